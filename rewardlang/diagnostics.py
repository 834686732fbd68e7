"""Located diagnostics: a stable code, ``file:line:col``, the source line with a caret, and a hint.

    >>> from rewardlang.syntax import Loc
    >>> src = "let x = lenn(completion)\\n"
    >>> d = Diagnostic("E102", "unknown function `lenn`", Loc("my.reward", 1, 9, 1, 13, 8, 12),
    ...                hint="did you mean `len`?")
    >>> print(d.render({"my.reward": src}, color=False))
    error[E102]: unknown function `lenn`
     --> my.reward:1:9
      |
    1 | let x = lenn(completion)
      |         ^^^^
      = hint: did you mean `len`?

Every code is listed, with an example and its fix, in ``docs/errors.md``; ``CODES`` here is the source of the
short titles.
"""

from __future__ import annotations

import difflib
import os
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable

from rewardlang.syntax import Loc

__all__ = ["Diagnostic", "SpecError", "CODES", "did_you_mean", "render_all", "use_color"]

CODES: dict[str, str] = {
    # syntax
    "E001": "syntax error",
    "E002": "unexpected character",
    "E003": "unexpected end of file",
    "E004": "invalid regular expression",
    "E005": "invalid literal",
    "E006": "unclosed or mismatched bracket",
    "E007": "unclosed string",
    # names and structure
    "E101": "unknown name",
    "E102": "unknown function",
    "E103": "duplicate definition",
    "E104": "definitions form a cycle",
    "E105": "import failed",
    "E106": "imported name not found",
    "E107": "reserved name",
    "E108": "misplaced statement",
    # types and arguments
    "E201": "type mismatch",
    "E202": "wrong number of arguments",
    "E203": "wrong argument type",
    "E204": "invalid option",
    "E205": "argument must be a constant",
    "E206": "condition is not a bool",
    "E207": "unknown type",
    "E208": "invalid range",
    "E209": "component value is not a number",
    "E210": "spans clause is not spans",
    "E211": "invalid weight",
    "E212": "schedule without a step count",
    "E213": "comprehension over a per-sample value",
    "E214": "invalid threshold or piecewise map",
    "E215": "reward is not a number",
    "E216": "invalid component clause",
    "E217": "unsupported operation",
    "E218": "invalid audit",
    "E219": "audit used in the reward",
    # advantages
    "E301": "invalid advantage stage",
    "E302": "per-component normalization without a sum",
    # examples
    "E401": "invalid example input",
    "E402": "invalid example expectation",
    "E403": "example failed",
    # sections and parameters
    "E501": "unknown section",
    "E502": "invalid setting",
    "E503": "unknown preference setting",
    "E504": "invalid preference setting",
    "E505": "preference expression of the wrong type",
    "E601": "invalid parameter",
    "E602": "invalid override",
    "E603": "a resource the spec needs is missing",
    # warnings
    "W001": "unused input",
    "W002": "unused definition",
    "W003": "weight not used by the reward",
    "W004": "component may be none",
    "W005": "spec has no components",
    "W006": "regex may backtrack catastrophically",
}


@dataclass
class Diagnostic:
    code: str
    message: str
    loc: Loc | None
    hint: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def severity(self) -> str:
        return "warning" if self.code.startswith("W") else "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def sort_key(self) -> tuple:
        if self.loc is None:
            return ("", 0, 0)
        return (self.loc.file, self.loc.line, self.loc.column)

    def render(self, sources: dict[str, str] | None = None, color: bool = False) -> str:
        c = _Colors(color)
        sev_color = c.yellow if self.severity == "warning" else c.red
        out = [f"{sev_color}{c.bold}{self.severity}[{self.code}]{c.reset}{c.bold}: {self.message}{c.reset}"]
        if self.loc is not None:
            loc = self.loc
            out.append(f" {c.blue}-->{c.reset} {loc.file}:{loc.line}:{loc.column}")
            src = (sources or {}).get(loc.file)
            lines = src.split("\n") if src is not None else []  # lines as the parser counts them
            if 1 <= loc.line <= len(lines):
                text = lines[loc.line - 1].replace("\t", " ")
                gutter = len(str(loc.line))
                pad = " " * gutter
                end_col = loc.end_column if loc.end_line == loc.line else len(text) + 1
                width = max(1, end_col - loc.column)
                text, col, width = _window(text, loc.column - 1, width)
                # the caret is drawn in terminal cells: a wide character (日, 😀) takes two, a combining one none
                col, width = _cells(text[:col]), max(1, _cells(text[col:col + width]))
                out.append(f"{pad} {c.blue}|{c.reset}")
                out.append(f"{c.blue}{loc.line} |{c.reset} {_highlight(text) if color else text}")
                out.append(f"{pad} {c.blue}|{c.reset} {' ' * col}{sev_color}{'^' * width}{c.reset}")
                if self.hint:
                    out.append(f"{pad} {c.blue}={c.reset} hint: {self.hint}")
                for n in self.notes:
                    out.append(f"{pad} {c.blue}={c.reset} note: {n}")
                return "\n".join(out)
        if self.hint:
            out.append(f"  = hint: {self.hint}")
        for n in self.notes:
            out.append(f"  = note: {n}")
        return "\n".join(out)


#: the widest source line a diagnostic shows; a longer one (a generated spec, a 5,000-term sum) is cut around
#: the caret, with `…` where text was left out
MAX_SHOWN = 120


def _cells(text: str) -> int:
    """How many terminal cells ``text`` takes: two for an East Asian wide or full-width character, none for a
    combining mark, one otherwise.

        >>> _cells("ab"), _cells("日本"), _cells("e\u0301"), _cells("😀")
        (2, 4, 1, 2)
    """
    n = 0
    for ch in text:
        if ch.isascii():
            n += 1
        elif unicodedata.combining(ch):
            continue
        else:
            n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def _window(text: str, col: int, width: int) -> tuple[str, int, int]:
    """(the shown part of a source line, the caret's 0-based column in it, the caret's width).

        >>> shown, col, width = _window("x" * 50 + "BAD" + "y" * 200, 50, 3)
        >>> shown[:8], shown[col:col + width], col, width
        ('…xxxxxxx', 'BAD', 41, 3)
    """
    if len(text) <= MAX_SHOWN:
        return text, col, width
    width = min(width, MAX_SHOWN - 2 * 40)  # a caret wider than the window is cut too
    start = max(0, col - 40)
    end = min(len(text), start + MAX_SHOWN)
    start = max(0, min(start, end - MAX_SHOWN))
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    return head + text[start:end] + tail, col - start + len(head), width


def _highlight(line: str) -> str:
    """One source line in the terminal's colours (the ``reward`` Pygments lexer); plain if Pygments is absent."""
    try:
        from rewardlang.highlight import highlight_source
    except ImportError:  # pragma: no cover - Pygments comes with rich, a dependency
        return line
    return highlight_source(line)


class _Colors:
    def __init__(self, on: bool) -> None:
        self.red = "\x1b[31m" if on else ""
        self.yellow = "\x1b[33m" if on else ""
        self.blue = "\x1b[34m" if on else ""
        self.bold = "\x1b[1m" if on else ""
        self.reset = "\x1b[0m" if on else ""


def use_color(stream: object = None) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render_all(diags: Iterable[Diagnostic], sources: dict[str, str], color: bool = False) -> str:
    return "\n\n".join(d.render(sources, color) for d in sorted(diags, key=Diagnostic.sort_key))


class SpecError(Exception):
    """Raised by :func:`rewardlang.load` for an invalid spec; carries every diagnostic of the run."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, str]) -> None:
        self.diagnostics = diagnostics
        self.sources = sources
        errors = [d for d in diagnostics if d.is_error]
        first = errors[0] if errors else (diagnostics[0] if diagnostics else None)
        summary = f"{len(errors)} error(s)"
        if first is not None and first.loc is not None:
            summary += f"; first: {first.loc.file}:{first.loc.line}:{first.loc.column}: {first.message}"
        super().__init__(summary)

    def render(self, color: bool = False) -> str:
        return render_all(self.diagnostics, self.sources, color)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A hint naming the closest candidate, if any is close enough."""
    matches = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{matches[0]}`?" if matches else None
