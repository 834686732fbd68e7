        return Long.toString(x, (int) base);
    }
}
