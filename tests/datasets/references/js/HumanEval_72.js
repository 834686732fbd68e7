    const sum = q.reduce((s, x) => s + x, 0);
    return sum <= w && q.every((x, i) => x === q[q.length - 1 - i]);
}
