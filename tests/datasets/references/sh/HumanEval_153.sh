    local best= bestval= e val up low
    for e in $2; do
        up=${e//[^A-Z]/}; low=${e//[^a-z]/}
        val=$(( ${#up} - ${#low} ))
        if [[ -z $bestval ]] || ((val > bestval)); then best=$e; bestval=$val; fi
    done
    echo "$1.$best"
}
