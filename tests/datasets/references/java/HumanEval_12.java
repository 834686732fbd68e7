        Optional<String> best = Optional.empty();
        for (String s : strings)
            if (best.isEmpty() || s.length() > best.get().length()) best = Optional.of(s);
        return best;
    }
}
