    local out= i
    for ((i = 0; i < ${#1}; i++)); do
        if [[ ${1:i:1} == "${2:i:1}" ]]; then out+=0; else out+=1; fi
    done
    echo "$out"
}
