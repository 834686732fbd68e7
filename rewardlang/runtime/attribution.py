"""How a component's value reaches the tokens of the completion: the runtime side of the ``tokens`` clause.

The checker records each component's placement (``SPEC["components"][i]["tokens"]``, see docs/language.md,
"Token attribution"); the per-sample phase computes the component's value and its spans (the ``tokens`` forms
``over`` and ``split`` are lowered into spans by the checker). :func:`place` turns them into a :class:`Placement`
in *completion characters*, which is what ``rewardlang score`` writes (testable without a tokenizer), and
:func:`to_tokens` maps a placement onto tokens given each token's character end (from
:class:`rewardlang.trainers.align.TokenAligner`) with the overlap rule: a token gets a range's value when it
overlaps the range.

    >>> p = place({"mode": "spans", "uncovered": 1.0}, -3.0, [(4, 8, -1.0, "E1")], "ab\\ncd\\nef\\n")
    >>> p.ranges, p.uncovered
    (((4, 8, -1.0),), 1.0)
    >>> to_tokens(p, [3, 6, 9]).tolist()      # tokens "ab\\n" "cd\\n" "ef\\n"
    [1.0, -1.0, -1.0]
    >>> to_tokens(place(None, 0.5, [], "abc"), [1, 3]).tolist()   # no `tokens` clause: a sequence reward
    [0.0, 0.5]
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MODES", "Placement", "edge_ranges", "place", "to_tokens"]

_EOL = re.compile(r"\r\n|\r|\n")
#: the placements a ``tokens`` clause can name (``sequence``: no clause, the value on the last token)
MODES = ("sequence", "last", "over", "spans", "ends", "split")


@dataclass(frozen=True)
class Placement:
    """One sample's attribution in completion characters.

    ``ranges`` are ``(start, end, value)``; ``uncovered`` goes to every token (of non-zero width) no range
    overlaps; ``last`` goes to the last token; with ``replace`` a token takes the value of the *last* range it
    overlaps (``split``: the violation's token counts as after it, a fence token as fence), else the values of
    all ranges it overlaps add.
    """

    ranges: tuple[tuple[int, int, float], ...] = ()
    uncovered: float | None = None
    last: float | None = None
    replace: bool = False

    def as_json(self) -> dict[str, Any]:
        """The form ``rewardlang score`` writes: ``{"ranges": [[start, end, value], ...], ...}``."""
        out: dict[str, Any] = {"ranges": [list(r) for r in self.ranges]}
        if self.uncovered is not None:
            out["uncovered"] = self.uncovered
        if self.last is not None:
            out["last"] = self.last
        return out


def edge_ranges(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The delimiters around ``text[start:end]``: the line before it up to ``start`` (a code block's opening
    fence with its line break) and from ``end`` to the end of the line after it (the line break and the closing
    fence). When that line holds a ```` ``` ```` fence, the delimiter is the fence alone: prose before an opening
    fence or after a closing one on the same line is not the fence (it gets what text outside the block gets), so
    the value of an answer never depends on which line its prose starts; the closing fence's indentation is part of
    it. Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``.

    >>> t = "hi\\n```python\\nx = 1\\n```\\nbye"
    >>> [t[a:b] for a, b in edge_ranges(t, 13, 18)]
    ['```python\\n', '\\n```']
    >>> t = "Sure: ```python\\nx = 1\\n``` Hope it helps"
    >>> [t[a:b] for a, b in edge_ranges(t, 16, 21)]
    ['```python\\n', '\\n```']
    >>> t = "Sure:\\r\\n  ```python\\r\\nx = 1\\r\\n  ```\\r\\n"
    >>> [t[a:b] for a, b in edge_ranges(t, 20, 25)]
    ['```python\\r\\n', '\\r\\n  ```']
    """
    out = []
    if start > 0:
        brk = start - 2 if text[start - 2:start] == "\r\n" else start - 1 if text[start - 1] in "\r\n" else start
        line_start = max(text.rfind("\n", 0, brk), text.rfind("\r", 0, brk)) + 1
        fence = text.rfind("```", line_start, start)
        out.append((fence if fence >= 0 else line_start, start))
    if end < len(text):
        after = end + 2 if text[end:end + 2] == "\r\n" else end + 1 if text[end] in "\r\n" else end
        eol = _EOL.search(text, after)
        stop = eol.start() if eol else len(text)
        rest = text[after:stop]
        if rest.lstrip(" \t").startswith("```"):  # the closing fence: its backticks (and nothing after them)
            ticks = after + len(rest) - len(rest.lstrip(" \t"))
            while ticks < stop and text[ticks] == "`":
                ticks += 1
            stop = ticks
        out.append((end, stop))
    return out


def place(tokens: Mapping[str, Any] | None, value: float, spans: Sequence[Sequence[Any]] | None,
          text: str) -> Placement:
    """The placement of one (unmasked) sample: ``tokens`` is the component's ``tokens`` metadata (None: no
    clause), ``value`` its value, ``spans`` its spans in completion characters, ``text`` the completion."""
    mode = "sequence" if not tokens else tokens["mode"]
    placed = [(int(s[0]), int(s[1]), float(s[2])) for s in (spans or []) if int(s[0]) >= 0]
    if mode in ("sequence", "last"):
        return Placement(last=float(value))
    if mode == "over":
        return Placement(tuple((a, b, float(value)) for a, b, _ in placed))
    if mode == "spans":
        unc = tokens.get("uncovered")
        # overlap="last": a token overlapping several spans takes one span's value (the last, in span order), e.g.
        # the lint term's -1 on a token that straddles two flagged lines, not -2
        return Placement(tuple(placed), None if unc is None else float(unc), replace=tokens.get("overlap") == "last")
    if mode == "ends":  # the token holding each span's last character
        return Placement(tuple((max(b - 1, 0), b, v) for a, b, v in placed if b > 0))
    if mode == "split":
        if not placed:
            return Placement()
        lo, hi = min(a for a, _, _ in placed), max(b for _, b, _ in placed)
        edges = tokens.get("edges")
        extra = [] if edges is None else [(a, b, float(edges)) for a, b in edge_ranges(text, lo, hi)]
        return Placement(tuple(placed + extra), replace=True)
    raise ValueError(f"unknown token placement {mode!r}")  # pragma: no cover - the checker names the modes


def to_tokens(p: Placement, ends: Sequence[int]) -> np.ndarray:
    """Per-token values (float64, ``len(ends)``) of a placement; ``ends[t]`` is token t's character end.

    A token overlaps ``[a, b)`` when it starts before ``b`` and ends after ``a``; tokens of width 0 (special
    tokens, byte pieces of an unfinished character) get nothing from ranges. O(T + R·log T).
    """
    n = len(ends)
    out = np.zeros(n, dtype=np.float64)
    if n == 0:
        return out
    ends_arr = np.asarray(ends, dtype=np.int64)
    width = np.diff(ends_arr, prepend=0) > 0
    covered = np.zeros(n, dtype=bool)
    if p.replace:
        for a, b, v in p.ranges:  # few ranges (split: before, after, two edges)
            lo, hi = bisect.bisect_right(ends, a), min(bisect.bisect_left(ends, b), n - 1)
            if lo <= hi:
                out[lo:hi + 1] = v
                covered[lo:hi + 1] = True
    else:
        diff = np.zeros(n + 1, dtype=np.float64)
        hits = np.zeros(n + 1, dtype=np.int64)
        for a, b, v in p.ranges:
            lo, hi = bisect.bisect_right(ends, a), min(bisect.bisect_left(ends, b), n - 1)
            if lo <= hi:
                diff[lo] += v
                diff[hi + 1] -= v
                hits[lo] += 1
                hits[hi + 1] -= 1
        out = np.cumsum(diff[:n])
        covered = np.cumsum(hits[:n]) > 0
    out[~width] = 0.0
    if p.uncovered is not None:
        out[width & ~covered] = p.uncovered
    if p.last is not None:
        out[n - 1] += p.last
    return out
