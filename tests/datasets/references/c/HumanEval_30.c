    long *out = malloc((l_len ? l_len : 1) * sizeof(long));
    size_t k = 0;
    for (size_t i = 0; i < l_len; i++)
        if (l[i] > 0) out[k++] = l[i];
    *out_len = k;
    return out;
}
