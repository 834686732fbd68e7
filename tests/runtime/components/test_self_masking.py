"""Issue 19, class 10: a program must not mask itself through a component.

The rule (docs/language.md, "none, errors and masking"): a failure caused by the completion's own text is the
completion's outcome, never a mask; masks stay for failures outside the program's control (a broken tool, the
sandbox's infrastructure). And one completion must never change another's value: errors are per row.

- every shipped spec that needs no model scores a batch of hostile completions (tests/runtime/components/
  hostile.py: unparseable code, 20,000-term expressions, NUL bytes, 100 kB lines, 20,000-digit literals, regex
  bait, ...) mixed with normal ones with no masked row, and the normal rows get exactly the values they get alone;
- a function that raises on one row fails that row only (kernels.call isolates it by bisection);
- a spec whose PRM checkpoint is missing is refused at load (E603), not masked row by row.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlang
from rewardlang.diagnostics import SpecError
from rewardlang.runtime.api import Context, function
from rewardlang.runtime.components.text import TagParams, _tag_matches, _tag_regex
from rewardlang.compiler import load_program

from hostile import HOSTILE, NORMAL

ROOT = Path(__file__).resolve().parents[3]
#: specs/prlcoder.reward needs a trained PRM (refused without one: see below); every other shipped spec runs here
SPECS = sorted(p.stem for p in (ROOT / "specs").glob("*.reward") if p.stem != "prlcoder")
COLUMNS: dict[str, Any] = {
    "tests": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n",
    "entry_point": "inc", "reference": "def inc(x):\n    return x + 1\n", "prompt": "Write inc.",
    # a reference solution, as the shipped data sets have: the tests' time limit is relative to its time (a
    # completion that computes for ever is stopped after a second or so instead of the spec's 10 s timeout)
    "solution": "def inc(x):\n    return x + 1\n",
    "expected": "3", "difficulty": 2.0, "verified": True, "task": "t1",
}


#: inputs a spec reads in a form of its own (the robot spec's `task` is a task of the robot domain, as JSON)
SPEC_COLUMNS: dict[str, dict[str, Any]] = {
    "dense_ppo_robot": {"task": "robot"},
    # the paper's OORL spec scores translations: structured tests in the target language (docs/languages.md)
    "oorl": {"language": "js", "tests": json.dumps({
        "format": "rewardlang-tests/1",
        "harness": 'const rlFs = require("fs");\nrlFs.writeSync(3, "0 " + JSON.stringify(inc(1)) + "\\n");\n'
                   'rlFs.writeSync(3, "1 " + JSON.stringify(inc(-1)) + "\\n");\n',
        "cases": [{"expected": 2, "type": "int", "tolerance": None},
                  {"expected": 0, "type": "int", "tolerance": None}]})},
}


def _column(spec: str, name: str) -> Any:
    value = SPEC_COLUMNS.get(spec, {}).get(name, COLUMNS.get(name))
    if value == "robot":
        from rewardlang.domains.robot.data import rows

        value = rows("train")[0]["task"]
    return value


def _score(prog: rewardlang.Program, completions: list[str]) -> Any:
    given: dict[str, Any] = {"completion": completions}
    for inp in prog.inputs:
        if inp.used and inp.name != "completion":
            value = _column(prog.name, inp.name)
            given[inp.name] = [value if value is not None else _column(prog.name, inp.column)] * len(completions)
    return prog.score(**given)


def test_every_shipped_spec_is_covered() -> None:
    assert {"codepo", "codepo_text", "constructs", "dense_ppo", "dpo_tests", "oorl", "prlcoder_dpo", "prm",
            "quality_grpo"} <= set(SPECS)


#: specs whose sandboxed components make the run long: in the slow run (quality_grpo's sandboxed tests stay in the
#: default run as their representative)
HEAVY = {"dpo_tests", "oorl_python", "prlcoder_dpo", "dense_ppo"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in SPECS])
def test_hostile_completions_never_mask_and_never_change_other_rows(name: str) -> None:
    prog = load_program(str(ROOT / "specs" / f"{name}.reward"))
    labels = list(HOSTILE) + [f"normal {i}" for i in range(len(NORMAL))]
    out = _score(prog, list(HOSTILE.values()) + NORMAL)
    masked = {(labels[i], c, out.errors[c][i]) for c, m in out.masked.items() for i in np.flatnonzero(m)}
    assert not masked, f"rows masked by their own text: {sorted(masked, key=str)[:10]}"
    assert not np.isnan(out.total).any()
    # each normal row has exactly the values it has when it is scored alone
    k = len(HOSTILE)
    for j, text in enumerate(NORMAL):
        alone = _score(prog, [text])
        assert out.total[k + j] == alone.total[0], (name, j)
        for c in out.components:
            assert out.components[c][k + j] == alone.components[c][0], (name, j, c)


def test_the_issue_examples() -> None:
    # specs/prm.reward: one 20,000-term expression among ten completions used to mask all ten (segments raised
    # RecursionError for the batch); now it has no segments (it does not parse) and the nine keep their values
    prog = load_program(str(ROOT / "specs" / "prm.reward"))
    good = "```python\ndef f(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n```"
    batch = [good] * 9 + [HOSTILE["deep_binop"]]
    out = prog.score(completion=batch)
    assert out.components["steps"].tolist() == [3.0] * 9 + [0.0]
    assert not any(m.any() for m in out.masked.values())
    # specs/quality_grpo.reward on code that does not parse: the worst quality (0), reward 0.2 (format 1), not none
    prog = load_program(str(ROOT / "specs" / "quality_grpo.reward"))
    out = _score(prog, ["```python\ndef inc(x):\n    return (x + \n```"])
    assert out.components["quality"].tolist() == [0.0] and out.errors["quality"] == [None]
    assert out.total.tolist() == [pytest.approx(0.2)]
    # the library's behaviour, as the named option: ~0.99925 for the same code
    lib = load_program(str(ROOT / "specs" / "quality_grpo.reward"), params={"quality_invalid": "library"})
    assert _score(lib, ["```python\ndef inc(x):\n    return (x + \n```"]).components["quality"][0] == \
        pytest.approx(0.9992505945054277)


# ------------------------------------------------------------------ a function raising on some rows
@function("_test_explodes", args={"text": "text"}, returns="number",
          doc="test only: raises RecursionError for the whole call when any text contains BOOM")
def _explodes(text: list[str], *, params: None, ctx: Context) -> list[float]:
    if any("BOOM" in t for t in text):
        raise RecursionError("maximum recursion depth exceeded")
    return [float(len(t)) for t in text]


def test_a_function_that_raises_on_one_row_fails_only_that_row() -> None:
    prog = rewardlang.loads("component n = _test_explodes(completion)\ncomponent m = len(completion)\n")
    out = prog.score(completion=["a", "bb", "BOOM", "ccc", "dddd", "BOOM"])
    assert out.components["n"][[0, 1, 3, 4]].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert math.isnan(out.components["n"][2]) and math.isnan(out.components["n"][5])
    assert out.errors["n"][2] == "_test_explodes crashed: RecursionError: maximum recursion depth exceeded"
    assert out.masked["n"].tolist() == [False, False, True, False, False, True]
    # the two BOOM rows are one distinct argument: one crash, found by splitting the 5 distinct rows
    assert out.stats["crash:_test_explodes"] == 1 and out.stats["isolate:_test_explodes"] >= 2
    assert out.components["m"].tolist() == [1.0, 2.0, 4.0, 3.0, 4.0, 4.0]


# ------------------------------------------------------------------ tags in linear time, as the regex
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["<a>", "</a>", "x", "\n", "<", ">", "a", "<a", "a>"]), max_size=14).map("".join),
       st.booleans(), st.booleans())
def test_tag_scan_equals_the_regex(text: str, dotall: bool, greedy: bool) -> None:
    rx = _tag_regex("a", TagParams(dotall=dotall, greedy=greedy))
    assert _tag_matches(text, "a", dotall, greedy, first=False) == [(m.start(1), m.end(1)) for m in rx.finditer(text)]
    m = rx.search(text)
    assert _tag_matches(text, "a", dotall, greedy, first=True) == ([(m.start(1), m.end(1))] if m else [])


# ------------------------------------------------------------------ a missing model is refused at load
def test_a_spec_without_its_prm_is_refused_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # runs/prm/final, relative, does not exist here
    prog = load_program(str(ROOT / "specs" / "prlcoder.reward"))
    [d] = prog.missing_resources()
    assert d.code == "E603" and "runs/prm/final" in d.message and "does not exist" in d.message
    assert "rewardlang prm-data" in (d.hint or "") and "specs/prm.reward" in (d.hint or "")
    with pytest.raises(SpecError) as ei:  # any scoring refuses it, once, before a row is scored
        prog.score(completion=["x = 1"], prompt=["p"], tests=["t"], entry_point=["f"])
    assert [x.code for x in ei.value.diagnostics] == ["E603"]
    # a directory without a model is named as such; an unset checkpoint too
    (tmp_path / "empty").mkdir()
    prog = load_program(str(ROOT / "specs" / "prlcoder.reward"), params={"prm_checkpoint": str(tmp_path / "empty")})
    assert "holds no model" in prog.missing_resources()[0].message
    # the trainer refuses it before loading a model
    from rewardlang.trainers.run import train

    with pytest.raises(SpecError) as ei:
        train(str(ROOT / "specs" / "prlcoder.reward"), flags={"model": "tiny", "dataset": str(tmp_path / "none")})
    assert [x.code for x in ei.value.diagnostics] == ["E603"]


def test_rewardlang_score_refuses_it_with_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rewardlang.cli import app

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"completion": "x = 1", "prompt": "p", "tests": "t", "entry_point": "f"}) + "\n")
    r = CliRunner().invoke(app, ["score", str(ROOT / "specs" / "prlcoder.reward"), "-i", str(data)])
    assert r.exit_code == 1
    assert "error[E603]" in r.output and "prm_total` needs the PRM checkpoint 'runs/prm/final'" in r.output


def test_a_present_checkpoint_is_not_refused(tmp_path: Path) -> None:
    ck = tmp_path / "prm"
    ck.mkdir()
    (ck / "config.json").write_text("{}")
    prog = load_program(str(ROOT / "specs" / "prlcoder.reward"), params={"prm_checkpoint": str(ck)})
    assert prog.missing_resources() == []


def test_a_ruff_crash_on_one_sample_flags_every_line_of_it_and_nothing_else() -> None:
    """ruff overflows its stack on ~10,000 nested brackets: for the line-level signal (dense PPO's lint) that sample
    has every line flagged, the worst lint outcome, instead of an error a spec without `on_error` masks; the other
    samples of the batch keep their own findings."""
    from rewardlang.runtime.components.dense import ruff_rows
    from rewardlang.runtime.components.lint import RuffParams, ruff_line_spans

    crash = "y = 1\nx = " + "[" * 12000 + "]" * 12000 + "\nz = 2\n"
    for fn in (ruff_line_spans, ruff_rows):
        ctx = Context()
        r = fn.fn(["import os\n", crash], params=RuffParams(select=["F"]), ctx=ctx)
        assert r.errors == [None, None] and r.infra == [False, False]
        assert [s.label for s in r.values[0]] == (["line 1: F401"] if fn is ruff_line_spans else ["1-1 F401"])
        spans = [tuple(x[:2]) for x in r.values[1]]  # lines 1-3, breaks included: one span a line, or one for all
        assert spans == ([(0, 6), (6, len(crash) - 6), (len(crash) - 6, len(crash))] if fn is ruff_line_spans
                         else [(0, len(crash))])
        assert sum(v for k, v in ctx.stats.items() if k.endswith("failed_all_lines_flagged")) == 1
