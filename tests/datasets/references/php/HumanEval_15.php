    return implode(" ", range(0, $n));
}
