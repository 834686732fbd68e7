    local best= bestu=-1 w u seen c i
    for w in $1; do
        seen=; u=0
        for ((i = 0; i < ${#w}; i++)); do
            c=${w:i:1}
            if [[ $seen != *"$c"* ]]; then seen+=$c; ((u++)); fi
        done
        if ((u > bestu)) || { ((u == bestu)) && [[ $w < $best ]]; }; then best=$w; bestu=$u; fi
    done
    echo "$best"
}
