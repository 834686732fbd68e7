"""A tiny random policy learns a toy spec's reward with GRPO (two seeds), on CPU in about a minute each."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rewardlang.trainers.grpo import train
from rewardlang.trainers.metrics import read_metrics

HERE = os.path.dirname(os.path.abspath(__file__))
TOY = os.path.join(HERE, "toy_digits.reward")


def _prompts(path) -> str:
    with open(path, "w") as fh:
        for i in range(16):
            fh.write(json.dumps({"prompt": f"Task {i}: write something."}) + "\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_tiny_model_learns_the_toy_reward(tmp_path, seed: int) -> None:
    result = train(TOY, flags={"dataset": _prompts(tmp_path / "prompts.jsonl"), "output_dir": str(tmp_path / "run"),
                               "seed": seed}, progress=False)
    records = [r for r in read_metrics(result.metrics_path) if "reward" in r]
    rewards = np.array([r["reward"] for r in records])
    assert len(rewards) == 20 and result.global_step == 20
    first, last = rewards[:4].mean(), rewards[-4:].mean()
    print(f"seed {seed}: reward curve {np.round(rewards, 3).tolist()}")
    # A random 512-token policy emits ~5% digit characters; GRPO should push that far up within 20 steps.
    assert first < 0.15
    assert last > first + 0.25, rewards.round(3).tolist()
    # the spec's advantage (z-score with ddof=1) was used: group advantages have unit sample std
    assert all(abs(r["advantages/mean"]) < 1e-6 for r in records)
