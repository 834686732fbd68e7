"""rewardlang in OpenRLHF: ``reward_func(queries, prompts, labels)`` for ``--reward.remote_url <this file>``.

Run it as::

    REWARDLANG_SPEC=specs/quality_grpo.reward python3 -m openrlhf.cli.train_ppo_ray ... \\
        --reward.remote_url $(python3 -c "import rewardlang.integrations.openrlhf as m; print(m.__file__)") \\
        --data.label_key reward_columns

OpenRLHF imports this file in every vLLM engine actor and calls ``reward_func`` once per sample from a thread
(``asyncio.to_thread``); concurrent calls in one actor are scored together (a 20 ms window, ``REWARDLANG_WINDOW_S``).

- The response is the query minus its prompt (OpenRLHF decodes prompt + response with the special tokens, so the
  trailing end-of-sequence texts named in ``REWARDLANG_STRIP``, comma-separated, default the common ones, are cut).
  A query that does not start with its prompt is a bad row: masked, counted and logged with its reason.
- A label carries the spec's other columns: a dict, or a JSON object in a string; a plain string fills the spec's
  one other input when it has exactly one.
- The result: ``rewards`` and ``scores`` (the spec's total; 0.0 when masked) and ``extra_logs`` with
  ``rl_masked`` and ``rl_<component>``: scalars for one sample (what OpenRLHF 0.11 wraps as ``torch.tensor([x])``),
  lists for several. OpenRLHF has no mask: a masked sample is a 0.0 with ``rl_masked`` = 1 in its logs.

Example::

    >>> import os; os.environ["REWARDLANG_SPEC"] = "specs/codepo_text.reward"
    >>> from rewardlang.integrations.openrlhf import reward_func
    >>> out = reward_func(["Q: write f\\n```python\\ndef f():\\n    return 1\\n```</s>"], ["Q: write f\\n"], [{}])
    >>> out
    {'rewards': 0.0, 'scores': 0.0, 'extra_logs': {'rl_masked': 0.0, 'rl_format': 0.0, 'rl_reason': 0.0, 'rl_rep': 0.0}}
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from rewardlang.integrations.batching import (
    MASK_KEY,
    SpecScorer,
    batcher_for,
    log_masks,
)

__all__ = ["merge_masked", "openrlhf_rows", "read_samples", "reward_func", "score_openrlhf", "to_openrlhf"]

log = logging.getLogger("rewardlang.integrations")

_STRIP = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>")


def _strip_eos(text: str) -> str:
    env = os.environ.get("REWARDLANG_STRIP")
    marks = tuple(m for m in env.split(",") if m) if env is not None else _STRIP
    changed = True
    while changed:
        changed = False
        t = text.rstrip()
        for m in marks:
            if t.endswith(m):
                text, changed = t[: -len(m)], True
    return text


class BadLabel(ValueError):
    """A label that is neither a dict, a JSON object nor a value for the spec's one other input."""


def _label_columns(scorer: SpecScorer, label: Any) -> dict[str, Any]:
    if label is None or label == "":
        return {}
    if isinstance(label, dict):
        return dict(label)
    if isinstance(label, str):
        try:
            parsed = json.loads(label)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    others = [i for i in scorer.inputs if i.name != "completion"]
    if len(others) == 1:
        return {others[0].column: label}
    raise BadLabel("a label must be a dict or a JSON object of the spec's columns "
                   f"({', '.join(i.column for i in others)})")


def read_samples(scorer: SpecScorer, queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]
                 ) -> tuple[list[dict[str, Any] | None], list[str | None]]:
    """The spec rows of OpenRLHF samples (None for a sample that cannot be read: it is masked) and, beside each,
    why it cannot be read (None for one that can)."""
    if not (len(queries) == len(prompts) == len(labels)):
        raise ValueError(f"reward_func: {len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels")
    comp = next(i for i in scorer.program.inputs if i.name == "completion")
    rows: list[dict[str, Any] | None] = []
    reasons: list[str | None] = []
    for q, p, lab in zip(queries, prompts, labels):
        if not isinstance(q, str) or not isinstance(p, str):
            rows.append(None)
            reasons.append(f"the query and the prompt must be text, not {type(q).__name__} and {type(p).__name__}")
            continue
        if not q.startswith(p):
            rows.append(None)
            reasons.append("the query does not start with its prompt (the response is the query after the prompt)")
            continue
        try:
            row = _label_columns(scorer, lab)
        except BadLabel as exc:
            rows.append(None)
            reasons.append(f"the label cannot be mapped: {exc}")
            continue
        row.setdefault("prompt", p)
        response = _strip_eos(q[len(p):])
        row[comp.column] = response
        row["completion"] = response
        rows.append(row)
        reasons.append(None)
    return rows, reasons


def openrlhf_rows(scorer: SpecScorer, queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]
                  ) -> list[dict[str, Any] | None]:
    """The spec rows of OpenRLHF samples; None for a sample that cannot be read (it is masked; :func:`read_samples`
    also says why)."""
    return read_samples(scorer, queries, prompts, labels)[0]


def to_openrlhf(results: list[dict[str, float]], scalar: bool) -> dict[str, Any]:
    """OpenRLHF's answer from result dicts: scalars for one sample when ``scalar``, else lists."""
    keys = [k for k in results[0] if k != "score"] if results else []
    if scalar and len(results) == 1:
        r = results[0]
        return {"rewards": r["score"], "scores": r["score"], "extra_logs": {k: r[k] for k in keys}}
    return {"rewards": [r["score"] for r in results], "scores": [r["score"] for r in results],
            "extra_logs": {k: [r[k] for r in results] for k in keys}}


def merge_masked(scorer: SpecScorer, rows: Sequence[dict | None], scored: Sequence[dict[str, float]],
                 reasons: Sequence[str | None] | None = None) -> list[dict[str, float]]:
    """Put the results of the readable rows back in place; an unreadable one is masked (with its reason from
    :func:`read_samples`) and counted."""
    it = iter(scored)
    bad = sum(r is None for r in rows)
    if bad:
        scorer.stats["bad_rows"] += bad
    why = list(reasons) if reasons is not None else [None] * len(rows)
    return [next(it) if r is not None else scorer.masked_result(w) for r, w in zip(rows, why)]


def score_openrlhf(batcher: Any, queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]
                   ) -> list[dict[str, float]]:
    """Result dicts for OpenRLHF samples through ``batcher`` (unreadable samples masked, counted and logged with
    their reason; the batcher's scorer logs the masks of the rows it scores)."""
    rows, reasons = read_samples(batcher.scorer, queries, prompts, labels)
    good = [r for r in rows if r is not None]
    results = merge_masked(batcher.scorer, rows, batcher.score(good) if good else [], reasons)
    if any(r is None for r in rows):
        log_masks(log, "an OpenRLHF request", [r if rows[k] is None else {MASK_KEY: 0.0}
                                                for k, r in enumerate(results)])
    return results


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any
                ) -> dict[str, Any]:
    """OpenRLHF's reward function (see the module docstring); the spec is ``$REWARDLANG_SPEC``."""
    spec = os.environ.get("REWARDLANG_SPEC")
    if not spec:
        raise RuntimeError("rewardlang: set REWARDLANG_SPEC to the .reward file for OpenRLHF's reward_func")
    batcher = batcher_for(spec, window_s=float(os.environ.get("REWARDLANG_WINDOW_S", "0.02")))
    return to_openrlhf(score_openrlhf(batcher, queries, prompts, labels), scalar=True)
