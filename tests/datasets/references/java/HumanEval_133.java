        long total = 0;
        for (double x : lst) {
            long c = (long) Math.ceil(x);
            total += c * c;
        }
        return total;
    }
}
