"""PPO learns on the tiny CPU model (2 seeds each): a toy dense spec's mean reward rises clearly, and a spec that
puts -1 on the tokens where a pattern occurs makes that pattern rarer."""

from __future__ import annotations

import json
import os
import re

import pytest
from transformers import TrainerCallback

from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture()
def prompts(tmp_path) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(4)))
    return str(path)


class Texts(TrainerCallback):
    """Keeps the completions each update trained on (what the spec scored)."""

    def __init__(self) -> None:
        self.texts: list[list[str]] = []

    def on_step_end(self, args, state, control, trainer=None, **kwargs):  # type: ignore[no-untyped-def]
        self.texts.append(list(trainer.last_rollout["dense"].texts))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_raises_a_toy_dense_reward(tmp_path, prompts, seed: int) -> None:
    run = train(os.path.join(HERE, "toy_dense.reward"), flags={"dataset": prompts, "seed": seed,
                                                              "output_dir": str(tmp_path / "run")}, progress=False)
    assert run.global_step == 16 and run.config.algorithm == "ppo"
    rewards = [r["reward"] for r in read_metrics(run.metrics_path) if "reward" in r]
    assert len(rewards) == 16
    # a random policy's completions are ~5% digits; PPO drives the share far up
    assert _mean(rewards[-3:]) > _mean(rewards[:3]) + 0.25, rewards


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_makes_a_penalised_token_pattern_rarer(tmp_path, prompts, seed: int) -> None:
    texts = Texts()
    run = train(os.path.join(HERE, "toy_letters.reward"), flags={"dataset": prompts, "seed": seed,
                                                                "output_dir": str(tmp_path / "run")},
                progress=False, callbacks=[texts])
    assert len(texts.texts) == 16

    def letter_share(batches: list[list[str]]) -> float:
        chars = "".join(t for batch in batches for t in batch)
        return len(re.findall(r"[a-zA-Z]", chars)) / max(len(chars), 1)

    before, after = letter_share(texts.texts[:3]), letter_share(texts.texts[-3:])
    assert before > 0.3, before  # a random policy writes mostly letters (the tokenizer is trained on code)
    assert after < before / 2, (before, after)
    metrics = [r for r in read_metrics(run.metrics_path) if "reward" in r]
    assert metrics[-1]["rewards/letters/mean"] > metrics[0]["rewards/letters/mean"]


def test_a_ppo_run_logs_its_metrics_and_plots(tmp_path, prompts) -> None:
    """Any spec trains with PPO (toy_digits is a GRPO spec with a sequence reward); the metrics and the plot."""
    from rewardlang.trainers.plot import chosen_panels, plot_run

    run = train(os.path.join(HERE, "toy_digits.reward"),
                sets={"train.algorithm": "ppo", "train.max_steps": 2, "train.max_completion_length": 6,
                      "train.missing_eos_penalty": 1.0, "train.kl_in": "loss", "train.beta": 0.1},
                flags={"dataset": prompts, "output_dir": str(tmp_path / "run")}, progress=False)
    records = [r for r in read_metrics(run.metrics_path) if "reward" in r]
    for key in ("rewards/digits/mean", "kl", "loss/value", "loss/kl", "value/explained_variance",
                "clip_ratio/policy", "clip_ratio/value", "approx_kl", "entropy", "time/reward_share",
                "time/align", "tokens_per_second", "align/fallbacks", "masked/count", "completions/eos_rate"):
        assert records[-1][key] is not None, key
    assert 0 <= records[-1]["time/align"] <= records[-1]["time/reward"] <= records[-1]["time/step"]
    # 6 tokens without EOS cost the penalty at the last token: every rollout reward is below digits' max of 1
    ro = run.trainer.last_rollout
    no_eos = ~ro["ended"]
    assert no_eos.any()
    assert (ro["score"][no_eos].sum(1) <= 0.0 + 1e-6).all()
    titles = [t for t, _ in chosen_panels(records)]
    assert "PPO: value loss, explained variance" in titles and "entropy" in titles
    assert os.path.getsize(plot_run(run.run_dir)) > 10_000


def test_the_seed_quirk_options_do_what_they_say(tmp_path, prompts) -> None:
    """stop_at_eos=false generates and trains every token; old_logprobs="processed_scores" takes generate's scores
    after top-p, so the first ratio new/old is the nucleus mass (<= 1), not 1."""
    import torch

    run = train(os.path.join(HERE, "toy_dense.reward"),
                sets={"train.max_steps": 1, "train.max_completion_length": 12, "train.stop_at_eos": False,
                      "train.old_logprobs": "processed_scores", "train.top_p": 0.5, "train.ppo_epochs": 1},
                flags={"dataset": prompts, "output_dir": str(tmp_path / "run")}, progress=False)
    trainer = run.trainer
    ro = trainer.last_rollout
    assert ro["ids"].shape[1] == 12 and bool(ro["mask"].bool().all())  # no stop, every token is the completion
    with torch.no_grad():  # the sampling policy's full-softmax log-probs (the update changed the weights since)
        trainer.model.eval()
        unwrapped = trainer.accelerator.unwrap_model(trainer.model)
        saved = {k: v.clone() for k, v in unwrapped.state_dict().items()}
        init = os.path.join(run.run_dir, "initial_model")
        from transformers import AutoModelForCausalLM

        unwrapped.policy.load_state_dict(AutoModelForCausalLM.from_pretrained(init).state_dict())
        full, _, _ = trainer._forward(ro["seq"], ro["attn"], ro["prompt_len"], with_values=False)
        unwrapped.load_state_dict(saved)
    mass = torch.exp(full - ro["old_lp"])  # p / (p / nucleus mass)
    assert (mass <= 1 + 1e-4).all() and (mass < 0.99).any()


class MaskFirstRow(TrainerCallback):
    """Makes the spec's reward of each batch's first completion masked (as an infrastructure failure would)."""

    def on_train_begin(self, args, state, control, trainer=None, **kwargs):  # type: ignore[no-untyped-def]
        rewards = trainer.rewards

        class Masking:
            def __getattr__(self, name):  # type: ignore[no-untyped-def]
                return getattr(rewards, name)

            def __call__(self, *a, **k):  # type: ignore[no-untyped-def]
                batch = rewards(*a, **k)
                batch.masked[0] = True
                batch.rewards[0] = 0.0
                return batch

        trainer.rewards = Masking()


def test_masked_rows_are_never_trained_on_and_are_counted(tmp_path, prompts) -> None:
    import torch

    run = train(os.path.join(HERE, "toy_dense.reward"), sets={"train.max_steps": 2, "train.beta": 0.1},
                flags={"dataset": prompts, "output_dir": str(tmp_path / "run")}, progress=False,
                callbacks=[MaskFirstRow()])
    ro = run.trainer.last_rollout
    assert ro["mask"][0].sum() > 0 and ro["train_mask"][0].sum() == 0  # it has tokens, none of them trained
    assert torch.all(ro["advantages"][0] == 0) and torch.all(ro["returns"][0] == 0)
    # the whitening left the masked row out: the other rows' advantages have mean 0 and std 1 on their own
    tm = ro["train_mask"].bool()
    kept = ro["advantages"][tm]
    assert abs(float(kept.mean())) < 1e-5 and abs(float(kept.std()) - 1) < 1e-4
    records = [r for r in read_metrics(run.metrics_path) if "reward" in r]
    assert [r["masked/count"] for r in records] == [1.0, 1.0]
    assert [r["masked/rate"] for r in records] == [1 / 8, 1 / 8]


@pytest.fixture()
def robot_prompts(tmp_path) -> str:
    path = tmp_path / "robot_prompts.jsonl"
    task = json.dumps({"family": "say_number", "params": {}, "seeds": [1, 2]})
    path.write_text("".join(json.dumps({"prompt": f"Robot {i}", "task": task}) + "\n" for i in range(4)))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_raises_a_toy_robot_reward(tmp_path, robot_prompts, seed: int) -> None:
    """issue 22: the robot simulator's reward through the sandbox (robot_pass_rate on a toy task whose program says
    the completion) rises under PPO on the tiny model."""
    run = train(os.path.join(HERE, "toy_robot.reward"), flags={"dataset": robot_prompts, "seed": seed,
                                                              "output_dir": str(tmp_path / "run")}, progress=False)
    rewards = [r["reward"] for r in read_metrics(run.metrics_path) if "reward" in r]
    assert len(rewards) == 16
    assert _mean(rewards[-3:]) > _mean(rewards[:3]) + 0.25, rewards
