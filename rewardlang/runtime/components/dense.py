"""Functions for dense (per-token) rewards: ``split_at``, ``first_violation`` and ``without_ruff_lines``.

``split_at(text, at, before=, after=)`` is what the ``tokens split(...)`` clause compiles to: two spans of
``text``, before and from character ``at``.

The dense-reward PPO paper's terms are written with the ``tokens`` clause (docs/language.md, Token attribution)
over functions the runtime already has (``ruff_lines``, ``tests_pass_rate``, ``dataflow_match``) and these two:

- ``first_violation(code)``: the character of ``code`` where it stops being valid Python, found by CPython's own
  compiler with the prefix scan of :mod:`rewardlang.runtime.code.validity` (none when the code compiles). It is
  the ``at=`` of the syntax term::

      component syntax = 1 if parses(code) else 0
          tokens split(code, at=first_violation(code), before=1, after=-1, edges=2)

- ``without_ruff_lines(code, select=[...])``: the code with every line ruff flags deleted. The paper's public
  implementation runs the unit tests on that text (a bug: a flagged line may be needed); specs/dense_ppo.reward
  offers it as the named quirk ``tests_on_linted_code`` (default off).

Bad input: empty code is valid (no violation) and has no flagged lines; code nested too deeply for CPython's
compiler, and code longer than ``max_chars`` (not compiled), are invalid from their start (0): the completion's
own outcome, never a mask; ``ctx.timeout`` bounds the scan (running out of it is an infrastructure failure). See docs/specs/dense_ppo.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from rewardlang.runtime.api import Context, Result, Span, function
from rewardlang.runtime.components.lint import RuffParams, _line_spans, _ruff
from rewardlang.runtime.components.syntax import DEFAULT_TIMEOUT, SyntaxParams

__all__ = ["first_violation", "split_at", "without_ruff_lines"]


@function("first_violation", args={"code": "code"}, params=SyntaxParams, returns="number?", tags=("heavy",),
          doc="The character of the code where it stops being valid Python (CPython's compiler, prefix scan; for "
              "code that is merely unfinished, the start of the line where the unfinished construct begins); none "
              "when it compiles. The `at=` of `tokens split(...)`.")
def first_violation(code: list[str], *, params: SyntaxParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> first_violation.fn(["x = 1\\ny = = 2\\n", "x = 1\\n", "def f(:\\n"], params=None, ctx=Context()).values
    [10, None, 6]
    """
    from rewardlang.runtime.code import validity

    params = params or SyntaxParams()
    if params.method != "cpython":
        raise ValueError('first_violation uses CPython\'s compiler: method="cpython" only')
    budget = float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT
    values: list[int | None] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for c in code:
        if len(c) > params.max_chars:  # not compiled: invalid from its start (the completion's own outcome)
            values.append(0)
            errors.append(None)
            infra.append(False)
            ctx.stats["first_violation:too_long"] += 1
            continue
        try:
            bad = validity.first_violation(c, deadline=time.monotonic() + budget)
        except validity.TooDeep:
            values.append(0)
            errors.append(None)
            infra.append(False)
            continue
        except TimeoutError as exc:  # an overloaded machine (see syntax.py): infrastructure, masked
            values.append(None)
            errors.append(f"first_violation: {exc} ({budget} s)")
            infra.append(True)
            ctx.stats["first_violation:timeouts"] += 1
            continue
        values.append(None if bad is None else bad.start)
        errors.append(None)
        infra.append(False)
    return Result(values, errors=errors, infra=infra)


@function("without_ruff_lines", args={"code": "code"}, params=RuffParams, returns="code", in_workers=False,
          tags=("lint", "tool"),
          doc="The code with every line ruff flags deleted (line break included), as the dense-reward paper's "
              "implementation runs the tests on it (a quirk; see docs/specs/dense_ppo.md).")
def without_ruff_lines(code: list[str], *, params: RuffParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> without_ruff_lines.fn(["x = 1\\nimport os\\ny = 2\\n"], params=RuffParams(), ctx=Context()).values
    ['x = 1\\ny = 2\\n']
    """
    from rewardlang.runtime.tools.text import SourceText

    params = params or RuffParams()
    results = _ruff(code, params, ctx)
    values: list[str | None] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for c, res in zip(code, results):
        infra.append(bool(not res.ok and res.infra))
        if not res.ok:
            values.append(None)
            errors.append(f"without_ruff_lines: {res.error}")
            continue
        drop = _line_spans(SourceText(c), res.findings)
        kept, pos = [], 0
        for sp in drop:
            kept.append(c[pos:sp.start])
            pos = sp.end
        kept.append(c[pos:])
        values.append("".join(kept))
        errors.append(None)
    return Result(values, errors=errors, infra=infra)


class SplitParams(BaseModel):
    """Options of ``split_at``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    before: float = Field(1.0, description="value of the characters before `at`")
    after: float = Field(-1.0, description="value of the characters from `at` to the end")


@function("split_at", args={"text": "text", "at": "number"}, returns="spans", params=SplitParams, spans_of="text",
          tags=("no_dedup",),
          doc="Two spans: `text` before character `at` (label before) and from it on (label after); all of it "
              "`before` when `at` is negative or past the end (what `tokens split` compiles to).")
def split_at(text: list[str], at: Sequence[float], *, params: SplitParams, ctx: Context) -> list[list[Span]]:
    out = []
    for t, a in zip(text, at):
        k = int(a)
        if k < 0 or k >= len(t):
            out.append([Span(0, len(t), params.before, "before")] if t else [])
        else:
            out.append(([Span(0, k, params.before, "before")] if k > 0 else [])
                       + [Span(k, len(t), params.after, "after")])
    return out
