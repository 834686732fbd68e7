    return strings.join("");
}
