"""GEPO's loss: parity with TRL's sigmoid DPO loss (λ = 0, one winner, one loser), a hand-computed loss and
gradient, and the chunked backward equal to the one-pass gradient."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.gepo import gepo_loss, sequence_logps, tokenize_members
from rewardlang.trainers.model import build_tiny_model, build_tokenizer


@pytest.fixture(scope="module")
def tiny() -> tuple:
    torch.set_num_threads(1)
    tok = build_tokenizer(512)
    return tok, build_tiny_model(tok, TinyModelConfig(), seed=0), build_tiny_model(tok, TinyModelConfig(), seed=1)


def test_one_winner_one_loser_lambda_0_is_trls_sigmoid_dpo_loss(tiny: tuple, tmp_path) -> None:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    tok, model, ref = tiny
    ds = Dataset.from_list([{"prompt": "def f(x):\n", "chosen": "    return x + 1", "rejected": "    pass"},
                            {"prompt": "Task 1\n", "chosen": "ok fine", "rejected": "no no no no"},
                            {"prompt": "Task 2\n", "chosen": "a b", "rejected": "c"}])
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=3, report_to=[], use_cpu=True, beta=0.1,
                     loss_type=["sigmoid"], max_steps=1)
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=ds, processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    trl_loss = trainer.compute_loss(trainer.model, batch)    # TRL's own loss code (_compute_loss, sigmoid)
    ids, att, cm = batch["input_ids"], batch["attention_mask"], batch["completion_mask"]
    with torch.no_grad():
        r = 0.1 * (sequence_logps(trainer.model, ids, att, cm) - sequence_logps(trainer.ref_model, ids, att, cm))
    n = len(r) // 2   # TRL stacks the chosen rows, then the rejected rows
    ours, stats = gepo_loss(r, torch.tensor([True] * n + [False] * n), torch.tensor(list(range(n)) * 2), lam=0.0)
    assert abs(float(trl_loss) - float(ours)) < 1e-6
    assert float(trl_loss) > 0.1 and stats["accuracy"].shape == (3,)


def test_hand_computed_loss_and_gradient() -> None:
    # one group: winners r = 1, 3 (mean 2, population variance 1), losers r = 0, -1 (mean -0.5)
    r = torch.tensor([1.0, 3.0, 0.0, -1.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([True, True, False, False])
    loss, stats = gepo_loss(r, w, torch.zeros(4, dtype=torch.long), lam=1.0)
    s = 1 / (1 + math.exp(-2.5))                         # σ(2.5)
    assert float(loss) == pytest.approx(-math.log(s) + 1.0, abs=1e-12)
    loss.backward()
    # ∂/∂r_w = −(1−σ)/|W| + λ·2(r−mean_W)/|W|;  ∂/∂r_l = (1−σ)/|L|
    expected = [-(1 - s) / 2 + (1 - 2), -(1 - s) / 2 + (3 - 2), (1 - s) / 2, (1 - s) / 2]
    assert r.grad.tolist() == pytest.approx(expected, abs=1e-12)
    assert float(stats["margin"][0]) == 2.5 and float(stats["winner_var"][0]) == 1.0
    # two groups: the loss is the mean of the groups' losses
    r2 = torch.tensor([1.0, 3.0, 0.0, -1.0, 0.5, 0.0], dtype=torch.float64)
    w2 = torch.tensor([True, True, False, False, True, False])
    g2 = torch.tensor([0, 0, 0, 0, 1, 1])
    both, _ = gepo_loss(r2, w2, g2, lam=0.5)
    one = -math.log(s) + 0.5 * 1.0
    two = -math.log(1 / (1 + math.exp(-0.5)))
    assert float(both) == pytest.approx((one + two) / 2, abs=1e-12)


def test_chunked_backward_equals_one_pass_gradient(tiny: tuple) -> None:
    tok = tiny[0]
    model = build_tiny_model(tok, TinyModelConfig(), seed=0).double()
    ref = build_tiny_model(tok, TinyModelConfig(), seed=1).double()
    prompts = ["Task 0\n"] * 5 + ["Task 1\n"] * 3
    members = ["return 1", "return x", "pass", "no", "x = 1\nreturn x", "a", "b c", "d e f"]
    winner = torch.tensor([True, True, False, False, True, True, False, False])
    group = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])
    b = tokenize_members(tok, prompts, members)
    beta = 0.1
    with torch.no_grad():
        ref_lp = sequence_logps(ref, b["input_ids"], b["attention_mask"], b["completion_mask"])
    # one pass: autograd through every member at once
    model.zero_grad()
    lp = sequence_logps(model, b["input_ids"], b["attention_mask"], b["completion_mask"])
    loss, _ = gepo_loss(beta * (lp - ref_lp), winner, group, lam=1.0)
    loss.backward()
    one = [p.grad.clone() for p in model.parameters()]
    # chunked: r̂ without gradients, c = ∂L/∂r̂, then Σ c·r̂ over chunks of 3
    model.zero_grad()
    with torch.no_grad():
        lp0 = sequence_logps(model, b["input_ids"], b["attention_mask"], b["completion_mask"])
    r = (beta * (lp0 - ref_lp)).requires_grad_(True)
    loss2, _ = gepo_loss(r, winner, group, lam=1.0)
    (c,) = torch.autograd.grad(loss2, r)
    for a in range(0, 8, 3):
        sl = slice(a, a + 3)
        lpc = sequence_logps(model, b["input_ids"][sl], b["attention_mask"][sl], b["completion_mask"][sl])
        (c[sl] * beta * lpc).sum().backward()
    chunked = [p.grad.clone() for p in model.parameters()]
    assert float(loss) == pytest.approx(float(loss2), abs=1e-12)
    assert max(float((x - y).abs().max()) for x, y in zip(one, chunked)) < 1e-12
    assert max(float(x.abs().max()) for x in one) > 1e-6   # a real gradient, not zeros
