    let s = 0, p = 1;
    for (const x of numbers) { s += x; p *= x; }
    return [s, p];
}
