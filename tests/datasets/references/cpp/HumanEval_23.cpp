    return (long)string.size();
}
