"""Issue 35, item 7: the shipped specs the issue names declare their audits, and the audits see what the reward does not.

Each of quality_grpo, codepo, dense_ppo, dpo_tests, oorl_python, prlcoder and the translation spec oorl declares a
`hidden` audit over the hidden tests (`plus_tests`, `rewardlang data humaneval --plus`). A wrong program that passes
HumanEval/23's own tests (a length capped at 11: the base tests use strings of 0, 1 and 9 characters) earns full
marks on the spec's tests component, and its `hidden` audit is the share of the shipped plus inputs shorter than
12 characters, counted here from the shipped file itself (0.79 of its 100); the canonical solution's audit is 1.
The statistics the specs name (group collapse, the PRM's share of the total's variance) are declared with their
settings.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest

import rewardlang
from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.datasets.multilang import load_humaneval as load_translated
from rewardlang.datasets.plus import load_plus

ROOT = Path(__file__).resolve().parents[1]
PLUS_FILE = ROOT / "rewardlang" / "data" / "humaneval_plus.jsonl.gz"
#: the shipped specs issue 35 names, and the component of each that is 1 when the program passes the base tests
#: (None: the reward runs no tests (codepo: CodeBLEU) or needs a trained PRM to score (prlcoder))
SPECS = {"quality_grpo": "correct", "codepo": None, "dense_ppo": "tests", "dpo_tests": "passes",
         "oorl_python": "rule", "prlcoder": None}
CAPPED = "def strlen(string: str) -> int:\n    return len(string) if len(string) < 12 else 11\n"


def _share_below_12() -> float:
    """The capped program's expected plus pass rate, from the shipped file's inputs (not from running anything)."""
    with gzip.open(PLUS_FILE, "rt", encoding="utf-8") as fh:
        row = next(r for r in map(json.loads, fh) if r["task_id"] == "HumanEval/23")
    inputs = [ast.literal_eval(a) for a in row["inputs"]]
    assert len(inputs) >= 50
    return sum(len(a[0]) < 12 for a in inputs) / len(inputs)


def _answer(spec: str, code: str) -> str:
    block = f"```python\n{code}```"
    if spec == "codepo":  # its format: reasoning, then the answer's block
        return f"<reasoning>Count the characters.</reasoning>\n<answer>\n{block}\n</answer>"
    return block


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_named_shipped_spec_audits_hidden_tests(spec: str) -> None:
    prog = rewardlang.load(str(ROOT / "specs" / f"{spec}.reward"))
    info = {a.name: a for a in prog.audits}
    assert info["hidden"].kind == "samples" and info["hidden"].range == (0.0, 1.0)
    assert "plus_tests" in prog.audit_columns() and "plus_tests" not in prog.required_columns()
    row = {r["task_id"]: r for r in load_humaneval()}["HumanEval/23"]
    row = {**row, "plus_tests": load_plus("python")["HumanEval/23"], "language": "python"}
    comps = [_answer(spec, row["solution"]), _answer(spec, CAPPED)]
    cols = {k: [row[k]] * 2 for k in prog.audit_columns() if k != "completion"}
    out = prog.audit(completion=comps, **cols)
    assert out.errors["hidden"] == [None, None]
    assert out.components["hidden"].tolist() == [1.0, pytest.approx(_share_below_12())]
    assert _share_below_12() < 0.9
    if SPECS[spec] is not None:  # the reward's own tests cannot tell the two apart
        need = {i.column for i in prog.inputs if i.used} - {"completion"}
        full = {**row, "reference": row["solution"]}
        scored = prog.score(completion=comps, **{k: [full.get(k)] * 2 for k in need})
        assert scored.components[SPECS[spec]].tolist() == [1.0, 1.0]


def test_the_translation_spec_audits_the_targets_hidden_tests() -> None:
    prog = rewardlang.load(str(ROOT / "specs" / "oorl.reward"))
    assert {a.name for a in prog.audits} == {"hidden"} and "plus_tests" in prog.audit_columns()
    row = {r["task_id"]: r for r in load_translated("js")}["HumanEval/23"]
    plus = load_plus("js")["HumanEval/23"]
    assert json.loads(plus)["format"] == "rewardlang-tests/1"
    good = "```js\nfunction strlen(string) {\n  return string.length;\n}\n```"
    capped = "```js\nfunction strlen(string) {\n  return string.length < 12 ? string.length : 11;\n}\n```"
    out = prog.audit(completion=[good, capped], plus_tests=[plus] * 2, entry_point=[row["entry_point"]] * 2,
                     language=["js"] * 2)
    assert out.components["hidden"].tolist() == [1.0, pytest.approx(_share_below_12())]
    scored = prog.score(completion=[good, capped], tests=[row["tests"]] * 2, entry_point=[row["entry_point"]] * 2,
                        language=["js"] * 2, prompt=[row["prompt"]] * 2)
    assert scored.components["passes"].tolist() == [1.0, 1.0]


def test_the_statistics_the_shipped_specs_name() -> None:
    def stats(spec: str) -> dict[str, tuple[str | None, dict]]:
        prog = rewardlang.load(str(ROOT / "specs" / f"{spec}.reward"))
        return {a.name: (a.statistic, a.options) for a in prog.audits if a.kind == "statistic"}

    assert stats("quality_grpo") == {"collapse": ("group_collapse", {"threshold": 0.9})}
    assert stats("codepo") == {"collapse": ("group_collapse", {"threshold": 0.9})}
    # prlcoder: the PRM's score against the tests, and the PRM's share of the total's variance
    assert stats("prlcoder") == {"process_share": ("component_dominance", {"threshold": 0.95})}
