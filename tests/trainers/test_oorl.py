"""OORL: REINFORCE++ on the spec's rule reward plus 0.01 x GEPO each step, on PPOTrainer (tiny model, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

pytestmark = pytest.mark.slow

SPEC = """\
spec toy_oorl "digits are the rule: a completion that is mostly digits wins"

component digits in [0, 1] = count(completion, /[0-9]/) / max(len(completion), 1)

preference { winners = digits >= 0.5, losers = digits < 0.5, max_group = 6 }

train {
    algorithm = "oorl",
    num_generations = 4,
    prompts_per_step = 4,
    max_completion_length = 12,
    learning_rate = 2e-2,
    lr_scheduler = "cosine",
    warmup_ratio = 0.03,
}
"""


def _files(tmp: Path) -> tuple[Path, Path, Path]:
    spec = tmp / "toy_oorl.reward"
    spec.write_text(SPEC, encoding="utf-8")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Task {i}: say it."}) + "\n" for i in range(8)))
    groups = tmp / "groups.jsonl"
    groups.write_text("".join(json.dumps({"prompt": f"Task {i}: say it.", "winners": ["123 45", "7 8 90", "2024"],
                                          "losers": ["abc de", "hello"]}) + "\n" for i in range(8)))
    return spec, prompts, groups


@pytest.mark.parametrize("seed", [0, 1])
def test_oorl_trains_with_gepo_each_step_and_the_rule_reward_does_not_fall(tmp_path: Path, seed: int) -> None:
    spec, prompts, groups = _files(tmp_path)
    res = train(str(spec), sets={"train.max_steps": 12, "train.save_steps": 12,
                                 "train.preference_data": str(groups)},
                flags={"dataset": str(prompts), "output_dir": str(tmp_path / "run"), "seed": seed}, progress=False)
    assert res.global_step == 12 and res.config.advantage_estimator == "reinforce_pp"
    rec = [r for r in read_metrics(res.metrics_path) if "reward" in r]
    assert all(r["pref/groups"] == 4 and r["gepo/loss"] > 0 for r in rec)
    # the two parts' shares of the loss: fractions that sum to 1, both parts present every step
    assert all(r["oorl/rl_share"] + r["oorl/gepo_share"] == pytest.approx(1.0) for r in rec)
    assert all(0 < r["oorl/gepo_share"] < 1 for r in rec)
    assert "loss/value" not in rec[0]                      # REINFORCE++: no critic
    first = sum(r["reward"] for r in rec[:4]) / 4
    last = sum(r["reward"] for r in rec[-4:]) / 4
    assert last >= first - 0.02, (first, last)
    # the GEPO term moves the implicit rewards of winners above the losers'
    assert rec[-1]["pref/margin"] > rec[0]["pref/margin"]


def test_oorl_mines_groups_from_its_rollouts_without_a_groups_file(tmp_path: Path) -> None:
    spec, prompts, _ = _files(tmp_path)
    res = train(str(spec), sets={"train.max_steps": 2, "train.save_steps": 2},
                flags={"dataset": str(prompts), "output_dir": str(tmp_path / "run")}, progress=False)
    rec = [r for r in read_metrics(res.metrics_path) if "reward" in r]
    assert len(rec) == 2 and all("pref/groups" in r for r in rec)


def test_oorl_stop_and_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 2:
                control.should_training_stop = True

    spec, prompts, groups = _files(tmp_path)
    sets = {"train.max_steps": 4, "train.save_steps": 2, "train.preference_data": str(groups)}
    flags = {"dataset": str(prompts), "seed": 3}
    full = train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "full")}, progress=False)
    part = train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                 callbacks=[StopAt()])
    assert part.global_step == 2
    resumed = train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                    resume=True)
    assert resumed.global_step == 4
    a = load_file(str(tmp_path / "full" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "part" / "final" / "model.safetensors"))
    init = load_file(str(tmp_path / "full" / "initial_model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a) and any(not torch.equal(a[k], init[k]) for k in a)
    curve = [(r["step"], r["reward"], r["gepo/loss"]) for r in read_metrics(full.metrics_path) if "reward" in r]
    again = [(r["step"], r["reward"], r["gepo/loss"]) for r in read_metrics(resumed.metrics_path) if "reward" in r]
    assert curve == again and [s for s, _, _ in again] == [1, 2, 3, 4]


def test_oorl_groups_file_is_presented_like_the_rollouts(tmp_path: Path) -> None:
    spec, prompts, groups = _files(tmp_path)
    sets = {"train.max_steps": 1, "train.save_steps": 1, "train.preference_data": str(groups),
            "train.system_prompt": "Answer with digits.", "train.prompt_template": "Q: {prompt}"}
    res = train(str(spec), sets=sets, flags={"dataset": str(prompts), "output_dir": str(tmp_path / "run")},
                progress=False)
    trainer = res.trainer
    rollout_prompt = trainer.dataset[0]["prompt"]
    file_prompt = trainer.groups_file[0]["prompt"]
    # the same shape as the rollouts' prompts: a system message, then the templated user message
    assert file_prompt[0] == rollout_prompt[0] == {"role": "system", "content": "Answer with digits."}
    assert file_prompt[1]["content"].startswith("Q: Task ")
    # rendered once by the chat template in the GEPO step (no template inside a template)
    text = trainer.tokenizer.apply_chat_template(file_prompt, tokenize=False, add_generation_prompt=True)
    assert text.count("Answer with digits.") == 1 and text.count("Q: Task") == 1
