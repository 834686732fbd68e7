    char *out = malloc((size_t)n * 24 + 32);
    size_t k = 0;
    for (long i = 0; i <= n; i++) k += (size_t)sprintf(out + k, i ? " %ld" : "%ld", i);
    out[k] = 0;
    return out;
}
