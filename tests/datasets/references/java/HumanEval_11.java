        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < a.length(); i++) sb.append(a.charAt(i) == b.charAt(i) ? '0' : '1');
        return sb.toString();
    }
}
