	return strconv.FormatInt(int64(x), base)
}
