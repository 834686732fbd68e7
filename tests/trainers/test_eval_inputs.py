"""Issue 25: eval judges a function followed by a closing fence and prose (major 7), refuses a PRM run as a model
(major 11), checks --n/--limit/--k before any model loads and counts the completions a file holds (minors); a PRM
run is presented as a reward model, its plot shows the held-out step accuracy and its final evaluation is recorded
once (minor); DPO/GEPO log no tokens_per_second of 0 (minor)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.trainers.cli import app
from rewardlang.trainers.evaluate import code_of, program_for
from rewardlang.trainers.metrics import read_metrics

HERE = os.path.dirname(os.path.abspath(__file__))
PRM_SPEC = os.path.join(HERE, "..", "..", "specs", "prm.reward")


def _jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# ----------------------------------------------------------------------- major 7
PROSE = "```\n\nThis function checks every pair of numbers and returns True when two are closer than the threshold."


def test_a_body_then_a_closing_fence_and_prose_is_the_body() -> None:
    prompt = "def f(x):\n    \"\"\"Double x.\"\"\"\n"
    assert code_of("    return 2 * x\n" + PROSE, prompt) == "    return 2 * x\n"
    assert program_for("    return 2 * x\n" + PROSE, prompt, "f") == prompt + "    return 2 * x\n"
    whole = "def f(x):\n    return 2 * x\n"
    assert program_for(whole + PROSE, prompt, "f") == prompt + "\n" + whole
    # prose, then a bare fence that opens the block; one word of prose is not code
    assert code_of("Here is the code:\n```\n" + whole + "```\nDone.") == whole
    assert code_of("Sure\n```\n" + whole + "```") == whole
    assert code_of("```python\n" + whole + "```\nprose") == whole
    assert code_of(whole) == whole
    # a closing fence after code that does not parse is not taken for code: the fence opens a block
    assert code_of("    return (\n```\nx = 1\n```") == "x = 1\n"


def test_eval_judges_canonical_bodies_followed_by_a_fence_and_prose_as_passing(tmp_path: Path) -> None:
    rows = load_humaneval()[:8]
    comps = _jsonl(tmp_path / "c.jsonl", [{"task_id": r["task_id"], "completion": r["reference"] + PROSE}
                                          for r in rows])
    res = CliRunner().invoke(app, ["eval", "--completions", comps, "--limit", "8"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["pass@1"] == 1.0 and summary["scored"] == 8


# ----------------------------------------------------------------------- eval's options (minors)
@pytest.mark.parametrize(("args", "message"), [
    (["--n", "0"], "--n must be at least 1 (got 0)"),
    (["--n", "5"], "--n 5 at temperature 0.0: greedy decoding gives one completion per problem"),
    (["--limit", "-2"], "--limit must be at least 1 (got -2)"),
    (["--limit", "0"], "--limit must be at least 1 (got 0)"),
])
def test_eval_options_are_checked_before_any_model_loads(args: list[str], message: str, monkeypatch) -> None:
    import rewardlang.trainers.evaluate as ev

    def no_model(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(ev, "load_eval_model", no_model)
    res = CliRunner().invoke(app, ["eval", "--model", "tiny", *args])
    assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output
    assert "--k" not in res.output


def test_eval_completions_counts_the_samples_the_file_holds(tmp_path: Path) -> None:
    rows = load_humaneval()[:2]
    wrong = "    return None\n"
    given = [{"task_id": rows[0]["task_id"], "completion": c} for c in (rows[0]["reference"], wrong, wrong)]
    given += [{"task_id": rows[1]["task_id"], "completion": c} for c in (rows[1]["reference"],) * 3]
    comps = _jsonl(tmp_path / "c.jsonl", given)
    res = CliRunner().invoke(app, ["eval", "--completions", comps, "--limit", "2"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["n"] == 3 and summary["samples"] == 6
    assert summary["pass@1"] == pytest.approx((1 / 3 + 1) / 2)
    assert summary["pass@3"] == 1.0  # k defaults to 1 and the file's count, without --n
    res = CliRunner().invoke(app, ["eval", "--completions", comps, "--limit", "2", "--k", "4"])
    assert res.exit_code == 1 and f"({comps} holds 3 for HumanEval/0)" in res.output


# ----------------------------------------------------------------------- PRM runs (major 11, minor)
@pytest.fixture(scope="module")
def prm_run(tmp_path_factory) -> str:
    from rewardlang.trainers.run import train

    tmp = tmp_path_factory.mktemp("prm")
    rows = []
    for i in range(30):
        good = [f"    a{i} = {i}\n", f"    return a{i}\n"]
        rows.append({"task_id": f"t{i}", "prompt": f"def f{i}():\n", "completions": good, "labels": [True, True]})
        rows.append({"task_id": f"t{i}", "prompt": f"def f{i}():\n", "completions": [good[0], "    pass\n"],
                     "labels": [True, False]})
    data = _jsonl(tmp / "steps.jsonl", rows)
    res = train(PRM_SPEC, flags={"dataset": data, "max_steps": 4, "batch_size": 4, "output_dir": str(tmp / "run")},
                sets={"train.save_steps": 2}, progress=False)
    return res.run_dir


def test_eval_refuses_a_prm_run_before_loading_it(prm_run: str) -> None:
    for name in (prm_run, os.path.join(prm_run, "final")):
        res = CliRunner().invoke(app, ["eval", "--model", name, "--limit", "1"])
        assert res.exit_code == 1, res.output
        assert "not a policy" in res.output and "Traceback" not in res.output and "pass@1" not in res.output


def test_a_prm_run_records_its_final_evaluation_once_and_plots_it(prm_run: str) -> None:
    evals = [r for r in read_metrics(os.path.join(prm_run, "metrics.jsonl")) if "eval_step_accuracy" in r]
    assert [r["step"] for r in evals] == [2, 4]
    from rewardlang.trainers.plot import chosen_panels

    records = read_metrics(os.path.join(prm_run, "metrics.jsonl"))
    assert "PRM: held-out step accuracy" in [t for t, _ in chosen_panels(records)]


def test_the_prm_cli_says_reward_model(tmp_path: Path) -> None:
    rows = []
    for i in range(30):
        rows.append({"task_id": f"t{i}", "prompt": f"def f{i}():\n", "completions": ["    return 1\n"],
                     "labels": [i % 2 == 0]})
    data = _jsonl(tmp_path / "steps.jsonl", rows)
    res = CliRunner().invoke(app, ["train", "--spec", PRM_SPEC, "--model", "tiny", "--dataset", data,
                                   "--max-steps", "1", "--output", str(tmp_path / "run"), "--no-progress",
                                   "--set", "train.batch_size=4"])
    assert res.exit_code == 0, res.output
    assert "final reward model in" in res.output and "final policy" not in res.output


# ----------------------------------------------------------------------- tokens_per_second (minor)
def test_a_trainer_that_counts_no_tokens_logs_no_tokens_per_second() -> None:
    from collections import defaultdict
    from types import SimpleNamespace

    from transformers import TrainerControl, TrainerState

    from rewardlang.trainers.metrics import RewardClock, StepTimingCallback

    def step(trainer: object, seen: int) -> dict:
        cb = StepTimingCallback(RewardClock())
        cb.trainer = trainer
        state = TrainerState()
        cb.on_step_begin(None, state, TrainerControl())
        state.num_input_tokens_seen = seen
        cb.on_step_end(None, state, TrainerControl())
        return trainer._metrics["train"]

    dpo = SimpleNamespace(_metrics={"train": defaultdict(list)})  # TRL's DPOTrainer: transformers counts nothing
    assert "tokens_per_second" not in step(dpo, 0) and "time/step" in dpo._metrics["train"]
    gepo = SimpleNamespace(_metrics={"train": defaultdict(list)}, tokens_seen=120)  # GEPO counts its groups' tokens
    (rate,) = step(gepo, 0)["tokens_per_second"]
    assert rate > 0 and gepo.tokens_seen == 0
    grpo = SimpleNamespace(_metrics={"train": defaultdict(list)})  # transformers' own count
    assert step(grpo, 64)["tokens_per_second"][0] > 0
