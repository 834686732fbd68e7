    return *std::max_element(l.begin(), l.end());
}
