    let best = null, bestU = -1;
    for (const w of words) {
        const u = new Set(w).size;
        if (u > bestU || (u === bestU && w < best)) { bestU = u; best = w; }
    }
    return best;
}
