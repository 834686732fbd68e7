    $balance = 0;
    foreach ($operations as $op) {
        $balance += $op;
        if ($balance < 0) return true;
    }
    return false;
}
