	m := l[0]
	for _, x := range l {
		if x > m {
			m = x
		}
	}
	return m
}
