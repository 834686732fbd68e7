    return b == 0 ? a : greatest_common_divisor(b, a % b);
}
