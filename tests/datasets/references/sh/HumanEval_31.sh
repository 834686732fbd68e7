    local n=$1 k
    if ((n < 2)); then echo false; return; fi
    for ((k = 2; k * k <= n; k++)); do
        if ((n % k == 0)); then echo false; return; fi
    done
    echo true
}
