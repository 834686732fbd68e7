    return new Set(string.toLowerCase()).size;
}
