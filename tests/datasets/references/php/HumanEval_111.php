    $c = [];
    foreach (explode(" ", $test) as $w)
        if ($w !== "") $c[$w] = ($c[$w] ?? 0) + 1;
    $m = $c ? max($c) : 0;
    $out = [];
    foreach ($c as $k => $v)
        if ($v === $m) $out[$k] = $v;
    return $out;
}
