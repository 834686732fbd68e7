"""OORL raises the paper's rule reward (specs/oorl.reward: one fenced block in the target language that compiles
and passes every unit test, through the sandbox) on a toy translation task, on the tiny CPU model, 2 seeds.

The task: translate the Python constant function ``def f(): return 3`` into JavaScript; the prompt is the real
translation prompt (:func:`rewardlang.datasets.translate._prompt`: the instruction, the source in a block, the
target's declaration), the tests are structured ``rewardlang-tests/1`` tests (the harness calls ``f()`` in node, the
expected 3 stays in the trusted process). A random policy never writes a fenced block (the answer is 22 tokens of a
512-token vocabulary), so every sample would earn 0 and REINFORCE++ would have nothing to follow; as the paper
starts from a trained LLM, the policy is first taught the answer's *shape* with the constants 2, 3, 4 and 5 equally
(supervised steps on the answer tokens), so about a quarter of its answers pass. Raising the reward means writing
the source's constant rather than another: the translation. (A harder variant, sources with constants 2..5 each,
where the policy must copy the prompt's constant, rose only within noise in 20 steps at lr 2e-4: 0.19 -> 0.17 and
0.22 -> 0.31; lr 1e-3 and above collapsed the taught policy in one step.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rewardlang.datasets.translate import _prompt
from rewardlang.trainers.config import TrainConfig
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.model import load_policy
from rewardlang.trainers.run import train

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "oorl.reward")
CONSTANTS = (2, 3, 4, 5)  # what the policy is taught to answer, equally
SOURCE = 3  # the constant of the source program: the one answer that passes
STEPS = 120  # supervised steps: enough for the shape (most samples then follow the format)
HARNESS = '\nrequire("fs").writeSync(3, "0 " + JSON.stringify(f()) + "\\n");\n'


def _answer(n: int) -> str:
    return f"```js\nfunction f() {{\n  return {n};\n}}\n```"


def _rows() -> list[dict[str, str]]:
    tests = {n: json.dumps({"format": "rewardlang-tests/1", "harness": HARNESS,
                            "cases": [{"expected": n, "type": "int", "tolerance": None}]}) for n in CONSTANTS}
    return [{"task_id": f"toy/{n}", "prompt": _prompt("python", "js", f"def f():\n    return {n}\n", "function f() {\n"),
             "tests": tests[n], "entry_point": "f", "language": "js"} for n in (SOURCE,)]


def _taught(path: Path, seed: int) -> str:
    """The tiny policy after supervised steps on every (prompt, answer) pair: the shape, not the constant."""
    torch.manual_seed(seed)
    model, tok = load_policy(TrainConfig(seed=seed))
    texts, starts = [], []
    for r in _rows():
        chat = [{"role": "user", "content": r["prompt"]}]
        shown = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)  # as the trainer shows it
        for n in CONSTANTS:
            texts.append(shown + _answer(n) + tok.eos_token)
            starts.append(len(tok(shown, add_special_tokens=False)["input_ids"]))
    batch = tok(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    for i, a in enumerate(starts):  # the loss is on the answer only: the prompt is given, not learnt
        labels[i, :a] = -100
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(STEPS):
        model(**batch, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_oorl_raises_the_rule_reward_on_a_toy_translation_task(tmp_path: Path, seed: int) -> None:
    data = tmp_path / "toy_translate.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows() * 4), encoding="utf-8")
    model = _taught(tmp_path / "taught", seed)
    res = train(SPEC, sets={"train.learning_rate": 3e-4, "train.warmup_ratio": 0.0, "train.num_generations": 4,
                            "train.prompts_per_step": 4, "train.max_completion_length": 28, "train.save_steps": 100,
                            "train.system_prompt": ""},
                flags={"model": model, "dataset": str(data), "output_dir": str(tmp_path / "run"), "seed": seed,
                       "max_steps": 20}, progress=False)
    rec = [r for r in read_metrics(res.metrics_path) if "reward" in r]
    rewards = np.array([r["reward"] for r in rec])
    print(f"seed {seed}: rule reward {rewards.round(3).tolist()}")
    assert len(rewards) == 20
    first, last = rewards[:4].mean(), rewards[-4:].mean()
    assert 0.05 < first < 0.6, rewards.round(3).tolist()  # about one in four at the start
    assert last > first + 0.25, rewards.round(3).tolist()  # measured: 0.34 -> 0.80, 0.30 -> 0.73
    # OORL's GEPO part trained on groups mined from the rollouts (winners pass, losers do not)
    assert any(r["pref/groups"] > 0 for r in rec) and all("oorl/gepo_share" in r for r in rec if r["pref/groups"])
