    std::string best = extensions[0];
    long best_val = LONG_MIN;
    for (const auto &e : extensions) {
        long val = 0;
        for (char c : e) {
            if (std::isupper((unsigned char)c)) val++;
            else if (std::islower((unsigned char)c)) val--;
        }
        if (val > best_val) { best_val = val; best = e; }
    }
    return class_name + "." + best;
}
