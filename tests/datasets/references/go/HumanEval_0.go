	for i := range numbers {
		for j := range numbers {
			if i != j && math.Abs(numbers[i]-numbers[j]) < threshold {
				return true
			}
		}
	}
	return false
}
