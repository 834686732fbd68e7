    return lst.reduce((s, x) => s + Math.ceil(x) ** 2, 0);
}
