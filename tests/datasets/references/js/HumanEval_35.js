    return Math.max(...l);
}
