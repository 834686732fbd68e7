    long depth = 0;
    for (char c : brackets) {
        depth += c == '<' ? 1 : -1;
        if (depth < 0) return false;
    }
    return depth == 0;
}
