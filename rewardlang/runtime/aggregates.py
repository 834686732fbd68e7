"""Group aggregates and NumPy helpers for the reward and advantage phases.

Values are float64 arrays with NaN for masked samples. Aggregates are computed per group (``G[key]`` holds
integer group codes; ``key=None`` is the whole batch) over the unmasked samples only, broadcast back to every
sample of the group, and stay NaN for masked samples (they are never trained on).

    >>> import numpy as np
    >>> x = np.array([1.0, 3.0, 10.0, np.nan])
    >>> G = {"prompt": np.array([0, 0, 1, 1])}
    >>> aggregate("mean", x, G, "prompt").tolist()
    [2.0, 2.0, 10.0, nan]
    >>> aggregate("std", x, G, "prompt", ddof=0).tolist()
    [1.0, 1.0, 0.0, nan]

Conventions (documented in docs/language.md): ``std`` of a group with no more samples than ``ddof`` is 0;
``loo_mean`` of a singleton group is the sample itself; ``rank`` is the average rank within the group scaled
to [0, 1] (0.5 for a singleton).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["aggregate", "as_float", "is_none", "where", "math", "minimum", "maximum", "step_fn", "interp", "weighted_sum",
           "logical_and", "logical_or", "logical_not", "group_codes"]


def group_codes(keys: Sequence[Any]) -> np.ndarray:
    """Integer codes 0..k-1 for arbitrary hashable group keys, in order of first appearance."""
    index: dict[Any, int] = {}
    out = np.empty(len(keys), dtype=np.int64)
    for i, k in enumerate(keys):
        k = tuple(k) if isinstance(k, list) else k
        out[i] = index.setdefault(k, len(index))
    return out


def aggregate(fn: str, x: np.ndarray, G: Mapping[str | None, np.ndarray], key: str | None, ddof: int = 0
              ) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    codes = G[key] if key is not None else np.zeros(len(x), dtype=np.int64)
    valid = ~np.isnan(x)
    k = int(codes.max()) + 1 if len(codes) else 0
    xv = np.where(valid, x, 0.0)
    count = np.bincount(codes, weights=valid.astype(np.float64), minlength=k)
    total = np.bincount(codes, weights=xv, minlength=k)
    with np.errstate(all="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        if fn == "mean":
            out = mean[codes]
        elif fn == "sum":
            out = total[codes]
        elif fn == "count":
            out = count[codes]
        elif fn == "std":
            dev = np.where(valid, x - mean[codes], 0.0)
            ss = np.bincount(codes, weights=dev * dev, minlength=k)
            denom = count - ddof
            std = np.where(denom > 0, np.sqrt(ss / np.where(denom > 0, denom, 1.0)), 0.0)
            out = std[codes]
        elif fn in ("min", "max"):
            init = np.inf if fn == "min" else -np.inf
            acc = np.full(k, init)
            (np.minimum if fn == "min" else np.maximum).at(acc, codes[valid], x[valid])
            out = acc[codes]
        elif fn == "loo_mean":
            others = count[codes] - 1
            out = np.where(others > 0, (total[codes] - xv) / np.where(others > 0, others, 1.0), x)
        elif fn == "median":
            med = np.full(k, np.nan)
            order = np.lexsort((x, codes))
            order = order[valid[order]]
            sc = codes[order]
            starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if len(sc) else np.array([], dtype=np.int64)
            ends = np.r_[starts[1:], len(sc)] if len(sc) else starts
            for s, e in zip(starts, ends):
                med[sc[s]] = np.median(x[order[s:e]])
            out = med[codes]
        elif fn == "rank":
            out = _rank(x, codes, valid, count)
        else:
            raise ValueError(f"unknown aggregate {fn!r}")
    return np.where(valid, out, np.nan)


def _rank(x: np.ndarray, codes: np.ndarray, valid: np.ndarray, count: np.ndarray) -> np.ndarray:
    out = np.full(len(x), np.nan)
    idx = np.flatnonzero(valid)
    if not len(idx):
        return out
    order = idx[np.lexsort((x[idx], codes[idx]))]
    c, v = codes[order], x[order]
    group_start = np.r_[True, c[1:] != c[:-1]]
    run_start = group_start | np.r_[True, v[1:] != v[:-1]]
    pos = np.arange(len(order))
    first_of_group = np.maximum.accumulate(np.where(group_start, pos, 0))
    run_id = np.cumsum(run_start) - 1
    run_first = pos[run_start]
    run_last = np.r_[run_first[1:], len(order)] - 1
    avg = (run_first + run_last) / 2.0
    r = avg[run_id] - first_of_group
    n = count[c]
    out[order] = np.where(n > 1, r / np.maximum(n - 1, 1), 0.5)
    return out


def is_none(x: Any) -> Any:
    """`x is none` in the phases over float arrays, where none (masked) is NaN."""
    if x is None:
        return True
    return np.isnan(np.asarray(x, dtype=np.float64))


def as_float(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64, copy=False)
    return float(x)


def where(c: Any, a: Any, b: Any) -> Any:
    return np.where(c, a, b)


def logical_and(a: Any, b: Any) -> Any:
    return np.logical_and(a, b)


def logical_or(a: Any, b: Any) -> Any:
    return np.logical_or(a, b)


def logical_not(a: Any) -> Any:
    return np.logical_not(a)


def math(fn: str, x: Any, digits: int = 0) -> Any:
    with np.errstate(all="ignore"):
        if fn == "round":
            return np.round(x, digits)
        if fn == "sigmoid":
            return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))
        f = {"abs": np.abs, "log": np.log, "exp": np.exp, "tanh": np.tanh, "sqrt": np.sqrt, "floor": np.floor,
             "ceil": np.ceil}[fn]
        return f(x)


def minimum(a: Any, b: Any) -> Any:
    return np.minimum(a, b)


def maximum(a: Any, b: Any) -> Any:
    return np.maximum(a, b)


_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}


def step_fn(arms: Sequence[tuple[str, float]], x: Any, *values: Any) -> Any:
    xv = np.asarray(x, dtype=np.float64)
    out = np.select([_OPS[op](xv, b) for op, b in arms], [np.broadcast_to(v, xv.shape) for v in values[:-1]],
                    default=values[-1])
    return np.where(np.isnan(xv), np.nan, out)


def interp(x: Any, xs: Sequence[float], ys: Sequence[float]) -> Any:
    return np.interp(x, xs, ys)


def weighted_sum(xs: Mapping[str, np.ndarray], W: Mapping[str, float]) -> np.ndarray:
    total: Any = 0.0
    for name, v in xs.items():
        total = total + W[name] * v
    return np.asarray(total, dtype=np.float64)
