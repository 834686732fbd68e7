        return string.length();
    }
}
