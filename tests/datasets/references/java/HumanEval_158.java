        String best = null;
        long bestU = -1;
        for (String w : words) {
            long u = w.chars().distinct().count();
            if (u > bestU || (u == bestU && w.compareTo(best) < 0)) { bestU = u; best = w; }
        }
        return best;
    }
}
