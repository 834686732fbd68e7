"""Viable prefixes (issue 36): SynCode's rule, "some text can follow this to make a valid program", decided by
CPython (rewardlang.runtime.code.validity.viable / shortest_nonviable_prefix), the syntax check of dense PPO's
authors' mode.

SynCode's check (GrammarConstrainer.is_valid, syncode/grammar_mask/grammar_constrainer.py) accepts a token when the
parsed code with it is a prefix of some program of its grammar (the parser's remainder a prefix of an acceptable
terminal); the authors' processor asks it for every token inside a block (wrappers/syncode_wrapper.py:116-125 at
stg-tud/RL-CodeGeneration@bb3551d). Cases here are labelled by hand; the properties: every prefix of valid code is
viable (completeness), viability is monotone, and no short text from an independent alphabet makes a prefix the
function calls non-viable valid (a witness search)."""

from __future__ import annotations

import ast
import random
import time
import warnings

import pytest

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.runtime.code import validity
from rewardlang.runtime.code.validity import first_violation, shortest_nonviable_prefix, viable

VIABLE = [
    "",
    "def f(x",                           # an open bracket
    "def f(x):",                         # a block header without its body
    "def f(x):\n    '''Add x",           # inside a docstring
    's = """doc\n\nmore',                # a docstring over lines
    "x = [1, 2,\n     3",                # a bracket over lines
    "x = 1 +",                           # an operator waiting for its operand
    "x = 1 an",                          # the start of `and`
    "x = 1 if y",                        # waiting for `else`
    "def",                               # the start of a statement, or of a name (`default = 1`)
    "print(1)\nelse",                    # a name that starts with `else` (`else_ = 2`)
    "x = 'abc",                          # a one-line string
    "x = f'{a!r:>{w}} {b['",             # inside an f-string's replacement field
    "x = 1e",                            # `1e5`
    "x = 0x",                            # `0x1`
    "x = [1, 3i",                        # `3if y else 4`: a keyword right after a number (CPython warns)
    "def f() -",                         # `->`
    "(x :",                              # `:=`
    "x = ..",                            # `...`
    "lambda a, *",                       # `**kw` or `*args`
    "x = ('a'\n     r",                  # the prefix letters of a string
    "x = 1 \\",                          # a line continuation
    "x = 1\n  ",                         # indentation that may still go anywhere
    "for x i",                           # `in`
    "@dec",                              # a decorator
    "try:\n    pass\n",                  # waiting for except/finally
    "if x:\n    pass\nel",               # `elif`/`else`
]

NOT_VIABLE = [
    "x = = 1",                           # no program has `= =`
    "x = \n",                            # the statement's line is finished
    "x = (1 2",                          # two numbers side by side
    "x = 1 + # c",                       # a comment ends the line: the `+` can never get its operand
    "x = 1\n  y = 2",                    # an unexpected indent
    "x = 1 '''doc",                      # a string cannot stand after `1`, finished or not
    "x r'abc",                           # nor after a name
    "def f(a):\n'''doc",                 # a body must be indented, a docstring too
    "x = [1, 2]]",                       # an unmatched bracket
    "return return 1",                   # (`return return` is viable: `return returned`)
    "print 'a'",
    "else:",
    "def f(:",
    "if x:\n    y = 1\n  z",             # a dedent to no enclosing level
    "x = !",
    "x = 1\x00",                         # CPython refuses NUL
]


@pytest.mark.parametrize("text", VIABLE)
def test_viable_prefixes(text: str) -> None:
    assert viable(text), text


@pytest.mark.parametrize("text", NOT_VIABLE)
def test_prefixes_no_program_can_follow(text: str) -> None:
    assert not viable(text), text


def test_shortest_nonviable_prefix_by_hand() -> None:
    # "x = 1\ny = =": the second "=" (index 10) is the first character no program can follow
    assert shortest_nonviable_prefix("x = 1\ny = = 2\n") == 11
    # only the cuts are examined: the first cut at or past 11 is 12
    assert shortest_nonviable_prefix("x = 1\ny = = 2\n", cuts=[1, 5, 6, 9, 12, 14]) == 12
    # unfinished but viable code: none (the project's first_violation puts its violation on the unfinished line)
    for text in ("def f(x):\n    '''doc", "total = sum(\n    xs,\n"):
        assert shortest_nonviable_prefix(text) is None
        assert first_violation(text) is not None and first_violation(text).incomplete
    assert shortest_nonviable_prefix("def f(x):\n    return x +") is None
    # a string after a name: non-viable from the quote on (index 2), the docstring's text after it too
    assert shortest_nonviable_prefix("x '''doc\nmore") == 3
    # NUL: the prefix that takes it in is the first non-viable one
    assert shortest_nonviable_prefix("x = 1\x00y") == 6
    assert shortest_nonviable_prefix("x = = \x00y") == 5
    assert shortest_nonviable_prefix("") is None and shortest_nonviable_prefix("x = 1", cuts=[]) is None


def test_deadline_and_nesting() -> None:
    with pytest.raises(TimeoutError):
        shortest_nonviable_prefix("x = 1\n" * 60 + "y = = 2\n", deadline=time.monotonic() - 1)
    with pytest.raises(validity.TooDeep):
        viable("x = " + "-" * 150_000 + "1")


def test_a_string_where_none_may_stand_is_not_incomplete() -> None:
    """CPython calls an input that ends inside a string "incomplete" before its parser has seen the string; the
    project's first_violation (default mapping) now places such code where it breaks too."""
    v = first_violation("def f(a):\n'''doc\nmore\n")
    assert v is not None and not v.incomplete and v.line == 2
    v = first_violation("x = 1 '''doc\nmore\n")
    assert v is not None and not v.incomplete and v.line == 1 and v.start == 6


def _programs() -> list[str]:
    rows = load_humaneval()
    return [r["solution"] for r in rows] + [r["tests"] for r in rows]


def _every_prefix_viable(programs: list[str]) -> None:
    for src in programs:
        assert shortest_nonviable_prefix(src) is None
        for k in range(1, len(src) + 1):
            assert viable(src[:k]), repr(src[max(0, k - 60):k])


def test_every_prefix_of_valid_code_is_viable() -> None:
    """Completeness on a sample: every character prefix of 6 HumanEval programs and of a file of constructs."""
    constructs = (
        "match cmd:\n    case [x, y, *rest] if x > 0:\n        pass\n    case {'k': v, **kw}:\n        pass\n"
        "async def f(a, /, b=1, *args, c: int = 2, **kw) -> 'A':\n    async with a as b, c as d:\n"
        "        async for x in y:\n            await z\n    return [i async for i in g()]\n"
        "x = f\"{a!r:>{width}} {b['k']} {{lit}}\" + rb'\\x00' + F'{x=}'\n"
        "y = lambda a, *b, **c: (yield) if a else b\n"
        "if (n := len(a)) > 10: print(n)\n"
        "try:\n    pass\nexcept* C:\n    pass\n"
        "from ..x.y import (z,\n    w)\n"
        "x = 0x1F + 0o17 + 0b101 + 1_000 + 1e-10 + 1.5j + .5 + 5.\n"
        's = """multi\nline""" \'\\\'\' "\\""\n'
    )
    ast.parse(constructs)
    progs = _programs()
    _every_prefix_viable([constructs] + progs[:3] + progs[164:167])


@pytest.mark.slow
def test_every_prefix_of_every_humaneval_program_is_viable() -> None:
    _every_prefix_viable(_programs())


ALPHABET = ["(", ")", "]", "}", ":", ",", "x", " x", "=", " in ", " else ", " import ", "'", '"', "1", ".", "\n",
            "    ", "*", "->", " as ", " for ", " if ", " not ", "e", "t", "f", "s"]


def _ok(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "invalid decimal literal" for `1if` and the like
            compile(text, "<t>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        return True
    except SyntaxError:
        return False


def _mutants(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    rows = load_humaneval()
    pieces = ["(", ")", "[", "]", ":", ",", "=", " ", "\n", "    ", "x", "if", "else", "for", "in", "'", '"', "1",
              ".", "+", "*", "#", "\\", "return", "def", "lambda", "\t", "{", "}"]
    out = []
    for _ in range(n):
        src = rng.choice(rows)["solution"]
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(src))
            op = rng.random()
            src = src[:i] + src[i + 1:] if op < 0.4 else src[:i] + rng.choice(pieces) + src[i + (op >= 0.8) * 2:]
        out.append(src)
    return out


def _check_mutants(n: int, seed: int) -> int:
    """Monotone at the boundary, and no witness for a prefix called non-viable: P + S valid (compiled whole, not
    merely "incomplete") for S of one or two pieces of ALPHABET followed by closing text."""
    checked = 0
    rng = random.Random(seed + 1)
    closers = ["", "\n    pass\n", ")", "]", "')", "'", '"', ":\n    pass\n", " x\n", "1\n"]
    for src in _mutants(n, seed):
        cut = shortest_nonviable_prefix(src)
        if cut is None:
            continue
        checked += 1
        for m in {max(1, cut - 3), cut - 1, cut, min(len(src), cut + 3), rng.randint(1, len(src))}:
            if m >= 1:
                assert viable(src[:m]) == (m < cut), (m, cut, src[max(0, m - 40):m])
        p = src[:cut]
        for a in ALPHABET:
            for b in [""] + ALPHABET:
                assert not any(_ok(p + a + b + c) for c in closers), (p[-50:], a, b)
    return checked


def test_monotone_and_no_witness_on_mutants() -> None:
    assert _check_mutants(40, seed=3) >= 8


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_monotone_and_no_witness_on_many_mutants() -> None:
    assert _check_mutants(200, seed=11) >= 50
