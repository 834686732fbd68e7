    $n = count($numbers);
    for ($i = 0; $i < $n; $i++)
        for ($j = 0; $j < $n; $j++)
            if ($i != $j && abs($numbers[$i] - $numbers[$j]) < $threshold) return true;
    return false;
}
