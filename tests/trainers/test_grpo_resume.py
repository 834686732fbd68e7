"""Resuming a run from its last checkpoint gives the same weights and metrics as never stopping it."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file

from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.grpo import train
from rewardlang.trainers.metrics import read_metrics
from resume_kit import kill_and_resume  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOY = os.path.join(HERE, "toy_digits.reward")
SETS = {"train.max_steps": 6, "train.save_steps": 3, "train.max_completion_length": 8, "train.prompts_per_step": 2}



@pytest.fixture()
def prompts(tmp_path) -> str:
    """5 prompts, 2 per step: an epoch is 2 steps, so the 6-step runs cross epochs and resume mid-epoch."""
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Task {i}: say it."}) + "\n" for i in range(5)))
    return str(path)


def _weights(run_dir: str) -> dict[str, torch.Tensor]:
    return load_file(os.path.join(run_dir, "final", "model.safetensors"))


def _curve(run_dir: str) -> list[tuple[int, float, float]]:
    return [(r["step"], r["reward"], r["loss"]) for r in read_metrics(os.path.join(run_dir, "metrics.jsonl"))
            if "reward" in r]


def _assert_same_run(a: str, b: str) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    assert _curve(a) == _curve(b)
    assert [s for s, _, _ in _curve(b)] == [1, 2, 3, 4, 5, 6]


def test_stop_and_resume_matches_an_uninterrupted_run(grpo_resume_runs) -> None:
    """The session's shared run (tests/trainers/conftest.py): 6 steps in one go, and stopped after step 3 (with a
    half-written step-4 record) then resumed."""
    full, resumed = grpo_resume_runs["full"], grpo_resume_runs["resumed"]
    assert (grpo_resume_runs["spec"], grpo_resume_runs["sets"]) == (TOY, SETS)
    assert full.global_step == 6
    assert grpo_resume_runs["part_step"] == 3 and grpo_resume_runs["part_last"].endswith("checkpoint-3")
    assert resumed.global_step == 6
    _assert_same_run(full.run_dir, resumed.run_dir)
    assert os.path.exists(os.path.join(resumed.run_dir, "config.resume-3.json"))
    # the trained policy differs from the initial one (the comparison above is not vacuous)
    init = load_file(os.path.join(resumed.run_dir, "initial_model", "model.safetensors"))
    assert any(not torch.equal(init[k], _weights(full.run_dir)[k]) for k in init)


def test_resume_refuses_changed_settings_and_fresh_runs_refuse_used_dirs(tmp_path, prompts,
                                                                          grpo_resume_runs) -> None:
    out = str(tmp_path / "run")
    shutil.copytree(grpo_resume_runs["full"].run_dir, out)   # a finished run, trained with seed 3
    with pytest.raises(ConfigError, match=r"settings differ .*seed \(3 then, 5 now\)"):
        train(TOY, sets=SETS, flags={**grpo_resume_runs["flags"], "output_dir": out, "seed": 5}, resume=True,
              progress=False)
    with pytest.raises(ConfigError, match="already holds a run; continue it with --resume"):
        train(TOY, sets=SETS, flags={"dataset": prompts, "output_dir": out}, progress=False)
    with pytest.raises(ConfigError, match="run directory .*/nowhere does not exist"):
        train(TOY, sets=SETS, flags={"dataset": prompts, "output_dir": str(tmp_path / "nowhere")}, resume=True)
    (tmp_path / "empty" / "checkpoint-2").mkdir(parents=True)  # cut off before trainer_state.json was written
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        train(TOY, sets=SETS, flags={"dataset": prompts, "output_dir": str(tmp_path / "empty")}, resume=True)


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tmp_path, prompts) -> None:
    """SIGKILL the CLI right after its first checkpoint; `--resume` finishes the run exactly as an unkilled one."""
    base = [sys.executable, "-m", "rewardlang.trainers.cli", "train", "--spec", TOY, "--dataset", prompts,
            "--no-progress", "--seed", "3"] + [f"--set={k}={v}" for k, v in SETS.items()]
    full, killed = kill_and_resume(base, tmp_path)
    _assert_same_run(full, killed)
