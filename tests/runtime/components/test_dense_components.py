"""The dense-reward paper's functions (first_violation, without_ruff_lines) and specs/dense_ppo.reward's options."""

from __future__ import annotations

import pytest

import rewardlang
from rewardlang.runtime.api import Context
from rewardlang.runtime.code import validity
from rewardlang.runtime.components.dense import first_violation, without_ruff_lines
from rewardlang.runtime.components.lint import RuffParams

TESTS = "def check(candidate):\n    assert candidate(1) == 2\n"


def test_first_violation_positions() -> None:
    codes = ["x = 1\ny = = 2\n", "x = 1\n", "def f(:\n", "", "# only a comment", "def f():\n    return (1,\n"]
    got = first_violation.fn(codes, params=None, ctx=Context()).values
    # "y = = 2": CPython points at the second "="; "def f(:" at ":"; an unfinished bracket: its line's start
    assert got == [10, None, 6, None, None, 9]
    for c, v in zip(codes, got):  # the same as the runtime's prefix scan
        bad = validity.first_violation(c)
        assert v == (None if bad is None else bad.start)


def test_without_ruff_lines_deletes_flagged_lines() -> None:
    code = "import os\ndef f(x):\n    return x\nimport sys\n"
    got = without_ruff_lines.fn([code, ""], params=RuffParams(select=["F401"]), ctx=Context()).values
    assert got == ["def f(x):\n    return x\n", ""]


@pytest.fixture(scope="module")
def prog():
    return rewardlang.load("specs/dense_ppo.reward")


def _score(p, text: str, **cols):
    return p.score([text], unit_tests=[cols.get("tests", TESTS)], entry_point=["inc"],
                   reference=[cols.get("reference", "def inc(x):\n    return x + 1\n")])


def test_the_papers_selection_flags_lines_of_the_whole_response(prog) -> None:
    text = "Here:\n```python\nimport os\ndef inc(x):\n    return x+1\n```"
    res = _score(prog, text)
    labels = [s.label for s in res.spans["lint"][0]]
    # prose and fences are not Python: invalid-syntax on lines 1, 2 and 6 (ruff then reports syntax errors only)
    assert labels == ["line 1: invalid-syntax", "line 2: invalid-syntax", "line 6: invalid-syntax, W292"]
    assert res.components["tests"][0] == 1.0 and res.components["syntax"][0] == 1.0
    code_only = rewardlang.load("specs/dense_ppo.reward", params={"lint_scope": "code"})
    res = _score(code_only, text)
    # the block alone: I001 + F401 (os unused), ANN001/ANN201 (no annotations); no W292 on the block's last line
    lines = {s.label.split(":")[0]: s.label for s in res.spans["lint"][0]}
    assert lines == {"line 1": "line 1: I001, F401", "line 2": "line 2: ANN201, ANN001"}
    start = text.index("import os")
    assert res.spans["lint"][0][0][:2] == (start, start + len("import os\n"))


def test_tests_on_linted_code_is_the_papers_bug(prog) -> None:
    # an import ruff flags (I001) that the function needs: deleting flagged lines breaks it
    text = "```python\nimport math as m\ndef inc(x):\n    return int(m.floor(x)) + 1\n```"
    assert _score(prog, text).components["tests"][0] == 1.0
    quirk = rewardlang.load("specs/dense_ppo.reward", params={"tests_on_linted_code": True, "lint_scope": "code"})
    res = _score(quirk, text)
    assert res.components["tests"][0] == -0.3  # `import math as m` is flagged (I001), deleted: NameError


def test_dfg_is_the_match_minus_half_when_positive(prog) -> None:
    ref = "def inc(x):\n    y = x + 1\n    z = y * 2\n    return z\n"
    # CodeBLEU dataflow matches 0.25, 0.625 and 1.0 (codebleu component tests cover the match itself)
    cands = ["def inc(x):\n    return x\n", "def inc(x):\n    y = x + 1\n    return y\n",
             "def inc(a):\n    b = a + 1\n    c = b * 2\n    return c\n"]
    got = [_score(prog, f"```python\n{c}```", reference=ref).components["dfg"][0] for c in cands]
    assert got == pytest.approx([0.0, 0.125, 0.5])
    res = _score(prog, "no code at all", reference=ref)
    assert res.components["dfg"][0] == 0.0 and res.components["tests"][0] == -0.3
    assert res.attribution["tests"][0].ranges == () and res.attribution["syntax"][0].ranges == ()


def _lint_tokens(p, text: str, ends: list[int]) -> list[float]:
    from rewardlang.runtime.attribution import place, to_tokens

    res = _score(p, text)
    info = next(c for c in p.spec["components"] if c["name"] == "lint")
    return to_tokens(place(info.get("tokens"), float(res.components["lint"][0]), res.spans["lint"][0], text),
                     ends).tolist()


def test_a_token_overlapping_two_flagged_lines_gets_minus_one(prog) -> None:
    # issue 22 (a): the documented rule is -1 on every token of a flagged line; the two lines' spans added to -2
    code_only = rewardlang.load("specs/dense_ppo.reward", params={"lint_scope": "code"})
    text = "```python\nimport os\nimport sys\ndef inc(x: int) -> int:\n    return x + 1\n```"
    res = _score(code_only, text)
    assert [s.label.split(":")[0] for s in res.spans["lint"][0]] == ["line 1", "line 2"]
    a = text.index("os\n")
    b = text.index("sys")
    # tokens: "```python\nimport " | "os\nimport" (lines 1 and 2) | " sys\n" | the rest
    ends = [a, b - 1, b + 4, len(text)]
    assert _lint_tokens(code_only, text, ends) == [-1.0, -1.0, -1.0, 1.0]


# -- mapping = "authors": ruff_rows and the per-test runs ----------------------------------------------------------

def test_ruff_rows_gives_rufs_own_rows_with_noqa_honoured_when_asked() -> None:
    from rewardlang.runtime.components.dense import ruff_rows

    code = "import sys\nimport os\n\nx = 1\n"
    r = ruff_rows.fn([code, ""], params=RuffParams(select=["I"]), ctx=Context())
    # I001 spans rows 1-2: one finding, one span over both lines with their breaks
    assert [(s.label, code[s.start:s.end]) for s in r.values[0]] == [("1-2 I001", "import sys\nimport os\n")]
    assert r.values[1] == []
    silenced = "x = 1\nimport json  # noqa\n"
    got = [ruff_rows.fn([silenced], params=RuffParams(select=["F401"], respect_noqa=honour), ctx=Context()).values[0]
           for honour in (True, False)]
    assert got[0] == [] and [s.label for s in got[1]] == ["2-2 F401"]


def test_script_tests_run_each_test_alone_and_pass_on_exit_status_zero() -> None:
    from rewardlang.runtime.components.dense import ScriptTestsParams, script_tests_pass_rate

    tests = ["assert f(1) == 2", "assert f(2) == 4", "assert seen == []\nseen.append(1)"]
    codes = [
        "seen = []\ndef f(x):\n    return x + 1",            # 2 of 3: each test is a fresh process (seen is empty)
        "import os\nos._exit(0)",                            # their semantics: exit status 0 passes every test
        "def f(:",                                           # a syntax error: nothing passes
        "while True:\n    pass",                               # the 1 s CPU limit: a timeout fails
        None,                                                # no code: 0
    ]
    r = script_tests_pass_rate.fn(codes, [tests] * 5, None, params=ScriptTestsParams(timeout=1),
                                  ctx=Context(use_cache=False))
    assert r.infra == [False] * 5
    assert r.values == pytest.approx([2 / 3, 1.0, 0.0, 0.0, 0.0])
    # OpenCodeInstruct's column is a list literal in a text; HumanEval's check(candidate): each assert a test
    # (tests/trainers/test_dense_authors.py: HumanEval/0, and the one-test reading check="whole")
    lit = script_tests_pass_rate.fn(["def f(x):\n    return x + 1"] * 2,
                                    ["['assert f(1) == 2', 'assert f(1) == 3']", TESTS],
                                    ["f", "f"], params=ScriptTestsParams(timeout=2), ctx=Context())
    assert lit.values == pytest.approx([0.5, 1.0])
