    let best = null;
    for (const s of strings)
        if (best === null || s.length > best.length) best = s;
    return best;
}
