	c := map[string]int{}
	for _, w := range strings.Split(test, " ") {
		if w != "" {
			c[w]++
		}
	}
	m := 0
	for _, v := range c {
		if v > m {
			m = v
		}
	}
	out := map[string]int{}
	for k, v := range c {
		if v == m {
			out[k] = v
		}
	}
	return out
}
