    const char *best = extensions[0];
    long best_val = LONG_MIN;
    for (size_t i = 0; i < extensions_len; i++) {
        long val = 0;
        for (const char *p = extensions[i]; *p; p++) {
            if (isupper((unsigned char)*p)) val++;
            else if (islower((unsigned char)*p)) val--;
        }
        if (val > best_val) { best_val = val; best = extensions[i]; }
    }
    char *out = malloc(strlen(class_name) + strlen(best) + 2);
    sprintf(out, "%s.%s", class_name, best);
    return out;
}
