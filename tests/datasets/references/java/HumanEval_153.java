        String best = extensions.get(0);
        long bestVal = Long.MIN_VALUE;
        for (String e : extensions) {
            long val = 0;
            for (char c : e.toCharArray()) {
                if (Character.isUpperCase(c)) val++;
                else if (Character.isLowerCase(c)) val--;
            }
            if (val > bestVal) { bestVal = val; best = e; }
        }
        return class_name + "." + best;
    }
}
