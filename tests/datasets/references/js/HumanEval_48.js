    return text === text.split("").reverse().join("");
}
