    return array_sum($q) <= $w && array_reverse($q) === $q;
}
