    return implode("", $strings);
}
