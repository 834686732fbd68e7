	return len(string_)
}
