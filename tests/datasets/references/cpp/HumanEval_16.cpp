    std::set<char> seen;
    for (char c : string) seen.insert((char)std::tolower((unsigned char)c));
    return (long)seen.size();
}
