    return x + y;
}
