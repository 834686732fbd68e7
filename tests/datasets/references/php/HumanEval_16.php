    return count(array_unique(str_split(strtolower($string))));
}
