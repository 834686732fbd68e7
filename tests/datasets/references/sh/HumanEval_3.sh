    local balance=0 op
    for op in $1; do
        ((balance += op))
        if ((balance < 0)); then echo true; return; fi
    done
    echo false
}
