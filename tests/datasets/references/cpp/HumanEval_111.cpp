    std::map<std::string, long> counts;
    std::stringstream ss(test);
    std::string w;
    while (ss >> w) counts[w]++;
    long m = 0;
    for (const auto &kv : counts) m = std::max(m, kv.second);
    std::map<std::string, long> out;
    for (const auto &kv : counts)
        if (kv.second == m) out[kv.first] = kv.second;
    return out;
}
