"""``rewardlang eval --plus``: pass@k on the base tests and on base + hidden tests, side by side. A wrong program that
passes HumanEval's own tests (a length capped below 12: HumanEval/23's tests use strings of 0, 1 and 9 characters)
passes base and fails plus; the canonical solutions pass both."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.trainers.cli import app


def test_eval_plus_base_and_plus_side_by_side(tmp_path: Path) -> None:
    rows = {r["task_id"]: r for r in load_humaneval()}
    capped = "```python\ndef strlen(string: str) -> int:\n    return len(string) if len(string) < 12 else 11\n```"
    comps = [{"task_id": "HumanEval/23", "completion": capped},
             {"task_id": "HumanEval/2", "completion": "```python\n" + rows["HumanEval/2"]["solution"] + "```"},
             {"task_id": "HumanEval/13", "completion": "```python\n" + rows["HumanEval/13"]["solution"] + "```"}]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in comps))
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(app, ["eval", "--completions", str(path), "--problems", "23", "--problems", "2",
                                   "--problems", "13", "--plus", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["plus"]["base"]["pass@1"] == 1.0
    assert abs(summary["plus"]["plus"]["pass@1"] - 2 / 3) < 1e-9
    assert "hidden tests: pass@1: base 1.000, plus 0.667 (-0.333)" in res.output
    recs = {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert recs["HumanEval/23"]["plus"]["correct_base"] == 1 and recs["HumanEval/23"]["plus"]["correct_plus"] == 0
    assert recs["HumanEval/2"]["plus"]["has_plus"] is True
