        return new StringBuilder(text).reverse().toString().equals(text);
    }
}
