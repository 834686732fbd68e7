    size_t n = strlen(a);
    char *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) out[i] = a[i] == b[i] ? '0' : '1';
    out[n] = 0;
    return out;
}
