    return string.length;
}
