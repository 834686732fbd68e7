	var sb strings.Builder
	for i := 0; i < len(a); i++ {
		if a[i] == b[i] {
			sb.WriteByte('0')
		} else {
			sb.WriteByte('1')
		}
	}
	return sb.String()
}
