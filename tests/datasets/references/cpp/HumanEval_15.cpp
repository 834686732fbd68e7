    std::string out = "0";
    for (long i = 1; i <= n; i++) out += " " + std::to_string(i);
    return out;
}
