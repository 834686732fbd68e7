"""What a run shows about its reward (issue 27): every generating trainer logs, per step, the reward's time and share,
its slowest program, its timeouts, each component's time, and the zero-variance groups or mined pairs/groups; a run
whose reward cannot teach (a component constant on every sample) says so on stderr and in its README; the README
lists exactly the files the run wrote; DPO/GEPO's config.json records the β in force. Tiny model, 4-token
completions, 3 steps per run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from rewardlang.trainers.health import LearningGuard, StepReward, learning_warnings
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

# `format` is 0 on every sample whatever the model writes; `ran` runs the completion in the sandbox
STUCK = """
spec stuck "format never varies"
input completion: text
component format in [0, 1] = 0 * len(completion)
component ran in [0, 1] = 1 if executes(completion) else 0
    timeout 2
preference {{
    pairs = "max_min",
    winners = ran == 1,
}}
train {{
    algorithm = "{algo}",
    max_steps = 3,
    num_generations = 2,
    prompts_per_step = 1,
    max_completion_length = 4,
    learning_rate = 1e-3,
}}
"""

#: every generating trainer, and what it learns from: group differences or mined pairs/groups
ALGOS = {"grpo": ["groups/zero_variance"], "ppo": ["groups/zero_variance"], "oorl": ["pref/groups"],
         "gepo": ["pref/groups", "groups/zero_variance"], "dpo": ["pref/groups", "groups/zero_variance"]}
#: `format` calls no timed function: it logged no time/component/format before issue 37 (item 20)
KEYS = ["time/reward", "time/reward_share", "time/reward_max", "reward/timeouts", "time/component/ran",
        "time/component/format"]


def _run(tmp_path: Path, algo: str, sets: dict | None = None):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "s.reward"
    spec.write_text(STUCK.format(algo=algo))
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(4)))
    return train(str(spec), sets=sets or {}, flags={"model": "tiny", "dataset": str(data),
                                                     "output_dir": str(tmp_path / "run")}, progress=False)


def _check_run(tmp_path: Path, algo: str, err: str) -> None:
    run = tmp_path / "run"
    recs = [r for r in read_metrics(str(run / "metrics.jsonl")) if "train_runtime" not in r]
    assert [r["step"] for r in recs] == [1, 2, 3]
    for r in recs:
        missing = [k for k in KEYS + ALGOS[algo] if not isinstance(r.get(k), (int, float))]
        assert not missing, (algo, missing, sorted(r))
        assert 0.0 <= r["time/reward_share"] <= 1.0
        assert r["time/reward_max"] > 0.0  # every step ran programs in the sandbox
        assert r["reward/timeouts"] == 0.0  # 4 tokens of text never loop for 2 s
        assert r["components/format/min"] == r["components/format/max"] == 0.0
    # the run said it cannot learn from `format`, once, and its README records it
    said = re.findall(r"warning: `format` was 0 on all (\d+) samples of steps 1-3", err)
    assert len(said) == 1, err
    readme = (run / "README.md").read_text()
    assert "`format` was 0 on all" in readme and "steps 1-3" in readme
    assert "reward time:" in readme and "slowest component" in readme
    _check_file_list(run)


def _check_file_list(run: Path) -> None:
    """The README's `Files:` line names exactly the run's files and directories (README.md aside)."""
    readme = (run / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("Files: "))
    listed = {n.rstrip("/") for n in re.findall(r"`([^`]+)`", line)} - {"README.md"}
    there = set(os.listdir(run)) - {"README.md"}
    assert listed == there, (listed, there)


@pytest.mark.parametrize("algo", ["grpo", "dpo"])
def test_every_step_logs_what_the_reward_cost_and_a_stuck_component_is_named(
        tmp_path: Path, algo: str, capfd: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, algo)
    _check_run(tmp_path, algo, capfd.readouterr().err)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "oorl", "gepo"])
def test_every_generating_trainer_logs_the_reward_metrics(tmp_path: Path, algo: str,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, algo)
    _check_run(tmp_path, algo, capfd.readouterr().err)


@pytest.mark.parametrize("algo", ["dpo", "gepo"])
def test_config_json_records_the_beta_in_force(tmp_path: Path, algo: str) -> None:
    _run(tmp_path, algo, {"train.max_steps": 1})
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["train"]["beta"] == 0.1 == cfg["beta"]
    _run(tmp_path / "b", algo, {"train.max_steps": 1, "train.beta": 0.3})
    cfg = json.loads((tmp_path / "b" / "run" / "config.json").read_text())
    assert cfg["train"]["beta"] == 0.3 == cfg["beta"]


# ---- the pure parts: hand-computed cases

def test_step_reward_counts_zero_variance_groups_and_ranges() -> None:
    import numpy as np

    class P:
        def __init__(self) -> None:
            self.stats = {"sandbox.timeouts": 2, "time:correct": 1.0, "sandbox.max_wall_s": 9.0}

    p = P()
    sr = StepReward(p)
    p.stats.update({"sandbox.timeouts": 5, "time:correct": 1.75, "sandbox.max_wall_s": 3.5})
    # groups: 0 -> [1, 1] (no variance), 1 -> [0, 1], 2 -> [nan, 0.5] (one unmasked: not a group)
    sr.observe({"c": [1, 1, 0, 1, 7, 0.5]}, np.array([1, 1, 0, 1, np.nan, 0.5]), np.array([0, 0, 1, 1, 2, 2]))
    m = sr.take()
    assert m["reward/timeouts"] == 3 and m["time/component/correct"] == 0.75 and m["time/reward_max"] == 3.5
    assert m["groups/zero_variance"] == 0.5  # 1 of the 2 groups with two unmasked samples
    assert (m["components/c/min"], m["components/c/max"], m["reward/samples"]) == (0.0, 1.0, 5.0)
    assert p.stats["sandbox.max_wall_s"] == 0.0  # the next step starts its own maximum
    assert sr.take()["reward/timeouts"] == 0


def test_learning_warnings_need_three_consecutive_steps() -> None:
    def rec(step: int, zv: float, groups: float, lo: float, hi: float) -> dict:
        return {"step": step, "groups/zero_variance": zv, "pref/groups": groups, "components/f/min": lo,
                "components/f/max": hi, "reward/samples": 4}

    # two stuck steps, a good one, two stuck: nothing to say
    recs = [rec(1, 1.0, 0, 0, 0), rec(2, 1.0, 0, 0, 0), rec(3, 0.5, 1, 0, 1), rec(4, 1.0, 0, 0, 0),
            rec(5, 1.0, 0, 0, 0)]
    assert learning_warnings(recs) == []
    # a component constant at different values in consecutive steps is not "constant"
    assert learning_warnings([rec(1, 0.5, 1, 0, 0), rec(2, 0.5, 1, 1, 1), rec(3, 0.5, 1, 0, 0)]) == []
    stuck = [rec(s, 1.0, 0, 1, 1) for s in (1, 2, 3, 4)]
    w = learning_warnings(stuck)
    assert len(w) == 3
    assert w[0].startswith("every prompt group had zero reward variance in steps 1-4")
    assert w[1].startswith("no pair or group was mined in steps 1-4")
    assert w[2].startswith("`f` was 1 on all 16 samples of steps 1-4")


def test_the_guard_says_each_condition_once(capsys: pytest.CaptureFixture[str]) -> None:
    g = LearningGuard()
    said = [g.observe(s, {"components/f/min": 0.0, "components/f/max": 0.0, "reward/samples": 2})
            for s in range(1, 7)]
    assert [len(x) for x in said] == [0, 0, 1, 0, 0, 0]
    assert capsys.readouterr().err.count("warning: `f` was 0") == 1


def test_every_component_has_its_time_even_pure_arithmetic() -> None:
    """Issue 37, item 20: a component that calls no timed function logs time/component/NAME = 0 (it logged
    nothing); one that does logs its seconds."""
    import numpy as np

    import rewardlang

    prog = rewardlang.loads("component c in [0, 10] = 2 * 3 - 1\ncomponent n in [0, 99] = len(completion)\n"
                            "component ran in [0, 1] = 1 if executes(completion) else 0\n")
    sr = StepReward(prog)
    r = prog.score(["x = 1", "y = 2"])
    sr.observe(r.components, r.total, np.array([0, 0]))
    m = sr.take()
    assert m["time/component/c"] == 0.0 and m["time/component/n"] >= 0.0 and m["time/component/ran"] > 0.0
