"""`audit` declarations: parsed, checked, formatted and compiled like components, and never part of the reward.

The reward, the components, the masks, the advantages and the preference ranks of a spec are bit-identical with and
without its audits (the audits compile to a module of their own); an audit is checked as a component is (types,
range, on_error, timeout), its period and alarm settings are validated, and a spec that names an audit where the
reward is made is refused (E219).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rewardlang
from rewardlang.checker import check_source
from rewardlang.diagnostics import SpecError
from rewardlang.fmt import format_source
from rewardlang.runtime import registry

BASE = '''\
input tests: text
input entry_point: text
input task: group from "task_id"
let code = code_block(completion, "python") or ""
component correct in [0, 1] = tests_pass_rate(code, tests, entry_point) if len(code) > 0 else 0
component fmt in [0, 1] = 1 if len(code) > 0 else 0.5 * number(contains(completion, "```"))
component brief in [0, 1] = 1 - min(len(completion), 400) / 400
    on_error 0
fmt.weight = linear(1 -> 0.2, steps=10)
advantage over group(task) = (x - mean) / (std(ddof=1) + 1e-4)
preference {
    pairs = "all",
    rank = reward,
}
'''

AUDITS = '''\
input plus_tests: text?
audit hidden in [0, 1] = tests_pass_rate(code, plus_tests, entry_point) every 2 steps window 4 steps margin 0.2
    on_error 0
    timeout 5
audit words = len(words(completion))
audit groups = group_collapse(threshold=0.5)
audit dom = component_dominance
'''

TESTS = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"
PLUS = TESTS + "    assert candidate(10) == 11\n    assert candidate(0) == 1\n"


def _batch(n: int = 12) -> dict[str, list]:
    bodies = ["return x + 1", "return 2", "return x * 2", "return abs(x) + 1", "return x - 1", "return x+1 "]
    comps = []
    for i in range(n):
        b = bodies[i % len(bodies)]
        comps.append(f"```python\ndef inc(x):\n    {b}\n```" if i % 4 else f"I think {b}")
    return {"completion": comps, "tests": [TESTS] * n, "plus_tests": [PLUS] * n, "entry_point": ["inc"] * n,
            "task": [f"t{i // 3}" for i in range(n)]}


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


@pytest.mark.parametrize("step", [0, 3, 20])
def test_the_reward_is_bit_identical_with_and_without_audits(step: int) -> None:
    plain = rewardlang.loads(BASE)
    audited = rewardlang.loads(BASE + AUDITS)
    cols = _batch()
    a = plain.score(**{k: v for k, v in cols.items() if k != "plus_tests"}, step=step)
    b = audited.score(**cols, step=step)
    assert _bits(a.total) == _bits(b.total)
    assert a.advantages is not None and _bits(a.advantages) == _bits(b.advantages)
    assert a.components.keys() == b.components.keys()  # audits are not components
    for k in a.components:
        assert _bits(a.components[k]) == _bits(b.components[k])
        assert (a.masked[k] == b.masked[k]).all() and a.errors[k] == b.errors[k]
    assert a.weights == b.weights
    # preference ranks read the same columns
    from rewardlang.runtime.preference import rank_rows

    masked = np.zeros(len(a.total), dtype=bool)
    ra = rank_rows(plain, a.total, a.components, masked, step)
    rb = rank_rows(audited, b.total, b.components, masked, step)
    assert _bits(ra.rank) == _bits(rb.rank)
    # the per-sample phase is the same code: the audits are a module of their own
    assert plain.python_source.split("def rows(")[1].split("\ndef ")[0] == \
        audited.python_source.split("def rows(")[1].split("\ndef ")[0]
    # and the audits are scored apart
    out = audited.audit(**{k: v for k, v in cols.items() if k != "task"}, step=step)
    assert set(out.components) == {"hidden", "words"}


def test_audit_values_and_clauses() -> None:
    prog = rewardlang.loads(BASE + AUDITS)
    info = {a.name: a for a in prog.audits}
    assert (info["hidden"].every, info["hidden"].window, info["hidden"].margin) == (2, 4, 0.2)
    assert info["hidden"].range == (0.0, 1.0) and info["hidden"].kind == "samples"
    assert (info["words"].every, info["words"].window, info["words"].margin) == (10, 20, 0.1)  # the defaults
    assert (info["groups"].kind, info["groups"].statistic, info["groups"].options) == \
        ("statistic", "group_collapse", {"threshold": 0.5})
    assert info["dom"].options == {"threshold": 0.9} and info["dom"].every == 1  # statistics: every step
    cols = _batch(6)
    out = prog.audit(completion=cols["completion"], plus_tests=cols["plus_tests"], entry_point=cols["entry_point"])
    # rows: 0 prose (code "" -> the sandbox fails it: 0), 1 `return 2` (half of the base tests, 1 of 4 plus),
    # 2 `x * 2` (1 plus test: f(1) = 2 only), 3 abs(x) + 1 (f(-1) = 2: 3 of 4), 4 `x - 1` (none), 5 right
    assert out.components["hidden"].tolist() == [0.0, 0.25, 0.25, 0.75, 0.0, 1.0]
    assert out.components["words"].tolist() == [len(c.split()) for c in cols["completion"]]
    # the reward's inputs do not include the audit-only column; the audits' do
    assert "plus_tests" not in prog.required_columns() and "plus_tests" in prog.audit_columns()


def test_scoring_needs_no_audit_column() -> None:
    prog = rewardlang.loads(BASE.replace("input task", "input plus_tests: text\ninput task") + AUDITS.split("\n", 1)[1])
    cols = _batch(3)
    del cols["plus_tests"]
    assert len(prog.score(**cols).total) == 3  # plus_tests is read by the audit only
    with pytest.raises(rewardlang.runtime.program.DataError, match="plus_tests"):
        prog.audit(completion=cols["completion"], entry_point=cols["entry_point"])


def test_examples_expect_audits_and_fail_on_a_wrong_value() -> None:
    src = BASE + AUDITS + '''
example {
    completion: "```python\\ndef inc(x):\\n    return 2\\n```",
    tests: "def check(candidate):\\n    assert candidate(1) == 2\\n",
    plus_tests: "def check(candidate):\\n    assert candidate(1) == 2\\n    assert candidate(5) == 6\\n",
    entry_point: "inc",
    expect correct = 1,
    expect hidden = 0.5,
    expect words = 6,
}
'''
    prog = rewardlang.loads(src)
    assert [f for *_, f in prog.run_examples()] == [[]]
    bad = rewardlang.loads(src.replace("expect hidden = 0.5", "expect hidden = 1"))
    (failures,) = [f for *_, f in bad.run_examples()]
    assert failures == ["`hidden`: expected 1, got 0.5 (tolerance 1e-09)"]


def _codes(src: str) -> list[tuple[str, str]]:
    _, diags, _ = check_source(src, "t.reward", registry.signatures())
    return [(d.code, d.message) for d in diags if d.is_error]


@pytest.mark.parametrize("src,code,message", [
    ("component c = 1\naudit a = completion", "E218", "audit `a` is `text`, not a number"),
    ("component c = 1\naudit a = len(completion) every 2.5 steps", "E218",
     "`every` is a whole number of steps, at least 1"),
    ("component c = 1\naudit a = len(completion) window 0 steps", "E218", "`window` is a whole number of steps, at least 1"),
    ("component c = 1\naudit a = len(completion) margin -1", "E218",
     "`margin` is a positive number: how far the reward must rise"),
    ("component c = 1\naudit a = len(completion) every 5 steps window 9 steps", "E218",
     "a window of 9 steps holds fewer than two audits taken every 5 steps"),
    ("component c = 1\naudit a in [0, 1] = len(completion)\n    on_error 2", "E218",
     "`on_error 2` lies outside the range [0, 1]"),
    ("component c = 1\naudit a = len(completion)\n    timeout 0", "E218", "`timeout` is a positive number of seconds"),
    ("component c = 1\naudit a = len(completion) every 2 steps every 3 steps", "E218", "`every` is given twice"),
    ("component c = 1\naudit a = group_collapse(0.5)", "E218",
     "`group_collapse` takes options only, such as `group_collapse(threshold=0.75)`"),
    ("component c = 1\naudit a = group_collapse(treshold=0.5)", "E218", "`group_collapse` has no option `treshold`"),
    ("component c = 1\naudit a = group_collapse(threshold=2)", "E218",
     "`threshold` of `group_collapse` is a constant number in [0, 1]"),
    ("component c = 1\naudit a = entropy_collapse\n    on_error 0", "E218",
     "the statistic `entropy_collapse` takes no `on_error`"),
    ("component c = 1\naudit a = component_dominance", "E218", "`component_dominance` needs at least two components"),
    ("component c = 1\naudit a = len(completion)\nreward = c + a", "E219", "`a` is an audit: it cannot be used in the reward"),
    ("component c = 1\naudit a = len(completion)\nadvantage over batch = x - a", "E219",
     "`a` is an audit: it cannot be used in the advantage"),
    ("component c = 1\naudit a = len(completion)\npreference { rank = a }", "E219",
     "`a` is an audit: it cannot be used in the `preference` section"),
    ("component c = 1 + a\naudit a = len(completion)", "E219", "`a` is an audit: it cannot be used in a component or let"),
    ("component c = 1\naudit a = len(completion)\na.weight = 2", "E219", "`a` is an audit: it has no weight"),
    ("component c = 1\naudit a = len(completion)\nreward = a.weight * c", "E219",
     "`a` is an audit: it cannot be used in the reward"),
    ("component c = 1\naudit c = len(completion)", "E103", "`c` is both a component and an audit"),
    ("component c = 1\naudit a = 1\naudit a = 2", "E103", "audit `a` is defined twice"),
    ("component c = 1\naudit reward = 1", "E107", "`reward` is a reserved name"),
    ("component c = 1\naudit a = lenn(completion)", "E102", None),
    ("component c = 1\naudit a = 1\nexample { completion: \"x\", expect b = 1 }", "E402", "`b` is not a component"),
])
def test_audit_errors(src: str, code: str, message: str | None) -> None:
    got = _codes(src)
    assert [c for c, _ in got] == [code], got
    if message is not None:
        assert got[0][1] == message


def test_an_audit_in_an_imported_file_is_E108(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "lib.reward").write_text("let n = len(completion)\naudit a = n\n", encoding="utf-8")
    (tmp_path / "s.reward").write_text('import "lib.reward"\ncomponent c = n\n', encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        rewardlang.load(str(tmp_path / "s.reward"))
    assert [(d.code, d.message) for d in exc.value.diagnostics] == [("E108", "an audit in an imported file")]


def test_an_input_only_an_audit_reads_is_used_and_optional_to_score() -> None:
    prog, diags, _ = check_source("input plus: text\ncomponent c = 1\naudit a = len(plus)", "t.reward",
                                  registry.signatures())
    assert [d.code for d in diags] == []  # no W001: the audit reads it
    assert prog is not None and prog.audit_only_inputs == {"plus"}
    # a let only an audit uses is used (no W002)
    _, diags, _ = check_source("let n = len(completion)\ncomponent c = 1\naudit a = n", "t.reward",
                               registry.signatures())
    assert diags == []


def test_clause_words_stay_usable_as_names() -> None:
    src = ("component margin = 1\ncomponent window = len(completion)\ncomponent steps = 2\nlet every = 3\n"
           "component c = every\nmargin.weight = 2\nwindow.weight = .5\nsteps.weight = linear(1 -> 0, steps=4)\n"
           "audit a = every every 1 step window 2 steps margin .5\n")
    prog = rewardlang.loads(src)
    assert [c.name for c in prog.components] == ["margin", "window", "steps", "c"]
    assert prog.weights(0) == {"margin": 2.0, "window": 0.5, "steps": 1.0, "c": 1.0}
    a = prog.audits[0]
    assert (a.every, a.window, a.margin) == (1, 2, 0.5)
    assert math.isclose(float(prog.score(["abcd"]).total[0]), 2 + 2 + 2 + 3)


def test_fmt_keeps_audits_canonical_and_compiling() -> None:
    messy = ("component c=len(completion)\naudit  hidden in [0,1]=min(len(completion),1) every 5 steps  # five\n"
             "  window 10 steps margin .2\n  on_error 0 # zero\naudit s=length_drift(margin=0.3)\n"
             "audit one = 1 every 1 steps window 2 step\n")
    out = format_source(messy)
    assert out == ("component c = len(completion)\n"
                   "audit hidden in [0, 1] = min(len(completion), 1) every 5 steps window 10 steps margin .2  # five\n"
                   "    on_error 0  # zero\n"
                   "audit s = length_drift(margin=0.3)\n"
                   "audit one = 1 every 1 step window 2 steps\n")
    assert format_source(out) == out
    a, b = rewardlang.loads(messy), rewardlang.loads(out)
    from dataclasses import replace

    assert [replace(x, line=0) for x in a.audits] == [replace(x, line=0) for x in b.audits]
    assert a.audits[0].text == "min(len(completion), 1)"
