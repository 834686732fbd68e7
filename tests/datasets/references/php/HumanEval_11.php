    $out = "";
    for ($i = 0; $i < strlen($a); $i++) $out .= $a[$i] === $b[$i] ? "0" : "1";
    return $out;
}
