    std::string out;
    do { out.insert(out.begin(), (char)('0' + x % base)); x /= base; } while (x > 0);
    return out;
}
