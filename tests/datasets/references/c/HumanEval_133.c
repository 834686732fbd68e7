    long total = 0;
    for (size_t i = 0; i < lst_len; i++) {
        long c = (long)ceil(lst[i]);
        total += c * c;
    }
    return total;
}
