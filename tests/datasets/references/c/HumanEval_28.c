    size_t total = 0;
    for (size_t i = 0; i < strings_len; i++) total += strlen(strings[i]);
    char *out = malloc(total + 1);
    out[0] = 0;
    for (size_t j = 0; j < strings_len; j++) strcat(out, strings[j]);
    return out;
}
