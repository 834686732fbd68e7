    echo "${#1}"
}
