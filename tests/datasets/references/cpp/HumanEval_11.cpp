    std::string out;
    for (size_t i = 0; i < a.size(); i++) out += a[i] == b[i] ? '0' : '1';
    return out;
}
