    return x.toString(base);
}
