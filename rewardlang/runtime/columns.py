"""Columns: one value per sample of the batch, with none and error masks.

A :class:`Col` holds the values (a float64/bool NumPy array for numbers and bools, a list otherwise), an
optional ``none`` mask, optional per-sample errors, and, for text cut out of the completion, each value's
character offset in the completion (so spans found in an answer's code block land on the right characters).
Constants stay plain Python values; kernels broadcast them.

    >>> import numpy as np
    >>> c = Col(np.array([1.0, 2.0]), none=np.array([False, True]))
    >>> c.n, c.is_none(1), c.to_python()
    (2, True, [1.0, None])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["Col", "CellError", "merge_err", "as_col"]


@dataclass(frozen=True)
class CellError:
    """Why one sample has no value. ``infra`` marks an infrastructure failure (masked, never on_error)."""

    message: str
    infra: bool = False
    function: str = ""

    def __str__(self) -> str:
        return self.message


class Col:
    __slots__ = ("v", "none", "err", "off", "kind")

    def __init__(self, v: Any, none: np.ndarray | None = None, err: list[CellError | None] | None = None,
                 off: np.ndarray | None = None, kind: str | None = None) -> None:
        self.v = v
        self.none = none if none is not None and none.any() else None
        self.err = err if err is not None and any(e is not None for e in err) else None
        self.off = off
        if kind is None:
            kind = "num" if isinstance(v, np.ndarray) and v.dtype == np.float64 else (
                "bool" if isinstance(v, np.ndarray) and v.dtype == np.bool_ else "obj")
        self.kind = kind

    @property
    def n(self) -> int:
        return len(self.v)

    def is_none(self, i: int) -> bool:
        return self.none is not None and bool(self.none[i])

    def error_at(self, i: int) -> CellError | None:
        return self.err[i] if self.err is not None else None

    def bad(self) -> np.ndarray:
        """Samples that are none or failed."""
        m = np.zeros(self.n, dtype=bool) if self.none is None else self.none.copy()
        if self.err is not None:
            m |= np.fromiter((e is not None for e in self.err), dtype=bool, count=self.n)
        return m

    def err_mask(self) -> np.ndarray:
        if self.err is None:
            return np.zeros(self.n, dtype=bool)
        return np.fromiter((e is not None for e in self.err), dtype=bool, count=self.n)

    def to_python(self) -> list[Any]:
        vals = self.v.tolist() if isinstance(self.v, np.ndarray) else list(self.v)
        if self.none is not None:
            vals = [None if self.none[i] else x for i, x in enumerate(vals)]
        return vals

    def take(self, idx: np.ndarray) -> "Col":
        v = self.v[idx] if isinstance(self.v, np.ndarray) else [self.v[i] for i in idx]
        return Col(v, None if self.none is None else self.none[idx],
                   None if self.err is None else [self.err[i] for i in idx],
                   None if self.off is None else self.off[idx], self.kind)


def merge_err(n: int, *cols: Any) -> list[CellError | None] | None:
    """The first error of each sample over several operands (``None`` when no operand failed anywhere)."""
    errs = [c.err for c in cols if isinstance(c, Col) and c.err is not None]
    if not errs:
        return None
    if len(errs) == 1:
        return list(errs[0])
    out: list[CellError | None] = [None] * n
    for e in errs:
        for i, x in enumerate(e):
            if x is not None and out[i] is None:
                out[i] = x
    return out


def merge_none(*cols: Any) -> np.ndarray | None:
    masks = [c.none for c in cols if isinstance(c, Col) and c.none is not None]
    if not masks:
        return None
    out = masks[0].copy()
    for m in masks[1:]:
        out |= m
    return out


def as_col(values: Sequence[Any], kind: str) -> Col:
    """A column from Python values (``None`` = none)."""
    n = len(values)
    if kind in ("num", "bool"):
        none = np.fromiter((x is None for x in values), dtype=bool, count=n)
        dtype = np.float64 if kind == "num" else np.bool_
        fill = 0.0 if kind == "num" else False
        arr = np.fromiter((fill if x is None else x for x in values), dtype=dtype, count=n)
        return Col(arr, none, kind=kind)
    none = np.fromiter((x is None for x in values), dtype=bool, count=n)
    return Col(list(values), none, kind="obj")
