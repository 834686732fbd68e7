	best, bestU := "", -1
	for _, w := range words {
		seen := map[rune]bool{}
		for _, c := range w {
			seen[c] = true
		}
		if len(seen) > bestU || (len(seen) == bestU && w < best) {
			best, bestU = w, len(seen)
		}
	}
	return best
}
