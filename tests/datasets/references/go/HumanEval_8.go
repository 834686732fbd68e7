	s, p := 0, 1
	for _, x := range numbers {
		s += x
		p *= x
	}
	return []int{s, p}
}
