"""rewardlang in verl (>= 0.7, the reward loop): a custom reward function and a batching reward manager.

**Function** (``reward.custom_reward_function``)::

    reward.custom_reward_function.path=$(python3 -c "import rewardlang.integrations.verl as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.spec=specs/quality_grpo.reward

**Manager** (``reward.reward_manager.source=importlib``): the same, plus::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=RewardlangRewardManager
    reward.reward_manager.module.path=<the same file>

verl calls the function once per sample from a thread pool, and the manager's ``run_single`` once per sample as
concurrent tasks; both hand the sample to the process's :class:`~rewardlang.integrations.batching.Batcher`, which
scores the samples that arrive within ``window_s`` (20 ms) together through one compiled program and one sandbox
pool. The manager also decodes in the batch and needs no thread per sample.

**Per-token rewards** (a spec with ``tokens`` clauses; :mod:`rewardlang.integrations.verl_tokens`): the manager's
``reward_score`` is the total carrying the per-token rewards, and its ``assemble_rm_scores`` places them on the
response tokens where verl assembles ``rm_scores`` from them (``RewardLoopManager.compute_rm_score``); verl's agent
loop, which scores each sample as its rollout ends, takes the total alone (on the last token). verl <= 0.6's
legacy interface takes them whole: ``RewardlangBatchRewardManager`` scores the batch and returns the
``reward_tensor`` (``reward_model.reward_manager=rewardlang``, registered when verl imports this file).

**Inputs.** The completion is ``solution_str``. Every other input the spec reads comes, by its column name (or its
input name), from ``extra_info`` (a dict) or from ``ground_truth`` when that is a dict; when ``ground_truth`` is not
a dict it fills the input named by ``reward_kwargs.ground_truth_input``, or else the one input that ``extra_info``
does not give (``quality_grpo.reward``: ``ground_truth`` = the tests, ``extra_info`` = ``{"entry_point": ...}``).

**Result.** ``{"score", "rl_masked", "rl_<component>"...}``, the same keys on every sample (verl takes the key list
from sample 0). A masked sample (an infrastructure failure, a bad row) scores 0.0 with ``rl_masked`` = 1.0: verl
has no mask, so it enters the advantage as a 0 (docs/scale.md).

Example (the function without verl)::

    >>> from rewardlang.integrations.verl import compute_score
    >>> r = compute_score("humaneval", "```python\\ndef f():\\n    return 1\\n```", None, {"prompt": "p"},
    ...                   spec="specs/codepo_text.reward")
    >>> r
    {'score': 0.0, 'rl_masked': 0.0, 'rl_format': 0.0, 'rl_reason': 0.0, 'rl_rep': 0.0}
"""

from __future__ import annotations

from typing import Any

from rewardlang.integrations.batching import batcher_for
from rewardlang.integrations.verl_rows import verl_row
from rewardlang.integrations.verl_tokens import (
    TokenScore,
    assemble_rm_scores,
    legacy_manager_class,
    per_token_flag,
    token_rewards,
)

# and RewardlangRewardManager, RewardlangBatchRewardManager: made on first access (they need verl)
__all__ = ["compute_score", "verl_row"]

def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: dict | None = None, *,
                  spec: str, ground_truth_input: str | None = None, window_s: float = 0.02,
                  **kwargs: Any) -> dict[str, float]:
    """verl's ``compute_score``: one sample in, ``{"score", "rl_masked", "rl_<component>"...}`` out.

    Concurrent calls in one process are scored together (``window_s``). ``kwargs`` that verl adds
    (``reward_router_address``...) are ignored.
    """
    batcher = batcher_for(spec, window_s=window_s)
    row = verl_row(batcher.scorer, data_source, solution_str, ground_truth, extra_info, ground_truth_input)
    return batcher.score([row])[0]


def _manager_class() -> type:
    import asyncio

    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    class RewardlangRewardManager(RewardManagerBase):
        """verl reward manager: samples from concurrent ``run_single`` calls are scored in one batch.

        The spec comes from ``reward.custom_reward_function.reward_kwargs.spec`` (or ``REWARDLANG_SPEC``).
        """

        def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, reward_router_address: Any = None,
                     reward_model_tokenizer: Any = None) -> None:
            import os

            super().__init__(config, tokenizer, compute_score)
            kw = dict((config.reward.get("custom_reward_function") or {}).get("reward_kwargs") or {})
            spec = kw.get("spec") or os.environ.get("REWARDLANG_SPEC")
            if not spec:
                raise ValueError("rewardlang: set reward.custom_reward_function.reward_kwargs.spec (or the "
                                 "REWARDLANG_SPEC environment variable) to the .reward file")
            self.ground_truth_input = kw.get("ground_truth_input")
            self.per_token = per_token_flag(kw)  # false: the total alone, on the last token
            self.batcher = batcher_for(str(spec), window_s=float(kw.get("window_s", 0.02)))
            self.batcher.scorer.keep_places = True
            self._aligner: Any = None

        async def run_single(self, data: Any) -> dict:
            item = data[-1:][0]
            ids = item.batch["responses"]
            n = int(item.batch["attention_mask"][-ids.shape[-1]:].sum())
            valid = ids[:n].tolist()
            scorer = self.batcher.scorer
            if scorer.dense and self.per_token:  # the text exactly as decoded below, and where each token ends in it
                if self._aligner is None:
                    from rewardlang.trainers.align import TokenAligner

                    self._aligner = TokenAligner(self.tokenizer)
                text, ends = self._aligner.align(valid)
            else:
                text, ends = self.tokenizer.decode(valid, skip_special_tokens=True), None
            nt = item.non_tensor_batch
            extra = dict(nt.get("extra_info", {}) or {})
            row = verl_row(scorer, nt.get("data_source"), text,
                           (nt.get("reward_model") or {}).get("ground_truth"), extra, self.ground_truth_input)
            fut = self.batcher.submit([row])
            result = (await asyncio.wrap_future(fut))[0]
            score: float = result["score"]
            if ends is not None:  # the total, carrying the per-token rewards for assemble_rm_scores
                score = TokenScore(score, token_rewards(result, ends))
            return {"reward_score": score, "reward_extra_info": dict(result)}

        @classmethod
        def assemble_rm_scores(cls, data: Any, scores: list) -> Any:
            """verl's hook (``RewardLoopManager.compute_rm_score``): per-token rewards where the spec has them."""
            return assemble_rm_scores(data, scores)

    return RewardlangRewardManager


def __getattr__(name: str) -> Any:
    # the managers subclass verl's base classes, so they exist only where verl is installed (the function does not
    # need verl); verl looks them up with getattr on this file's module
    if name == "RewardlangRewardManager":
        cls = _manager_class()
        globals()[name] = cls
        return cls
    if name == "RewardlangBatchRewardManager":
        return legacy_manager_class()
    raise AttributeError(name)


def _register_legacy() -> None:
    """verl <= 0.6 finds a reward manager by name in its legacy registry (``reward_model.reward_manager=rewardlang``),
    after importing the custom reward function's file: register there when verl is the one importing this file
    (never otherwise: importing verl would import torch)."""
    import sys

    if "verl.workers.reward_manager" not in sys.modules:
        return
    from verl.workers.reward_manager import registry

    cls = __getattr__("RewardlangBatchRewardManager")
    if registry.REWARD_MANAGER_REGISTRY.get("rewardlang") is not cls:
        registry.register("rewardlang")(cls)


_register_legacy()
