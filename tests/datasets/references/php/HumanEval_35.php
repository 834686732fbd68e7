    return max($l);
}
