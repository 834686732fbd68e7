"""The RL algorithm functions shared by the token-level trainers (PPO, and OORL/PRM after it): KL estimators, masked
statistics and whitening, GAE, REINFORCE++ returns, the clipped policy and value losses, explained variance and
entropy. Plain tensor functions over ``(B, T)`` batches with a 0/1 ``mask`` of the tokens that count; nothing here
knows about models or data.

Conventions (as TRL's PPO, verl and OpenRLHF): ``logp`` are log-probabilities of the sampled tokens; a token-mean
over the masked tokens of the batch is the loss aggregation; the advantage at a masked token is 0.

    >>> import torch
    >>> r = torch.tensor([[0.0, 0.0, 1.0]]); v = torch.zeros(1, 3); m = torch.ones(1, 3)
    >>> adv, ret = gae(r, v, m, gamma=1.0, lam=1.0)
    >>> adv.tolist()
    [[1.0, 1.0, 1.0]]
    >>> kl(torch.tensor([0.0]), torch.tensor([0.0]), "k3").item()
    0.0
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["KL_ESTIMATORS", "kl", "masked_mean", "masked_var", "masked_whiten", "gae", "reinforce_pp_returns",
           "policy_loss", "value_loss", "explained_variance", "entropy_from_logits"]

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(π ‖ π_ref) from the sampled tokens' log-probs (Schulman, "Approximating KL").

    With ``d = logp − ref_logp``: k1 = d (unbiased, can be negative); k2 = d²/2; k3 = e^(−d) − 1 + d (unbiased,
    never negative). All three are 0 where the policies agree.

    >>> kl(torch.tensor([0.5]), torch.tensor([0.0]), "k2").item()
    0.125
    """
    d = logp - ref_logp
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d * d
    if kind == "k3":
        return torch.expm1(-d) + d
    raise ValueError(f"unknown KL estimator {kind!r}; choose one of {', '.join(KL_ESTIMATORS)}")


def _reduce(values: list[torch.Tensor], accelerator: Any) -> list[torch.Tensor]:
    """Sum scalars over every process (one all-reduce) when an accelerator with several processes is given."""
    if accelerator is None or getattr(accelerator, "num_processes", 1) <= 1:
        return values
    stacked = accelerator.reduce(torch.stack(values).to(accelerator.device), reduction="sum")
    return list(stacked.to(values[0].device).unbind())


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None, accelerator: Any = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1 (over ``dim``, or all; over every process when ``accelerator`` is given).

    >>> masked_mean(torch.tensor([[1.0, 2.0, 9.0]]), torch.tensor([[1, 1, 0]])).item()
    1.5
    """
    mask = mask.to(x.dtype)
    if dim is not None:
        return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)
    total, count = _reduce([(x * mask).sum(), mask.sum()], accelerator)
    return total / count.clamp(min=1)


def masked_var(x: torch.Tensor, mask: torch.Tensor, accelerator: Any = None, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` where ``mask`` is 1 (Bessel-corrected by default, as TRL's ``masked_var``).

    >>> masked_var(torch.tensor([1.0, 3.0, 100.0]), torch.tensor([1, 1, 0])).item()
    2.0
    """
    mask = mask.to(x.dtype)
    total, sq, count = _reduce([(x * mask).sum(), (x * x * mask).sum(), mask.sum()], accelerator)
    mean = total / count.clamp(min=1)
    var = sq / count.clamp(min=1) - mean * mean
    if unbiased and count > 1:
        var = var * count / (count - 1)
    return var.clamp(min=0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, accelerator: Any = None,
                  eps: float = 1e-8) -> torch.Tensor:
    """``(x − mean) / sqrt(var + eps)`` over the masked entries; 0 where the mask is 0.

    ``accelerator=None`` whitens over this process's batch (the seed's per-process scope); with an accelerator the
    mean and variance are over every process's batch ("global"). ``shift_mean=False`` keeps the mean (rewards).

    >>> masked_whiten(torch.tensor([1.0, 3.0, 7.0]), torch.tensor([1, 1, 0])).tolist()
    [-0.7071067690849304, 0.7071067690849304, 0.0]
    """
    mask_f = mask.to(x.dtype)
    mean = masked_mean(x, mask_f, accelerator=accelerator)
    var = masked_var(x, mask_f, accelerator=accelerator)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask_f


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over right-padded ``(B, T)`` rows → ``(advantages, returns)``.

    δ_t = r_t + γ·V_{t+1} − V_t and A_t = δ_t + γλ·A_{t+1}, with V and A 0 past a row's last token (the episode
    ends there). Returns = A + V. Both are 0 at masked tokens.

    >>> a, g = gae(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, 0.25]]), torch.ones(1, 2), gamma=0.5, lam=0.5)
    >>> a.tolist(), g.tolist()
    ([[1.0625, 1.75]], [[1.5625, 2.0]])
    """
    mask = mask.to(rewards.dtype)
    rewards, values = rewards * mask, values * mask
    T = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(T)):  # T is at most a few thousand; each step is one (B,) vector op
        next_value = values[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


def reinforce_pp_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """REINFORCE++ (no critic): discounted returns G_t = r_t + γ·G_{t+1}, 0 at masked tokens; whitened afterwards
    they are the advantages (verl ``compute_reinforce_plus_plus_outcome_advantage``, OpenRLHF).

    >>> reinforce_pp_returns(torch.tensor([[1.0, 0.0, 2.0, 5.0]]), torch.tensor([[1, 1, 1, 0]]), 0.5).tolist()
    [[1.5, 1.0, 2.0, 0.0]]
    """
    mask = mask.to(rewards.dtype)
    rewards = rewards * mask
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = (rewards[:, t] + gamma * running) * mask[:, t]
        out[:, t] = running
    return out


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                clip_low: float = 0.2, clip_high: float | None = None, dual_clip: float | None = None
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped surrogate, token-mean over the mask → ``(loss, stats)``.

    ratio = e^(logp − old_logp); loss_t = max(−A·ratio, −A·clip(ratio, 1 − ε_low, 1 + ε_high)); with ``dual_clip``
    c > 1, tokens with A < 0 are also bounded by −A·c (Ye et al. 2020). Stats (no gradient): ``clipfrac`` (share of
    tokens where the clipped term was taken), ``approx_kl`` (mean of ½(logp − old_logp)², as TRL), ``ratio``.

    >>> loss, st = policy_loss(torch.log(torch.tensor([[1.5, 0.5]])), torch.zeros(1, 2),
    ...                        torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    >>> round(loss.item(), 6), st["clipfrac"].item()
    (-0.2, 1.0)
    """
    clip_high = clip_low if clip_high is None else clip_high
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (got {dual_clip})")
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * dual_clip), loss)
    with torch.no_grad():
        stats = {"clipfrac": masked_mean((clipped > unclipped).float(), mask),
                 "approx_kl": masked_mean(0.5 * log_ratio * log_ratio, mask),
                 "ratio": masked_mean(ratio, mask)}
    return masked_mean(loss, mask), stats


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float | None = 0.2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped value loss ½·max((V − G)², (V_clip − G)²), V_clip = clamp(V, old − clip, old + clip), token-mean.

    ``clip=None`` gives the plain ½(V − G)². Stats: ``clipfrac`` (share where the clipped error was larger).

    >>> loss, st = value_loss(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), torch.tensor([[2.0, 1.0]]),
    ...                       torch.ones(1, 2), clip=0.5)
    >>> loss.item(), st["clipfrac"].item()
    (0.8125, 0.5)
    """
    err = (values - returns) ** 2
    if clip is None:
        return 0.5 * masked_mean(err, mask), {"clipfrac": torch.zeros((), device=values.device)}
    # clamp V itself between old ± clip (TRL's formula): inside the range V_clip is V bit for bit, whereas
    # old + clamp(V − old) rounds in float32 and made ~1 % of unclipped tokens count as clipped (issue 22 (c))
    clipped = torch.clamp(values, old_values - clip, old_values + clip)
    err_clipped = (clipped - returns) ** 2
    with torch.no_grad():
        stats = {"clipfrac": masked_mean((err_clipped > err).float(), mask)}
    return 0.5 * masked_mean(torch.maximum(err, err_clipped), mask), stats


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 − Var(G − V) / Var(G) over the masked tokens (1: perfect critic; ≤ 0: no better than a constant).

    >>> explained_variance(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 4.0]), torch.ones(3)).item()
    0.8571428656578064
    """
    var_g = masked_var(returns, mask, unbiased=False)
    var_res = masked_var(returns - values, mask, unbiased=False)
    return 1.0 - var_res / var_g.clamp(min=1e-12)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last dimension, computed stably: logsumexp(z) − Σ softmax(z)·z.

    >>> round(entropy_from_logits(torch.zeros(4)).item(), 6) == round(float(torch.log(torch.tensor(4.0))), 6)
    True
    """
    p = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(-1)
