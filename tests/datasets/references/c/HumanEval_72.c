    long sum = 0;
    for (size_t i = 0; i < q_len; i++) sum += q[i];
    if (sum > w) return false;
    for (size_t i = 0; i < q_len / 2; i++)
        if (q[i] != q[q_len - 1 - i]) return false;
    return true;
}
