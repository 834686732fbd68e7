"""The tokens a GRPO group's rows share, computed once (rewardlang/trainers/prefix.py).

The shared path must compute what the plain one does: the same log-probabilities, entropies and gradients in the
update's forward pass (to float rounding), the same greedy tokens in generation, and in a whole step from a seed the
same completions, rewards and loss. Each test also checks that the shared path ran.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rewardlang.trainers import grpo, prefix
from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.model import build_tiny_model, build_tokenizer

SPEC = '''spec lengths "length and digits"
input completion: text
input prompt: text
component short in [0, 1] = len(completion) / 30
component digits in [0, 1] = count(completion, /[0-9a-f]/) / max(len(completion), 1)
'''
# a system prompt long enough that every group's rows share more than MIN_SHARED_PREFIX tokens
SYSTEM = "Answer with the whole function in one code block, after a short plan of the steps it takes. " * 2


def _train(tmp_path, name: str, share: bool, monkeypatch, **sets):
    monkeypatch.setattr(grpo.SpecGRPOTrainer, "share_prompt", share, raising=True)
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"def f{i}(x):\n    return x + {i}\n"}) + "\n" for i in range(8)))
    base = {"train.max_steps": 1, "train.max_completion_length": 10, "train.prompts_per_step": 1,
            "train.num_generations": 4, "train.seed": 5, "train.system_prompt": SYSTEM, "train.beta": 0.04,
            "train.lora": True, "train.lora_dropout": 0.0}
    result = grpo.train(str(spec), sets={**base, **sets},
                        flags={"dataset": str(data), "output_dir": str(tmp_path / name)}, progress=False)
    return result.trainer, [r for r in read_metrics(result.metrics_path) if "loss" in r]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same step with the shared prompt off, then on (trained once for the module)."""
    tmp = tmp_path_factory.mktemp("prefix")
    with pytest.MonkeyPatch.context() as mp:
        off = _train(tmp, "off", False, mp)
        on = _train(tmp, "on", True, mp)
    return off, on


def test_a_step_with_the_shared_prompt_is_the_plain_step(runs) -> None:
    """A step from one seed, LoRA, a reference model (beta > 0): the same completions, rewards and advantages;
    loss, gradient norm, entropy and KL equal to float rounding."""
    (off, m_off), (on, m_on) = runs
    assert "prompt_shared" not in off.__dict__
    # generation and the update's and the reference's forward passes took the shared path
    assert on.prompt_shared["generate"] == 1 and on.prompt_shared["forward"] >= 2
    assert on.prompt_shared["tokens"] >= 3 * prefix.MIN_SHARED_PREFIX
    for key in ("rewards_per_func", "total", "advantages"):
        np.testing.assert_array_equal(off.last_batch[key], on.last_batch[key], err_msg=key)
    assert len(m_off) == len(m_on) == 1
    for a, b in zip(m_off, m_on):
        for key in ("loss", "grad_norm", "entropy", "kl", "reward"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
    assert np.abs(on.last_batch["advantages"]).max() > 0 and m_on[-1]["grad_norm"] > 0


def _batch(tok, completions: list[str], prompt: str):
    """TRL's layout: the prompt (the same for every row), then each completion right-padded."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    cs = [tok(c, add_special_tokens=False)["input_ids"] for c in completions]
    width = max(len(c) for c in cs)
    ids = torch.tensor([p + c + [tok.pad_token_id] * (width - len(c)) for c in cs])
    mask = torch.tensor([[1] * len(p) + [1] * len(c) + [0] * (width - len(c)) for c in cs])
    return ids, mask, width


def test_the_forward_pass_gives_the_same_log_probs_and_gradients(runs) -> None:
    """The update's forward pass on one prompt's rows of different lengths: log-probabilities, entropies and every
    parameter's gradient of a loss over them equal those of the plain pass."""
    trainer = runs[1][0]
    model = trainer.model
    tok = trainer.processing_class
    ids, mask, keep = _batch(tok, ["    return x", "    return x + 1  # one more", "pass", "    y = x\n    return y"],
                             SYSTEM + "def g(x):\n")
    assert prefix.rows_prefix(ids, mask, ids.size(1) - keep - 1) >= prefix.MIN_SHARED_PREFIX

    def run(share: bool):
        trainer.share_prompt = share
        model.zero_grad()
        logps, ent, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, compute_entropy=True)
        (logps * mask[:, -keep:]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return logps.detach(), ent.detach(), grads

    before = trainer.prompt_shared["forward"]
    try:
        plain, shared = run(False), run(True)
    finally:
        trainer.share_prompt = True
        model.zero_grad()
    assert trainer.prompt_shared["forward"] == before + 1
    torch.testing.assert_close(shared[0], plain[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared[1], plain[1], rtol=1e-5, atol=1e-5)
    assert shared[2].keys() == plain[2].keys() and len(plain[2]) > 0
    for name in plain[2]:
        torch.testing.assert_close(shared[2][name], plain[2][name], rtol=1e-4, atol=1e-6, msg=name)
    # the rows differ: a mix-up between rows would have shown
    assert not torch.allclose(plain[0][0], plain[0][1])


def test_generation_from_the_shared_prefix_gives_the_plain_answers() -> None:
    """Greedy answers of rows that share a long prefix, some left-padded: the same tokens as plain generate, the
    same width before the completions."""
    tok = build_tokenizer(512)
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=64, num_hidden_layers=2), seed=3).eval()
    prompts = [SYSTEM + "def a(x):", SYSTEM + "def a(x):", SYSTEM + "def bb(x, y):\n    # sum", SYSTEM + "x"]
    enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    gen = dict(max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=None)
    seen: list[int] = []
    with torch.no_grad():
        plain = model.generate(**enc, **gen)
        shared = prefix.generate_from_prefix(model, enc["input_ids"], enc["attention_mask"], tok.pad_token_id,
                                             on_shared=seen.append, **gen)
    width = enc["input_ids"].shape[1]
    assert shared.shape == plain.shape
    assert torch.equal(shared[:, width:], plain[:, width:])
    assert seen and seen[0] >= prefix.MIN_SHARED_PREFIX
    assert not torch.equal(plain[0, width:], plain[2, width:])   # the rows' answers depend on their own tokens


def test_the_adapter_is_merged_for_generation_and_the_weights_put_back_bit_for_bit() -> None:
    """merged_adapter: inside, the merged model computes the unmerged one's logits (to rounding); after, every
    weight is the one before, exactly (``unmerge`` alone leaves a rounding error that would add up over steps)."""
    from peft import get_peft_model

    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.model import load_policy, lora_config

    model, _ = load_policy(TrainConfig())
    policy = get_peft_model(model, lora_config(TrainConfig(lora=True))).eval()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:   # a trained adapter (B starts at 0, which would merge as nothing)
                p.normal_(std=0.2)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    x = torch.randint(0, 500, (2, 12))
    with torch.no_grad():
        plain = policy(input_ids=x).logits
        with prefix.merged_adapter(policy):
            assert sum(bool(getattr(m, "merged", False)) for m in policy.modules()) > 0
            merged = policy(input_ids=x).logits
        after = policy(input_ids=x).logits
    torch.testing.assert_close(merged, plain, rtol=1e-4, atol=1e-4)
    assert torch.equal(after, plain)
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    with prefix.merged_adapter(None):   # no model: nothing to do
        pass
