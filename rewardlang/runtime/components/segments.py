"""PRLCoder's segments as spans: ``segments(code, level="line"|"block")``.

Each span covers one segment of the code (whole lines, line break included; value 1, label ``"line 3"`` /
``"block 2"``, counted from 1), so "at the ends of segments" attribution places a value on each segment's
last token::

    let steps = segments(code, level="block")
    component n_steps in [0, 50] = min(len(steps), 50)

See :mod:`rewardlang.runtime.code.segment` for the rules (logical lines; top-level statements of the last
function's body; docstrings excluded; a bare indented body is segmented as a function body). Code that does
not parse has no segments (an empty list, not an error).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from rewardlang.runtime.api import Context, Result, Span, function

__all__ = ["SegmentParams", "segment_spans"]


class SegmentParams(BaseModel):
    """Options of ``segments``."""

    #: ``line``: logical lines; ``block``: top-level statements of the function body
    level: Literal["line", "block"] = "block"
    #: the function to segment (default: the last top-level ``def``)
    function: str | None = None


@function("segments", args={"code": "code"}, returns="spans", params=SegmentParams, spans_of="code",
          doc="The code's segments (PRLCoder): level=\"line\" logical lines, level=\"block\" each top-level "
              "statement of the function body (a compound statement is one block). Whole lines, value 1, "
              "label 'line N' / 'block N'. Code that does not parse has none.")
def segment_spans(code: list[str], *, params: SegmentParams | None = None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> segment_spans.fn(["def f():\\n    x = 1\\n    return x\\n"], params=None, ctx=Context()).values
    [[Span(start=9, end=19, value=1.0, label='block 1'), Span(start=19, end=32, value=1.0, label='block 2')]]
    """
    from rewardlang.runtime.code.segment import segments

    p = params or SegmentParams()
    values = [[Span(s, e, 1.0, f"{p.level} {i + 1}") for i, (s, e) in enumerate(segments(c, p.level, p.function))]
              for c in code]
    return Result(values=values)


__test__ = {"segments": segment_spans.fn}
