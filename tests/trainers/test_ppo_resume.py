"""PPO: resuming from the last checkpoint gives the same weights (policy and critic) and metrics as never stopping;
a killed CLI run resumes to the same result; a run with LoRA policy and critic saves adapters and resumes too."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from safetensors.torch import load_file

from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import last_checkpoint, train
from resume_kit import StopAt, kill_and_resume  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOY = os.path.join(HERE, "toy_dense.reward")
# beta > 0 exercises the reference model; 2 mini-batches x 2 micro-batches exercise accumulation; warm-up + cosine;
# 4 steps, a checkpoint after step 3: the resumed run crosses into the second epoch of the data before the stop and
# resumes mid-epoch (data position 6 of 5 prompts), with a step of the cosine schedule still to go
SETS = {"train.max_steps": 4, "train.save_steps": 3, "train.max_completion_length": 8, "train.beta": 0.05,
        "train.num_mini_batches": 2, "train.gradient_accumulation_steps": 2, "train.lr_scheduler": "cosine",
        "train.warmup_ratio": 0.1, "train.ppo_epochs": 2}



@pytest.fixture()
def prompts(tmp_path) -> str:
    """5 prompts, 2 per step: the runs cross epochs of the data and resume mid-epoch."""
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Task {i}: say it."}) + "\n" for i in range(5)))
    return str(path)


def _weights(run_dir: str, name: str) -> dict[str, torch.Tensor]:
    return load_file(os.path.join(run_dir, "final", name))


def _curve(run_dir: str) -> list[tuple]:
    keys = ("step", "reward", "loss", "loss/value", "kl", "learning_rate", "value/explained_variance")
    return [tuple(r.get(k) for k in keys) for r in read_metrics(os.path.join(run_dir, "metrics.jsonl"))
            if "reward" in r]


def _assert_same_run(a: str, b: str, names: tuple[str, ...]) -> None:
    for name in names:
        wa, wb = _weights(a, name), _weights(b, name)
        assert wa.keys() == wb.keys()
        for k in wa:
            assert torch.equal(wa[k], wb[k]), (name, k)
    assert _curve(a) == _curve(b)
    assert [c[0] for c in _curve(b)] == list(range(1, SETS["train.max_steps"] + 1))


def test_stop_and_resume_matches_an_uninterrupted_run(tmp_path, prompts) -> None:
    flags = {"dataset": prompts, "seed": 3}
    full = train(TOY, sets=SETS, flags={**flags, "output_dir": str(tmp_path / "full")}, progress=False)
    assert full.global_step == 4
    part = train(TOY, sets=SETS, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                 callbacks=[StopAt(3)])
    assert part.global_step == 3 and last_checkpoint(part.run_dir).endswith("checkpoint-3")
    resumed = train(TOY, sets=SETS, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                    resume=True)
    assert resumed.global_step == 4
    names = ("model.safetensors", os.path.join("critic", "model.safetensors"))
    _assert_same_run(full.run_dir, resumed.run_dir, names)
    assert os.path.exists(os.path.join(resumed.run_dir, "config.resume-3.json"))
    # training changed both models (the comparison above is not vacuous)
    init = load_file(os.path.join(resumed.run_dir, "initial_model", "model.safetensors"))
    assert any(not torch.equal(init[k], _weights(full.run_dir, names[0])[k]) for k in init)
    critic = _weights(full.run_dir, names[1])
    assert critic["score.weight"].abs().sum() > 0  # the value head starts at 0
    with open(os.path.join(full.run_dir, "checkpoint-3", "trainer_state.json")) as fh:
        saved = json.load(fh)
    assert saved["global_step"] == 3 and saved["data_position"] == 6
    with open(os.path.join(full.run_dir, "config.json")) as fh:
        cfg = json.load(fh)
    assert cfg["train"]["algorithm"] == "ppo" and cfg["train"]["beta"] == 0.05


@pytest.mark.slow
def test_lora_policy_and_critic_resume(tmp_path, prompts) -> None:
    sets = {**SETS, "train.lora": True, "train.lora_r": 4, "train.max_steps": 4, "train.save_steps": 2,
            "train.learning_rate": 5e-3}
    flags = {"dataset": prompts, "seed": 1}
    full = train(TOY, sets=sets, flags={**flags, "output_dir": str(tmp_path / "full")}, progress=False)
    train(TOY, sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
          callbacks=[StopAt(2)])
    resumed = train(TOY, sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                    resume=True)
    names = ("adapter_model.safetensors", os.path.join("critic", "adapter_model.safetensors"))
    for name in names:
        wa, wb = _weights(full.run_dir, name), _weights(resumed.run_dir, name)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any("score" in k for k in _weights(full.run_dir, names[1]))  # PEFT saves the value head with the adapter
    assert _curve(full.run_dir) == _curve(resumed.run_dir)
    # the KL against the adapter-free reference is non-zero once the adapter has moved
    assert any(c[4] for c in _curve(full.run_dir)[1:])


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tmp_path, prompts) -> None:
    """SIGKILL the CLI right after its first checkpoint; `--resume` finishes the run exactly as an unkilled one."""
    base = [sys.executable, "-m", "rewardlang.trainers.cli", "train", "--spec", TOY, "--dataset", prompts,
            "--no-progress", "--seed", "3"] + [f"--set={k}={v}" for k, v in SETS.items()]
    full, killed = kill_and_resume(base, tmp_path)
    _assert_same_run(full, killed, ("model.safetensors", os.path.join("critic", "model.safetensors")))
