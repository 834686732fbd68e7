	return x + y
}
