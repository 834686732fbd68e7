	seen := map[rune]bool{}
	for _, r := range strings.ToLower(string_) {
		seen[r] = true
	}
	return len(seen)
}
