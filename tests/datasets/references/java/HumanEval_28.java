        return String.join("", strings);
    }
}
