    $total = 0;
    foreach ($lst as $x) $total += intval(ceil($x)) ** 2;
    return $total;
}
