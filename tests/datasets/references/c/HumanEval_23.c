    return (long)strlen(string);
}
