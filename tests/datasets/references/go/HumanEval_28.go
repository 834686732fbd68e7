	return strings.Join(strings_, "")
}
