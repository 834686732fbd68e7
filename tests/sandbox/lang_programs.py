"""Programs of the language tests: ``evens(n)`` (the even numbers in [0, n), as a list; Bash: as a string of
space-separated numbers) in every language, a correct and a wrong unit, and the structured tests that
judge them (the harness calls evens(5), evens(1), evens(0) and writes one record per case to fd 3)."""

from __future__ import annotations

import os

import pytest

from rewardlang.sandbox.languages import PROFILES, TESTS_FORMAT

NS = (5, 1, 0)
EXPECTED = ([0, 2, 4], [0], [])

#: per language: (correct unit, harness); the wrong unit starts at 2 instead of 0 (cases 0 and 1 fail)
UNITS: dict[str, tuple[str, str]] = {
    "c": ("""#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int *evens(int n, int *len) {
    int *out = malloc(sizeof(int) * (n + 1));
    *len = 0;
    for (int i = START; i < n; i += 2) out[(*len)++] = i;
    return out;
}
""", """int main(void) {
    int ns[] = {5, 1, 0};
    for (int c = 0; c < 3; c++) {
        int len;
        int *r = evens(ns[c], &len);
        dprintf(3, "%d [", c);
        for (int k = 0; k < len; k++) dprintf(3, k ? ",%d" : "%d", r[k]);
        dprintf(3, "]\\n");
    }
    return 0;
}
"""),
    "cpp": ("""#include <cstdio>
#include <vector>
#include <string>
#include <unistd.h>
std::vector<int> evens(int n) {
    std::vector<int> out;
    for (int i = START; i < n; i += 2) out.push_back(i);
    return out;
}
""", """int main() {
    int ns[] = {5, 1, 0};
    for (int c = 0; c < 3; c++) {
        std::vector<int> r = evens(ns[c]);
        std::string s = std::to_string(c) + " [";
        for (size_t k = 0; k < r.size(); k++) s += (k ? "," : "") + std::to_string(r[k]);
        s += "]\\n";
        dprintf(3, "%s", s.c_str());
    }
}
"""),
    "java": ("""import java.util.*;
class Problem {
    public static List<Integer> evens(int n) {
        List<Integer> out = new ArrayList<>();
        for (int i = START; i < n; i += 2) out.add(i);
        return out;
    }
}
""", """public class Main {
    public static void main(String[] args) throws Exception {
        int[] ns = {5, 1, 0};
        try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {
            for (int c = 0; c < ns.length; c++) {
                List<Integer> r = Problem.evens(ns[c]);
                StringBuilder sb = new StringBuilder(c + " [");
                for (int k = 0; k < r.size(); k++) sb.append(k > 0 ? "," : "").append(r.get(k));
                f.write((sb + "]\\n").getBytes("UTF-8"));
            }
        }
    }
}
"""),
    "js": ("""function evens(n) {
    const out = [];
    for (let i = START; i < n; i += 2) out.push(i);
    return out;
}
""", """const fs = require("fs");
[5, 1, 0].forEach((n, c) => fs.writeSync(3, c + " " + JSON.stringify(evens(n)) + "\\n"));
"""),
    "php": ("""<?php
function evens($n) {
    $out = [];
    for ($i = START; $i < $n; $i += 2) $out[] = $i;
    return $out;
}
""", """$f = fopen("php://fd/3", "w");
foreach ([5, 1, 0] as $c => $n) fwrite($f, $c . " " . json_encode(evens($n)) . "\\n");
"""),
    "sh": ("""evens() {
    local out=() i
    for ((i = START; i < $1; i += 2)); do out+=("$i"); done
    echo "${out[*]}"
}
""", """c=0
for n in 5 1 0; do
    r=$(evens "$n")
    printf '%d "%s"\\n' "$c" "$r" >&3
    c=$((c + 1))
done
"""),
    "go": ("""package main

import (
    "encoding/json"
    "fmt"
    "os"
)

func evens(n int) []int {
    out := []int{}
    for i := START; i < n; i += 2 {
        out = append(out, i)
    }
    return out
}
""", """func main() {
    f := os.NewFile(3, "results")
    for c, n := range []int{5, 1, 0} {
        r := evens(n)
        if r == nil {
            r = []int{}
        }
        b, _ := json.Marshal(r)
        f.WriteString(fmt.Sprintf("%d %s\\n", c, b))
    }
}
"""),
}

LANGS = tuple(UNITS)


def unit(lang: str, correct: bool = True) -> str:
    return UNITS[lang][0].replace("START", "0" if correct else "2")


def lang_tests(lang: str, harness: str | None = None) -> dict:
    """The structured tests of ``evens`` in ``lang`` (Bash returns strings)."""
    if lang == "sh":
        cases = [{"expected": " ".join(map(str, e)), "type": "str", "tolerance": None} for e in EXPECTED]
    else:
        cases = [{"expected": e, "type": "list[int]", "tolerance": None} for e in EXPECTED]
    return {"format": TESTS_FORMAT, "harness": UNITS[lang][1] if harness is None else harness, "cases": cases}


def require(lang: str) -> None:
    """Skip without the language's toolchain; under CI=true a missing toolchain fails (never skips)."""
    missing = [t for t in PROFILES[lang].tools() if not os.access(t, os.X_OK)]
    if missing:
        msg = f"{lang}: toolchain missing ({', '.join(missing)}); scripts/install.sh installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


#: what the next program finds: the run directory holds only its own source, /tmp only the run directory,
#: /dev/shm nothing (Bash, judged like any program: three str cases)
PROBE = """probe() { :; }
"""
PROBE_HARNESS = """printf '0 "%s"\\n' "$(ls -A . | tr '\\n' ' ')" >&3
printf '1 "%s"\\n' "$(ls -A .. | tr '\\n' ' ')" >&3
printf '2 "%s"\\n' "$(ls -A /dev/shm | tr '\\n' ' ')" >&3
"""
PROBE_TESTS = {"format": "rewardlang-tests/1", "harness": PROBE_HARNESS,
               "cases": [{"expected": "main.sh ", "type": "str", "tolerance": None},
                         {"expected": "run ", "type": "str", "tolerance": None},
                         {"expected": "", "type": "str", "tolerance": None}]}
