        Map<String, Long> c = new HashMap<>();
        for (String w : test.split(" "))
            if (!w.isEmpty()) c.merge(w, 1L, Long::sum);
        long m = 0;
        for (long v : c.values()) m = Math.max(m, v);
        Map<String, Long> out = new HashMap<>();
        for (Map.Entry<String, Long> e : c.entrySet())
            if (e.getValue() == m) out.put(e.getKey(), e.getValue());
        return out;
    }
}
