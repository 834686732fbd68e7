    $best = null; $bestU = -1;
    foreach ($words as $w) {
        $u = count(array_unique(str_split($w)));
        if ($u > $bestU || ($u == $bestU && strcmp($w, $best) < 0)) { $bestU = $u; $best = $w; }
    }
    return $best;
}
