	total := 0
	for _, x := range lst {
		c := int(math.Ceil(x))
		total += c * c
	}
	return total
}
