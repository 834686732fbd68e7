    local s=${1,,} seen= c count=0 i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        if [[ $seen != *"$c"* ]]; then seen+=$c; ((count++)); fi
    done
    echo "$count"
}
