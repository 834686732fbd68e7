"""Issue 36, the default mapping of specs/dense_ppo.reward with CRLF, lone CR, mixed line ends and indented fences:
each token's syntax, lint and tests value derived from the documented rules alone (docs/specs/dense_ppo.md,
docs/language.md "Token attribution", docs/components/lint.md "Positions") by an independent replay, on generated
completions cut into random tokens; and golden cases by hand under the repo's byte-level BPE.

The rules the replay implements (none of the project's placement code is used; ruff and CPython's first violation
are the tools the rules name):

- lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``;
- the code is the first closed python block's (info string ``python``/``py``/``python3``, any case): from after
  the opening fence's line break to the line break ahead of the closing fence's line when only spaces or tabs stand
  before that fence (its indentation is the fence's), else to the fence;
- syntax: 2.0 on every token touching a fence (the opening one from its backticks through its line break; the
  closing one from the code's end through its backticks), else -1 on a token holding a character at or after
  CPython's first violation, +1 on the code's other tokens, 0 elsewhere;
- lint: -1 once on every token touching a line ruff flags (a diagnostic flags its rows, a range ending at column 0
  not that row), +1 on every other token of non-zero width;
- tests: the component's value on every token touching the code.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

import rewardlang
from rewardlang.runtime.attribution import place, to_tokens
from rewardlang.runtime.code.validity import first_violation
from rewardlang.trainers.dense import DenseRewards
from rewardlang.trainers.model import build_tokenizer

SELECT = ["E", "F", "W", "I", "UP", "B", "S", "ANN", "C", "N", "PL", "PT", "TID"]
IGNORE = ["D100", "D101", "D102", "D103", "E501"]
TESTS = "def check(candidate):\n    assert candidate(1) == 2\n"
REF = "def inc(x):\n    return x + 1\n"
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
BREAK = re.compile(r"[\r\n]")


def _block(text: str) -> dict | None:
    pos = 0
    while True:
        i = text.find("```", pos)
        if i < 0:
            return None
        m = BREAK.search(text, i + 3)
        le = m.start() if m else len(text)
        info = text[i + 3:le]
        if "```" in info:  # an inline block on one line
            pos = text.find("```", i + 3) + 3
            continue
        lang = info.split()[0].lower() if info.strip() else ""
        cs = le + (2 if text[le:le + 2] == "\r\n" else 1 if le < len(text) else 0)
        close = text.find("```", cs)
        if close < 0:
            return None
        ls = max(text.rfind("\n", 0, close), text.rfind("\r", 0, close)) + 1  # the closing fence's line
        if text[max(ls, cs):close].strip(" \t"):
            end = close
        elif ls <= cs:
            end = cs
        else:
            end = max(cs, ls - (2 if text[ls - 2:ls] == "\r\n" else 1))
        t = close
        while t < len(text) and text[t] == "`":
            t += 1
        if lang in ("python", "py", "python3"):
            return {"cs": cs, "ce": end, "open": (i, cs), "close": (end, t)}
        pos = close + 3


def _ruff_rows(text: str) -> set[int]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.py")
        with open(path, "w", newline="", encoding="utf-8") as f:
            f.write(text)
        out = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--exit-zero",
                              "--output-format", "json", "--select", ",".join(SELECT), "--ignore", ",".join(IGNORE),
                              "--line-length", "88", "--target-version", "py311", "--ignore-noqa", path],
                             capture_output=True, text=True, check=True)
    rows: set[int] = set()
    for v in json.loads(out.stdout):
        a, z = v["location"]["row"], v["end_location"]["row"]
        if z > a and v["end_location"]["column"] == 1:
            z -= 1
        rows.update(range(a, max(a, z) + 1))
    return rows


def expected(text: str, ends: list[int], tests_value: float) -> dict[str, list[float]]:
    def touches(s: int, e: int, a: int, b: int) -> bool:
        return s < b and e > a

    lines = [(m.start(), m.end()) for m in LINE.finditer(text)]
    flagged = [lines[r - 1] for r in _ruff_rows(text) if 1 <= r <= len(lines)]
    b = _block(text)
    if b is not None:
        v = first_violation(text[b["cs"]:b["ce"]])
        bad = b["cs"] + v.start if v is not None else b["ce"]
    out: dict[str, list[float]] = {"syntax": [], "lint": [], "tests": []}
    prev = 0
    for e in ends:
        s, prev = prev, e
        if e == s:
            for values in out.values():
                values.append(0.0)
            continue
        out["lint"].append(-1.0 if any(touches(s, e, a, z) for a, z in flagged) else 1.0)
        if b is None:
            out["syntax"].append(0.0)
            out["tests"].append(0.0)
            continue
        if touches(s, e, *b["open"]) or touches(s, e, *b["close"]):
            out["syntax"].append(2.0)
        elif touches(s, e, bad, b["ce"]):
            out["syntax"].append(-1.0)
        elif touches(s, e, b["cs"], bad):
            out["syntax"].append(1.0)
        else:
            out["syntax"].append(0.0)
        out["tests"].append(tests_value if touches(s, e, b["cs"], b["ce"]) else 0.0)
    return out


CODE = ["def inc(x):", "    return x + 1", "    y = (1,", "    2)", "x = = 1", "    '''doc", "import os", "",
        "  z = 3", "x = 1 "]
PROSE = ["Sure:", "Here it is", "", "Hope it helps."]


def _completion(rng: random.Random) -> str:
    def eol() -> str:
        return rng.choice(["\n", "\r\n", "\r"])

    parts = [rng.choice(PROSE) + eol() for _ in range(rng.randint(0, 2))]
    indent = " " * rng.choice([0, 0, 1, 2, 3])
    parts.append(indent + rng.choice(["```python", "```py", "```python3", "```Python title"]) + eol())
    body = ["def inc(x):", "    return x + 1"] if rng.random() < 0.5 else rng.sample(CODE, rng.randint(0, 4))
    parts += [indent + ln + eol() for ln in body]
    if rng.random() < 0.2:
        parts.append(eol())
    parts.append(indent + "```")
    if rng.random() < 0.5:
        parts.append(rng.choice([eol() + rng.choice(PROSE), " bye", eol()]))
    return "".join(parts)


def _tokens(rng: random.Random, text: str) -> list[int]:
    """Random token ends: every piece a token, or about one cut in 2-4 characters (pieces spanning line ends)."""
    k = max(1, len(text) // rng.choice([1, 2, 3, 4]))
    return sorted(set(rng.sample(range(1, len(text)), min(len(text) - 1, k))) | {len(text)})


def _check(n: int, seed: int) -> None:
    rng = random.Random(seed)
    prog = rewardlang.load("specs/dense_ppo.reward")
    names = [c.name for c in prog.components]
    texts = [_completion(rng) for _ in range(n)]
    assert sum("\r\n" in t for t in texts) > n // 4 and sum(re.search("\r(?!\n)", t) is not None for t in texts) > n // 4
    res = prog.score(texts, unit_tests=[TESTS] * n, entry_point=["inc"] * n, reference=[REF] * n)
    for i, text in enumerate(texts):
        ends = _tokens(rng, text)
        want = expected(text, ends, float(res.components["tests"][i]))
        for name in ("syntax", "lint", "tests"):
            clause = prog.spec["components"][names.index(name)]["tokens"]
            got = to_tokens(place(clause, float(res.components[name][i]), res.spans[name][i], text), ends)
            pieces = [text[a:b] for a, b in zip([0] + ends[:-1], ends)]
            assert np.allclose(got, want[name]), (name, text, [(p, g, w) for p, g, w in zip(pieces, got, want[name])
                                                               if abs(g - w) > 1e-9])


def test_line_ends_and_indented_fences_follow_the_documented_rules() -> None:
    _check(60, seed=1)


@pytest.mark.slow
def test_line_ends_and_indented_fences_follow_the_documented_rules_at_length() -> None:
    _check(400, seed=7)


# -- golden cases, by hand, through DenseRewards ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def run():
    tok = build_tokenizer()
    dense = DenseRewards(rewardlang.load("specs/dense_ppo.reward"), tok)

    def go(text: str) -> tuple[list[str], dict[str, list[float]]]:
        ids = tok(text)["input_ids"]
        out = dense(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long),
                    {"unit_tests": [TESTS], "entry_point": ["inc"], "reference": [REF]})
        return [tok.decode([i]) for i in ids], {k: v[0].tolist() for k, v in out.components.items()}

    return go


FENCE = ["`", "`", "`", "p", "y", "th", "on"]


def test_crlf_block(run) -> None:
    pieces, v = run("```python\r\ndef inc(x):\r\n    return x + 1\r\n\r\n```")
    assert pieces == FENCE + ["\r", "\n", "def", " in", "c", "(", "x", "):", "\r", "\n   ", " return", " x", " +",
                              " 1", "\r", "\n", "\r", "\n", "`", "`", "`"]
    # the code is "def inc(x):\r\n    return x + 1\r\n" (tokens 9-22); the empty line's CRLF and the fence are the
    # closing fence (2.0), the opening fence's CRLF is the opening one; the tests pass (1.0 on the code)
    assert v["syntax"] == [2.0] * 9 + [1.0] * 14 + [2.0] * 5
    assert v["tests"] == [0.0] * 9 + [1.0] * 14 + [0.0] * 5
    # ruff: the two fence lines are invalid syntax; the code lines and the empty line are clean
    assert v["lint"] == [-1.0] * 9 + [1.0] * 16 + [-1.0] * 3


def test_a_lone_cr_ends_lines_and_fences(run) -> None:
    pieces, v = run("```python\rx = = 1\r```\rok")
    assert pieces == FENCE + ["\r", "x", " =", " =", " 1", "\r", "`", "`", "`", "\r", "o", "k"]
    # code "x = = 1": +1 up to the second "=", -1 from it; "\r```" the closing fence; after it 0
    assert v["syntax"] == [2.0] * 8 + [1.0, 1.0, -1.0, -1.0] + [2.0] * 4 + [0.0] * 3
    assert v["tests"] == pytest.approx([0.0] * 8 + [-0.3] * 4 + [0.0] * 7)


def test_crlf_then_a_lone_cr_before_the_fence(run) -> None:
    """The issue's `\\r\\n\\r` after a code line: the CRLF ends the code's line (code), the lone CR is the closing
    fence's line break (2.0); a token holding both touches the fence: 2.0."""
    pieces, v = run("Sure:\r\n```python\r\nx = 1\r\n\r```")
    assert pieces == ["S", "u", "re", ":", "\r", "\n"] + FENCE + ["\r", "\n", "x", " =", " 1", "\r", "\n", "\r",
                                                                 "`", "`", "`"]
    assert v["syntax"] == [0.0] * 6 + [2.0] * 9 + [1.0] * 5 + [2.0] * 4
    assert v["lint"] == [-1.0] * 15 + [1.0] * 6 + [-1.0] * 3  # "Sure:" and the fences are invalid syntax for ruff


def test_indented_fences(run) -> None:
    pieces, v = run("  ```python\n  x = 1\n  ```")
    assert pieces == [" ", " "] + FENCE + ["\n", " ", " x", " =", " 1", "\n", " ", " ", "`", "`", "`"]
    # the indentation before the opening fence is not the fence (0); the code "  x = 1" keeps its indentation:
    # CPython's unexpected indent, -1 from its first character; the closing fence is "\n" + "  " + "```"
    assert v["syntax"] == [0.0, 0.0] + [2.0] * 8 + [-1.0] * 4 + [2.0] * 6
    assert v["tests"] == pytest.approx([0.0] * 10 + [-0.3] * 4 + [0.0] * 6)


def test_a_newline_and_indent_token_over_two_flagged_lines_gets_minus_one_once(run) -> None:
    """`tokens spans(uncovered=1, overlap="last")`: a token touching two flagged lines takes one span's value."""
    pieces, v = run("```python\ndef inc(x):\n    return x + 1 \n   ```")
    assert pieces[18:22] == [" 1", " ", "\n  ", " "]
    # line 3 has trailing whitespace (W291), line 4 "   ```" is invalid syntax: "\n  " touches both: -1, not -2
    assert v["lint"][20] == -1.0 and min(v["lint"]) == -1.0
    # the code ends before "\n   ```": "\n  " is the closing fence's (2.0) and gets no test value
    assert v["syntax"][19:] == [1.0] + [2.0] * 5 and v["tests"][19:] == [1.0] + [0.0] * 5
