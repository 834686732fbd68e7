    for (size_t i = 0; i < numbers_len; i++)
        for (size_t j = 0; j < numbers_len; j++)
            if (i != j && fabs(numbers[i] - numbers[j]) < threshold) return true;
    return false;
}
