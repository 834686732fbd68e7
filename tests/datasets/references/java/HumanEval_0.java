        for (int i = 0; i < numbers.size(); i++)
            for (int j = 0; j < numbers.size(); j++)
                if (i != j && Math.abs(numbers.get(i) - numbers.get(j)) < threshold) return true;
        return false;
    }
}
