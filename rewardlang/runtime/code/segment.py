"""Split a Python solution into the segments PRLCoder mutates and scores: logical lines or statement blocks.

A segment is a character range ``[start, end)`` of the code covering whole lines (its line break included),
so splicing a new text for one segment leaves every other byte of the program unchanged.

- ``level="line"``: each *logical* line (a statement bracketed over several physical lines is one segment;
  a compound statement's header is one segment and each line of its body another). Comment-only and blank
  lines belong to no segment.
- ``level="block"``: each top-level statement of the function body; a compound statement (``for``, ``if``,
  ``while``, ``try``, ``with``, a nested ``def``) is one block. Statements sharing a line (``a = 1; b = 2``)
  are one segment.

The segmented function is the one named ``function``, else the last top-level ``def`` (HumanEval's entry
point follows its helpers); its docstring is not a segment. Code with no ``def`` is segmented at module
level. A bare function body (indented, as a completion after a HumanEval prompt) is segmented as the body
of a function. Code that does not parse (a syntax error, NUL bytes, nesting too deep for CPython's parser) has no
segments.

    >>> code = "def f(xs):\\n    s = 0\\n    for x in (xs +\\n              [1]):\\n        s += x\\n    return s\\n"
    >>> [code[a:b] for a, b in segments(code, "block")]
    ['    s = 0\\n', '    for x in (xs +\\n              [1]):\\n        s += x\\n', '    return s\\n']
    >>> [code[a:b] for a, b in segments(code, "line")][1]
    '    for x in (xs +\\n              [1]):\\n'
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

from rewardlang.pycompile import compile_quietly

__all__ = ["LEVELS", "Source", "find_function", "parse_program", "partition", "segments"]

LEVELS = ("line", "block")
_BODY_HEADER = "def __rl_body__():\n"


class Source:
    """Line/column <-> character offset conversions for one text (ast columns are UTF-8 byte offsets)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def offset(self, lineno: int, col_byte: int) -> int:
        """Character offset of (1-based line, UTF-8 byte column)."""
        if lineno > len(self.lines):
            return len(self.text)
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8", "surrogatepass")[:col_byte].decode(
            "utf-8", "surrogatepass"))

    def line_start(self, lineno: int) -> int:
        return self.starts[min(lineno - 1, len(self.lines))]

    def line_end(self, lineno: int) -> int:
        """Offset just after line ``lineno``'s line break."""
        return self.starts[min(lineno, len(self.lines))]

    def node_range(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Program:
    """A parsed program: the tree, the text and the offset added when a bare body was wrapped."""

    tree: ast.Module
    source: Source
    shift: int  # characters of the wrapper header (0 when the code parsed as is)


def parse_program(code: str) -> Program | None:
    """Parse ``code``, or ``code`` as the body of a function when it is indented; None if neither parses."""
    try:
        return Program(compile_quietly(code), Source(code), 0)
    except (SyntaxError, ValueError):
        pass
    except (RecursionError, MemoryError):
        # nested too deeply for CPython's parser (a 20,000-term expression): not a program rewardlang can
        # segment, so it has no segments, like any code that does not parse -- never an exception that would
        # fail the call (and, before per-row isolation, every completion of the batch)
        return None
    wrapped = _BODY_HEADER + code
    try:
        return Program(compile_quietly(wrapped), Source(wrapped), len(_BODY_HEADER))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def find_function(tree: ast.Module, function: str | None = None) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function named ``function``, else the last top-level ``def``; None when there is none."""
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if function is not None:
        named = [d for d in defs if d.name == function]
        if named:
            return named[-1]
    return defs[-1] if defs else None


def _body(tree: ast.Module, function: str | None) -> list[ast.stmt]:
    fn = find_function(tree, function)
    body = list(fn.body) if fn is not None else list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring is part of the prompt, not a step
    return body


def _block_lines(body: list[ast.stmt]) -> list[tuple[int, int]]:
    groups: list[list[int]] = []
    for s in body:
        first, last = s.lineno, s.end_lineno or s.lineno
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.decorator_list:
            first = min(d.lineno for d in s.decorator_list)
        if groups and first <= groups[-1][1]:  # shares a line with the previous statement
            groups[-1][1] = max(groups[-1][1], last)
        else:
            groups.append([first, last])
    return [(a, b) for a, b in groups]


def _logical_lines(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start: int | None = None
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NEWLINE:
            if start is not None:
                out.append((start, tok.start[0]))
            start = None
        elif tok.type not in skip and start is None:
            start = tok.start[0]
    return out


def segments(code: str, level: str = "block", function: str | None = None) -> list[tuple[int, int]]:
    """Character ranges of the segments of ``code`` at ``level`` (``"line"`` or ``"block"``), in order.

        >>> segments("def f():\\n    a = 1; b = 2\\n    return a + b\\n")
        [(9, 26), (26, 43)]
        >>> segments("    x = (1,\\n         2)\\n    return x\\n", "line")
        [(0, 24), (24, 37)]
        >>> segments("def f(:\\n")
        []
    """
    if level not in LEVELS:
        raise ValueError(f"unknown segment level {level!r} (expected one of {', '.join(LEVELS)})")
    prog = parse_program(code)
    if prog is None:
        return []
    src = prog.source
    body = _body(prog.tree, function)
    if not body:
        return []
    if level == "block":
        ranges = _block_lines(body)
    else:
        lo = body[0].lineno
        if isinstance(body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body[0].decorator_list:
            lo = min(d.lineno for d in body[0].decorator_list)
        hi = body[-1].end_lineno or body[-1].lineno
        ranges = [(a, b) for a, b in _logical_lines(src.text) if a >= lo and b <= hi]
    out = []
    for a, b in ranges:
        s, e = src.line_start(a) - prog.shift, src.line_end(b) - prog.shift
        if s >= 0:
            out.append((s, e))
    return out


def partition(code: str, spans: list[tuple[int, int]], start: int = 0) -> list[str]:
    """Cut ``code[start:]`` into one piece per span, each ending where its span ends (comments and blank lines
    before a segment join it; text after the last segment joins the last piece), so the pieces concatenate
    back to ``code[start:]``.

        >>> partition("a\\n# c\\nb\\n", [(0, 2), (6, 8)])
        ['a\\n', '# c\\nb\\n']
    """
    pieces, prev = [], start
    for i, (_, e) in enumerate(spans):
        end = len(code) if i == len(spans) - 1 else e
        pieces.append(code[prev:end])
        prev = end
    return pieces
