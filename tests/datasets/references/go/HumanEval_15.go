	parts := make([]string, 0, n+1)
	for i := 0; i <= n; i++ {
		parts = append(parts, strconv.Itoa(i))
	}
	return strings.Join(parts, " ")
}
