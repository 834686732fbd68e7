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


@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_raises_a_toy_dense_reward(tmp_path, prompts, seed: int) -> None:
    run = train(os.path.join(HERE, "toy_dense.reward"), flags={"dataset": prompts, "seed": seed,
                                                              "output_dir": str(tmp_path / "run")}, progress=False)
    assert run.global_step == 16 and run.config.algorithm == "ppo"
    rewards = [r["reward"] for r in read_metrics(run.metrics_path) if "reward" in r]
    assert len(rewards) == 16
    # a random policy's completions are ~5% digits; PPO drives the share far up
    assert _mean(rewards[-3:]) > _mean(rewards[:3]) + 0.25, rewards


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
