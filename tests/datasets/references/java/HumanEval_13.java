        while (b != 0) {
            long t = a % b;
            a = b;
            b = t;
        }
        return a;
    }
}
