"""Token-level attribution: character spans → completion tokens, and TRL 1.16's loss taking (B, T) advantages."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.grpo import token_advantages, token_char_ends
from rewardlang.trainers.model import build_tiny_model, build_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(300)


def test_token_char_ends_follow_the_decoded_text(tok) -> None:
    for text in ["def f(x):\n    return x * 2", "é → ✓ 漢", "a"]:
        ids = tok(text)["input_ids"]
        ends = token_char_ends(tok, ids)
        assert len(ends) == len(ids) and ends[-1] == len(text)
        assert ends == sorted(ends)
        for i, end in enumerate(ends):
            prefix = tok.decode(ids[: i + 1])
            assert text.startswith(prefix[:end]) and end <= len(prefix)


def test_token_char_ends_skip_special_tokens(tok) -> None:
    ids = tok("ab")["input_ids"] + [tok.eos_token_id]
    assert token_char_ends(tok, ids)[-1] == 2  # TRL decodes with skip_special_tokens=True


def test_token_advantages_add_span_values_on_overlapping_tokens() -> None:
    ends = [3, 5, 9, 10]  # tokens cover [0,3) [3,5) [5,9) [9,10)
    got = token_advantages(1.0, [(4, 6, -2.0, "bad"), (9, 10, 0.5, "good"), (-1, -1, 9.0, "unplaced")], ends, 6)
    assert got == [1.0, -1.0, -1.0, 1.5, 0.0, 0.0]
    assert token_advantages(-0.25, [], ends, 4) == [-0.25] * 4


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_trl_loss_accepts_per_token_advantages(tok, loss_type: str) -> None:
    """TRL 1.16's _compute_loss takes (B, T) advantages. On-policy (ratio 1) the per-token loss is -A_it; "dapo"
    (TRL's default) sums it over the unpadded tokens of the batch and divides by their count, "grpo" averages per
    sequence, then over sequences. Checked by hand, with a value on a padding token that must not count."""
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1))
    args = GRPOConfig(output_dir="/tmp/unused", per_device_train_batch_size=2, num_generations=2, report_to=[],
                      use_cpu=True, bf16=False, gradient_checkpointing=False, max_completion_length=4,
                      loss_type=loss_type)
    ds = Dataset.from_list([{"prompt": "a"}, {"prompt": "b"}])
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                          args=args, train_dataset=ds, processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    inputs = {
        "prompt_ids": torch.tensor([[5, 6], [7, 8]]), "prompt_mask": torch.ones(2, 2, dtype=torch.long),
        "completion_ids": torch.tensor([[9, 10, 11], [12, 13, tok.pad_token_id]]),
        "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]), "num_items_in_batch": torch.tensor(5),
    }
    per_token = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 99.0]])  # 99 sits on padding: masked out
    broadcast = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    if loss_type == "dapo":
        expect_seq, expect_tok = -(3 * 1.0 + 2 * -2.0) / 5, -(1 + 2 + 3 - 1 + 0.5) / 5
    else:
        expect_seq, expect_tok = -(1.0 + -2.0) / 2, -((1 + 2 + 3) / 3 + (-1 + 0.5) / 2) / 2
    seq = trainer._compute_loss(model, {**inputs, "advantages": torch.tensor([1.0, -2.0])})
    assert seq.item() == pytest.approx(expect_seq, abs=1e-6)
    same = trainer._compute_loss(model, {**inputs, "advantages": broadcast})
    assert same.item() == pytest.approx(seq.item(), abs=1e-6)
    loss = trainer._compute_loss(model, {**inputs, "advantages": per_token})
    assert loss.item() == pytest.approx(expect_tok, abs=1e-6)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_grpo_adds_only_written_spans_to_token_advantages() -> None:
    """`tokens over(...)`/`split(...)` make spans to place per-token rewards; GRPO's advantages must not get them."""
    import rewardlang
    from rewardlang.trainers.grpo import SpecRewardSet
    from rewardlang.trainers.metrics import RewardClock

    prog = rewardlang.loads('''
let code = code_block(completion, "python")
component a = 1
    tokens over(code)
component b = 1
    tokens split(code, at=0, edges=2)
component c = count(completion, "x")
    spans matches(completion, /x/, value=-1)
    tokens spans(uncovered=1)
''')
    rewards = SpecRewardSet(prog, RewardClock())
    assert rewards.span_components == ["c"] and rewards.need_spans
    assert not SpecRewardSet(rewardlang.loads("component a = 1\n    tokens over(completion)"), RewardClock()).need_spans
