    if (n < 2) return false;
    for (let k = 2; k * k <= n; k++)
        if (n % k === 0) return false;
    return true;
}
