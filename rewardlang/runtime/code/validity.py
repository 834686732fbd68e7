"""Where Python code stops being viable: CPython's own compiler, or tree-sitter's error nodes.

**CPython** (:func:`first_violation`). The code is compiled to an AST only (``compile(..., PyCF_ONLY_AST)``:
nothing is executed, no bytecode is generated). If that fails, a prefix scan finds the first line ``k`` whose
prefix ``lines[:k]`` is *invalid* — neither valid nor *incomplete* (CPython's ``PyCF_ALLOW_INCOMPLETE_INPUT``
flag, which ``codeop`` uses to tell an unfinished statement from a wrong one). This catches what tree-sitter
accepts (a dedent to no enclosing level, tabs/spaces mixes) and places errors where they start even when
CPython reports them elsewhere (``x = (1,`` / ``2`` / ``def g(): pass`` is reported at the ``(`` of line 1,
but lines 1-2 are a viable prefix and line 3 is where it breaks). Within line ``k`` the violation starts at
CPython's reported column when it reports line ``k``, else at the start of the line.

If no prefix is invalid, the code is **incomplete** at its end (an unclosed bracket or string, a block header
with no body, a trailing backslash). The violation is then placed at the *start of the line where the
unfinished construct begins*, as CPython reports it (the unclosed bracket's line, the string's first line, the
block header's line): the whole unfinished statement counts as the violation, not just the missing end.

An indentation error starts at the beginning of its line. Lone surrogates count as U+FFFD. Lines are split
like CPython splits them (``\\n``, ``\\r\\n``, ``\\r``). Up to :data:`LINEAR_SCAN_LINES` lines every prefix is
tried in order; longer code first checks the line CPython reports (two compilations), then bisects (about
log₂(lines) compilations). CPython's AST construction costs about 20 µs per line, so callers bound the input
size; an optional deadline stops the scan.

**tree-sitter** (:func:`tree_sitter_errors`): the outermost ``ERROR`` nodes and every ``MISSING`` node of the
tree (a MISSING node is zero-width: it marks where a token was expected). Cheaper, but tree-sitter is tolerant
(it accepts inconsistent dedents, for one).

Example::

    >>> v = first_violation("x = 1\\ny = = 2\\nz = 3\\n")
    >>> (v.line, v.start, v.message)
    (2, 10, 'invalid syntax')
    >>> first_violation("def f(x):\\n    return x\\n") is None
    True
    >>> v = first_violation("total = sum(\\n    xs,\\n")   # incomplete: the unfinished statement's line
    >>> (v.line, v.start, v.incomplete)
    (1, 0, True)
"""

from __future__ import annotations

import ast
import re
import time
import warnings
from dataclasses import dataclass

from rewardlang.runtime.code.parse import replace_surrogates

__all__ = ["LINEAR_SCAN_LINES", "TooDeep", "Violation", "first_violation", "is_valid", "tree_sitter_errors"]

_PyCF_ALLOW_INCOMPLETE_INPUT = 0x4000  # codeop.PyCF_ALLOW_INCOMPLETE_INPUT (not exported by ast)
_ONLY_AST = ast.PyCF_ONLY_AST
_VIABLE_FLAGS = _ONLY_AST | _PyCF_ALLOW_INCOMPLETE_INPUT
#: up to this many lines, prefixes are scanned one by one (exact even if viability were not monotone)
LINEAR_SCAN_LINES = 48
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_ON_LINE = re.compile(r"on line (\d+)")


class TooDeep(Exception):
    """CPython's compiler gave up (RecursionError / MemoryError) on deeply nested code."""


@dataclass(frozen=True)
class Violation:
    """The first point where the code stops being viable Python.

    ``start``: character index into the code; ``line``: its 1-based line; ``message``: CPython's message;
    ``incomplete``: the code is a viable but unfinished prefix (the violation is its missing end).
    """

    start: int
    line: int
    message: str
    incomplete: bool = False


def _compile(source: str, flags: int) -> SyntaxError | None:
    """None if ``source`` compiles (AST only, never executed), else the SyntaxError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning / DeprecationWarning for odd escapes etc.
            compile(source, "<code>", "exec", flags, dont_inherit=True)
        return None
    except SyntaxError as exc:  # includes IndentationError / TabError
        return exc
    except ValueError as exc:  # older CPythons reject NUL bytes with ValueError
        err = SyntaxError(str(exc))
        return err
    except (RecursionError, MemoryError) as exc:
        raise TooDeep(f"too deeply nested for CPython's compiler ({type(exc).__name__})") from exc


def is_valid(code: str) -> bool:
    """True when CPython compiles ``code`` (AST only). Raises :class:`TooDeep` when the compiler gives up."""
    return _compile(replace_surrogates(code), _ONLY_AST) is None


def _viable(prefix: str) -> tuple[bool, SyntaxError | None]:
    err = _compile(prefix, _VIABLE_FLAGS)
    return (err is None or err.msg == "incomplete input"), err


def first_violation(code: str, deadline: float | None = None) -> Violation | None:
    """The first non-viable point of ``code`` (module docstring), or None when it compiles.

    ``deadline`` (a ``time.monotonic()`` value) bounds the prefix scan; :class:`TimeoutError` when exceeded.
    Raises :class:`TooDeep` when CPython's compiler gives up on nesting.
    """
    code = replace_surrogates(code)
    err = _compile(code, _ONLY_AST)
    if err is None:
        return None
    if "\x00" in code and err.lineno is None:  # "source code string cannot contain null bytes"
        nul = code.index("\x00")
        return Violation(nul, code.count("\n", 0, nul) + code.count("\r", 0, nul) - code.count("\r\n", 0, nul) + 1,
                         err.msg)
    lines = _LINES.findall(code)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    viable_all, err_all = _viable(code)
    if viable_all:
        # incomplete at the end: start of the line where the unfinished construct begins
        line = err.lineno or len(lines) or 1
        m = _ON_LINE.search(err.msg or "")
        if m:
            line = min(line, int(m.group(1)))
        line = max(1, min(line, max(1, len(lines))))
        return Violation(starts[line - 1] if lines else 0, line, err.msg, incomplete=True)
    n = len(lines)

    def invalid(k: int) -> tuple[bool, SyntaxError | None]:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("syntax check exceeded its time budget")
        ok, e = _viable(code[:starts[k]])
        return (not ok), e

    k_err: SyntaxError | None = err_all
    if n <= LINEAR_SCAN_LINES:
        k = n
        for j in range(1, n + 1):
            bad, e = invalid(j)
            if bad:
                k, k_err = j, e
                break
    else:
        k = 0
        # CPython usually reports the line where the code breaks: check that boundary first (two compilations)
        hint = err_all.lineno if err_all is not None and err_all.lineno else 0
        if 1 <= hint <= n:
            bad, e = invalid(hint)
            if bad and (hint == 1 or not invalid(hint - 1)[0]):
                k, k_err = hint, e
        if not k:  # bisection: prefix[:lo] viable, prefix[:hi] invalid
            lo, hi = 0, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                bad, e = invalid(mid)
                if bad:
                    hi, k_err = mid, e
                else:
                    lo = mid
            k = hi
    line_start = starts[k - 1]
    start = line_start
    # an indentation error is about the whole line's indentation: it starts at the line
    if k_err is not None and k_err.lineno == k and k_err.offset and not isinstance(k_err, IndentationError):
        start = min(line_start + max(0, k_err.offset - 1), starts[k] - 1 if starts[k] > line_start else line_start)
    message = k_err.msg if k_err is not None else err.msg
    return Violation(start, k, message)


def tree_sitter_errors(code: str) -> list[tuple[int, int, str]]:
    """``(start, end, label)`` character ranges of the outermost ERROR nodes and of all MISSING nodes."""
    from rewardlang.runtime.code.parse import byte_to_char, parse

    tree = parse(code)
    root = tree.root_node
    if not root.has_error:
        return []
    found: list[tuple[int, int, str]] = []
    cur = tree.walk()
    while True:
        node = cur.node
        descend = True
        if node.is_error:
            found.append((node.start_byte, node.end_byte, "ERROR"))
            descend = False
        elif node.is_missing:
            found.append((node.start_byte, node.end_byte, f"MISSING {node.type}"))
        elif not node.has_error:
            descend = False  # nothing below
        if descend and cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                offsets = byte_to_char(code, [x for s, e, _ in found for x in (s, e)])
                return [(offsets[2 * i], offsets[2 * i + 1], lab) for i, (_, _, lab) in enumerate(found)]
