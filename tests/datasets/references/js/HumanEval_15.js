    return Array.from({length: n + 1}, (_, i) => i).join(" ");
}
