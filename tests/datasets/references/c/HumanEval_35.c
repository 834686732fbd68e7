    long m = l[0];
    for (size_t i = 1; i < l_len; i++)
        if (l[i] > m) m = l[i];
    return m;
}
