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

import contextlib
import copy
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["MIN_SHARED_PREFIX", "PREFILL_GROUP", "merged_adapter", "shared_prefix", "continue_prefix", "prefill_rows", "rows_prefix", "generate_from_prefix",
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
    cache = copy.deepcopy(prefix_cache)
    cache.batch_repeat_interleave(len(rows))
    return _layout(rows, prefix, pad_id, device, width), cache


def _layout(rows: Sequence[Sequence[int]], prefix: int, pad_id: int, device: Any,
            width: int | None = None) -> dict[str, Any]:
    """``[shared prefix | padding | the row's own tokens]`` for every row, ``width`` wide (at least the longest)."""
    import torch

    width = max(max(len(r) for r in rows), width or 0)
    ids = [list(r[:prefix]) + [pad_id] * (width - len(r)) + list(r[prefix:]) for r in rows]
    mask = [[1] * prefix + [0] * (width - len(r)) + [1] * (len(r) - prefix) for r in rows]
    return {"input_ids": torch.tensor(ids, device=device), "attention_mask": torch.tensor(mask, device=device)}


#: rows whose own tokens are computed together by :func:`prefill_rows` (rows sorted by length pad only to the longest
#: of their group: one batch of 40 held-out prompts padded to the longest would compute ~2x the tokens)
PREFILL_GROUP = 8


def prefill_rows(model: Any, rows: Sequence[Sequence[int]], prefix: int, prefix_cache: Any, pad_id: int,
                 device: Any) -> tuple[dict[str, Any], Any]:
    """:func:`continue_prefix`'s batch, with every token but each row's last already in the cache.

    The rows' own tokens are computed :data:`PREFILL_GROUP` rows at a time (give the rows sorted by length), each
    group padded only to its own longest row; the groups' caches are then widened to the batch's width by masked
    zeros right after the prefix (where the batch layout has its padding) and stacked. ``generate`` on the returned
    batch and cache computes only the last column, and positions count unmasked tokens as ``generate`` counts them:
    every row sees what it would see left-padded."""
    import torch

    width = prefix + max(len(r) - prefix for r in rows)
    parts = []
    for start in range(0, len(rows), PREFILL_GROUP):
        chunk = rows[start:start + PREFILL_GROUP]
        enc, cache = continue_prefix(chunk, prefix, prefix_cache, pad_id, device)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        w = ids.size(1)
        if w - 1 > prefix:
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                model(input_ids=ids[:, prefix:w - 1], attention_mask=mask[:, :w - 1],
                      position_ids=positions[:, prefix:w - 1], cache=cache, use_cache=True, logits_to_keep=1)
        if w < width:
            for layer in cache.layers:
                for name in ("keys", "values"):
                    t = getattr(layer, name)
                    gap = t.new_zeros(t.size(0), t.size(1), width - w, t.size(3))
                    setattr(layer, name, torch.cat([t[:, :, :prefix], gap, t[:, :, prefix:]], dim=2))
        parts.append(cache)
    merged = parts[0]
    for i, layer in enumerate(merged.layers):
        layer.keys = torch.cat([p.layers[i].keys for p in parts], dim=0)
        layer.values = torch.cat([p.layers[i].values for p in parts], dim=0)
    return _layout(rows, prefix, pad_id, device, width), merged


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


@contextlib.contextmanager
def merged_adapter(model: Any) -> Iterator[None]:
    """``model``'s LoRA adapter merged into its weights for the block, and the weights put back exactly after.

    An unmerged adapter adds four small operations to every linear layer at every decoding step, and its dropout
    draws a mask per token: SmolLM2-135M on 2 CPU cores samples 4 x 160 tokens in 47.7 s merged against 54.6 s
    unmerged in eval mode and 59.0 s with dropout. Merged, the samples come from the policy itself, without
    dropout noise, as TRL's vLLM path samples them (it merges the adapter into vLLM's weights). The base weights are
    copied before and restored after, bit for bit (``unmerge`` alone would leave them a rounding error away, and the
    error would add up over the steps). ``model`` None, or without an unmerged LoRA adapter: nothing is done.
    """
    layers = [m for m in model.modules() if hasattr(m, "merge") and hasattr(m, "base_layer")
              and not getattr(m, "merged", True)] if model is not None and hasattr(model, "peft_config") else []
    if not layers:
        yield
        return
    saved = [m.get_base_layer().weight.detach().clone() for m in layers]
    for m in layers:
        m.merge()
    try:
        yield
    finally:
        for m, w in zip(layers, saved):
            m.unmerge()
            m.get_base_layer().weight.data.copy_(w)


class SharedPromptForward:
    """Mixin for a TRL ``GRPOTrainer`` subclass: the group's shared prompt computed once, in generation and in the
    update's forward pass (module docstring). It steps aside (TRL's own code runs) for vLLM or continuous batching,
    tools, images, several processes, a mixture-of-experts loss, or rows that share fewer than
    :data:`MIN_SHARED_PREFIX` tokens; ``share_prompt = False`` turns it off. With a LoRA adapter the samples are
    drawn with it merged (:func:`merged_adapter`; ``merge_for_generation = False`` draws them unmerged). ``prompt_shared`` counts the calls
    that took the shared path (``generate``, ``forward``) and the tokens they computed once (``tokens``)."""

    share_prompt: bool = True
    #: samples drawn from the policy with its LoRA adapter merged into the weights (:func:`merged_adapter`)
    merge_for_generation: bool = True
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
        model = self.accelerator.unwrap_model(self.model_wrapped)  # type: ignore[attr-defined]
        merge = model if (self.merge_for_generation and self.accelerator.num_processes == 1  # type: ignore[attr-defined]
                          and not self.use_vllm) else None  # type: ignore[attr-defined]
        if not self._share_ok() or images is not None or multimodal_fields:
            with merged_adapter(merge):
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields,  # type: ignore[misc]
                                                     num_generations, has_tool_images)
        plain = model.generate
        pad_id = self._tokenizer.pad_token_id  # type: ignore[attr-defined]

        def generate(input_ids: "torch.Tensor", attention_mask: "torch.Tensor", **kwargs: Any) -> "torch.Tensor":
            return generate_from_prefix(_Plain(model, plain), input_ids, attention_mask, pad_id,
                                        on_shared=lambda p: self._shared("generate", p), **kwargs)

        model.generate = generate  # for this call only: TRL calls ``unwrapped_model.generate``
        try:
            with merged_adapter(merge):
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
        # activation checkpointing turns the cache off in a pass with gradients: the plain pass then
        checkpointing = bool(getattr(self.args, "gradient_checkpointing", False)) and _grad_enabled()  # type: ignore[attr-defined]
        if (self._share_ok() and input_ids.size(0) > 1 and not compute_aux_loss and not checkpointing
                and (batch_size is None or batch_size >= input_ids.size(0))
                and all(v is None for v in kwargs.values())):
            prefix = rows_prefix(input_ids, attention_mask, limit)
        if prefix < MIN_SHARED_PREFIX:
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        with self.accelerator.autocast():  # type: ignore[attr-defined]
            cache = model(input_ids=input_ids[:1, :prefix], attention_mask=attention_mask[:1, :prefix],
                          use_cache=True, logits_to_keep=1).cache
        if cache is None:  # activation checkpointing turns the cache off: the plain pass
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        self._shared("forward", prefix)
        cache.batch_repeat_interleave(input_ids.size(0))
        # TRL's labels: only the completion tokens are scored
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[:, :-logits_to_keep] = -100
        with self.accelerator.autocast():  # type: ignore[attr-defined]
            # TRL's fused head over the rows' own tokens, on top of the prefix (its labels shifted as TRL's are)
            outputs = model(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, cache=cache,
                            labels=labels[:, prefix:], fused_lm_head=True)
        logps = outputs.log_probs[:, -logits_to_keep:]
        entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
        return logps, entropies, None


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


class _Plain:
    """``model`` whose ``generate`` is the one it had before :class:`SharedPromptForward` replaced it."""

    def __init__(self, model: Any, generate: Any) -> None:
        self._model, self.generate = model, generate

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._model(*args, **kwargs)
