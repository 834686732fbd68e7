	best, bestVal := extensions[0], math.MinInt64
	for _, e := range extensions {
		val := 0
		for _, c := range e {
			if unicode.IsUpper(c) {
				val++
			} else if unicode.IsLower(c) {
				val--
			}
		}
		if val > bestVal {
			best, bestVal = e, val
		}
	}
	return class_name + "." + best
}
