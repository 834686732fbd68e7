"""GRPO's reward scored beside the step's forward passes (issue 38): the same step, bit for bit.

Two runs from the same seed on the tiny model, one with ``SpecGRPOTrainer.overlap_reward`` off (the reward scored
where TRL calls the functions, every forward pass where TRL runs it) and one with it on (the batch scored in a thread
from the moment the completions exist; the update's forward pass run while it is scored): the rewards, the
advantages, every logged loss and gradient norm and the trained weights are equal, exactly.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rewardlang.trainers import grpo
from rewardlang.trainers.metrics import read_metrics

# varied rewards on the untaught tiny model's random text (a constant reward would make every advantage 0), and a
# masked total for the longer completions (their advantage is 0, and TRL leaves them out of the group's baseline)
SPEC = '''spec overlap "length and digits"
input completion: text
input prompt: text
component short in [0, 1] = len(completion) / 30
component digits in [0, 1] = count(completion, /[0-9a-f]/) / max(len(completion), 1)
'''


def _run(tmp_path, name: str, overlap: bool, monkeypatch, **sets) -> tuple[object, list[dict], dict]:
    monkeypatch.setattr(grpo.SpecGRPOTrainer, "overlap_reward", overlap)
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(8)))
    base = {"train.max_steps": 1, "train.max_completion_length": 12, "train.prompts_per_step": 2, "train.seed": 3}
    result = grpo.train(str(spec), sets={**base, **sets},
                        flags={"dataset": str(data), "output_dir": str(tmp_path / name)}, progress=False)
    trainer = result.trainer
    weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return trainer, list(read_metrics(result.metrics_path)), weights


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _assert_identical(off: tuple, on: tuple) -> None:
    (t_off, m_off, w_off), (t_on, m_on, w_on) = off, on
    for key in ("rewards_per_func", "total", "advantages"):
        np.testing.assert_array_equal(t_off.last_batch[key], t_on.last_batch[key], err_msg=key)
    steps_off = [r for r in m_off if "loss" in r]
    steps_on = [r for r in m_on if "loss" in r]
    assert len(steps_off) == len(steps_on) > 0
    for a, b in zip(steps_off, steps_on):
        for key in ("loss", "grad_norm", "reward", "reward_std", "advantages/mean", "advantages/abs_mean",
                    "masked/rate", "entropy"):
            if key in a or key in b:
                assert _same(a[key], b[key]), (key, a[key], b[key])
    assert w_off.keys() == w_on.keys()
    for k in w_off:
        assert torch.equal(w_off[k], w_on[k]), k
    # the test means something: the step had a learning signal, and the overlap ran
    assert np.abs(t_on.last_batch["advantages"]).max() > 0
    assert any(r.get("grad_norm", 0) > 0 for r in steps_on)
    assert t_off.forward_ahead == {"used": 0, "missed": 0}
    assert t_on.forward_ahead["missed"] == 0 and t_on.forward_ahead["used"] >= 1
    # the logged split of the reward's time: waited + hidden = all of it, the share counts only the wait
    for r in steps_on:
        assert r["time/reward_wait"] + r["time/reward_hidden"] == pytest.approx(r["time/reward"], abs=1e-9)
        assert r["time/reward_share"] == pytest.approx(r["time/reward_wait"] / r["time/step"], rel=1e-6)
    for r in steps_off:
        assert r["time/reward_hidden"] == 0.0


def test_overlapped_reward_gives_the_same_step_with_a_reference_model(tmp_path, monkeypatch) -> None:
    """beta > 0: the reference's forward pass and the update's run beside the scoring."""
    off = _run(tmp_path, "off", False, monkeypatch, **{"train.beta": 0.04})
    on = _run(tmp_path, "on", True, monkeypatch, **{"train.beta": 0.04})
    _assert_identical(off, on)
    assert on[0].forward_ahead == {"used": 1, "missed": 0}


@pytest.mark.slow
def test_overlapped_reward_gives_the_same_steps_with_accumulation_and_lora(tmp_path, monkeypatch) -> None:
    """The main job's beta = 0 with LoRA, two generation batches of two micro-batches each (the first micro-batch
    of each run ahead, the second where TRL runs it), and a masked total among the samples."""
    sets = {"train.beta": 0.0, "train.lora": True, "train.max_steps": 2, "train.gradient_accumulation_steps": 2,
            "train.max_completion_length": 16}
    off = _run(tmp_path, "off", False, monkeypatch, **sets)
    on = _run(tmp_path, "on", True, monkeypatch, **sets)
    _assert_identical(off, on)
    assert on[0].forward_ahead == {"used": 2, "missed": 0}
