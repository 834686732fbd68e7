    return strlen($string);
}
