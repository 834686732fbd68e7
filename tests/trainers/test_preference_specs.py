"""The shipped OORL spec trains from a fresh clone: `rewardlang train --spec specs/oorl.reward` (tiny model,
HumanEval prompts, two steps; the online DPO path of specs/dpo_tests.reward is exercised by
test_preference_training.py::test_online_gepo_and_dpo_sample_score_and_mine, and the spec is checked with the others)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app
from rewardlang.trainers.metrics import read_metrics

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec,key", [("oorl", "pref/groups"), ("oorl_python", "pref/groups")])
def test_shipped_spec_trains(tmp_path: Path, spec: str, key: str) -> None:
    out = tmp_path / spec
    r = CliRunner().invoke(app, ["train", "--spec", str(ROOT / "specs" / f"{spec}.reward"), "--max-steps", "2",
                                 "--output", str(out), "--no-progress", "--set", "train.max_completion_length=12",
                                 "--set", "train.save_steps=2"])
    assert r.exit_code == 0, r.output
    rec = [x for x in read_metrics(str(out / "metrics.jsonl")) if key in x]
    assert [x["step"] for x in rec] == [1, 2]
    assert (out / "final").is_dir() and (out / "checkpoint-2").is_dir()
