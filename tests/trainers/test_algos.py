"""Golden tests of rewardlang.trainers.algos: every expected value is worked out by hand in the comment beside it."""

from __future__ import annotations

import math

import pytest
import torch

from rewardlang.trainers import algos


def close(t: torch.Tensor, expected: list) -> None:
    torch.testing.assert_close(t, torch.tensor(expected, dtype=t.dtype), atol=1e-6, rtol=1e-6)


def test_kl_estimators_by_hand() -> None:
    logp, ref = torch.tensor([math.log(0.5), math.log(0.2)]), torch.tensor([math.log(0.25), math.log(0.4)])
    # d = log 2, log 0.5
    assert torch.allclose(algos.kl(logp, ref, "k1"), torch.tensor([math.log(2), -math.log(2)]))
    assert torch.allclose(algos.kl(logp, ref, "k2"), torch.tensor([0.5 * math.log(2) ** 2] * 2))
    # k3 = r - 1 - log r with r = ref/p: r = 0.5 -> 0.5 - 1 + log 2 ; r = 2 -> 2 - 1 - log 2
    assert torch.allclose(algos.kl(logp, ref, "k3"), torch.tensor([-0.5 + math.log(2), 1 - math.log(2)]))
    assert (algos.kl(logp, ref, "k3") >= 0).all()
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'"):
        algos.kl(logp, ref, "k4")


def test_masked_statistics_and_whitening() -> None:
    x = torch.tensor([[2.0, 4.0, 100.0], [6.0, 8.0, -50.0]])
    m = torch.tensor([[1, 1, 0], [1, 1, 0]])
    assert algos.masked_mean(x, m).item() == 5.0  # (2+4+6+8)/4
    assert algos.masked_mean(x, m, dim=1).tolist() == [3.0, 7.0]
    # deviations -3 -1 1 3: squares sum 20; unbiased 20/3, biased 5
    assert algos.masked_var(x, m).item() == pytest.approx(20 / 3)
    assert algos.masked_var(x, m, unbiased=False).item() == pytest.approx(5.0)
    w = algos.masked_whiten(x, m)
    s = math.sqrt(20 / 3)
    close(w, [[-3 / s, -1 / s, 0.0], [1 / s, 3 / s, 0.0]])
    kept = algos.masked_whiten(x, m, shift_mean=False)
    assert kept[0, 0].item() == pytest.approx(-3 / s + 5.0, abs=1e-6)


class TwoProcesses:
    """Stands in for an accelerator of 2 processes whose other process holds ``other`` under mask ``other_mask``."""

    num_processes = 2
    device = torch.device("cpu")

    def __init__(self, other: torch.Tensor, other_mask: torch.Tensor) -> None:
        m = other_mask.float()
        self.other = torch.stack([(other * m).sum(), (other * other * m).sum(), m.sum()])

    def reduce(self, t: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
        assert reduction == "sum"
        return t + self.other[: len(t)] if len(t) == 3 else t + self.other[[0, 2]]


def test_global_whitening_uses_every_process() -> None:
    mine, theirs = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 10.0]])
    ones = torch.ones(1, 2)
    acc = TwoProcesses(theirs, torch.tensor([[1.0, 0.0]]))  # the other process contributes only 3.0
    # global values 1, 2, 3: mean 2, unbiased var 1
    close(algos.masked_whiten(mine, ones, accelerator=acc), [[-1.0, 0.0]])
    # per process: 1, 2: mean 1.5, var 0.5
    h = 0.5 / math.sqrt(0.5)
    close(algos.masked_whiten(mine, ones), [[-h, h]])


def test_gae_by_hand() -> None:
    r = torch.tensor([[0.0, 1.0, 2.0, 9.0], [3.0, 0.0, 0.0, 0.0]])
    v = torch.tensor([[1.0, 1.0, 1.0, 7.0], [2.0, 5.0, 5.0, 5.0]])
    m = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    adv, ret = algos.gae(r, v, m, gamma=0.9, lam=0.5)
    # row 0: d2 = 2 - 1 = 1 ; d1 = 1 + .9 - 1 = .9 ; d0 = 0 + .9 - 1 = -.1
    #        A2 = 1 ; A1 = .9 + .45*1 = 1.35 ; A0 = -.1 + .45*1.35 = .5075
    # row 1: one token, episode ends: A0 = 3 - 2 = 1
    close(adv, [[0.5075, 1.35, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    close(ret, [[1.5075, 2.35, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    # lam = 1, gamma = 1, V = 0: the advantage is the reward-to-go
    adv1, _ = algos.gae(r, torch.zeros_like(v), m, gamma=1.0, lam=1.0)
    assert adv1[0].tolist() == [3.0, 3.0, 2.0, 0.0]


def test_reinforce_pp_returns_by_hand() -> None:
    r = torch.tensor([[1.0, 0.0, -1.0, 4.0]])
    g = algos.reinforce_pp_returns(r, torch.tensor([[1, 1, 1, 0]]), gamma=0.5)
    # G2 = -1 ; G1 = 0 - .5 = -.5 ; G0 = 1 - .25 = .75 ; the masked 4 is ignored
    assert g.tolist() == [[0.75, -0.5, -1.0, 0.0]]


def test_policy_loss_clipping_by_hand() -> None:
    ratio = torch.tensor([[1.5, 0.5, 1.1, 0.5]])
    adv = torch.tensor([[1.0, -1.0, 2.0, 1.0]])
    m = torch.tensor([[1, 1, 1, 0]])
    loss, st = algos.policy_loss(torch.log(ratio), torch.zeros(1, 4), adv, m, clip_low=0.2)
    # token 0: max(-1.5, -1.2) = -1.2 (clipped) ; token 1: max(.5, .8) = .8 (clipped) ; token 2: max(-2.2, -2.2)
    # = -2.2 (not clipped) ; mean = (-1.2 + .8 - 2.2) / 3
    assert loss.item() == pytest.approx(-2.6 / 3)
    assert st["clipfrac"].item() == pytest.approx(2 / 3)
    lr = torch.log(ratio[0, :3])
    assert st["approx_kl"].item() == pytest.approx(float((0.5 * lr * lr).mean()))
    # asymmetric clip (DAPO clip-higher): eps_high .6 lets token 0 keep its ratio: -1.5
    loss_h, _ = algos.policy_loss(torch.log(ratio), torch.zeros(1, 4), adv, m, clip_low=0.2, clip_high=0.6)
    assert loss_h.item() == pytest.approx((-1.5 + 0.8 - 2.2) / 3)
    # dual clip c=3: a negative advantage with a huge ratio is bounded by -A*c = 3
    big, _ = algos.policy_loss(torch.log(torch.tensor([[10.0]])), torch.zeros(1, 1), torch.tensor([[-1.0]]),
                               torch.ones(1, 1), dual_clip=3.0)
    assert big.item() == pytest.approx(3.0)
    plain, _ = algos.policy_loss(torch.log(torch.tensor([[10.0]])), torch.zeros(1, 1), torch.tensor([[-1.0]]),
                                 torch.ones(1, 1))
    assert plain.item() == pytest.approx(10.0)


def test_policy_loss_gradient_is_zero_where_clipped() -> None:
    logp = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss, _ = algos.policy_loss(logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2))
    loss.backward()
    # d/dlogp of -A*ratio/2 = -ratio/2 at the unclipped token; 0 at the clipped one
    close(logp.grad, [[0.0, -0.55]])


def test_value_loss_by_hand() -> None:
    v = torch.tensor([[1.0, 0.1, 5.0]])
    old = torch.tensor([[0.0, 0.0, 0.0]])
    g = torch.tensor([[2.0, 1.0, 0.0]])
    m = torch.tensor([[1, 1, 0]])
    loss, st = algos.value_loss(v, old, g, m, clip=0.3)
    # token 0: err (1-2)^2 = 1, clipped V .3: (.3-2)^2 = 2.89 -> 2.89 ; token 1: err .81, clipped V .1 -> .81
    assert loss.item() == pytest.approx(0.5 * (2.89 + 0.81) / 2)
    assert st["clipfrac"].item() == pytest.approx(0.5)
    plain, _ = algos.value_loss(v, old, g, m, clip=None)
    assert plain.item() == pytest.approx(0.5 * (1 + 0.81) / 2)


def test_explained_variance_and_entropy() -> None:
    g = torch.tensor([[1.0, 2.0, 4.0, 50.0]])
    m = torch.tensor([[1, 1, 1, 0]])
    assert algos.explained_variance(g, g, m).item() == pytest.approx(1.0)
    # Var(G) = 14/9, residual (0,0,1): var 2/9 -> 1 - 1/7
    assert algos.explained_variance(torch.tensor([[1.0, 2.0, 3.0, 0.0]]), g, m).item() == pytest.approx(6 / 7)
    # entropy of (1/2, 1/4, 1/4) = 1.5 ln 2 ; logits are log-probs up to a constant
    z = torch.log(torch.tensor([0.5, 0.25, 0.25])) + 7.0
    assert algos.entropy_from_logits(z).item() == pytest.approx(1.5 * math.log(2), abs=1e-6)


def test_value_clipfrac_counts_no_float_rounding_as_clipping() -> None:
    """issue 22 (c): ``old + clamp(v - old)`` is not ``v`` in float32, so values inside the clip range were
    counted as clipped (about 1.5 %); TRL clamps ``v`` itself between ``old ± clip`` and counts 0."""
    gen = torch.Generator().manual_seed(0)
    # two independent float32 outputs a little apart (as the critic's before and after an update): built in
    # float64 and rounded separately, so v - old is inexact (v = old + d in float32 would make it exact)
    v64 = torch.randn(64, 128, generator=gen, dtype=torch.float64) * 0.2
    old = (v64 + (torch.rand(64, 128, generator=gen, dtype=torch.float64) - 0.5) * 0.5).float()  # |v - old| < 0.3
    v = v64.float()
    g = torch.randn(64, 128, generator=gen) * 3
    m = torch.ones(64, 128)
    loss, st = algos.value_loss(v, old, g, m, clip=0.3)
    assert st["clipfrac"].item() == 0.0
    assert loss.item() == (0.5 * ((v - g) ** 2).mean()).item()  # nothing clipped: the plain loss exactly
    # TRL's formula on the same tensors, with some values outside the range
    v2 = old + (torch.rand(64, 128, generator=gen) - 0.5) * 1.2
    _, st2 = algos.value_loss(v2, old, g, m, clip=0.3)
    trl_clipped = torch.clamp(v2, old - 0.3, old + 0.3)
    trl = ((trl_clipped - g) ** 2 > (v2 - g) ** 2).float().mean()
    assert st2["clipfrac"].item() == trl.item() and 0 < trl.item() < 1
