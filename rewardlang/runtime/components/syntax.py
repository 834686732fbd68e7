"""Syntax validity: ``parses(code)`` and ``syntax_errors(code)`` (spans for token-level rewards).

Dense-reward PPO's ``syntax_t`` rewards the tokens before the first grammar violation and penalises the ones
from it on::

    let code = code_block(completion, "python") or ""
    component syntax in [0, 1] = 1 if parses(code) else 0   spans syntax_errors(code)

``method="cpython"`` (default) asks CPython's own compiler (AST only: nothing is executed) and finds the first
non-viable line with a prefix scan that tells *incomplete* from *invalid* (see
:mod:`rewardlang.runtime.code.validity`); the span runs from that point to the end of the code, value -1,
label CPython's message. It catches what tree-sitter accepts (e.g. a dedent to no enclosing level).
``method="tree_sitter"`` is cheaper: one span per outermost ERROR node and per MISSING node (zero-width).

Bad input: empty code and code that is only comments are valid; NUL bytes are a violation at the first NUL;
code nested too deeply for CPython's compiler is invalid from its start (label says so); so is code longer
than ``max_chars`` (cpython method; not compiled: CPython builds the AST at about 20 µs per line and the
prefix scan compiles up to ~log₂(lines) prefixes). Each is the completion's own outcome (``parses`` false,
one span over the whole code), never an error that masks it. ``ctx.timeout`` bounds the scan; running out of
it (only an overloaded machine can, within ``max_chars``) is an infrastructure failure: masked and counted.
See docs/components/syntax.md.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rewardlang.runtime.api import Context, Result, Span, function

__all__ = ["SyntaxParams"]

DEFAULT_TIMEOUT = 10.0


class SyntaxParams(BaseModel):
    """Options of ``parses`` and ``syntax_errors``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: "cpython": CPython's compiler (exact, catches indentation errors); "tree_sitter": ERROR/MISSING nodes
    method: Literal["cpython", "tree_sitter"] = "cpython"
    #: longer code fails the sample under method="cpython" (tree-sitter handles any size)
    max_chars: int = Field(200_000, ge=1)


def _check(name: str, code: list[str], params: SyntaxParams, ctx: Context, spans: bool) -> Result:
    from rewardlang.runtime.code import validity

    budget = float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT
    values: list[object] = [None] * len(code)
    errors: list[str | None] = [None] * len(code)
    infra: list[bool] = [False] * len(code)
    pkey = (name, params.model_dump_json())
    for i, c in enumerate(code):
        key = (pkey, c)
        if ctx.use_cache:
            hit = ctx.cache.get(key)
            if hit is not None:
                values[i] = hit
                continue
        try:
            if params.method == "tree_sitter":
                found = validity.tree_sitter_errors(c)
                v: object = [Span(s, e, -1.0, lab) for s, e, lab in found] if spans else not found
            else:
                if len(c) > params.max_chars:
                    # longer than the compiler is asked to check: the completion's own doing, so its outcome is
                    # the worst (invalid from its start), never an error that masks it
                    v = ([Span(0, len(c), -1.0, too_long(len(c), params.max_chars))] if spans else False)
                    values[i] = v
                    ctx.stats[f"{name}:too_long"] += 1
                    continue
                try:
                    if not spans:
                        v = validity.is_valid(c)
                    else:
                        bad = validity.first_violation(c, deadline=time.monotonic() + budget)
                        v = [] if bad is None else [Span(bad.start, len(c), -1.0, bad.message)]
                except validity.TooDeep as exc:
                    v = [Span(0, len(c), -1.0, str(exc))] if spans else False
        except TimeoutError as exc:
            # within max_chars the scan compiles at most ~log2(lines) prefixes, well inside the budget: running
            # out of time means the machine is overloaded, not that the code is bad -- an infrastructure
            # failure (masked and counted), never a score
            errors[i] = f"{name}: {exc} ({budget} s)"
            infra[i] = True
            ctx.stats[f"{name}:timeouts"] += 1
            continue
        values[i] = v
        if ctx.use_cache:
            ctx.cache.put(key, v)
    return Result(values, errors=errors, infra=infra)


def too_long(n: int, max_chars: int) -> str:
    """The label of code longer than ``max_chars``: not compiled, counted invalid from its start."""
    return (f"code has {n} characters, more than max_chars={max_chars} for method=\"cpython\": not checked, "
            "invalid from its start")


@function("parses", args={"code": "code"}, params=SyntaxParams, returns="bool",
          doc="True when the code is valid Python: CPython compiles it to an AST (method=\"cpython\", nothing "
              "is executed) or tree-sitter finds no ERROR/MISSING node (method=\"tree_sitter\").", tags=("heavy",))
def parses(code: list[str], *, params: SyntaxParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> parses.fn(["x = 1", "x = = 1", ""], params=None, ctx=Context()).values
    [True, False, True]
    """
    return _check("parses", code, params or SyntaxParams(), ctx, spans=False)


@function("syntax_errors", args={"code": "code"}, params=SyntaxParams, returns="spans", spans_of="code",
          doc="Where the code stops being valid Python. cpython: one span from the first non-viable point "
              "(prefix scan with CPython's compiler; for code that is merely unfinished, the start of the "
              "line where the unfinished construct begins) to the end, label CPython's message. tree_sitter: "
              "the ERROR and MISSING nodes. Values -1.", tags=("heavy",))
def syntax_errors(code: list[str], *, params: SyntaxParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> syntax_errors.fn(["x = 1\\ny = = 2\\n"], params=None, ctx=Context()).values
    [[Span(start=10, end=14, value=-1.0, label='invalid syntax')]]
    """
    return _check("syntax_errors", code, params or SyntaxParams(), ctx, spans=True)
