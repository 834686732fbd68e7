"""PRLCoder's process reward: ``prm_steps(code, prompt, checkpoint=...)`` scores each segment of the code with a
process reward model (a token classifier trained by ``algorithm = "prm"``, see docs/prm.md).

The result is spans, one per segment (see ``segments``), each valued with the PRM's probability that the
prefix up to the end of that segment is correct, the probability read at the segment's last token, so
"at the ends of segments" attribution puts it where PRLCoder's PPO puts it::

    component steps in [0, 50] = len(prm_steps(code, prompt, checkpoint="runs/prm/final"))
        spans prm_steps(code, prompt, checkpoint="runs/prm/final")

The model is loaded once per process and checkpoint, runs in the calling (trainer's) process, on the GPU when
there is one, in batches of ``batch_size`` completions. The text before the first segment joins the prompt,
as in training; each step is tokenised on its own, as in training. torch is imported on first use.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Literal

from pydantic import BaseModel, Field

from rewardlang.runtime.api import Context, Result, Span, function

__all__ = ["PrmParams", "PrmTotalParams", "prm_steps", "prm_total", "score_steps"]

_MODELS: dict[tuple[str, str], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


class PrmParams(BaseModel):
    """Options of ``prm_steps``."""

    #: directory of a PRM checkpoint (``RUN_DIR/final`` of a ``prm`` run); required
    checkpoint: str = ""
    level: Literal["line", "block"] = "block"
    batch_size: int = Field(16, ge=1)
    #: ``auto``: cuda when available, else cpu
    device: str = "auto"
    #: longest scored row in tokens (the last tokens are kept, as in training)
    max_tokens: int = Field(512, ge=8)


#: how to get a PRM checkpoint (docs/prm.md): the E603 hint when one is missing
HOW_TO_TRAIN = ("train one: `rewardlang prm-data --dataset humaneval -o data/prm`, then `rewardlang train --spec "
                "specs/prm.reward --dataset data/prm/steps.jsonl --output runs/prm` (its RUN_DIR/final is the "
                "checkpoint; docs/prm.md), or point the spec at an existing one (e.g. --set prm_checkpoint=DIR)")


def missing_checkpoint(params: PrmParams) -> tuple[str, str] | None:
    """What is missing for a call with these options (an unset checkpoint, or a directory that holds no model),
    as ``(what, how to get it)``; None when the checkpoint is there. Checked when a program is loaded for scoring,
    so a spec without its PRM is refused (E603) instead of masking every row."""
    import importlib.util
    import os

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        return ("torch and transformers, to run the PRM (the core install has no training stack)",
                'pip install "rewardlang[train]"')
    if not params.checkpoint:
        return ("a PRM checkpoint: `checkpoint` is not set", HOW_TO_TRAIN)
    if not os.path.isfile(os.path.join(params.checkpoint, "config.json")):
        why = "does not exist" if not os.path.exists(params.checkpoint) else "holds no model (no config.json)"
        return (f"the PRM checkpoint {params.checkpoint!r}, which {why}", HOW_TO_TRAIN)
    return None


def _load(checkpoint: str, device: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    key = (checkpoint, dev)
    with _LOCK:
        if key not in _MODELS:
            tok = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
            model = AutoModelForTokenClassification.from_pretrained(checkpoint, local_files_only=True)
            _MODELS[key] = (model.to(dev).eval(), tok)
        return _MODELS[key]


def score_steps(model: Any, tok: Any, rows: list[tuple[str, list[str]]], *, batch_size: int = 16,
                max_tokens: int = 512) -> list[list[float]]:
    """P(correct) at the last token of each step, for ``(prompt, steps)`` rows, batched (right padding)."""
    import torch

    feats = []
    for prompt, steps in rows:
        ids = list(tok(prompt, add_special_tokens=False)["input_ids"])
        ends = []
        for s in steps:
            t = tok(s, add_special_tokens=False)["input_ids"]
            ids += t
            ends.append(len(ids) - 1 if t else -1)
        cut = max(0, len(ids) - max_tokens)
        feats.append((ids[cut:], [e - cut if e >= cut else -1 for e in ends]))
    out: list[list[float]] = []
    dev = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    for k in range(0, len(feats), batch_size):
        chunk = feats[k:k + batch_size]
        n = max(1, max(len(f[0]) for f in chunk))
        ids = torch.full((len(chunk), n), pad, dtype=torch.long)
        att = torch.zeros((len(chunk), n), dtype=torch.long)
        for i, (x, _) in enumerate(chunk):
            ids[i, :len(x)] = torch.tensor(x, dtype=torch.long)
            att[i, :len(x)] = 1
        with torch.no_grad():
            probs = torch.sigmoid(model(input_ids=ids.to(dev), attention_mask=att.to(dev)).logits[..., 0].float())
        probs = probs.cpu()
        for i, (_, ends) in enumerate(chunk):
            out.append([float(probs[i, e]) if e >= 0 else float("nan") for e in ends])
    return out


@function("prm_steps", args={"code": "code", "prompt": "text"}, returns="spans", params=PrmParams, spans_of="code",
          in_workers=False, tags=("heavy",), requires=missing_checkpoint,
          doc="Each segment of the code scored by a process reward model (checkpoint=RUN_DIR/final of a prm run): "
              "spans valued P(prefix correct), read at the segment's last token (PRLCoder). Batched, GPU when "
              "present, in the calling process.")
def prm_steps(code: list[str], prompt: list[str], *, params: PrmParams | None = None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> prm_steps.fn(["x = 1\\n"], [""], params=PrmParams(), ctx=Context()).errors
    ['prm_steps: set checkpoint="RUN_DIR/final" (a PRM trained with algorithm = "prm")']
    """
    from rewardlang.runtime.code.segment import partition, segments

    p = params or PrmParams()
    if not p.checkpoint:
        msg = 'prm_steps: set checkpoint="RUN_DIR/final" (a PRM trained with algorithm = "prm")'
        return Result(values=[None] * len(code), errors=[msg] * len(code))
    try:
        model, tok = _load(p.checkpoint, p.device)
    except (OSError, ValueError) as exc:
        msg = f"prm_steps: cannot load the PRM checkpoint {p.checkpoint!r}: {exc}"
        return Result(values=[None] * len(code), errors=[msg] * len(code))
    spans_of = [segments(c, p.level) for c in code]
    rows = []
    for c, pr, spans in zip(code, prompt, spans_of):
        first = spans[0][0] if spans else len(c)
        rows.append((pr + c[:first], partition(c, spans, first) if spans else []))
    scores = score_steps(model, tok, rows, batch_size=p.batch_size, max_tokens=p.max_tokens)
    ctx.stats["prm_steps.segments"] += sum(len(s) for s in spans_of)
    values = [[Span(a, b, sc, f"{p.level} {i + 1}") for i, ((a, b), sc) in enumerate(zip(spans, ss)) if not math.isnan(sc)]
              for spans, ss in zip(spans_of, scores)]
    return Result(values=values)


class PrmTotalParams(PrmParams):
    """Options of ``prm_total``."""

    #: ``sum`` of the step scores (the total a dense per-segment reward adds up to), their ``mean``, or the
    #: ``last`` step's score (P(the whole program is correct))
    reduce: Literal["sum", "mean", "last"] = "sum"


@function("prm_total", args={"code": "code", "prompt": "text"}, returns="number", params=PrmTotalParams,
          in_workers=False, tags=("heavy",), requires=missing_checkpoint,
          doc="The PRM's step scores of prm_steps reduced to one number: reduce=\"sum\" (default; the total of "
              "the per-segment rewards), \"mean\" or \"last\". Code with no segment scores 0.")
def prm_total(code: list[str], prompt: list[str], *, params: PrmTotalParams | None = None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> prm_total.fn(["x = 1\\n"], [""], params=PrmTotalParams(), ctx=Context()).errors[0][:31]
    'prm_steps: set checkpoint="RUN_'
    """
    p = params or PrmTotalParams()
    res = prm_steps.fn(code, prompt, params=p, ctx=ctx)
    values: list[float | None] = []
    for v in res.values:
        if v is None:
            values.append(None)
        elif not v:
            values.append(0.0)
        else:
            xs = [s.value for s in v]
            values.append(sum(xs) if p.reduce == "sum" else sum(xs) / len(xs) if p.reduce == "mean" else xs[-1])
    return Result(values=values, errors=res.errors)


__test__ = {"prm_steps": prm_steps.fn, "prm_total": prm_total.fn}
