"""`rewardlang explain` computes a row's advantage with the rows of its group, as `score` does, accepts
--group-by, and shows each call with its constant arguments, cut only between arguments (issue 13, item 14)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app
from rewardlang.explain import _call_label

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "codepo_text.reward"
DATA = ROOT / "examples" / "completions.jsonl"
runner = CliRunner()


def _scored(*extra: str) -> list[dict]:
    r = runner.invoke(app, ["score", str(SPEC), "-i", str(DATA), "--no-summary", "--no-progress", *extra])
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def _explained_advantage(row: int, *extra: str) -> float:
    r = runner.invoke(app, ["explain", str(SPEC), "-i", str(DATA), "--row", str(row), *extra])
    assert r.exit_code == 0, r.output
    m = re.search(r"advantage: (\S+) \(its group: (\d+) rows? of the input\)", r.stdout)
    assert m, r.stdout
    return float(m.group(1))


@pytest.mark.parametrize("row", [0, 3, 7, 8])
def test_explain_gives_the_advantage_score_gives(row: int) -> None:
    want = _scored()[row]["advantage"]
    assert want != 0.0
    assert _explained_advantage(row) == pytest.approx(want, abs=5e-6)  # shown with 6 significant digits


def test_explain_accepts_group_by(tmp_path: Path) -> None:
    # group by a column the spec does not group by: every row its own group in score, and in explain
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(dict(r, solo=i)) + "\n" for i, r in enumerate(rows)), encoding="utf-8")
    r = runner.invoke(app, ["score", str(SPEC), "-i", str(data), "--group-by", "solo", "--no-summary"])
    want = [json.loads(x)["advantage"] for x in r.stdout.splitlines() if x.strip()]
    r = runner.invoke(app, ["explain", str(SPEC), "-i", str(data), "--row", "3", "--group-by", "solo"])
    assert r.exit_code == 0, r.output
    assert "its group: 1 row of the input" in r.stdout
    assert float(re.search(r"advantage: (\S+)", r.stdout).group(1)) == pytest.approx(want[3], abs=5e-6)
    r = runner.invoke(app, ["explain", str(SPEC), "-i", str(data), "--group-by", "nope"])
    assert r.exit_code == 1 and "--group-by nope" in r.output


def test_the_derivation_shows_constant_arguments_and_cuts_between_them() -> None:
    r = runner.invoke(app, ["explain", str(SPEC), "-i", str(DATA), "--row", "0"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert 'tag(completion, "reasoning"' in out and 'tag(completion, "answer"' in out
    assert "count(completion, /Step\\s\\d+:/" in out
    assert re.search(r"distinct\(v\d+, 2\)", out)
    for line in out.splitlines():
        if "…)" in line and "(" in line:
            assert ", …)" in line, line  # cut between arguments, never inside one


def test_call_label_cuts_at_argument_boundaries() -> None:
    args = ["completion", "/Step\\s\\d+:/", '"Therefore"', '"Thus"', '"→"']
    assert _call_label("count", args, width=200) == 'count(completion, /Step\\s\\d+:/, "Therefore", "Thus", "→")'
    assert _call_label("count", args, width=40) == 'count(completion, /Step\\s\\d+:/, …)'
    # the first argument is always shown whole, however long
    assert _call_label("f", ["x" * 100, "y"], width=20) == "f(" + "x" * 100 + ", …)"
