"""benchmarks/learning.py: one table row from a run directory (metrics.jsonl, eval.json) and the Markdown table,
on hand-made runs whose figures are computed by hand here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "benchmarks" / "learning.py")
learning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(learning)


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "quality_grpo"
    run.mkdir()
    rewards = [0.2, 0.4, 0.3, 0.5, 0.7, 0.9]
    zero = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    with open(run / "metrics.jsonl", "w", encoding="utf-8") as fh:
        for s, (r, z) in enumerate(zip(rewards, zero)):
            fh.write(json.dumps({"step": s + 1, "reward": r, "reward_std": 0.1, "groups/zero_variance": z,
                                 "time/step": 10.0 + s}) + "\n")
        fh.write(json.dumps({"step": 6, "train_runtime": 99.0}) + "\n")  # the trainer's summary: not a step
    side = {"scored": 40, "pass@1": 0.05, "pass@1_ci95": [0.0, 0.125],
            "reward": {"mean": 0.43, "ci95": [0.34, 0.52]}, "components": {"format": 0.7}}
    (run / "eval.json").write_text(json.dumps({
        "before": side,
        "after": {**side, "pass@1": 0.1, "reward": {"mean": 0.55, "ci95": [0.46, 0.64]}, "components": {"format": 0.9}},
        "change": {"reward": {"mean": 0.12, "ci95": [0.04, 0.2]}, "pass@1": {"mean": 0.05, "ci95": [0.0, 0.1]}}}))
    return run


def test_a_row_holds_the_ends_the_zero_variance_share_and_the_heldout_change(tmp_path: Path) -> None:
    row = learning.summarize_run(str(_run(tmp_path)), ends=2)
    assert row["steps"] == 6
    assert abs(row["reward_first"] - 0.3) < 1e-12 and abs(row["reward_last"] - 0.8) < 1e-12
    assert (row["reward_min"], row["reward_max"]) == (0.2, 0.9)
    assert abs(row["zero_variance"] - 2 / 6) < 1e-12 and abs(row["zero_variance_first3"] - 1 / 3) < 1e-12
    assert row["seconds_per_step"] == 12.5
    assert (row["heldout_before"], row["heldout_after"], row["heldout_change"]) == (0.43, 0.55, 0.12)
    assert row["heldout_change_ci95"] == [0.04, 0.2] and row["pass1_change_ci95"] == [0.0, 0.1]
    assert (row["pass1_before"], row["pass1_after"], row["heldout_problems"]) == (0.05, 0.1, 40)
    assert row["components_after"] == {"format": 0.9}


def test_the_markdown_table_has_a_row_per_spec_and_names_the_skipped_and_the_load(tmp_path: Path) -> None:
    row = {"spec": "quality_grpo", "exit": 0, **learning.summarize_run(str(_run(tmp_path)), ends=2),
           "settings": {"algorithm": "grpo"}, "date": "2026-11-28 20:40", "load": [1.5, 2.0]}
    meta = {"date": "2026-11-28 21:00 UTC", "model": "smollm2", "steps": 6, "eval": 40, "seed": 0, "threads": 1,
            "load": [9.5, 10.2]}
    table = learning.markdown([row, {"spec": "prlcoder", "skipped": "needs a PRM"}], meta)
    lines = table.splitlines()
    assert lines[2] == ("| `quality_grpo` | grpo | 0.300 → 0.800 | 0.33 (0.33) | 0.430 → 0.550 | +0.120 "
                        "[+0.040, +0.200] | 0.050 → 0.100 | 12.5 | 11-28 20:40, 1.5-2.0 |")
    assert lines[3].startswith("| `prlcoder` | | needs a PRM |")
    assert "40 held-out problems" in table and "load average 9.5-10.2" in table and "`prm`" in table


def test_a_table_stopped_part_way_names_the_specs_it_did_not_run(tmp_path: Path) -> None:
    row = {"spec": "codepo_text", "exit": 0, **learning.summarize_run(str(_run(tmp_path)), ends=2),
           "settings": {"algorithm": "grpo"}}
    meta = {"date": "2026-11-28 21:00 UTC", "model": "smollm2", "steps": 6, "eval": 8, "seed": 0, "threads": 1,
            "load": [9.5, 10.2], "specs": ["codepo_text", "oorl", "codepo"]}
    lines = learning.markdown([row], meta).splitlines()
    assert lines[2].startswith("| `codepo_text` | grpo | 0.300 → 0.800 |")
    assert lines[3] == "| `oorl` | | not run (the table was stopped before this spec) | | | | | | |"
    assert lines[4].startswith("| `codepo` | | not run")


def test_merge_keeps_the_earlier_rows_of_other_specs_and_refuses_another_budget(tmp_path: Path) -> None:
    import argparse

    import pytest

    out = tmp_path / "learning.json"
    meta = {"date": "2026-11-29 02:00 UTC", "model": "smollm2", "steps": 4, "eval": 10, "ends": 3, "seed": 0,
            "threads": 1, "load": [1.0, 2.0], "specs": ["dpo_tests", "oorl"]}
    out.write_text(json.dumps({"meta": meta, "rows": [{"spec": "dpo_tests", "exit": 0, "date": "2026-11-29 02:00"},
                                                      {"spec": "oorl", "exit": 1, "error": ["x"]}]}))
    args = argparse.Namespace(steps=4, eval=10, ends=3, seed=0, threads=1, model=None)
    kept, earlier = learning.merged_rows(str(out), ["oorl", "codepo"], args)
    assert [r["spec"] for r in kept] == ["dpo_tests"]  # oorl is being redone: its old row goes
    assert earlier == ["dpo_tests", "oorl"]
    with pytest.raises(SystemExit, match="one budget per table"):
        learning.merged_rows(str(out), ["codepo"], argparse.Namespace(steps=8, eval=10, ends=3, seed=0, threads=1, model=None))


def test_an_offline_dpo_run_shows_its_margin_where_it_has_no_sampled_reward(tmp_path: Path) -> None:
    """Offline DPO samples nothing while it trains: its row's first/last is TRL's implicit reward margin."""
    run = tmp_path / "prlcoder_dpo"
    run.mkdir()
    with open(run / "metrics.jsonl", "w", encoding="utf-8") as fh:
        for s, m in enumerate([0.0, 0.0, 0.021, 0.083]):
            fh.write(json.dumps({"step": s + 1, "loss": 0.69, "rewards/margins": m, "time/step": 30.0}) + "\n")
    row = {"spec": "prlcoder_dpo", "exit": 0, **learning.summarize_run(str(run), ends=2),
           "settings": {"algorithm": "dpo"}, "date": "2026-11-29 10:40", "load": [4.1, 4.2]}
    assert row["reward_first"] is None and row["margin_first"] == 0.0 and abs(row["margin_last"] - 0.052) < 1e-12
    meta = {"date": "2026-11-29 11:00 UTC", "model": "smollm2", "steps": 4, "eval": 10, "seed": 0, "threads": 1,
            "load": [4.1, 4.2]}
    line = learning.markdown([row], meta).splitlines()[2]
    assert line.startswith("| `prlcoder_dpo` | dpo | offline pairs: margin 0.000 → 0.052 | – |"), line
