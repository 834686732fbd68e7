    std::string out;
    for (const auto &s : strings) out += s;
    return out;
}
