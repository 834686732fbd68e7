    local -a xs=($1)
    local n=${#xs[@]} i j
    for ((i = 0; i < n; i++)); do
        for ((j = 0; j < n; j++)); do
            if ((i != j)) && awk -v a="${xs[i]}" -v b="${xs[j]}" -v t="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < t) }'; then
                echo true; return
            fi
        done
    done
    echo false
}
