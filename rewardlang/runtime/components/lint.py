"""Lint findings as spans: ``ruff``, ``ruff_lines`` (line-level, for dense PPO) and ``pylint``.

Each function lints the whole batch with ONE tool run (pylint: one per core for large batches), with an
explicit rule selection and no configuration file consulted. Results are spans of the ``code`` argument,
value -1, label ``"<code>: <message>"``, so ``len(ruff(code))`` is the number of findings::

    component lint in [0, 1] = 1 - min(len(ruff(code, select=["E", "F"])), 10) / 10   spans ruff(code)

Suppression comments do not silence findings by default (``# noqa``: ``--ignore-noqa``; ``# pylint:``
pragmas are neutralised): a policy must not be able to hide its own lint. ``respect_noqa=true`` /
``respect_pragmas=true`` restore the tools' behaviour.

Bad input: empty code has no findings; code that is not Python gets syntax findings (ruff: code
``invalid-syntax``, pylint: ``E0001``), not an error; lone surrogates are linted as U+FFFD; a tool that
times out or crashes on one sample fails that sample (``on_error`` applies; the line-level ``ruff_lines`` and
``ruff_rows`` flag every line of it instead: :func:`crash_flags_every_line`), a missing or broken tool marks the
batch as an infrastructure failure. See ``docs/components/lint.md``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from rewardlang.runtime.api import Context, Result, Span, function
from rewardlang.runtime.tools.ruff import LintFinding
from rewardlang.runtime.tools.runner import FileResult
from rewardlang.runtime.tools.text import SourceText

__all__ = ["RuffParams", "PylintParams", "crash_flags_every_line", "findings_result", "line_spans", "pylint_spans", "ruff_line_spans",
           "ruff_spans", "run_ruff"]

_RUFF_SELECTOR = re.compile(r"^(ALL|[A-Z]{1,6}[0-9]{0,4})$")
_PYLINT_ID = re.compile(r"^(all|[CRWEFI]|[CRWEFI][0-9]{4}|[a-z][a-z0-9-]*)$")
DEFAULT_RUFF_TIMEOUT = 10.0
DEFAULT_PYLINT_TIMEOUT = 30.0
TargetVersion = Literal["py37", "py38", "py39", "py310", "py311", "py312", "py313", "py314"]


class RuffParams(BaseModel):
    """Options of ``ruff`` and ``ruff_lines``."""

    #: rule selectors (``--select``); default: ruff's own default set, written out so it cannot drift
    select: list[str] = Field(default_factory=lambda: ["E4", "E7", "E9", "F"], min_length=1)
    #: rule selectors to leave out (``--ignore``)
    ignore: list[str] = Field(default_factory=list)
    line_length: int = Field(88, ge=1, le=320)
    target_version: TargetVersion = "py311"
    #: honour noqa comments (off: a completion cannot silence its own findings)
    respect_noqa: bool = False

    @field_validator("select", "ignore")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        bad = [c for c in v if not _RUFF_SELECTOR.match(c)]
        if bad:
            raise ValueError(f"not ruff rule selectors: {bad} (e.g. 'E', 'F401', 'PLE', 'ALL')")
        return v


class PylintParams(BaseModel):
    """Options of ``pylint``."""

    #: message categories (``E``, ``W``, ...), ids (``W0611``) or symbols (``unused-import``) to enable
    enable: list[str] = Field(default_factory=lambda: ["E", "W"], min_length=1)
    disable: list[str] = Field(default_factory=list)
    #: honour ``# pylint: disable=...`` pragmas (off: a completion cannot silence its own findings)
    respect_pragmas: bool = False

    @field_validator("enable", "disable")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        bad = [c for c in v if not _PYLINT_ID.match(c)]
        if bad:
            raise ValueError(f"not pylint message ids, symbols or categories: {bad}")
        return v


def _timeout(ctx: Context, default: float) -> float:
    return float(ctx.timeout) if ctx.timeout else default


def _run_cached(kind: str, codes: list[str], params: BaseModel, ctx: Context, run: Any) -> list[Any]:
    """Results per code: from the cache, else from one batched run over the misses (then cached if ok)."""
    key_p = params.model_dump_json()
    out: list[Any] = [None] * len(codes)
    misses: dict[str, list[int]] = {}
    for i, c in enumerate(codes):
        hit = ctx.cache.get((kind, key_p, c)) if ctx.use_cache else None
        if hit is not None:
            out[i] = hit
        else:
            misses.setdefault(c, []).append(i)
    if misses:
        distinct = list(misses)
        for c, r in zip(distinct, run(distinct)):
            for i in misses[c]:
                out[i] = r
            if ctx.use_cache and r.ok:
                ctx.cache.put((kind, key_p, c), r)
    return out


def findings_result(codes: list[str], results: list[Any], make_spans: Any, ctx: Context, name: str) -> Result:
    """A linter's results (one per code, as :func:`run_ruff` returns them) as a span-valued :class:`Result`:
    ``make_spans(SourceText(code), findings)`` per code that was linted, the tool's error (``on_error``) or an
    infrastructure failure (masked) per code that was not; per-sample details count findings by rule and class.
    Shared by the lint functions here and the dense-reward ones (``ruff_rows``, ``without_ruff_lines``)."""

    values: list[list[Span]] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    details: list[dict[str, Any] | None] = []
    for code, r in zip(codes, results):
        if not r.ok:
            values.append([])
            errors.append(r.error)
            infra.append(bool(r.infra))
            details.append(None)
            ctx.stats[f"{name}.infra" if r.infra else f"{name}.errors"] += 1
            continue
        values.append(make_spans(SourceText(code), r.findings))
        errors.append(None)
        infra.append(False)
        rules: dict[str, int] = {}
        classes: dict[str, int] = {}
        for f in r.findings:
            rules[f.code] = rules.get(f.code, 0) + 1
            classes[f.severity] = classes.get(f.severity, 0) + 1
        details.append({"rules": rules, "classes": classes})
    return Result(values=values, errors=errors, infra=infra, details=details)


def _exact_span(src: Any, line: int, col: int, end_line: int, end_col: int | None) -> tuple[int, int]:
    start = src.offset(line, col)
    end = src.line_bounds(end_line)[1] if end_col is None or end_col < 0 else src.offset(end_line, end_col)
    if end <= start:  # a point diagnostic (e.g. "expected an indented block"): cover one character
        end = min(start + 1, len(src.original))
    return start, max(end, start)


def _finding_spans(src: Any, findings: list[Any]) -> list[Span]:
    spans = []
    for f in findings:
        s, e = _exact_span(src, f.line, f.col, f.end_line, f.end_col)
        spans.append(Span(s, e, -1.0, f"{f.code}: {f.message}"))
    return spans


def line_spans(src: Any, findings: list[Any]) -> list[Span]:
    """One span per line a finding covers (the whole line, its break included; value -1, label
    ``"line N: CODES"``), in line order; a range ending at column 0 of a line does not cover that line. ``src`` is
    the code's :class:`~rewardlang.runtime.tools.text.SourceText`. What ``ruff_lines`` returns, and the lines
    ``without_ruff_lines`` deletes.

    >>> from types import SimpleNamespace as F
    >>> from rewardlang.runtime.tools.text import SourceText
    >>> line_spans(SourceText("a\\r\\nb\\nc"), [F(line=2, end_line=3, end_col=0, code="E1")])
    [Span(start=3, end=5, value=-1.0, label='line 2: E1')]
    """
    lines: dict[int, list[str]] = {}
    for f in findings:
        last = f.end_line
        if last > f.line and f.end_col == 0:  # a range ending at the very start of a line does not cover it
            last -= 1
        for ln in range(f.line, max(last, f.line) + 1):
            codes = lines.setdefault(ln, [])
            if f.code not in codes:
                codes.append(f.code)
    spans = []
    for ln in sorted(lines):
        if ln > src.n_lines:
            continue
        s, e = src.line_bounds_with_break(ln)
        spans.append(Span(s, e, -1.0, f"line {ln}: {', '.join(lines[ln])}"))
    return spans


def crash_flags_every_line(codes: list[str], results: list[Any], ctx: Context, name: str) -> list[Any]:
    """For the line-level signals (``ruff_lines``, ``ruff_rows``): a sample ruff failed on alone (it crashed --
    ten thousand nested brackets overflow its stack -- or ran out of time on that code) has every line flagged,
    the worst lint outcome, instead of an error that a spec without ``on_error`` would turn into a mask: code the
    linter cannot lint is the completion's own doing. An infrastructure failure (a missing or broken ruff) stays
    one (masked)."""
    out = list(results)
    for k, (code, r) in enumerate(zip(codes, results)):
        if not r.ok and not r.infra:
            n = max(code.count("\n") + (0 if code.endswith("\n") else 1), 1)  # its lines (not the one after a last break)
            why = (r.error or "ruff failed on this code").splitlines()[0][:200]
            out[k] = FileResult([LintFinding("ruff-failed", "ruff-failed", why, 1, 0, n, -1)])
            ctx.stats[f"{name}.failed_all_lines_flagged"] += 1
    return out


def run_ruff(codes: list[str], params: RuffParams, ctx: Context) -> list[Any]:
    """ruff's result per code (``ok``, ``findings``, ``error``, ``infra``): the cached ones from ``ctx.cache``, the
    others from ONE batched ruff run over the distinct misses. Shared by every ruff-based function."""
    from rewardlang.runtime.tools import ruff

    def run(distinct: list[str]) -> list[Any]:
        return ruff.lint(distinct, select=params.select, ignore=params.ignore, line_length=params.line_length,
                         target_version=params.target_version, respect_noqa=params.respect_noqa,
                         timeout=_timeout(ctx, DEFAULT_RUFF_TIMEOUT), workers=ctx.workers, stats=ctx.stats)

    return _run_cached("rewardlang.lint.ruff", codes, params, ctx, run)


@function(
    "ruff", args={"code": "code"}, returns="spans", params=RuffParams, spans_of="code", in_workers=False,
    tags=("lint", "tool"),
    doc="ruff findings as spans (value -1, label 'CODE: message'); one ruff process per batch. "
        "len(ruff(code)) counts them. Syntax errors are findings with code 'invalid-syntax'.",
)
def ruff_spans(code: list[str], *, params: RuffParams | None = None, ctx: Context) -> Result:
    """Lint ``code`` with ruff; every diagnostic becomes a span over its exact character range.

        >>> from rewardlang.runtime.api import Context
        >>> r = ruff_spans.fn(["import os\\n"], params=RuffParams(), ctx=Context())
        >>> r.values[0]
        [Span(start=7, end=9, value=-1.0, label='F401: `os` imported but unused')]
    """
    params = params or RuffParams()
    return findings_result(code, run_ruff(code, params, ctx), _finding_spans, ctx, "ruff")


@function(
    "ruff_lines", args={"code": "code"}, returns="spans", params=RuffParams, spans_of="code", in_workers=False,
    tags=("lint", "tool", "dense"),
    doc="Lines flagged by ruff as spans (one per line, value -1, line break included, columns ignored): "
        "the lint_t signal of dense-reward PPO. A multi-line finding flags all its lines.",
)
def ruff_line_spans(code: list[str], *, params: RuffParams | None = None, ctx: Context) -> Result:
    """Lint ``code`` with ruff and return one span per flagged line.

        >>> from rewardlang.runtime.api import Context
        >>> r = ruff_line_spans.fn(["x = 1\\nimport os\\n"], params=RuffParams(), ctx=Context())
        >>> r.values[0]
        [Span(start=6, end=16, value=-1.0, label='line 2: E402, F401')]
    """
    params = params or RuffParams()
    results = crash_flags_every_line(code, run_ruff(code, params, ctx), ctx, "ruff_lines")
    return findings_result(code, results, line_spans, ctx, "ruff")


@function(
    "pylint", args={"code": "code"}, returns="spans", params=PylintParams, spans_of="code", in_workers=False,
    tags=("lint", "tool"),
    doc="pylint messages as spans (value -1, label 'W0611: Unused import os'); one pylint run per batch "
        "(one per core for large ones). Default enable: E and W. Syntax errors are E0001 findings.",
)
def pylint_spans(code: list[str], *, params: PylintParams | None = None, ctx: Context) -> Result:
    """Lint ``code`` with pylint (``--disable=all --enable=<enable>``).

        >>> from rewardlang.runtime.api import Context
        >>> r = pylint_spans.fn(["import os\\n"], params=PylintParams(), ctx=Context())
        >>> r.values[0]
        [Span(start=0, end=9, value=-1.0, label='W0611: Unused import os')]
    """
    from rewardlang.runtime.tools import pylint

    params = params or PylintParams()

    def run(distinct: list[str]) -> list[Any]:
        return pylint.lint(distinct, enable=params.enable, disable=params.disable,
                           respect_pragmas=params.respect_pragmas, timeout=_timeout(ctx, DEFAULT_PYLINT_TIMEOUT),
                           workers=ctx.workers, stats=ctx.stats)

    results = _run_cached("rewardlang.lint.pylint", code, params, ctx, run)
    return findings_result(code, results, _finding_spans, ctx, "pylint")


__test__ = {"ruff": ruff_spans.fn, "ruff_lines": ruff_line_spans.fn, "pylint": pylint_spans.fn}
