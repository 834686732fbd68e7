    local -a q=($1)
    local sum=0 x i n=${#q[@]}
    for x in "${q[@]}"; do ((sum += x)); done
    if ((sum > $2)); then echo false; return; fi
    for ((i = 0; i < n / 2; i++)); do
        if ((q[i] != q[n - 1 - i])); then echo false; return; fi
    done
    echo true
}
