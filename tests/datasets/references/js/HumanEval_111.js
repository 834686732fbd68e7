    const c = {};
    for (const w of test.split(" ")) if (w) c[w] = (c[w] || 0) + 1;
    const m = Math.max(0, ...Object.values(c));
    const out = {};
    for (const [k, v] of Object.entries(c)) if (v === m) out[k] = v;
    return out;
}
