    local m= x
    for x in $1; do
        if [[ -z $m ]] || ((x > m)); then m=$x; fi
    done
    echo "$m"
}
