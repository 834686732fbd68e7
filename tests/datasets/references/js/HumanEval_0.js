    for (let i = 0; i < numbers.length; i++)
        for (let j = 0; j < numbers.length; j++)
            if (i !== j && Math.abs(numbers[i] - numbers[j]) < threshold) return true;
    return false;
}
