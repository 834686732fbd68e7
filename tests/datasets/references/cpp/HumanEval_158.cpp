    std::string best;
    long best_u = -1;
    for (const auto &w : words) {
        long u = (long)std::set<char>(w.begin(), w.end()).size();
        if (u > best_u || (u == best_u && w < best)) { best_u = u; best = w; }
    }
    return best;
}
