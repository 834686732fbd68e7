    $best = $extensions[0];
    $bestVal = PHP_INT_MIN;
    foreach ($extensions as $e) {
        $val = preg_match_all('/[A-Z]/', $e) - preg_match_all('/[a-z]/', $e);
        if ($val > $bestVal) { $bestVal = $val; $best = $e; }
    }
    return $class_name . "." . $best;
}
