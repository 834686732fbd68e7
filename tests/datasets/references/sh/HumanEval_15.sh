    local out=0 i
    for ((i = 1; i <= $1; i++)); do out+=" $i"; done
    echo "$out"
}
