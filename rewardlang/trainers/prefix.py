"""The tokens every prompt of a batch starts with, computed once.

A GRPO group is one prompt repeated ``num_generations`` times, and every prompt of a spec starts with the same
system prompt and worked examples. On a CPU those shared tokens are most of the work: in the main job
(``examples/codepo_text_cpu.yaml``) a prompt is ~340-420 tokens and a completion ~150. Two places compute them once:

- **generation** (:func:`generate_from_prefix`, and :func:`rewardlang.trainers.evaluate.generate` for held-out
  answers): the prefix's keys and values are computed for one row and every row continues from a copy, laid out as
  ``[shared prefix | padding | the row's own tokens]`` (:func:`continue_prefix`); positions count unmasked tokens, so
  each row sees what it would see left-padded;
- **the GRPO update's forward pass** (:class:`SharedPromptForward`, a mixin of
  :class:`rewardlang.trainers.grpo.SpecGRPOTrainer`): when every row of the micro-batch starts with the same
  unpadded tokens (one prompt per step), the prefix runs once with gradients, its keys and values are repeated for
  every row, and the rows' own tokens run on top. The gradient reaches the prefix's activations once from every row,
  so the loss and the gradients are those of the plain pass up to float rounding (``tests/trainers/test_prefix.py``).

One thing differs from the plain pass, and only with dropout (``train.lora_dropout`` > 0): the rows share one
dropout mask over the prefix instead of drawing one each.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["MIN_SHARED_PREFIX", "shared_prefix", "continue_prefix", "rows_prefix", "generate_from_prefix",
           "SharedPromptForward"]

#: the fewest tokens every row must share before they are computed once (below that, the copy costs more than it
#: saves)
MIN_SHARED_PREFIX = 16


def shared_prefix(token_ids: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every prompt shares, leaving at least one token of each prompt after it (generation
    starts from a token it computes itself).

    >>> shared_prefix([[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 3, 4, 7]])
    3
    >>> shared_prefix([[1, 2], [1, 2]])
    1
    >>> shared_prefix([[1, 2], [3]])
    0
    """
    if not token_ids:
        return 0
    first = token_ids[0]
    k = min(len(ids) for ids in token_ids) - 1
    for ids in token_ids[1:]:
        j = 0
        while j < k and ids[j] == first[j]:
            j += 1
        k = j
    return max(k, 0)


def continue_prefix(rows: Sequence[Sequence[int]], prefix: int, prefix_cache: Any, pad_id: int, device: Any,
                    width: int | None = None) -> tuple[dict[str, Any], Any]:
    """A batch laid out as ``[shared prefix | padding | the prompt's own tokens]`` with a copy of the prefix's cache
    for every row, ``width`` tokens wide (default: the longest row). The attention mask hides the padding, and
    positions count unmasked tokens (as ``generate`` derives them from the mask), so each row sees exactly what it
    would left-padded: the prefix at positions 0..P-1, its own tokens after."""
    import torch

    tails = [list(ids[prefix:]) for ids in rows]
    width = max(prefix + max(len(t) for t in tails), width or 0)
    ids = [list(rows[0][:prefix]) + [pad_id] * (width - prefix - len(t)) + t for t in tails]
    mask = [[1] * prefix + [0] * (width - prefix - len(t)) + [1] * len(t) for t in tails]
    cache = copy.deepcopy(prefix_cache)
    cache.batch_repeat_interleave(len(rows))
    enc = {"input_ids": torch.tensor(ids, device=device), "attention_mask": torch.tensor(mask, device=device)}
    return enc, cache


def rows_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, limit: int) -> int:
    """How many leading positions (at most ``limit``) hold the same token in every row, none of them padding.

    >>> import torch
    >>> ids = torch.tensor([[5, 6, 7, 1], [5, 6, 7, 2], [5, 6, 8, 3]])
    >>> rows_prefix(ids, torch.ones_like(ids), 4), rows_prefix(ids, torch.ones_like(ids), 1)
    (2, 1)
    >>> rows_prefix(ids, torch.tensor([[0, 1, 1, 1]] * 3), 4)   # a left-padded row shares nothing
    0
    """
    same = (input_ids == input_ids[:1]).all(dim=0) & (attention_mask != 0).all(dim=0)
    same = same[:max(limit, 0)]
    return int(same.long().cumprod(dim=0).sum())


def generate_from_prefix(model: Any, input_ids: "torch.Tensor", attention_mask: "torch.Tensor", pad_id: int,
                         on_shared: Callable[[int], None] | None = None, **kwargs: Any) -> "torch.Tensor":
    """``model.generate`` on a left-padded batch, with the tokens every row starts with computed once.

    The result has the batch's own width before the completions (a caller slicing the completions at
    ``input_ids.size(1)`` gets them); only the prompt part's layout differs (padding after the shared prefix). With
    fewer than :data:`MIN_SHARED_PREFIX` shared tokens, or other model inputs, it is plain ``generate``;
    otherwise ``on_shared`` is called with the number of tokens computed once.
    """
    import torch

    rows = [ids[m.bool()].tolist() for ids, m in zip(input_ids, attention_mask)]
    prefix = shared_prefix(rows) if len(rows) > 1 else 0
    if prefix < MIN_SHARED_PREFIX or any(k in kwargs for k in ("cache", "past_key_values", "inputs_embeds")):
        return model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([rows[0][:prefix]], device=input_ids.device), use_cache=True,
                      logits_to_keep=1).cache
    enc, cache = continue_prefix(rows, prefix, cache, pad_id, input_ids.device, width=input_ids.size(1))
    if on_shared is not None:
        on_shared(prefix)
    return model.generate(**enc, cache=cache, **kwargs)


class SharedPromptForward:
    """Mixin for a TRL ``GRPOTrainer`` subclass: the group's shared prompt computed once, in generation and in the
    update's forward pass (module docstring). It steps aside (TRL's own code runs) for vLLM or continuous batching,
    tools, images, several processes, a mixture-of-experts loss, or rows that share fewer than
    :data:`MIN_SHARED_PREFIX` tokens; ``share_prompt = False`` turns it off. ``prompt_shared`` counts the calls
    that took the shared path (``generate``, ``forward``) and the tokens they computed once (``tokens``)."""

    share_prompt: bool = True
    prompt_shared: dict[str, int]

    def _shared(self, what: str, tokens: int) -> None:
        counts = self.__dict__.setdefault("prompt_shared", {"generate": 0, "forward": 0, "tokens": 0})
        counts[what] += 1
        counts["tokens"] += tokens

    def _share_ok(self) -> bool:
        return (self.share_prompt and self.accelerator.num_processes == 1 and not self.use_vllm  # type: ignore[attr-defined]
                and not getattr(self, "use_transformers_continuous_batching", False)
                and not getattr(self, "tools", None) and not getattr(self, "_is_vlm", False))

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: Any,
                              has_tool_images: bool = False) -> Any:
        if not self._share_ok() or images is not None or multimodal_fields:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields,  # type: ignore[misc]
                                                 num_generations, has_tool_images)
        model = self.accelerator.unwrap_model(self.model_wrapped)  # type: ignore[attr-defined]
        plain = model.generate
        pad_id = self._tokenizer.pad_token_id  # type: ignore[attr-defined]

        def generate(input_ids: "torch.Tensor", attention_mask: "torch.Tensor", **kwargs: Any) -> "torch.Tensor":
            return generate_from_prefix(_Plain(model, plain), input_ids, attention_mask, pad_id,
                                        on_shared=lambda p: self._shared("generate", p), **kwargs)

        model.generate = generate  # for this call only: TRL calls ``unwrapped_model.generate``
        try:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields,  # type: ignore[misc]
                                                 num_generations, has_tool_images)
        finally:
            del model.generate

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **kwargs: Any) -> Any:
        # the rows' own part must hold the last prompt token: its output predicts the first completion token
        limit = input_ids.size(1) - logits_to_keep - 1
        prefix = 0
        if (self._share_ok() and input_ids.size(0) > 1 and not compute_aux_loss
                and (batch_size is None or batch_size >= input_ids.size(0))
                and all(v is None for v in kwargs.values())):
            prefix = rows_prefix(input_ids, attention_mask, limit)
        if prefix < MIN_SHARED_PREFIX:
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        self._shared("forward", prefix)
        # TRL's labels: only the completion tokens are scored
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[:, :-logits_to_keep] = -100
        with self.accelerator.autocast():  # type: ignore[attr-defined]
            cache = model(input_ids=input_ids[:1, :prefix], attention_mask=attention_mask[:1, :prefix],
                          use_cache=True, logits_to_keep=1).cache
            cache.batch_repeat_interleave(input_ids.size(0))
            # TRL's fused head over the rows' own tokens, on top of the prefix (its labels shifted as TRL's are)
            outputs = model(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, cache=cache,
                            labels=labels[:, prefix:], fused_lm_head=True)
        logps = outputs.log_probs[:, -logits_to_keep:]
        entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
        return logps, entropies, None


class _Plain:
    """``model`` whose ``generate`` is the one it had before :class:`SharedPromptForward` replaced it."""

    def __init__(self, model: Any, generate: Any) -> None:
        self._model, self.generate = model, generate

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._model(*args, **kwargs)
