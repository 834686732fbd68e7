    local a=0 b=1 t i
    for ((i = 0; i < $1; i++)); do t=$((a + b)); a=$b; b=$t; done
    echo "$a"
}
