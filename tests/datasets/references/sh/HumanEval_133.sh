    local x c total=0
    for x in $1; do
        c=$(awk -v v="$x" 'BEGIN { c = int(v); if (c < v) c++; printf "%d", c }')
        ((total += c * c))
    done
    echo "$total"
}
