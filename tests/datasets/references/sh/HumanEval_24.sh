    local n=$1 i
    for ((i = n - 1; i > 0; i--)); do
        if ((n % i == 0)); then echo "$i"; return; fi
    done
    echo 1
}
