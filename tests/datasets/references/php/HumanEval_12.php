    $best = null;
    foreach ($strings as $s)
        if ($best === null || strlen($s) > strlen($best)) $best = $s;
    return $best;
}
