    local depth=0 i c
    for ((i = 0; i < ${#1}; i++)); do
        c=${1:i:1}
        if [[ $c == "<" ]]; then ((depth++)); else ((depth--)); fi
        if ((depth < 0)); then echo false; return; fi
    done
    if ((depth == 0)); then echo true; else echo false; fi
}
