    local x=$1 base=$2 out=
    while :; do
        out=$((x % base))$out
        x=$((x / base))
        ((x > 0)) || break
    done
    echo "$out"
}
