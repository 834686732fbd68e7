        return Collections.max(l);
    }
}
