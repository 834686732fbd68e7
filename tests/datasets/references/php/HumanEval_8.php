    return [array_sum($numbers), array_product($numbers)];
}
