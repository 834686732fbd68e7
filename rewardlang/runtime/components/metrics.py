"""Code metrics with radon (in-process): cyclomatic complexity, maintainability index, raw line counts.

- ``cyclomatic(code, stat="max"|"mean"|"sum")``: McCabe complexity of the functions and methods (nested
  functions included, classes not: a class's complexity is made of its methods'); 0 when there is none.
- ``maintainability_index(code, multi=true)``: radon's MI in [0, 100] (``multi``: multi-line strings count
  as comments, radon's default).
- ``loc``, ``lloc``, ``sloc``, ``comment_lines``, ``blank_lines``: radon's raw counts (lines, logical lines,
  source lines, comment lines, blank lines).

::

    component simple in [0, 1] = step(cyclomatic(code), <= 10: 1, <= 20: 0.5, else: 0)
    component short in [0, 1]  = 1 - min(sloc(code), 200) / 200

Bad input: complexity and MI need parseable Python, raw counts need tokenizable text. The maintainability
index of code radon cannot analyse is 0, the worst of its range (the completion's own outcome, never a mask);
a count has no worst value, so for such code the counts are a per-sample error and the spec's ``on_error``
says what it scores (write one: without it the sample is masked). Empty code: 0 everywhere, MI 100. Lone
surrogates count as U+FFFD, a leading BOM is ignored. Nesting deeper than the interpreter's recursion limit
cannot be analysed.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from pydantic import BaseModel

from rewardlang.runtime.api import Context, Result, function

__all__ = ["CyclomaticParams", "MIParams", "cyclomatic", "maintainability_index", "loc", "lloc", "sloc",
           "comment_lines", "blank_lines"]


class CyclomaticParams(BaseModel):
    """Options of ``cyclomatic``."""

    #: statistic over the functions and methods
    stat: Literal["max", "mean", "sum"] = "max"


class MIParams(BaseModel):
    """Options of ``maintainability_index``."""

    #: count multi-line strings as comments (radon's default)
    multi: bool = True


#: the maintainability index of code radon cannot analyse: the bottom of the range [0, 100]
WORST_MI = 0.0


def _text(code: str) -> str:
    from rewardlang.runtime.tools.text import SourceText

    return SourceText(code).text


def _each(codes: list[str], key: tuple[Any, ...], ctx: Context,
          compute: Callable[[str], Any]) -> tuple[list[Any], list[str | None]]:
    """Apply ``compute`` to each distinct code (cached); failures become per-sample errors."""
    values: list[Any] = []
    errors: list[str | None] = []
    for c in codes:
        k = (*key, c)
        hit = ctx.cache.get(k) if ctx.use_cache else None
        if hit is None:
            try:
                hit = ("ok", compute(_text(c)))
            except SyntaxError as exc:
                where = f" (line {exc.lineno})" if exc.lineno else ""
                hit = ("err", f"not parseable Python: {exc.msg}{where}")
            except RecursionError:
                hit = ("err", "nesting too deep to analyse (RecursionError)")
            except (ValueError, MemoryError, UnicodeError) as exc:
                hit = ("err", f"cannot analyse this code: {type(exc).__name__}: {exc}")
            except Exception as exc:  # radon's tokenizer raises its own errors on untokenizable text
                hit = ("err", f"cannot analyse this code: {type(exc).__name__}: {exc}")
            if ctx.use_cache:
                ctx.cache.put(k, hit)
        if hit[0] == "ok":
            values.append(hit[1])
            errors.append(None)
        else:
            values.append(None)
            errors.append(hit[1])
            ctx.stats["metrics.errors"] += 1
    return values, errors


def _numbers(values: list[Any], errors: list[str | None]) -> Result:
    import numpy as np

    arr = np.array([float("nan") if v is None else float(v) for v in values], dtype=np.float64)
    return Result(values=arr, errors=errors)


def _complexities(text: str) -> list[int]:
    from radon.complexity import cc_visit
    from radon.visitors import Class

    out: list[int] = []

    def walk(block: Any) -> None:
        out.append(int(block.complexity))
        for c in getattr(block, "closures", ()):
            walk(c)

    for b in cc_visit(text):
        if not isinstance(b, Class):
            walk(b)
    return out


@function(
    "cyclomatic", args={"code": "code"}, returns="number", params=CyclomaticParams,
    doc="radon cyclomatic complexity of the functions and methods: stat='max' (default), 'mean' or 'sum'; "
        "0 without functions.",
    tags=("metrics", "heavy"),
)
def cyclomatic(code: list[str], *, params: CyclomaticParams | None = None, ctx: Context) -> Result:
    """Cyclomatic complexity per code string.

        >>> from rewardlang.runtime.api import Context
        >>> src = "def f(x):\\n    if x:\\n        return 1\\n    return 2\\ndef g():\\n    pass\\n"
        >>> cyclomatic.fn([src], params=CyclomaticParams(stat="mean"), ctx=Context()).values.tolist()
        [1.5]
    """
    params = params or CyclomaticParams()
    values, errors = _each(code, ("rewardlang.metrics.cc",), ctx, _complexities)
    stat = {"max": max, "sum": sum, "mean": lambda xs: sum(xs) / len(xs)}[params.stat]
    return _numbers([None if v is None else (stat(v) if v else 0) for v in values], errors)


@function(
    "maintainability_index", args={"code": "code"}, returns="number", params=MIParams, range=(0.0, 100.0),
    doc="radon maintainability index in [0, 100] (100 for empty code; 0, the worst, for code radon cannot "
        "analyse: not Python, nested too deeply).", tags=("metrics", "heavy"),
)
def maintainability_index(code: list[str], *, params: MIParams | None = None, ctx: Context) -> Result:
    """Maintainability index per code string.

        >>> from rewardlang.runtime.api import Context
        >>> maintainability_index.fn(["", "x = 1\\n"], params=MIParams(), ctx=Context()).values.tolist()
        [100.0, 100.0]
    """
    from radon.metrics import mi_visit

    params = params or MIParams()
    values, errors = _each(code, ("rewardlang.metrics.mi", params.multi), ctx,
                           lambda t: float(mi_visit(t, params.multi)))
    # code radon cannot analyse (not Python, nested too deeply) is the completion's own failure: the worst index,
    # 0, never an error that would mask the sample (docs/components/quality.md, "Bad input")
    values = [WORST_MI if e is not None else v for v, e in zip(values, errors)]
    return _numbers(values, [None] * len(values))


def _raw(text: str) -> tuple[int, ...]:
    from radon.raw import analyze

    return tuple(int(x) for x in analyze(text))


_RAW_FIELDS = ("loc", "lloc", "sloc", "comments", "multi", "blank", "single_comments")


def _raw_metric(field: str) -> Callable[..., Result]:
    idx = _RAW_FIELDS.index(field)

    def fn(code: list[str], *, params: Any = None, ctx: Context) -> Result:
        values, errors = _each(code, ("rewardlang.metrics.raw",), ctx, _raw)
        return _numbers([None if v is None else v[idx] for v in values], errors)

    return fn


loc = function("loc", args={"code": "code"}, returns="number", tags=("metrics", "heavy"),
               doc="Number of lines (radon raw 'loc').")(_raw_metric("loc"))
lloc = function("lloc", args={"code": "code"}, returns="number", tags=("metrics", "heavy"),
                doc="Number of logical lines (radon raw 'lloc').")(_raw_metric("lloc"))
sloc = function("sloc", args={"code": "code"}, returns="number", tags=("metrics", "heavy"),
                doc="Number of source lines: not blank, not only a comment or docstring (radon raw 'sloc').")(
    _raw_metric("sloc"))
comment_lines = function("comment_lines", args={"code": "code"}, returns="number",
                         tags=("metrics", "heavy"), doc="Number of comment lines (radon raw 'comments').")(
    _raw_metric("comments"))
blank_lines = function("blank_lines", args={"code": "code"}, returns="number",
                       tags=("metrics", "heavy"), doc="Number of blank lines (radon raw 'blank').")(
    _raw_metric("blank"))


__test__ = {"cyclomatic": cyclomatic.fn, "maintainability_index": maintainability_index.fn}
