    long s = 0, p = 1;
    for (long x : numbers) { s += x; p *= x; }
    return {s, p};
}
