    std::optional<std::string> best;
    for (const auto &s : strings)
        if (!best || s.size() > best->size()) best = s;
    return best;
}
