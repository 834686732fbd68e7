	depth := 0
	for _, c := range brackets {
		if c == '<' {
			depth++
		} else {
			depth--
		}
		if depth < 0 {
			return false
		}
	}
	return depth == 0
}
