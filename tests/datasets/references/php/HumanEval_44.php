    return base_convert((string)$x, 10, $base);
}
