    local IFS=' ' out= w
    for w in $1; do out+=$w; done
    echo "$out"
}
