    $depth = 0;
    foreach (str_split($brackets) as $c) {
        $depth += $c === "<" ? 1 : -1;
        if ($depth < 0) return false;
    }
    return $depth === 0;
}
