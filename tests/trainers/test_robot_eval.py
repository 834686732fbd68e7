"""``rewardlang eval --dataset robot``: the held-out robot tasks judged by the simulator, outcome classes and
pass@1 (given completions: no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlang.domains.robot.data import rows
from rewardlang.domains.robot.tasks import get_task
from rewardlang.trainers import evaluate as ev


def test_select_robot_problems() -> None:
    held = ev.select_problems(None, None, "robot")
    assert [r["task_id"] for r in held] == [r["task_id"] for r in rows("heldout")] and len(held) == 16
    assert [r["task_id"] for r in ev.select_problems(["robot/fetch/apple-kitchen"], None, "robot")] == \
        ["robot/fetch/apple-kitchen"]
    assert len(ev.select_problems(None, 3, "robot")) == 3
    with pytest.raises(ValueError, match="unknown robot task"):
        ev.select_problems(["nope"], None, "robot")
    with pytest.raises(ValueError, match="humaneval or robot"):
        ev.select_problems(None, None, "mbpp")


def test_robot_eval_reports_classes_and_pass_at_1(tmp_path: Path) -> None:
    probs = ev.select_problems(["robot/fetch/apple-kitchen", "robot/go_say/kitchen"], None, "robot")
    fetch = get_task("robot/fetch/apple-kitchen")
    comps = [["```python\n" + fetch.canonical + "```", "```python\n" + fetch.mutants()["no_look"] + "```"],
             ["no code at all", "```python\ndef task_program():\n    go_to('kitchen')\n```"]]
    out = tmp_path / "r.jsonl"
    summary, records = ev.evaluate(probs, completions=comps, ks=[1, 2], out_path=str(out), dataset="robot")
    assert [r["outcomes"] for r in records] == [["success", "simulation_error"], ["python_error", "completion_error"]]
    assert summary["outcome_classes"] == {"python_error": 1, "simulation_error": 1, "completion_error": 1,
                                          "success": 1}
    assert summary["pass@1"] == 0.25 and summary["pass@2"] == 0.5
    assert [json.loads(line)["correct"] for line in out.read_text().splitlines()] == [1, 0]


def test_eval_cli_robot_completions(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardlang.trainers.cli import app

    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": "```python\n" + r["canonical"] + "```"})
                            + "\n" for r in rows("heldout")))
    res = CliRunner().invoke(app, ["eval", "--dataset", "robot", "--completions", str(path)])
    assert res.exit_code == 0, res.output
    assert "outcome classes: python_error 0, simulation_error 0, completion_error 0, success 16" in res.output
    assert "16 problems, 16 completions: pass@1 1.000" in res.output


def test_robot_dataset_rows_and_heldout_columns() -> None:
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.data import load_rows
    from rewardlang.trainers.report import heldout_rows

    got, source = load_rows("robot")
    assert source == "robot tasks (train split)" and len(got) == 60 and all(r["split"] == "train" for r in got)
    held = heldout_rows(TrainConfig(dataset="robot", eval=3))
    assert len(held) == 3 and all("task" in r for r in held)


@pytest.mark.slow
def test_the_robot_spec_trains_one_ppo_step_and_evaluates_before_and_after(tmp_path: Path) -> None:
    """`rewardlang train --spec specs/dense_ppo_robot.reward` on its own dataset (train.dataset = "robot"), with
    the held-out robot tasks judged by the simulator before and after."""
    from rewardlang.trainers.report import summary_lines
    from rewardlang.trainers.run import train

    run = train("specs/dense_ppo_robot.reward", sets={"train.eval": 2, "train.eval_max_new_tokens": 8,
                                                      "train.max_completion_length": 16},
                flags={"model": "tiny", "max_steps": 1, "output_dir": str(tmp_path / "run")}, progress=False)
    assert run.global_step == 1 and run.config.dataset == "robot" and run.config.beta == 0.9
    doc = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert doc["before"]["dataset"] == doc["after"]["dataset"] == "robot"
    assert sum(doc["after"]["outcome_classes"].values()) == 2
    assert any("robot tasks never trained on" in line for line in summary_lines(str(tmp_path / "run")))
