"""Vectorized kernels: the operations generated reward programs are made of.

Each kernel takes columns (:class:`~rewardlang.runtime.columns.Col`) or plain constants and returns a column
(or a constant when every operand is one). none propagates through arithmetic and function calls; errors
propagate too, except where a conditional or ``and``/``or`` never looks at the failing operand (as in
Python). Division by zero, the log of a non-positive number and non-finite results are per-sample errors.

    >>> import numpy as np
    >>> from rewardlang.runtime.columns import Col
    >>> x = arith("/", Col(np.array([1.0, 2.0])), Col(np.array([2.0, 0.0])))
    >>> x.v[0], str(x.err[1])
    (0.5, 'division by zero')
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Callable, Sequence

import numpy as np

from rewardlang.runtime.api import ComponentError, Context, Implementation, Result, Span
from rewardlang.runtime.columns import CellError, Col, merge_err, merge_none

__all__ = ["arith", "neg", "num", "cmp", "and_", "or_", "not_", "if_", "coalesce", "is_none", "length", "math_",
           "minmax", "step_fn", "piecewise", "schedule", "index", "concat", "to_text", "call", "pattern"]

_ERR_DIV0 = CellError("division by zero")
_ERR_NONFINITE = CellError("the result is not a finite number")


def _n(*xs: Any) -> int | None:
    for x in xs:
        if isinstance(x, Col):
            return x.n
    return None


def _arr(x: Any, n: int, dtype: Any = np.float64) -> np.ndarray:
    if isinstance(x, Col):
        return x.v
    return np.full(n, 0.0 if x is None else x, dtype=dtype)


def _none_of(x: Any, n: int) -> np.ndarray | None:
    if isinstance(x, Col):
        return x.none
    if x is None:
        return np.ones(n, dtype=bool)
    return None


def _with_errors(v: np.ndarray, none: np.ndarray | None, err: list | None, bad: np.ndarray, e: CellError) -> list | None:
    """Add error ``e`` where ``bad`` (and the sample is not already none/failed)."""
    if not bad.any():
        return err
    if none is not None:
        bad = bad & ~none
    if not bad.any():
        return err
    out = list(err) if err is not None else [None] * len(v)
    for i in np.flatnonzero(bad):
        if out[i] is None:
            out[i] = e
    return out


def _none2(a: Any, b: Any, n: int) -> np.ndarray | None:
    """The none mask of a binary operation (a constant `none` operand makes every sample none)."""
    none = merge_none(a, b)
    if none is None and (a is None or b is None):
        none = np.ones(n, dtype=bool)
    return none


def _scalar_arith(op: str, a: Any, b: Any) -> Any:
    """Arithmetic on two row-independent values. A result that is no number (x / 0, 0 ** -1, an overflow) is nan,
    which the runtime reports as an error of the component on every sample ("not a finite number"), as it does
    for the same result on per-sample values; raising here would abort the whole batch."""
    if a is None or b is None:
        return None
    a, b = float(a), float(b)
    if op in ("/", "%") and b == 0:
        return math.nan
    try:
        out = {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "%": a % b, "**": a ** b}[op]
    except ArithmeticError:  # 0 ** -1 (ZeroDivisionError), an overflowing power
        return math.nan
    return math.nan if isinstance(out, complex) else out  # (-8) ** (1 / 3) is complex in Python


def arith(op: str, a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        return _scalar_arith(op, a, b)
    av, bv = _arr(a, n), _arr(b, n)
    none = _none2(a, b, n)
    err = merge_err(n, a, b)
    with np.errstate(all="ignore"):
        if op == "+":
            v = av + bv
        elif op == "-":
            v = av - bv
        elif op == "*":
            v = av * bv
        elif op == "/":
            v = av / bv
        elif op == "%":
            v = np.mod(av, bv)
        elif op == "**":
            v = np.power(av, bv)
        else:  # pragma: no cover - the checker only emits the operators above
            raise ValueError(op)
    if op in ("/", "%"):
        err = _with_errors(v, none, err, bv == 0, _ERR_DIV0)
    finite = np.isfinite(v)
    if not finite.all():
        err = _with_errors(v, none, err, ~finite & ~(bv == 0 if op in ("/", "%") else False), _ERR_NONFINITE)
    return Col(v, none, err)


def neg(a: Any) -> Any:
    if not isinstance(a, Col):
        return None if a is None else -float(a)
    return Col(-a.v, a.none, a.err)


def num(a: Any) -> Any:
    if not isinstance(a, Col):
        return None if a is None else float(a)
    return Col(a.v.astype(np.float64), a.none, a.err)


def _obj_values(x: Any, n: int) -> Sequence[Any]:
    return x.v if isinstance(x, Col) else [x] * n


def cmp(op: str, a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        if a is None or b is None:
            return None
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
    none = _none2(a, b, n)
    numeric = all(not isinstance(x, Col) and not isinstance(x, str) or isinstance(x, Col) and x.kind != "obj"
                  for x in (a, b))
    if numeric:
        av, bv = _arr(a, n), _arr(b, n)
        with np.errstate(all="ignore"):
            v = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                 "==": np.equal, "!=": np.not_equal}[op](av, bv)
    else:
        av, bv = _obj_values(a, n), _obj_values(b, n)
        eq = np.fromiter((x == y for x, y in zip(av, bv)), dtype=bool, count=n)
        v = eq if op == "==" else ~eq
    return Col(np.asarray(v, dtype=bool), none, merge_err(n, a, b))


def _truth(x: Any, n: int) -> np.ndarray:
    """Truth values; none counts as false."""
    if isinstance(x, Col):
        return x.v & ~x.none if x.none is not None else x.v
    return np.full(n, bool(x))


def _select_err(n: int, parts: list[tuple[np.ndarray | None, Any]]) -> list | None:
    """Errors of each operand, only where ``mask`` says the operand matters (None: everywhere)."""
    out: list | None = None
    for mask, x in parts:
        if not isinstance(x, Col) or x.err is None:
            continue
        if out is None:
            out = [None] * n
        for i, e in enumerate(x.err):
            if e is not None and out[i] is None and (mask is None or mask[i]):
                out[i] = e
    return out


def and_(a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        return bool(a) and bool(b)
    ta, tb = _truth(a, n), _truth(b, n)
    return Col(ta & tb, None, _select_err(n, [(None, a), (ta, b)]))


def or_(a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        return bool(a) or bool(b)
    ta, tb = _truth(a, n), _truth(b, n)
    return Col(ta | tb, None, _select_err(n, [(None, a), (~ta, b)]))


def not_(a: Any) -> Any:
    if not isinstance(a, Col):
        return not a
    return Col(~_truth(a, a.n), None, a.err)


def is_none(a: Any) -> Any:
    if not isinstance(a, Col):
        return a is None
    return Col(a.none.copy() if a.none is not None else np.zeros(a.n, dtype=bool), None, a.err)


def if_(c: Any, a: Any, b: Any) -> Any:
    n = _n(c, a, b)
    if n is None:
        return a if c else b
    tc = _truth(c, n)
    err = _select_err(n, [(None, c), (tc, a), (~tc, b)])
    na, nb = _none_of(a, n), _none_of(b, n)
    none = None
    if na is not None or nb is not None:
        none = np.where(tc, na if na is not None else False, nb if nb is not None else False)
    v, off = _choose(tc, a, b, n)
    return Col(v, none, err, off)


def _choose(sel: np.ndarray, a: Any, b: Any, n: int) -> tuple[Any, np.ndarray | None]:
    """(values, offsets) taking ``a`` where ``sel`` and ``b`` elsewhere: one NumPy select for numbers and bools,
    a list (with the chosen texts' completion offsets) for anything else."""
    if _is_vector(a, b):
        dt = _dtype(a, b)
        return np.where(sel, _arr(a, n, dt), _arr(b, n, dt)), None
    av, bv = _obj_values(a, n), _obj_values(b, n)
    return [x if t else y for t, x, y in zip(sel, av, bv)], _pick_off(sel, a, b, n)


def _is_vector(*xs: Any) -> bool:
    return all((isinstance(x, Col) and x.kind != "obj") or (not isinstance(x, Col) and (
        x is None or isinstance(x, (int, float, bool)))) for x in xs) and any(
        isinstance(x, Col) or isinstance(x, (int, float)) for x in xs)


def _dtype(*xs: Any) -> Any:
    for x in xs:
        if isinstance(x, Col) and x.kind == "num" or isinstance(x, float) or (
                isinstance(x, int) and not isinstance(x, bool)):
            return np.float64
    return np.bool_


def _pick_off(sel: np.ndarray, a: Any, b: Any, n: int) -> np.ndarray | None:
    oa = a.off if isinstance(a, Col) else None
    ob = b.off if isinstance(b, Col) else None
    if oa is None and ob is None:
        return None
    oa = oa if oa is not None else np.full(n, -1, dtype=np.int64)
    ob = ob if ob is not None else np.full(n, -1, dtype=np.int64)
    return np.where(sel, oa, ob)


def coalesce(a: Any, b: Any) -> Any:
    """``a or b`` for none-able values: ``b`` where ``a`` is none (an error in ``a`` stays an error)."""
    n = _n(a, b)
    if n is None:
        return b if a is None else a
    na = _none_of(a, n)
    if na is None:
        return a
    err = _select_err(n, [(None, a), (na, b)])
    nb = _none_of(b, n)
    none = (na & nb) if nb is not None else None
    v, off = _choose(~na, a, b, n)
    return Col(v, none, err, off)


def length(a: Any) -> Any:
    if not isinstance(a, Col):
        return None if a is None else float(len(a))
    none = a.none
    v = np.fromiter((0 if x is None else len(x) for x in a.v), dtype=np.float64, count=a.n)
    return Col(v, none, a.err)


_MATH: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs, "exp": np.exp, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def math_(fn: str, a: Any, digits: int = 0) -> Any:
    if not isinstance(a, Col):
        if a is None:
            return None
        if fn == "round":
            return float(round(a, digits))
        try:  # log(0), sqrt(-1), exp(1000) on a row-independent value: nan, as for arithmetic (_scalar_arith)
            if fn == "sigmoid":
                return 1.0 / (1.0 + math.exp(-a))
            return float(getattr(math, fn)(a)) if fn != "abs" else abs(a)
        except (ArithmeticError, ValueError):
            return math.nan
    x = a.v
    err = a.err
    with np.errstate(all="ignore"):
        if fn == "log":
            v = np.log(x)
            err = _with_errors(v, a.none, err, x <= 0, CellError("log of a number that is not positive"))
        elif fn == "sqrt":
            v = np.sqrt(x)
            err = _with_errors(v, a.none, err, x < 0, CellError("square root of a negative number"))
        elif fn == "round":
            v = np.round(x, digits)
        else:
            v = _MATH[fn](x)
    bad = ~np.isfinite(v)
    if bad.any():
        err = _with_errors(v, a.none, err, bad & (x > 0 if fn == "log" else True) & (x >= 0 if fn == "sqrt"
                                                                                        else True), _ERR_NONFINITE)
    return Col(v, a.none, err)


def minmax(kind: str, a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        if a is None or b is None:
            return None
        return min(a, b) if kind == "min" else max(a, b)
    v = (np.minimum if kind == "min" else np.maximum)(_arr(a, n), _arr(b, n))
    none = _none2(a, b, n)
    return Col(v, none, merge_err(n, a, b))


_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def step_fn(arms: Sequence[tuple[str, float]], x: Any, *values: Any) -> Any:
    """Thresholds: the value of the first arm whose ``x <op> bound`` holds, else the last value."""
    n = _n(x, *values)
    if n is None:
        if x is None:
            return None
        for (op, bound), v in zip(arms, values):
            if {"<": x < bound, "<=": x <= bound, ">": x > bound, ">=": x >= bound, "==": x == bound,
                    "!=": x != bound}[op]:
                return v
        return values[-1]
    xv = _arr(x, n)
    conds = [_OPS[op](xv, bound) for op, bound in arms]
    choices = [_arr(v, n) for v in values[:-1]]
    out = np.select(conds, choices, default=_arr(values[-1], n))
    # which branch each sample took decides whose none/errors count
    taken = np.select(conds, list(range(len(arms))), default=len(arms))
    none = _none_of(x, n)
    none = none.copy() if none is not None else None
    parts: list[tuple[np.ndarray | None, Any]] = [(None, x)]
    for k, v in enumerate(values):
        sel = taken == k
        parts.append((sel, v))
        nv = _none_of(v, n)
        if nv is not None:
            none = (none if none is not None else np.zeros(n, dtype=bool)) | (sel & nv)
    return Col(out, none, _select_err(n, parts))


def piecewise(xs: Sequence[float], ys: Sequence[float], x: Any) -> Any:
    if not isinstance(x, Col):
        return None if x is None else float(np.interp(x, xs, ys))
    return Col(np.interp(x.v, xs, ys), x.none, x.err)


def schedule(kind: str, a: float, b: float, steps: float, start: float, step: Any) -> float:
    """A weight schedule over the training step: ``linear`` or ``cosine`` from ``a`` to ``b`` over ``steps``."""
    t = min(max((float(step) - start) / steps, 0.0), 1.0)
    if kind == "linear":
        return a + (b - a) * t
    if kind == "cosine":
        return a + (b - a) * (1.0 - math.cos(math.pi * t)) / 2.0
    raise ValueError(kind)  # pragma: no cover


def index(a: Any, i: Any) -> Any:
    n = _n(a, i)
    if n is None:
        try:
            return a[int(i)]
        except (IndexError, TypeError):
            return None
    av = _obj_values(a, n)
    iv = _arr(i, n) if isinstance(i, Col) else np.full(n, i if i is not None else 0, dtype=np.float64)
    out, none = [], np.zeros(n, dtype=bool)
    base_none = merge_none(a, i)
    for k in range(n):
        x = av[k]
        if x is None or (base_none is not None and base_none[k]):
            out.append(None)
            none[k] = True
            continue
        j = int(iv[k])
        if -len(x) <= j < len(x) and float(iv[k]).is_integer():
            out.append(x[j])
        else:
            out.append(None)
            none[k] = True
    return Col(out, none, merge_err(n, a, i))


def concat(a: Any, b: Any) -> Any:
    n = _n(a, b)
    if n is None:
        return None if a is None or b is None else a + b
    av, bv = _obj_values(a, n), _obj_values(b, n)
    none = merge_none(a, b)
    out = [None if (x is None or y is None) else x + y for x, y in zip(av, bv)]
    off = a.off if isinstance(a, Col) else None
    return Col(out, none, merge_err(n, a, b), off)


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else repr(float(x))


def to_text(a: Any) -> Any:
    if not isinstance(a, Col):
        return None if a is None else (str(a).lower() if isinstance(a, bool) else _fmt_num(a))
    if a.kind == "bool":
        out = ["true" if x else "false" for x in a.v]
    else:
        out = [_fmt_num(x) for x in a.v]
    return Col(out, a.none, a.err)


# ---------------------------------------------------------------------- regex constants

from rewardlang.regexrisk import catastrophic  # noqa: E402 - the language's analysis of patterns

#: the per-call deadline (seconds) of a pattern that can backtrack catastrophically, when the component
#: gives no `timeout`
REGEX_TIMEOUT = 1.0

class Pattern:
    """A compiled pattern constant: a /regex/ or a literal text (matched literally, counted with str.count)."""

    __slots__ = ("kind", "source", "flags", "regex", "_counter", "risky", "_bounded")

    def __init__(self, kind: str, source: str, flags: str) -> None:
        self.kind = kind
        self.source = source
        self.flags = flags
        bits = 0
        for f in flags:
            bits |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}[f]
        self.regex = re.compile(re.escape(source) if kind == "literal" else source, bits)
        self._counter: Any = None
        #: why the pattern can backtrack catastrophically (W006 at check time), or None; such a pattern is
        #: run by :meth:`bounded` with a deadline, since `re` cannot be interrupted
        self.risky = catastrophic(source, flags) if kind == "regex" else None
        self._bounded: Any = None

    def bounded(self) -> Any:
        """The pattern compiled by the `regex` package, whose match functions take ``timeout=`` (seconds) and
        raise TimeoutError when it runs out. Same syntax and flags as `re` for the patterns the checker admits."""
        if self._bounded is None:
            import regex

            self._bounded = regex.compile(self.source, self.regex.flags & ~re.UNICODE)
        return self._bounded

    @property
    def is_literal(self) -> bool:
        return self.kind == "literal"

    def __repr__(self) -> str:
        return f"/{self.source}/{self.flags}" if self.kind == "regex" else repr(self.source)

    def counter(self) -> Callable[[str], int]:
        """A function counting non-overlapping matches, as ``len(regex.findall(text))`` does."""
        if self._counter is None:
            self._counter = _line_start_counter(self) or (lambda t, fa=self.regex.findall: len(fa(t)))
        return self._counter

    @property
    def counter_is_findall(self) -> bool:
        """No faster exact counter exists than len(findall(...))."""
        return _line_start_counter(self) is None if self._counter is None else self._counter.__name__ == "<lambda>"


def _line_start_counter(p: "Pattern") -> Callable[[str], int] | None:
    """An exact fast count for `(?m)^rest` patterns.

    `re` tries such a pattern at every position; matches can only start at line starts, so searching for
    `\n(?:rest)` (which `re` scans for with a fast literal search) finds the same matches in the same order.
    Only for patterns that cannot match the empty string (findall's empty-match rules differ) and whose top
    level is not an alternation.
    """
    if p.kind != "regex" or "m" not in p.flags or not p.source.startswith("^") or "x" in p.flags:
        return None
    try:
        import re._parser as sre_parse  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - Python < 3.11
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(p.source, p.regex.flags)
        if any(op == sre_parse.BRANCH for op, _ in parsed.data) or parsed.getwidth()[0] == 0:
            return None
        rest = p.source[1:]
        head = re.compile(rest, p.regex.flags)
        tail = re.compile("\n(?:" + rest + ")", p.regex.flags)
    except (re.error, TypeError, ValueError, OverflowError):
        return None
    if re.compile(rest, p.regex.flags).groups != p.regex.groups:  # pragma: no cover - defensive
        return None

    def count(text: str) -> int:
        n = 0
        m = head.match(text)
        pos = 0
        if m is not None:
            n = 1
            pos = m.end()
        search = tail.search
        while True:
            # the next match starts at a line start >= pos: a newline at pos - 1 or later
            m = search(text, pos - 1 if pos > 0 else 0)
            if m is None:
                return n
            if m.start() + 1 < pos:  # pragma: no cover - a newline before pos cannot start a later match
                pos = m.start() + 2
                continue
            n += 1
            pos = m.end()

    return count


def pattern(kind: str, source: str, flags: str) -> Pattern:
    return Pattern(kind, source, flags)


# ---------------------------------------------------------------------- calls of registered functions

def _static(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 3 and value[0] in ("regex", "literal"):
        return Pattern(*value)
    if isinstance(value, (list, tuple)):
        return type(value)(_static(v) for v in value)
    return value


def _layout_args(layout: Sequence[tuple], columns: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for tag, val in layout:
        if tag == "d":
            out.append(columns[val])
        elif tag == "s":
            out.append(_static(val))
        elif tag == "vd":
            out.append([columns[k] for k in val])
        elif tag == "vs":
            out.append([_static(v) for v in val])
    return out


def _key(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_key(i) for i in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _key(v)) for k, v in x.items()))
    return x


def call(ctx: Context, impl: Implementation, layout: Sequence[tuple], args: Sequence[Any], params: Any,
         spans_index: int | None, timeout: float | None = None, component: str | None = None) -> Any:
    """Call a registered function over the samples that need it and scatter its results back.

    ``layout`` says, for each declared argument, where its value comes from: ``("d", k)`` the k-th dynamic
    operand, ``("s", value)`` a static constant, ``("vd", (k, ...))`` / ``("vs", (v, ...))`` variadic ones.
    """
    sig = impl.signature
    n = _n(*args)
    if impl.columnar and n is not None:
        sub = Context(timeout=timeout if timeout is not None else ctx.timeout, step=ctx.step, workers=ctx.workers,
                      component=component, cache=ctx.cache, stats=ctx.stats, use_cache=ctx.use_cache, extra=ctx.extra)
        t_start = time.perf_counter()
        out = _columnar_isolated(impl, layout, list(args), n, params, sub, ctx)
        ctx.stats[f"time:{component or sig.name}"] += time.perf_counter() - t_start
        return out
    if n is None:  # every operand is a constant: one call, one constant result
        cols = [Col([a] if not isinstance(a, (int, float)) or isinstance(a, bool) else np.array([float(a)]),
                    np.array([a is None])) for a in args]
        out = call(ctx, impl, layout, cols, params, spans_index, timeout, component)
        if out.err is not None and out.err[0] is not None:
            raise ComponentError(str(out.err[0]))
        return out.to_python()[0]
    bad = np.zeros(n, dtype=bool)
    for a in args:
        if isinstance(a, Col):
            if a.none is not None and not sig.accepts_none:
                bad |= a.none
            if a.err is not None:
                bad |= a.err_mask()
        elif a is None and not sig.accepts_none:
            bad[:] = True
    err = merge_err(n, *args)
    rows = np.flatnonzero(~bad)
    kind = _kind_of(sig.returns)
    out_vals: Any = np.zeros(n, dtype=np.float64 if kind == "num" else np.bool_) if kind in ("num", "bool") \
        else [None] * n
    none = np.ones(n, dtype=bool)  # cleared where a value arrives
    out_off = None
    if len(rows):
        dyn = list(args)
        if "no_dedup" in sig.tags and len(rows) == n:
            # cheap functions over rows that are all present: hand over the columns as they are
            inverse = np.arange(n)
            columns = [a.v if isinstance(a, Col) else [a] * n for a in dyn]
            m = n
        else:
            # identical argument tuples are computed once
            per_row = [[(a.v[i] if isinstance(a, Col) else a) for a in dyn] for i in rows] if dyn \
                else [[] for _ in rows]
            if "no_dedup" in sig.tags:
                inverse = np.arange(len(rows))
                uniq_vals = per_row
            else:
                seen: dict[Any, int] = {}
                inverse = np.empty(len(rows), dtype=np.int64)
                uniq_idx: list[int] = []
                for j, vals in enumerate(per_row):
                    key = _key(vals) if any(isinstance(v, (list, dict)) for v in vals) else tuple(vals)
                    u = seen.get(key)
                    if u is None:
                        u = seen[key] = len(uniq_idx)
                        uniq_idx.append(j)
                    inverse[j] = u
                uniq_vals = [per_row[j] for j in uniq_idx]
            columns = []
            for d in range(len(dyn)):
                col: Any = [v[d] for v in uniq_vals]
                if isinstance(dyn[d], Col) and dyn[d].kind == "num":
                    col = np.asarray(col, dtype=np.float64)
                columns.append(col)
            m = len(uniq_vals)
        sub = Context(timeout=timeout if timeout is not None else ctx.timeout, step=ctx.step, workers=ctx.workers,
                      component=component, cache=ctx.cache, stats=ctx.stats, use_cache=ctx.use_cache,
                      extra=ctx.extra)
        t_start = time.perf_counter()
        if ctx.extra.get("plan_only") and not impl.in_workers and "plans" not in sig.tags:
            # `rewardlang check --data`: nothing runs a program, a tool or a model; the functions that run tests
            # (tagged "plans") only read the tests; every other value is computed as when scoring
            res = Result([None] * m)
        else:
            res = _call_isolated(impl, layout, columns, m, params, sub, ctx)
        ctx.stats[f"time:{component or sig.name}"] += time.perf_counter() - t_start
        values = list(res.values) if not isinstance(res.values, np.ndarray) else res.values
        if len(values) != m:
            raise RuntimeError(f"{sig.name} returned {len(values)} values for {m} inputs")
        rel_off = getattr(res, "offsets", None)
        errs = res.errors
        infra = res.infra
        lo_hi = sig.range
        if err is None:
            err = [None] * n
        src_off = None
        if spans_index is not None and isinstance(args[spans_index], Col):
            src_off = args[spans_index].off
        if kind == "obj" and rel_off is not None:
            out_off = np.full(n, -1, dtype=np.int64)
        for j, i in enumerate(rows):
            u = inverse[j]
            if infra is not None and infra[u]:
                err[i] = CellError(errs[u] if errs is not None and errs[u] else f"{sig.name}: infrastructure failure",
                                   infra=True, function=sig.name)
                continue
            if errs is not None and errs[u] is not None:
                err[i] = CellError(str(errs[u]), function=sig.name)
                continue
            v = values[u]
            if v is None:
                continue
            none[i] = False
            if kind == "spans":
                base = int(src_off[i]) if src_off is not None and src_off[i] >= 0 else -1
                v = [Span(s.start + base, s.end + base, float(s.value), s.label) if base >= 0 else
                     Span(-1, -1, float(s.value), s.label) for s in v]
            elif kind == "num":
                v = float(v)
                if lo_hi is not None and not (lo_hi[0] - 1e-12 <= v <= lo_hi[1] + 1e-12) or v != v:
                    err[i] = CellError(f"{sig.name} returned {v!r}, outside its declared range "
                                       f"[{lo_hi[0] if lo_hi else '-inf'}, {lo_hi[1] if lo_hi else 'inf'}]",
                                       function=sig.name)
                    continue
            out_vals[i] = v
            if out_off is not None:
                r = rel_off[u]
                if r is not None and r >= 0 and src_off is not None and src_off[i] >= 0:
                    out_off[i] = src_off[i] + r
        for i in range(n):
            if err[i] is not None:
                none[i] = False
    return Col(out_vals, none, err, out_off, kind if kind != "spans" else "obj")


def _take(col: Any, idx: Sequence[int]) -> Any:
    """Rows ``idx`` of one argument column handed to a function (a list or a NumPy array)."""
    if isinstance(col, np.ndarray):
        return col[np.asarray(idx, dtype=np.int64)]
    return [col[i] for i in idx]


def _invoke(impl: Implementation, layout: Sequence[tuple], columns: Sequence[Any], params: Any, sub: Context
            ) -> Result:
    call_args = _layout_args(layout, columns)
    for j, (tag, _) in enumerate(layout):
        if tag == "vd":  # variadic per-sample arguments arrive as one list of values per sample
            call_args[j] = [list(x) for x in zip(*call_args[j])]
    res = impl.fn(*call_args, params=params, ctx=sub)
    return res if isinstance(res, Result) else Result(res)


def _merge_results(parts: Sequence[Result]) -> Result:
    """One Result from the Results of consecutive parts of a call (in order)."""
    values: list[Any] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    details: list[Any] = []
    offsets: list[Any] = []
    any_details = any(p.details is not None for p in parts)
    any_offsets = any(p.offsets is not None for p in parts)
    for p in parts:
        k = len(p.values)
        values.extend(list(p.values))
        errors.extend(list(p.errors) if p.errors is not None else [None] * k)
        infra.extend(list(p.infra) if p.infra is not None else [False] * k)
        details.extend(list(p.details) if p.details is not None else [None] * k)
        offsets.extend(list(p.offsets) if p.offsets is not None else [None] * k)
    return Result(values, errors, infra, details if any_details else None, offsets if any_offsets else None)


def _call_isolated(impl: Implementation, layout: Sequence[tuple], columns: Sequence[Any], m: int, params: Any,
                   sub: Context, ctx: Context) -> Result:
    """Call ``impl`` over ``m`` rows; when it raises, find the rows that make it raise.

    A function is vectorized, so one exception would fail every row of the call: one completion (a
    20,000-term expression that overflows a recursive parser) would fail the whole batch. So a call that
    raises is split in halves and retried until each failing row is alone: only the rows that raise by
    themselves get the error (``NAME crashed: ...``); every other row keeps its real value. At most
    ``2m - 1`` calls, only on the crash path. A :class:`ComponentError` is the function's own verdict on the
    call and is not split.
    """
    sig = impl.signature

    def run(idx: list[int]) -> Result:
        part = columns if len(idx) == m else [_take(c, idx) for c in columns]
        try:
            return _invoke(impl, layout, part, params, sub)
        except ComponentError as exc:
            return Result([None] * len(idx), errors=[str(exc)] * len(idx))
        except Exception as exc:  # noqa: BLE001 - a crashing component follows on_error; it never kills the run
            if len(idx) > 1:
                ctx.stats[f"isolate:{sig.name}"] += 1
                half = len(idx) // 2
                return _merge_results([run(idx[:half]), run(idx[half:])])
            ctx.stats[f"crash:{sig.name}"] += 1
            return Result([None], errors=[f"{sig.name} crashed: {type(exc).__name__}: {exc}"])

    return run(list(range(m)))


def _columnar_isolated(impl: Implementation, layout: Sequence[tuple], args: list[Any], n: int, params: Any,
                       sub: Context, ctx: Context) -> Col:
    """A columnar function over ``n`` rows, with the same per-row isolation of crashes as :func:`_call_isolated`."""
    sig = impl.signature

    def run(idx: np.ndarray) -> Col:
        part = args if len(idx) == n else [a.take(idx) if isinstance(a, Col) else a for a in args]
        try:
            return impl.fn(*_layout_args(layout, part), params=params, ctx=sub)
        except Exception as exc:  # noqa: BLE001 - one row's crash must not fail the batch
            if len(idx) > 1:
                ctx.stats[f"isolate:{sig.name}"] += 1
                half = len(idx) // 2
                return _concat_cols([run(idx[:half]), run(idx[half:])])
            ctx.stats[f"crash:{sig.name}"] += 1
            kind = _kind_of(sig.returns)
            v: Any = np.zeros(1) if kind == "num" else np.zeros(1, dtype=bool) if kind == "bool" else [None]
            return Col(v, None, [CellError(f"{sig.name} crashed: {type(exc).__name__}: {exc}", function=sig.name)],
                       kind=kind if kind != "spans" else "obj")

    return run(np.arange(n))


def _concat_cols(cols: Sequence[Col]) -> Col:
    """Columns of consecutive row ranges joined into one."""
    if all(isinstance(c.v, np.ndarray) for c in cols):
        v: Any = np.concatenate([c.v for c in cols])
    else:
        v = [x for c in cols for x in (c.v.tolist() if isinstance(c.v, np.ndarray) else c.v)]
    none = np.concatenate([c.none if c.none is not None else np.zeros(c.n, dtype=bool) for c in cols])
    err = [e for c in cols for e in (c.err if c.err is not None else [None] * c.n)]
    off = None
    if any(c.off is not None for c in cols):
        off = np.concatenate([c.off if c.off is not None else np.full(c.n, -1, dtype=np.int64) for c in cols])
    kinds = {c.kind for c in cols}
    return Col(v, none, err, off, kinds.pop() if len(kinds) == 1 else "obj")


def _kind_of(t: Any) -> str:
    name = getattr(t, "name", None)
    if name == "number":
        return "num"
    if name == "bool":
        return "bool"
    if name == "spans":
        return "spans"
    return "obj"
