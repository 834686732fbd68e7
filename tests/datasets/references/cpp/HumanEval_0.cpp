    for (size_t i = 0; i < numbers.size(); i++)
        for (size_t j = 0; j < numbers.size(); j++)
            if (i != j && std::fabs(numbers[i] - numbers[j]) < threshold) return true;
    return false;
}
