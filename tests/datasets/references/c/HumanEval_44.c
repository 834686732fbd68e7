    char buf[80];
    int k = 0;
    do { buf[k++] = (char)('0' + x % base); x /= base; } while (x > 0);
    char *out = malloc((size_t)k + 1);
    for (int i = 0; i < k; i++) out[i] = buf[k - 1 - i];
    out[k] = 0;
    return out;
}
