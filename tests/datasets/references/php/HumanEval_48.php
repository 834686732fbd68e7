    return strrev($text) === $text;
}
