    local s=$1 i n=${#1}
    for ((i = 0; i < n / 2; i++)); do
        if [[ ${s:i:1} != "${s:n-1-i:1}" ]]; then echo false; return; fi
    done
    echo true
}
