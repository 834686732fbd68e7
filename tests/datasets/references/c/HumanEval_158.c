    const char *best = NULL;
    long best_u = -1;
    for (size_t i = 0; i < words_len; i++) {
        bool seen[256] = {false};
        long u = 0;
        for (const char *p = words[i]; *p; p++) {
            unsigned char c = (unsigned char)*p;
            if (!seen[c]) { seen[c] = true; u++; }
        }
        if (u > best_u || (u == best_u && strcmp(words[i], best) < 0)) { best_u = u; best = words[i]; }
    }
    char *out = malloc(strlen(best) + 1);
    strcpy(out, best);
    return out;
}
