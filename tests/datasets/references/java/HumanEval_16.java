        return string.toLowerCase().chars().distinct().count();
    }
}
