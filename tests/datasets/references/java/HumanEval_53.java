        return x + y;
    }
}
