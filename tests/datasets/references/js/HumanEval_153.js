    let best = extensions[0], bestVal = -Infinity;
    for (const e of extensions) {
        let val = 0;
        for (const c of e) {
            if (/[A-Z]/.test(c)) val++;
            else if (/[a-z]/.test(c)) val--;
        }
        if (val > bestVal) { bestVal = val; best = e; }
    }
    return class_name + "." + best;
}
