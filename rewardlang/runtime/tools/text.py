"""Source text as the tools see it, and the mapping of their positions back to character offsets.

Tools report positions as (line, column) pairs, in different units: ruff counts characters (code points),
pylint, bandit and Python's ``ast`` count UTF-8 bytes. :class:`SourceText` converts any of them into a
character offset of the *original* string, so spans line up with the completion.

What the tools see differs from the original in two length-preserving-or-tracked ways:

- a leading byte-order mark is removed (every tool ignores it; offsets are shifted back by one);
- lone surrogates (``"\\ud800"``, possible in a Python ``str`` decoded with ``surrogateescape``) are
  replaced by U+FFFD, one code point for one, so the file can be written as UTF-8 and offsets stay equal.

Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``, as for Python's tokenizer and ruff (form feed and
U+2028 do not end a line for them, unlike :meth:`str.splitlines`).

    >>> s = SourceText("x = 'é'\\r\\ny = 1\\n")
    >>> s.offset(2, 0), s.line_bounds(1)
    (9, (0, 7))
    >>> s.char_col(1, 7)        # byte column 7 (after the 2-byte é) is character column 6
    6
"""

from __future__ import annotations

import bisect
import re

__all__ = ["SourceText", "sanitize", "line_table"]

_NEWLINE = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Replace lone surrogates by U+FFFD (same length), so the text encodes as UTF-8.

        >>> sanitize("a\\udc80b") == "a\\ufffdb"
        True
    """
    return _SURROGATE.sub("\ufffd", text)


def line_table(text: str) -> tuple[list[int], list[int]]:
    """Start offsets and end offsets (before the line break) of every line of ``text``.

        >>> line_table("ab\\r\\ncd\\ref")
        ([0, 4, 7], [2, 6, 9])
    """
    starts = [0]
    ends: list[int] = []
    for m in _NEWLINE.finditer(text):
        ends.append(m.start())
        starts.append(m.end())
    ends.append(len(text))
    return starts, ends


class SourceText:
    """One code string: the text written for the tools and the position conversions back to it."""

    __slots__ = ("original", "text", "shift", "starts", "ends", "_bytes_lines")

    def __init__(self, original: str) -> None:
        self.original = original
        bom = original.startswith("\ufeff")
        self.shift = 1 if bom else 0
        #: the text the tools see (written to their input files)
        self.text = sanitize(original[1:] if bom else original)
        self.starts, self.ends = line_table(self.text)
        self._bytes_lines: dict[int, bytes] = {}

    @property
    def n_lines(self) -> int:
        return len(self.starts)

    def _clamp_line(self, line: int) -> int:
        return min(max(line, 1), len(self.starts))

    def offset(self, line: int, col: int) -> int:
        """Character offset in the original string of 1-based ``line``, 0-based character ``col``.

        Positions past the end of a line clamp to the line's end (its line break included, so a column
        just past the last character of a line is the offset of the break); lines past the end clamp to the
        end of the text.
        """
        if line > len(self.starts):
            return len(self.text) + self.shift
        li = self._clamp_line(line) - 1
        nxt = self.starts[li + 1] if li + 1 < len(self.starts) else len(self.text)
        return min(self.starts[li] + max(col, 0), nxt) + self.shift

    def line_bounds(self, line: int) -> tuple[int, int]:
        """``(start, end)`` offsets in the original string of a 1-based line, line break excluded."""
        li = self._clamp_line(line) - 1
        return self.starts[li] + self.shift, self.ends[li] + self.shift

    def line_bounds_with_break(self, line: int) -> tuple[int, int]:
        """Like :meth:`line_bounds` but the span runs to the start of the next line (break included)."""
        li = self._clamp_line(line) - 1
        end = self.starts[li + 1] if li + 1 < len(self.starts) else len(self.text)
        return self.starts[li] + self.shift, end + self.shift

    def char_col(self, line: int, byte_col: int) -> int:
        """Convert a UTF-8 byte column of a 1-based line into a character column."""
        if byte_col <= 0:
            return 0
        li = self._clamp_line(line) - 1
        raw = self._bytes_lines.get(li)
        if raw is None:
            raw = self.text[self.starts[li]:self.ends[li]].encode("utf-8")
            self._bytes_lines[li] = raw
        return len(raw[:byte_col].decode("utf-8", errors="ignore"))

    def line_of(self, offset: int) -> int:
        """1-based line containing character ``offset`` of the original string."""
        return bisect.bisect_right(self.starts, max(offset - self.shift, 0))
