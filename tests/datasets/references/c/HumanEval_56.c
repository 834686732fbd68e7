    long depth = 0;
    for (const char *p = brackets; *p; p++) {
        depth += *p == '<' ? 1 : -1;
        if (depth < 0) return false;
    }
    return depth == 0;
}
