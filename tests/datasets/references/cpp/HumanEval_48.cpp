    return std::equal(text.begin(), text.end(), text.rbegin());
}
