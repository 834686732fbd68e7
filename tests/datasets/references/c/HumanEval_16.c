    bool seen[256] = {false};
    long count = 0;
    for (const char *p = string; *p; p++) {
        unsigned char c = (unsigned char)tolower((unsigned char)*p);
        if (!seen[c]) { seen[c] = true; count++; }
    }
    return count;
}
