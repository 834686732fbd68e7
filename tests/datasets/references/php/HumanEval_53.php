    return $x + $y;
}
