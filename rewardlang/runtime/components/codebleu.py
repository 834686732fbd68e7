"""CodeBLEU and its four parts, exact to the ``codebleu`` 0.7.0 package and fast: ``codebleu``, ``bleu4``,
``weighted_ngram_match``, ``syntax_match``, ``dataflow_match``.

In a spec (CodePO's accuracy reward)::

    component acc in [0, 1] = step(codebleu(code_block(answer, "python") or answer, reference,
                                            weights=(.4, 0, .3, .3)), <= 0.2: 0, <= 0.4: 0.5, else: 1)

Each part equals the package's (1e-9 on a 1,312-pair HumanEval corpus, tests/runtime/components/
test_codebleu.py). Two deliberate differences, both in the combination:

* the package scores ``θ · (dataflow or 1)``, so a zero dataflow match counts as a perfect one (package issue
  #59: an empty answer gets 0.30 under CodePO's weights). Here a zero is a zero.
* when the **reference has no dataflow edges** (``def f(): return 1``) the dataflow match is undefined:
  ``dataflow_match`` returns ``none`` (write ``dataflow_match(c, r) or 0`` to choose a value) and ``codebleu``
  drops the dataflow term and renormalizes the other weights: ``(α·ngram + β·weighted + γ·syntax) / (α+β+γ)``.

Determinism: the package's dataflow match depends on Python's per-process string hash (it orders merged
variable names with ``list(set(...))``); rewardlang reproduces the order a ``PYTHONHASHSEED=0`` interpreter
gets, in every process (``dataflow_order="seed0"``, the default; ``"process"`` uses this process's hash).

Bad input never raises: empty code scores 0 against a non-empty reference (1 against an empty one); code that
is not Python is parsed with tree-sitter's error recovery and scored; lone surrogates count as ``?``; code
longer than ``max_chars`` scores 0, the worst (the completion's own outcome, never a mask); a reference longer
than that fails the sample with an error (``on_error`` applies). See docs/components/codebleu.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rewardlang.runtime.api import Context, Result, function

__all__ = ["CodeBLEUParams", "DataflowParams", "PartParams"]

_DEFAULT_MAX_CHARS = 200_000


class PartParams(BaseModel):
    """Options shared by the CodeBLEU functions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: programming language (the tree-sitter grammar and the keyword list); Python is the one installed
    lang: Literal["python"] = "python"
    #: longer programs (candidate or reference) fail the sample instead of being scored
    max_chars: int = Field(_DEFAULT_MAX_CHARS, ge=1)


class DataflowParams(PartParams):
    """Options of ``dataflow_match`` (and of ``codebleu``'s dataflow part)."""

    #: "seed0": merged names ordered as by CPython with PYTHONHASHSEED=0 (deterministic); "process": by this
    #: process's string hash (equal to the package run in the same process)
    dataflow_order: Literal["seed0", "process"] = "seed0"


class CodeBLEUParams(DataflowParams):
    """Options of ``codebleu``."""

    #: weights of (ngram, weighted_ngram, syntax, dataflow): non-negative, summing to 1
    weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)

    @field_validator("weights")
    @classmethod
    def _weights(cls, w: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        if any(not math.isfinite(x) or x < 0 for x in w):
            raise ValueError(f"weights must be finite and non-negative, got {w}")
        if abs(sum(w) - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (so that codebleu stays in [0, 1]), got {w} (sum {sum(w)})")
        return w


_PARTS = ("ngram", "weighted_ngram", "syntax", "dataflow")
#: ~0.1-1 ms per distinct program: worth both cores from a few hundred rows (see Program.pool_min_rows)
HEAVY = ("heavy",)


def _score(name: str, parts: tuple[str, ...], code: list[str], reference: list[str], params: Any,
           ctx: Context, value: Callable[[Any, Any], float | None]) -> Result:
    """Score each pair; per-pair results are cached in ``ctx.cache`` under (name, params, code, reference)."""
    from rewardlang.runtime.code import codebleu, compiled

    cb = compiled.twin(codebleu)  # its compiled twin where built (setup.py)

    p = params
    order = getattr(p, "dataflow_order", "seed0")
    values: list[float | None] = [None] * len(code)
    errors: list[str | None] = [None] * len(code)
    details: list[dict[str, Any] | None] = [None] * len(code)
    pkey = (name, p.model_dump_json())
    feats: dict[str, Any] = {}

    def feat(text: str) -> Any:
        f = feats.get(text)
        if f is None:
            f = feats[text] = cb.features(text, p.lang, cache=ctx.use_cache)
        return f

    with cb.gc_paused():
        _score_pairs(name, parts, code, reference, p, ctx, value, order, pkey, feat, values, errors, details)
    return Result(values, errors=errors, details=details)


def _score_pairs(name: str, parts: tuple[str, ...], code: list[str], reference: list[str], p: Any, ctx: Context,
                 value: Callable[[Any, Any], float | None], order: str, pkey: tuple[str, str],
                 feat: Callable[[str], Any], values: list[float | None], errors: list[str | None],
                 details: list[dict[str, Any] | None]) -> None:
    from rewardlang.runtime.code import codebleu, compiled

    cb = compiled.twin(codebleu)  # its compiled twin where built (setup.py)

    for i, (c, r) in enumerate(zip(code, reference)):
        key = (pkey, c, r)
        if ctx.use_cache:
            hit = ctx.cache.get(key)
            if hit is not None:
                values[i], details[i] = hit
                continue
        if len(r) > p.max_chars:  # the data's problem, not the completion's: an error (on_error applies)
            errors[i] = f"{name}: reference has {len(r)} characters (max_chars={p.max_chars})"
            continue
        if len(c) > p.max_chars:
            # code too long to analyse is the completion's own doing: the worst match, 0, never an error that
            # would mask the sample (docs/language.md, "none, errors and masking")
            values[i], details[i] = 0.0, {"too_long": len(c)}
            ctx.stats[f"{name}:too_long"] += 1
            continue
        try:
            fc, fr = feat(c), feat(r)
            m = cb._matches(fc, fr) if ("ngram" in parts or "weighted_ngram" in parts) else None
            s = cb.PairScore(
                cb.bleu4(fc, fr, m) if "ngram" in parts else 0.0,
                cb.weighted_ngram_match(fc, fr, m) if "weighted_ngram" in parts else 0.0,
                cb.syntax_match(fc, fr) if "syntax" in parts else 0.0,
                cb.dataflow_part(fc, fr, order) if "dataflow" in parts else 0.0,
            )
        except Exception as exc:  # noqa: BLE001 - one pathological program must not fail the batch
            errors[i] = f"{name}: {type(exc).__name__}: {exc}"
            ctx.stats[f"{name}:errors"] += 1
            continue
        v = value(s, p)
        d = {k: getattr(s, k) for k in _PARTS if k in parts}
        values[i], details[i] = v, d
        if ctx.use_cache:
            ctx.cache.put(key, (v, d))


_ARGS = {"code": "code", "reference": "code"}


@function("codebleu", args=_ARGS, params=CodeBLEUParams, returns="number", range=(0.0, 1.0),
          doc="CodeBLEU of code against reference: α·BLEU-4 + β·keyword-weighted n-gram match + γ·syntax match "
              "+ θ·dataflow match, weights=(α, β, γ, θ). Exact to the codebleu 0.7.0 package, except that a "
              "zero dataflow match counts as 0 (not 1) and that without reference dataflow the dataflow term "
              "is dropped and the other weights renormalized.", tags=HEAVY)
def codebleu(code: list[str], reference: list[str], *, params: CodeBLEUParams | None, ctx: Context) -> Result:
    """Vectorized CodeBLEU; see the module docstring.

    >>> from rewardlang.runtime.api import Context
    >>> ref = "def add(a, b):\\n    return a + b\\n"
    >>> codebleu.fn([ref, ""], [ref, ref], params=CodeBLEUParams(), ctx=Context()).values
    [1.0, 0.0]
    """
    from rewardlang.runtime.code.codebleu import combine

    p = params or CodeBLEUParams()
    parts = tuple(k for k, w in zip(_PARTS, p.weights) if w > 0) or _PARTS
    return _score("codebleu", parts, code, reference, p, ctx, lambda s, q: min(1.0, combine(s, q.weights)))


@function("bleu4", args=_ARGS, params=PartParams, returns="number", range=(0.0, 1.0),
          doc="BLEU-4 over whitespace tokens with CodeBLEU's smoothing (zero counts become 0.1); CodeBLEU's "
              "ngram_match_score.", tags=HEAVY)
def bleu4(code: list[str], reference: list[str], *, params: PartParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> bleu4.fn(["a b c d", "x"], ["a b c d", "a b c d"], params=None, ctx=Context()).values
    [1.0, 0.0]
    """
    return _score("bleu4", ("ngram",), code, reference, params or PartParams(), ctx, lambda s, q: s.ngram)


@function("weighted_ngram_match", args=_ARGS, params=PartParams, returns="number", range=(0.0, 1.0),
          doc="CodeBLEU's keyword-weighted n-gram match (recall against the reference; Python keywords weigh 1, "
              "other unigrams 0.2); the package's weighted_ngram_match_score.", tags=HEAVY)
def weighted_ngram_match(code: list[str], reference: list[str], *, params: PartParams | None,
                         ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> weighted_ngram_match.fn(["return x"], ["return x"], params=None, ctx=Context()).values
    [1.0]
    """
    return _score("weighted_ngram_match", ("weighted_ngram",), code, reference, params or PartParams(), ctx,
                  lambda s, q: s.weighted_ngram)


@function("syntax_match", args=_ARGS, params=PartParams, returns="number", range=(0.0, 1.0),
          doc="Share of the reference's syntax subtrees (tree-sitter, comments and docstrings removed) found in "
              "the candidate's tree; CodeBLEU's syntax_match_score.", tags=HEAVY)
def syntax_match(code: list[str], reference: list[str], *, params: PartParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> syntax_match.fn(["x = 1  # one"], ["x = 1"], params=None, ctx=Context()).values
    [1.0]
    """
    return _score("syntax_match", ("syntax",), code, reference, params or PartParams(), ctx, lambda s, q: s.syntax)


@function("dataflow_match", args=_ARGS, params=DataflowParams, returns="number?", range=(0.0, 1.0),
          doc="Share of the reference's normalized dataflow edges found in the candidate; CodeBLEU's "
              "dataflow_match_score. none when the reference has no dataflow edges (write `or 0` / `or 1`).",
          tags=HEAVY)
def dataflow_match(code: list[str], reference: list[str], *, params: DataflowParams | None,
                   ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> dataflow_match.fn(["def f(y):\\n    return y\\n", "x = 1"], ["def f(x):\\n    return x\\n", "f()"],
    ...                   params=None, ctx=Context()).values
    [1.0, None]
    """
    return _score("dataflow_match", ("dataflow",), code, reference, params or DataflowParams(), ctx,
                  lambda s, q: s.dataflow)
