"""PPO with a process reward model (PRLCoder §3.3, specs/prlcoder.reward): the PRM's score of each segment lands
on the token holding the segment's last character in DenseRewards' (B, T) tensor (golden, real tokenizer), and
PPO on the tiny model raises a PRM-scored reward (a PRM trained here on steps whose label their first character decides)."""

from __future__ import annotations

import json
import os
import random
import warnings

import pytest
import torch

import rewardlang
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.model import build_tokenizer
from rewardlang.trainers.run import train

HERE = os.path.dirname(os.path.abspath(__file__))
PRM_SPEC = os.path.join(HERE, "..", "..", "specs", "prm.reward")
PRLCODER = os.path.join(HERE, "..", "..", "specs", "prlcoder.reward")


def _good(step: str) -> bool:
    """The rule the PRM learns: a step is correct when it starts with a space."""
    return step.startswith(" ")


def _space_rows(n: int, seed: int = 0) -> list[dict]:
    """Stepwise rows whose steps are one or two pieces of the policy's vocabulary that parse as a line of Python;
    `_good` decides each label, and the two classes are balanced."""
    from rewardlang.runtime.code.segment import segments

    tok = build_tokenizer(512)
    pieces = [tok.decode([i]) for i in range(len(tok))]
    pieces = [p for p in pieces if p.strip() and "\n" not in p]
    rng = random.Random(seed)
    rows: list[dict] = []
    while len(rows) < n:
        step = "".join(rng.choice(pieces) for _ in range(rng.choice((1, 2))))
        with warnings.catch_warnings():  # ast's SyntaxWarnings on pieces such as "1in"
            warnings.simplefilter("ignore", SyntaxWarning)
            parses = segments(step, "line") == [(0, len(step))]
        if not parses or _good(step) != (len(rows) % 2 == 0):
            continue
        rows.append({"task_id": f"t{len(rows)}", "prompt": f"Task {len(rows) % 4}", "completions": [step + "\n"],
                     "labels": [_good(step)]})
    return rows


@pytest.fixture(scope="module")
def prm_checkpoint(tmp_path_factory) -> str:
    """A tiny PRM trained with the `prm` trainer on those rows (module-scoped: both seeds share it)."""
    tmp = tmp_path_factory.mktemp("prm")
    data = tmp / "steps.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _space_rows(600)))
    run = train(PRM_SPEC, flags={"dataset": str(data), "max_steps": 80, "batch_size": 16, "output_dir": str(tmp / "r")},
                sets={"train.save_steps": 80, "train.learning_rate": 3e-3}, progress=False)
    last = [m for m in read_metrics(run.metrics_path) if "eval_step_accuracy" in m][-1]
    assert last["eval_step_accuracy"] > 0.9, last  # the PRM learned the rule on held-out problems
    return run.final_dir


# about 5-15 s a seed on the tiny model: seed 0 in the default run, both seeds in the slow run
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_ppo_raises_a_prm_scored_reward(tmp_path, prm_checkpoint: str, seed: int) -> None:
    """40 PPO updates of 8 two-token completions; the reward is the PRM's score of each line, on its last token.
    A random policy's lines mostly fail to parse or start without a space (reward ~0.1); PPO raises it."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(4)))
    run = train(os.path.join(HERE, "toy_prm_ppo.reward"), sets={"prm_checkpoint": prm_checkpoint},
                flags={"dataset": str(prompts), "seed": seed, "output_dir": str(tmp_path / "run")}, progress=False)
    assert run.global_step == 40 and run.config.algorithm == "ppo"
    rewards = [r["reward"] for r in read_metrics(run.metrics_path) if "reward" in r]
    assert len(rewards) == 40
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    print(f"seed {seed}: PRM-scored reward {first:.3f} -> {last:.3f}")
    assert last > first + 0.15, rewards


def test_prm_scores_land_on_segment_end_tokens(prm_checkpoint: str) -> None:
    """specs/prlcoder.reward in DenseRewards under the repo's byte-level BPE: each block's PRM score on the token
    holding the block's last character (values equal to prm_steps itself), the CodeRL outcome on the last token
    (pass 1, fail -0.3), nothing elsewhere; the logged total is prm_total + outcome."""
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.components.prm_score import PrmParams, prm_steps
    from rewardlang.trainers.dense import DenseRewards

    tok = build_tokenizer()
    prog = rewardlang.load(PRLCODER, params={"prm_checkpoint": prm_checkpoint})
    texts = ["Sure.\n```python\ndef add_one(x):\n    y = x + 1\n    return y\n```",
             "Sure.\n```python\ndef add_one(x):\n    y = x + 2\n    return y\n```"]
    ids = [tok(t)["input_ids"] for t in texts]
    assert [tok.decode([i]) for i in ids[0]] == [
        "S", "u", "re", ".", "\n", "`", "`", "`", "p", "y", "th", "on", "\n", "def", " a", "dd", "_", "on", "e", "(",
        "x", "):", "\n   ", " ", "y", " =", " x", " +", " 1", "\n   ", " return", " ", "y", "\n", "`", "`", "`"]
    assert len(ids[1]) == len(ids[0]) == 37
    prompt = 'def add_one(x):\n    """x plus one"""\n'
    cols = {"prompt": [prompt] * 2, "tests": ["def check(candidate):\n    assert candidate(1) == 2\n"] * 2,
            "entry_point": ["add_one"] * 2}
    out = DenseRewards(prog, tok)(torch.tensor(ids), torch.ones(2, 37, dtype=torch.long), cols)
    assert not out.masked.any()
    # by hand: code_block gives the code without the newline before the closing fence, from character 16 of the
    # completion; block 1 "    y = x + 1\n" ends with its newline at character 45, held by token 29 ("\n   ");
    # block 2 "    return y" ends with the "y" at character 57, token 32
    codes = [t[t.index("def"):t.rindex("\n```")] for t in texts]
    steps = prm_steps.fn(codes, [prompt] * 2, params=PrmParams(checkpoint=prm_checkpoint), ctx=Context()).values
    for b in range(2):
        want = [0.0] * 37
        want[29], want[32] = steps[b][0].value, steps[b][1].value
        assert out.components["process"][b].tolist() == pytest.approx(want, abs=1e-5)
        outcome = [0.0] * 36 + [1.0 if b == 0 else -0.3]
        assert out.components["compiled"][b].tolist() == pytest.approx(outcome)
        assert out.rewards[b].tolist() == pytest.approx([p + o for p, o in zip(want, outcome)], abs=1e-5)
        assert out.totals[b] == pytest.approx(sum(want) + outcome[-1], abs=1e-5)


def test_the_shipped_spec_runs_ppo(tmp_path, prm_checkpoint: str) -> None:
    """specs/prlcoder.reward as shipped (4 samples, temperature 0.6, top-p 0.95) runs PPO on the tiny model with
    the PRM and the sandboxed outcome; a random policy's completions do not compile: the outcome is -1, on the
    last token only."""
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"def inc{i}(x):\n", "entry_point": f"inc{i}",
                                        "tests": "def check(candidate):\n    assert candidate(1) == 2\n"}) + "\n"
                            for i in range(2)))
    run = train(PRLCODER, sets={"prm_checkpoint": prm_checkpoint, "train.max_steps": 2,
                                "train.max_completion_length": 8, "train.prompts_per_step": 1},
                flags={"dataset": str(data), "output_dir": str(tmp_path / "run")}, progress=False)
    cfg = run.config
    assert (cfg.algorithm, cfg.num_generations, cfg.temperature, cfg.top_p, run.global_step) == ("ppo", 4, 0.6, 0.95, 2)
    logged = [m for m in read_metrics(run.metrics_path) if "reward" in m]
    assert len(logged) == 2
    for m in logged:  # random bytes do not parse: no segments for the PRM, a compile error (-1) on the last token
        assert m["reward"] == pytest.approx(-1.0) and m["rewards/process/mean"] == 0.0
        assert m["rewards/compiled/mean"] == pytest.approx(-1.0 / m["completions/mean_length"])  # a per-token mean
