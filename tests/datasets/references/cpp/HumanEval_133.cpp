    long total = 0;
    for (double x : lst) {
        long c = (long)std::ceil(x);
        total += c * c;
    }
    return total;
}
