"""The spec's per-token rewards in verl's (batch, response_length) reward tensor.

verl trains on a token-level reward tensor (``token_level_scores``, then ``token_level_rewards`` after the KL
penalty, then GAE, GRPO...). Two of its reward paths let a reward manager fill that tensor itself:

- **the legacy reward manager** (``verl.workers.reward_manager.AbstractRewardManager``; verl's trainer calls it up
  to 0.6: ``compute_reward`` -> ``reward_fn(data, return_dict=True)["reward_tensor"]``): the whole batch in, the
  tensor out (:func:`legacy_manager_class`);
- **the reward loop's** ``RewardLoopManager.compute_rm_score`` (verl >= 0.7), which turns the ``reward_score`` of
  each sample into ``rm_scores`` with the manager class's ``assemble_rm_scores`` hook (:func:`assemble_rm_scores`).
  A sample's ``reward_score`` is a :class:`TokenScore`: a float (the spec's total, which is what every other
  consumer of ``reward_score`` sees: verl's agent loop, which computes the reward of each sample as rollout ends
  when no reward model is configured, puts that float on the last token itself) that carries its per-token rewards.

A spec with ``tokens`` clauses (and its reward the weighted sum) gives each response token
``sum_c weight_c * a_c[t]``, placed exactly as rewardlang's own PPO trainer places it
(:class:`rewardlang.trainers.dense.DenseRewards`): the valid response ids are decoded as verl decodes them
(``skip_special_tokens=True``), :class:`rewardlang.trainers.align.TokenAligner` gives each token its character end
in that text, and the spec's character placements land on the tokens they overlap; a component without a clause
puts its value on the last valid token. Any other spec puts its total on the last valid token (verl's naive
manager). A masked sample gets 0 everywhere (docs/scale.md).

    >>> s = TokenScore(0.5, [0.0, -0.5, 1.0])
    >>> s + 1, s.tokens
    (1.5, (0.0, -0.5, 1.0))
    >>> import pickle; pickle.loads(pickle.dumps(s)).tokens
    (0.0, -0.5, 1.0)
    >>> token_rewards({"score": 2.0}, [1, 3, 3]).tolist()     # no placement: the score on the last token
    [0.0, 0.0, 2.0]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardlang.integrations.batching import SpecScorer, batcher_for
from rewardlang.integrations.verl_rows import verl_row

__all__ = ["TokenScore", "assemble_rm_scores", "legacy_manager_class", "per_token_flag", "token_rewards"]


class TokenScore(float):
    """A sample's reward for verl's reward loop: the float is the spec's total (0.0 when masked); ``tokens`` holds
    one reward per valid response token (the per-token rewards, which :func:`assemble_rm_scores` places).

    It lives in this module (imported by its package name, never loaded from a file path) so that it pickles by
    reference between verl's Ray actors and the driver."""

    tokens: tuple[float, ...]

    def __new__(cls, total: float, tokens: Sequence[float]) -> TokenScore:  # noqa: PYI034 - typing.Self needs 3.11 (the core runs on 3.10)
        obj = super().__new__(cls, total)
        obj.tokens = tuple(float(t) for t in tokens)
        return obj

    def __reduce__(self) -> tuple:
        return (TokenScore, (float(self), self.tokens))

    def __repr__(self) -> str:
        return f"TokenScore({float(self)!r}, {len(self.tokens)} tokens)"


def token_rewards(result: dict[str, float], ends: Sequence[int]) -> np.ndarray:
    """One sample's reward per response token (float64, ``len(ends)``), ``ends`` being each token's character end
    in the decoded response (:meth:`rewardlang.trainers.align.TokenAligner.align`).

    ``result`` is a scorer's result; a :class:`rewardlang.integrations.batching.Scored` with ``places`` gives
    ``sum weight * placement`` over its components, anything else its ``score`` on the last token (nothing for an
    empty response)."""
    from rewardlang.runtime.attribution import to_tokens

    n = len(ends)
    out = np.zeros(n, dtype=np.float64)
    places = getattr(result, "places", None)
    if n == 0:
        return out
    if places is None:
        out[n - 1] = float(result["score"])
        return out
    for w, p in places:
        out += w * to_tokens(p, ends)
    return out


def assemble_rm_scores(data: Any, scores: Sequence[Any]) -> Any:
    """verl's ``RewardManagerBase.assemble_rm_scores`` for rewardlang: ``(len(data), response_length)`` float32,
    each :class:`TokenScore`'s ``tokens`` on its valid response tokens, any other score on the last valid token
    (verl's own rule), nothing on an empty response."""
    import torch

    prompt_length = data.batch["prompts"].size(1)
    valid = data.batch["attention_mask"][:, prompt_length:].sum(dim=1).tolist()
    out = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
    for i, (s, n) in enumerate(zip(scores, valid, strict=True)):
        n = int(n)
        toks = getattr(s, "tokens", None)
        if toks is not None:
            if len(toks) != n:
                raise ValueError(f"rewardlang: sample {i} has {len(toks)} per-token rewards for {n} valid response "
                                 "tokens (the batch passed to assemble_rm_scores is not the one scored)")
            if n:
                out[i, :n] = torch.tensor(toks, dtype=torch.float32)
        elif n:
            out[i, n - 1] = float(s)
    return out


def spec_from(kwargs: dict[str, Any], compute_score: Any = None) -> str:
    """The spec's path: the manager's ``reward_kwargs.spec``, else the ``spec`` bound to verl's wrapped custom reward
    function (``custom_reward_function.reward_kwargs.spec``), else ``REWARDLANG_SPEC`` (configuration before the
    environment), else a clear error."""
    spec = kwargs.get("spec")
    if not spec and compute_score is not None:
        # verl wraps the custom function as partial(_call_with_kwargs, raw_fn, reward_kwargs)
        for a in getattr(compute_score, "args", ()):
            if isinstance(a, dict) and a.get("spec"):
                spec = a["spec"]
    spec = spec or os.environ.get("REWARDLANG_SPEC")
    if not spec:
        raise ValueError("rewardlang: set the reward manager's reward_kwargs.spec (or the REWARDLANG_SPEC environment "
                         "variable) to the .reward file")
    return str(spec)


def per_token_flag(kwargs: dict[str, Any]) -> bool:
    """``reward_kwargs.per_token`` (default true): false puts the total on the last token even for a spec with
    ``tokens`` clauses (GRPO sums a sample's token rewards into its outcome score, which is then not the total)."""
    v = kwargs.get("per_token", True)
    if not isinstance(v, bool):
        raise TypeError(f"rewardlang: reward_kwargs.per_token must be true or false, not {v!r}")
    return v


_LEGACY: list[type] = []


def legacy_manager_class() -> type:
    """``RewardlangBatchRewardManager``: a legacy ``AbstractRewardManager`` (made once per process; needs verl)."""
    if _LEGACY:  # one class per process, even where verl imported the verl module's file a second time
        return _LEGACY[0]
    from verl.workers.reward_manager.abstract import AbstractRewardManager

    class RewardlangBatchRewardManager(AbstractRewardManager):
        """verl's legacy reward manager interface: the whole batch scored at once, the spec's per-token rewards in
        ``reward_tensor`` (see the module docstring); ``reward_extra_info`` holds ``score``, ``rl_masked`` and
        ``rl_<component>`` per sample. ``num_examine`` (verl prints that many samples) is accepted and unused:
        the per-component values in ``reward_extra_info`` are what verl logs."""

        def __init__(self, tokenizer: Any, num_examine: int = 0, compute_score: Any = None,
                     reward_fn_key: str = "data_source", **reward_kwargs: Any) -> None:
            self.tokenizer = tokenizer
            self.num_examine = num_examine
            self.reward_fn_key = reward_fn_key
            self.ground_truth_input = reward_kwargs.get("ground_truth_input")
            self.per_token = per_token_flag(reward_kwargs)
            self.batcher = batcher_for(spec_from(reward_kwargs, compute_score),
                                       window_s=float(reward_kwargs.get("window_s", 0.02)))
            self.batcher.scorer.keep_places = True
            self._aligner: Any = None

        @property
        def scorer(self) -> SpecScorer:
            return self.batcher.scorer

        def __call__(self, data: Any, return_dict: bool = False) -> Any:
            import torch

            from rewardlang.trainers.align import TokenAligner

            done = self._extract_reward_from_rm_scores(data, return_dict)  # as verl's managers: rm_scores win
            if done is not None:
                return done
            if self._aligner is None:
                self._aligner = TokenAligner(self.tokenizer)
            prompt_len = data.batch["prompts"].shape[-1]
            valid = data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
            responses = data.batch["responses"]
            nt = data.non_tensor_batch
            rows, ends = [], []
            dense = self.scorer.dense and self.per_token
            for i in range(len(data)):
                ids = responses[i][:int(valid[i])].tolist()
                if dense:
                    text, e = self._aligner.align(ids)
                else:
                    text, e = self._aligner.decode(ids), list(range(len(ids)))  # only the last index is used
                rm = nt["reward_model"][i] if "reward_model" in nt else {}
                extra = nt["extra_info"][i] if "extra_info" in nt else None
                rows.append(verl_row(self.scorer, nt[self.reward_fn_key][i] if self.reward_fn_key in nt else None,
                                     text, (rm or {}).get("ground_truth"), dict(extra or {}),
                                     self.ground_truth_input))
                ends.append(e)
            results = self.batcher.score(rows)  # one batch: one compiled program, one sandbox pool
            reward = torch.zeros_like(responses, dtype=torch.float32)
            for i, (r, e) in enumerate(zip(results, ends)):
                if e:
                    per = token_rewards(r if dense else {"score": r["score"]}, e)
                    reward[i, :len(e)] = torch.as_tensor(per, dtype=torch.float32)
            extra_info = {k: [r[k] for r in results] for k in self.scorer.keys}
            if return_dict:
                return {"reward_tensor": reward, "reward_extra_info": extra_info}
            return reward

    _LEGACY.append(RewardlangBatchRewardManager)
    return RewardlangBatchRewardManager
