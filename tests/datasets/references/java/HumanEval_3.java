        long balance = 0;
        for (long op : operations) {
            balance += op;
            if (balance < 0) return true;
        }
        return false;
    }
}
