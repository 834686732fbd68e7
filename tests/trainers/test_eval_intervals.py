"""Held-out evaluation with intervals (issue 34): the percentile bootstrap of a mean and of a paired change, the
spec's reward of each held-out answer, and what `eval.json` records before, after and as the change."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

import rewardlang
from rewardlang.trainers.evaluate import (bootstrap_ci, change_between, evaluate, mean_ci, paired_change,
                                          spec_scores, spec_summary)

GOOD = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>"


def test_two_values_give_the_exact_bootstrap_distribution() -> None:
    # resampled means of {0, 1}: 0 (1/4), 0.5 (1/2), 1 (1/4); the 2.5 % and 97.5 % quantiles are 0 and 1
    assert bootstrap_ci([0.0, 1.0]) == [0.0, 1.0]
    # {0, 0, 0, 1}: P(mean = 0) = (3/4)^4 = 0.316 > 2.5 %, P(mean = 1) = (1/4)^4 = 0.4 % < 2.5 %: [0, 0.75]
    assert bootstrap_ci([0.0, 0.0, 0.0, 1.0]) == [0.0, 0.75]


def test_a_known_paired_sample_matches_the_normal_interval_and_scipy() -> None:
    rng = random.Random(7)
    before = [rng.random() for _ in range(60)]
    after = [b + 0.05 + rng.gauss(0, 0.2) for b in before]
    diffs = np.array(after) - np.array(before)
    change = paired_change(before, after)
    assert change["n"] == 60 and change["left_out"] == 0
    assert change["mean"] == pytest.approx(diffs.mean(), abs=1e-12)
    # the percentile bootstrap of a mean is close to mean +- 1.96 plug-in standard errors for n = 60
    se = diffs.std(ddof=0) / math.sqrt(len(diffs))
    assert change["ci95"][0] == pytest.approx(diffs.mean() - 1.96 * se, abs=0.15 * se)
    assert change["ci95"][1] == pytest.approx(diffs.mean() + 1.96 * se, abs=0.15 * se)
    from scipy import stats  # the test extra's reference: never skipped

    ref = stats.bootstrap((diffs,), np.mean, method="percentile", n_resamples=20000, random_state=1,
                          confidence_level=0.95).confidence_interval
    assert change["ci95"][0] == pytest.approx(ref.low, abs=0.05 * se)
    assert change["ci95"][1] == pytest.approx(ref.high, abs=0.05 * se)


def test_identical_before_and_after_give_an_interval_holding_zero() -> None:
    rng = random.Random(1)
    values = [rng.random() for _ in range(45)]
    change = paired_change(values, list(values))
    assert change["mean"] == 0 and change["ci95"] == [0.0, 0.0]
    lo, hi = change["ci95"]
    assert lo <= 0 <= hi
    # unpaired the two samples' own intervals are wide; the paired one sees that nothing changed
    own = bootstrap_ci(values)
    assert own[1] - own[0] > 0.1


def test_a_shifted_copy_gives_an_interval_above_zero_and_a_noisy_null_does_not() -> None:
    rng = random.Random(2)
    before = [rng.random() for _ in range(40)]
    shifted = paired_change(before, [b + 0.1 for b in before])
    assert shifted["mean"] == pytest.approx(0.1) and shifted["ci95"][0] > 0
    assert shifted["ci95"] == pytest.approx([0.1, 0.1])
    down = paired_change(before, [b - 0.02 + rng.gauss(0, 0.01) for b in before])
    assert down["ci95"][1] < 0
    null = paired_change(before, [b + rng.gauss(0, 0.3) for b in before])  # noise with no shift
    assert null["ci95"][0] < null["mean"] < null["ci95"][1]
    assert null["ci95"][1] - null["ci95"][0] > 0.1


def test_intervals_are_deterministic_and_left_out_pairs_are_counted() -> None:
    rng = random.Random(3)
    xs = [rng.random() for _ in range(50)]
    assert bootstrap_ci(xs) == bootstrap_ci(xs)
    assert bootstrap_ci(xs, seed=1) != bootstrap_ci(xs, seed=2)  # the seed is what fixes it
    change = paired_change([0.1, None, 0.5, 0.2], [0.3, 0.9, None, 0.4])
    assert change["n"] == 2 and change["left_out"] == 2 and change["mean"] == pytest.approx(0.2)
    assert mean_ci([]) == {"mean": None, "ci95": None, "n": 0}
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([0.1, math.nan])
    with pytest.raises(ValueError, match="before"):
        paired_change([0.1], [0.1, 0.2])


def test_a_large_sample_is_resampled_in_bounded_blocks() -> None:
    xs = np.linspace(0, 1, 5001)
    lo, hi = bootstrap_ci(xs)
    se = xs.std() / math.sqrt(xs.size)
    assert lo == pytest.approx(0.5 - 1.96 * se, abs=0.1 * se) and hi == pytest.approx(0.5 + 1.96 * se, abs=0.1 * se)


def test_spec_scores_give_each_problem_its_mean_reward_and_components() -> None:
    prog = rewardlang.load("specs/codepo_text.reward")
    problems = [{"task_id": "a", "prompt": "def f():\n"}, {"task_id": "b", "prompt": "def g():\n"}]
    got = spec_scores(prog, problems, [[GOOD], ["x = 1", GOOD]], system_prompt="S", prompt_template="T {prompt}")
    assert got[0] == {"reward": pytest.approx(1.65), "components": {"format": 1.0, "reason": pytest.approx(0.65),
                                                                    "rep": 0.0}, "reward_masked": 0}
    # "x = 1" has no tags: 0; GOOD 1.65; the problem's reward is their mean
    assert got[1]["reward"] == pytest.approx(0.825) and got[1]["components"]["format"] == 0.5


def test_change_between_pairs_problems_by_task_id_whatever_the_order() -> None:
    before = [{"task_id": "a", "reward": 0.2, "components": {"f": 0.0}, "pass@1": 0.0},
              {"task_id": "b", "reward": 0.5, "components": {"f": 1.0}, "pass@1": 1.0}]
    after = [{"task_id": "b", "reward": 0.6, "components": {"f": 1.0}, "pass@1": 1.0},
             {"task_id": "a", "reward": 0.4, "components": {"f": 1.0}, "pass@1": 1.0}]
    ch = change_between(before, after)
    assert ch["reward"]["mean"] == pytest.approx(0.15) and ch["reward"]["n"] == 2
    assert ch["components"]["f"]["mean"] == pytest.approx(0.5)
    assert ch["pass@1"]["mean"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="different problems"):
        change_between(before, after[:1])


def test_evaluate_with_a_spec_adds_the_reward_and_its_interval() -> None:
    from rewardlang.datasets.humaneval import load_humaneval

    rows = load_humaneval()[:4]
    prog = rewardlang.load("specs/quality_grpo.reward")
    answers = [[f"```python\n{r['prompt']}{r['reference']}```"] for r in rows[:2]] + [["no code"], ["no code"]]
    summary, records = evaluate(rows, completions=answers, program=prog)
    assert [r["pass@1"] for r in records] == [1.0, 1.0, 0.0, 0.0]
    assert records[2]["reward"] == 0 and records[2]["components"] == {"format": 0.0, "correct": 0.0, "quality": 0.0}
    assert records[0]["components"]["format"] == 1 and records[0]["components"]["correct"] == 1
    assert summary["spec"] == "quality_grpo" and summary["reward"]["n"] == 4 and summary["reward"]["masked"] == 0
    assert summary["reward"]["mean"] == pytest.approx(sum(r["reward"] for r in records) / 4)
    lo, hi = summary["reward"]["ci95"]
    assert lo <= summary["reward"]["mean"] <= hi
    assert summary["components"]["format"] == 0.5 and summary["pass@1"] == 0.5
    assert summary["pass@1_ci95"] == bootstrap_ci([1.0, 1.0, 0.0, 0.0])
    assert spec_summary(records)["components_ci95"]["correct"] == bootstrap_ci([1.0, 1.0, 0.0, 0.0])


def test_heldout_evaluation_writes_before_after_and_the_paired_change(tmp_path: Path, monkeypatch) -> None:
    """`train.eval`'s eval.json and README lines, with the generation replaced by fixed answers (the model's part
    is tested by the slow runs in test_heldout_eval.py)."""
    from rewardlang.trainers import evaluate as ev
    from rewardlang.trainers import report
    from rewardlang.trainers.config import TrainConfig

    prog = rewardlang.load("specs/codepo_text.reward")
    rows = [{"task_id": f"HumanEval/{i}", "prompt": f"def f{i}():\n", "tests": "def check(c):\n    pass\n",
             "entry_point": f"f{i}"} for i in range(40)]
    answers = {"before": ["x = 1"] * 30 + [GOOD] * 10, "after": [GOOD] * 36 + ["x = 1"] * 4}

    class Tok:
        chat_template = "yes"

    for when in ("before", "after"):
        monkeypatch.setattr(ev, "generate", lambda *a, when=when, **k: [[c] for c in answers[when]])
        report.evaluate_heldout(object(), Tok(), rows, TrainConfig(system_prompt="S"), str(tmp_path), when,
                                progress=False, program=prog)
    doc = json.loads((tmp_path / "eval.json").read_text())
    assert doc["before"]["reward"]["mean"] == pytest.approx(10 * 1.65 / 40)
    assert doc["after"]["reward"]["mean"] == pytest.approx(36 * 1.65 / 40)
    assert doc["before"]["components"]["format"] == 0.25 and doc["after"]["components"]["format"] == 0.9
    change = doc["change"]["reward"]
    assert change["mean"] == pytest.approx(26 * 1.65 / 40) and change["n"] == 40 and change["ci95"][0] > 0
    for when in ("before", "after"):
        lo, hi = doc[when]["reward"]["ci95"]
        assert lo < doc[when]["reward"]["mean"] < hi
        assert "pass@1" in doc[when] and len(doc[when]["pass@1_ci95"]) == 2
    assert set(doc["change"]["pass@1"]) >= {"mean", "ci95", "n"}
    per = [json.loads(line) for line in (tmp_path / "eval-after.jsonl").read_text().splitlines()]
    assert per[0]["reward"] == pytest.approx(1.65) and per[-1]["reward"] == 0
    lines = report.heldout_lines(doc)
    assert lines[0].startswith("held-out reward (spec `codepo_text`, 40 HumanEval problems never trained on")
    assert "change +1.073 (95% CI +" in lines[0] and "format 0.250 -> 0.900" in lines[1]
    assert lines[2].startswith("held-out pass@1 (40 HumanEval problems")
    # the plot's last panel reads before/after (not `change`, whose pass@1 is a paired summary)
    from rewardlang.trainers.plot import plot_run

    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in (1, 2)))
    assert Path(plot_run(str(tmp_path))).stat().st_size > 0


def test_eval_command_scores_with_the_spec_and_pairs_with_an_earlier_evaluation(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardlang.datasets.humaneval import load_humaneval
    from rewardlang.trainers.cli import app

    rows = load_humaneval()[:3]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": "no code"}) + "\n" for r in rows))
    second.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": f"```python\n{r['prompt']}"
                                          f"{r['reference']}```"}) + "\n" for r in rows))
    before = tmp_path / "before.jsonl"
    res = CliRunner().invoke(app, ["eval", "--completions", str(first), "--limit", "3", "--spec",
                                   "specs/quality_grpo.reward", "-o", str(before)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["reward"]["mean"] == 0 and summary["reward"]["ci95"] == [0.0, 0.0]
    assert "reward (spec `quality_grpo`): 0.000 (95% CI 0.000 to 0.000) over 3 problems" in res.output
    # --compare: the earlier file's problems, paired
    res = CliRunner().invoke(app, ["eval", "--completions", str(second), "--spec", "specs/quality_grpo.reward",
                                   "--compare", str(before)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["problems"] == 3 and summary["pass@1"] == 1.0
    change = summary["change"]
    assert change["pass@1"]["mean"] == 1.0 and change["pass@1"]["ci95"] == [1.0, 1.0]
    assert change["reward"]["mean"] == pytest.approx(summary["reward"]["mean"]) and change["reward"]["ci95"][0] > 0
    assert "change in pass@1 against" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0"}\n')
    res = CliRunner().invoke(app, ["eval", "--completions", str(second), "--compare", str(bad)])
    assert res.exit_code == 1 and "bad.jsonl:1: not a per-problem evaluation record" in res.output


def test_evaluate_stage_runs_once_before_and_passes_the_spec(tmp_path: Path, monkeypatch) -> None:
    """finish_run's entry point (every trainer's held-out evaluation goes through it): main process only, `before`
    not again on a resume, the run's spec handed on."""
    from rewardlang.trainers import report
    from rewardlang.trainers.config import TrainConfig

    seen = []
    monkeypatch.setattr(report, "evaluate_heldout", lambda *a, **k: seen.append((a[5], k["program"])) or {})
    rows, prog = [{"task_id": "t"}], object()
    assert report.evaluate_stage("before", None, None, rows, TrainConfig(), str(tmp_path), main=False,
                                 program=prog) is None
    report.evaluate_stage("before", None, None, rows, TrainConfig(), str(tmp_path), main=True, program=prog)
    (tmp_path / "eval-before.jsonl").write_text("{}\n")
    report.evaluate_stage("before", None, None, rows, TrainConfig(), str(tmp_path), main=True, program=prog)
    report.evaluate_stage("after", None, None, rows, TrainConfig(), str(tmp_path), main=True, program=prog)
    assert seen == [("before", prog), ("after", prog)]
