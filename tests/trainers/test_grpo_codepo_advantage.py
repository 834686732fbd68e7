"""Inside the trainer, on a real generated batch, CodePO's advantage is the paper's tanh-centred formula."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import rewardlang
from rewardlang.trainers.config import TrainConfig
from rewardlang.trainers.grpo import train
from rewardlang.trainers.model import load_policy, teach

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(ROOT, "specs", "codepo_text.reward")
# What the policy is taught to write before GRPO, so that its samples earn varied CodePO rewards
# (a random policy never writes the tags, and every group would have zero variance).
TAUGHT = [
    "<reasoning>Step 1: read the task. Step 2: write it. Thus done.</reasoning><answer>return x</answer>",
    "<reasoning>1. parse\n2. loop\n3. return</reasoning><answer>x = 1</answer>",
    "<reasoning>short</reasoning><answer>y</answer>",
    "a a a a a a a a",
    "return x",
]


@pytest.fixture(scope="module")
def taught_model(tmp_path_factory) -> str:
    """The tiny policy after a few supervised steps on TAUGHT, saved as a local model directory."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, tok = load_policy(TrainConfig())
    teach(model, tok, TAUGHT, steps=50)
    path = tmp_path_factory.mktemp("taught") / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _codepo_by_hand(total: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Eqs. 9-11: A = tanh((R - mean) / (std + 1e-8)) - mean(tanh(...)), population std, per prompt group."""
    out = np.empty_like(total)
    for g in np.unique(groups):
        r = total[groups == g]
        a = np.tanh((r - r.mean()) / (r.std() + 1e-8))
        out[groups == g] = a - a.mean()
    return out


@pytest.mark.slow
def test_codepo_advantage_in_the_trainer_matches_the_formula(tmp_path, taught_model) -> None:
    data = tmp_path / "tasks.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(8)))
    # the model was taught on bare "Task i" prompts: present them bare (no system prompt, the identity template)
    result = train(SPEC, sets={"train.system_prompt": "", "train.prompt_template": "{prompt}"},
                   flags={"model": taught_model, "dataset": str(data), "output_dir": str(tmp_path / "run"),
                          "max_steps": 1, "seed": 0}, progress=False)
    trainer = result.trainer
    batch = trainer.last_batch
    total, groups, adv = batch["total"], batch["groups"], batch["advantages"]
    assert list(batch["names"]) == ["format", "reason", "rep"]
    assert groups.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]  # two prompts x num_generations=4 (the spec's train section)
    assert not np.isnan(total).any()

    # the total is the spec's reward (Eq. 1, unit weights) of the completions TRL generated and decoded
    comps = batch["rewards_per_func"]
    np.testing.assert_allclose(total, comps.sum(axis=1), rtol=0, atol=1e-12)
    completions = list(trainer._logs["completion"])[-len(total):]
    prompts = list(trainer._logs["prompt"])[-len(total):]
    rescored = rewardlang.load(SPEC).score(completion=completions, prompt=prompts)
    np.testing.assert_allclose(rescored.total, total, rtol=0, atol=1e-12)

    # the batch is informative: some group has different rewards, so the advantage is not trivially zero
    spread = [np.ptp(total[groups == g]) for g in (0, 1)]
    assert max(spread) > 0.05, (completions, total)

    np.testing.assert_allclose(adv, _codepo_by_hand(total, groups), rtol=0, atol=1e-9)
    # ... and it is not TRL's default normalisation ((R - mean) / (sample std + 1e-4)), which it replaced
    g = int(np.argmax(spread))
    r = total[groups == g]
    assert not np.allclose(adv[groups == g], (r - r.mean()) / (r.std(ddof=1) + 1e-4), atol=1e-3)

    # the advantages the loss consumed are these (TRL shuffles the batch before the loss; float32)
    used = trainer._buffered_inputs[0]["advantages"].double().numpy()
    np.testing.assert_allclose(np.sort(used), np.sort(adv), rtol=0, atol=1e-6)
