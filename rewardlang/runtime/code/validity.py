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
from collections.abc import Sequence
from dataclasses import dataclass

from rewardlang.pycompile import compile_quietly
from rewardlang.runtime.code.parse import replace_surrogates

__all__ = ["LINEAR_SCAN_LINES", "TooDeep", "Violation", "first_violation", "is_valid", "shortest_nonviable_prefix",
           "tree_sitter_errors", "viable"]

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
        compile_quietly(source, flags)  # SyntaxWarning / DeprecationWarning for odd escapes etc.: never an error
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


_STRING_OPEN = re.compile(r"([rRbBuUfF]{0,2})(?:'''|\"\"\"|'|\")")


def _viable(prefix: str) -> tuple[bool, SyntaxError | None]:
    """Whether ``prefix`` compiles or CPython calls it incomplete, and CPython's error.

    CPython's tokenizer reads a string as one token: an input that ends inside one (a docstring not closed yet, a
    one-line string continued by a backslash) is "incomplete" before the parser has seen the string at all, so
    ``x = 1 '''doc`` would pass. Such a prefix counts as incomplete only when a string may stand where it starts:
    the same text with an empty string of the same kind there, followed by a line continuation, is incomplete too.
    """
    err = _compile(prefix, _VIABLE_FLAGS)
    if err is None:
        return True, None
    if err.msg != "incomplete input":
        return False, err
    plain = _compile(prefix, _ONLY_AST)
    if plain is None or "unterminated" not in (plain.msg or "") or "string" not in (plain.msg or ""):
        return True, err
    lines = _LINES.findall(prefix)
    at = sum(len(ln) for ln in lines[:max((plain.lineno or 1) - 1, 0)]) + max((plain.offset or 1) - 1, 0)
    m = _STRING_OPEN.match(prefix, at)
    if m is None:  # CPython did not point at the string's start: its verdict stands
        return True, err
    stands = _compile(prefix[:at] + m.group(1) + "''\\\n", _VIABLE_FLAGS)
    if stands is None or stands.msg == "incomplete input":
        return True, err
    # located at the string's start, where the code breaks (CPython's own message would be about the stand-in)
    return False, SyntaxError("invalid syntax", (plain.filename, plain.lineno, plain.offset, plain.text))


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


# -- viable prefixes at any character (SynCode's rule, decided by CPython) ---------------------------------------
#
# A text P is a *viable prefix* when some text S makes P + S valid Python. CPython decides it. (1) P compiles, or
# CPython calls it incomplete (PyCF_ALLOW_INCOMPLETE_INPUT: its first parser pass consumed every token and asked
# for more at the end of the input: an open bracket, a triple-quoted string, a block header, a trailing backslash):
# P is viable. (2) Otherwise, when P ends inside a line, P + C + "\\\n" is compiled for a few continuations C of
# P's last token (none; a longer name or a keyword the trailing name begins; the quotes of a string whose prefix
# letters end P; a digit after "1e" or "0x", or a keyword the letters after a number begin (`1if`, `3is`: CPython
# warns and accepts); the second character of "!=", "->", ":=", "**", "//", "..."; "n"
# after a pending backslash in a one-line string): the line continuation makes the tokenizer read on past the end,
# so CPython calls it incomplete exactly when its parser consumed every token of P + C without an error and wanted
# more. Any such C is a witness (P + C is a viable prefix, so P is one). (3) A P that ends with a line break
# outside brackets and strings is decided by (1) alone: its logical line is finished.
#
# Viability is monotone (once a prefix is not viable, no longer one is). Inside an unterminated one-line string
# CPython reads the string as one token, checked when it closes: its content (bytes with non-ASCII characters, an
# f-string's replacement fields) does not make a prefix non-viable before the closing quote, as in SynCode, whose
# grammar reads a string as one terminal too.

_IDENT_TAIL = re.compile(r"[^\W\d]\w*$|\w+$")
_NUMBER_TAIL = re.compile(r"(?<![\w.])(?:\d[\w.]*(?:[eE][+-])?|\.\d[\w]*(?:[eE][+-])?)$")
_LETTERS_TAIL = re.compile(r"[^\W\d_]+$")
_STRING_PREFIXES = {"r", "u", "b", "f", "br", "rb", "fr", "rf"}
_KEYWORDS: tuple[str, ...] = ()
#: after P + C: nothing, or a line continuation (the parser asks for the next token at the end of the input)
_THEN = ("", "\\\n")


def _keywords() -> tuple[str, ...]:
    global _KEYWORDS
    if not _KEYWORDS:
        import keyword

        _KEYWORDS = tuple(sorted(set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ()))))
    return _KEYWORDS


def _ok(source: str) -> bool:
    """Step 1: ``source`` compiles or CPython calls it incomplete."""
    return _viable(source)[0]


def _continuations(prefix: str, err: SyntaxError | None) -> list[str]:
    """Texts that continue the last token of ``prefix`` (the empty text first)."""
    out = [""]
    number = _NUMBER_TAIL.search(prefix)
    m = _IDENT_TAIL.search(prefix)
    if m and not number:
        w = m.group(0)
        out += ["x"] + [k[len(w):] for k in _keywords() if k.startswith(w) and k != w]  # a longer name, a keyword
        if w.lower() in _STRING_PREFIXES:  # r, b, f, rb, ...: the prefix letters of a string
            out += ["''", '""']
    if number:
        out.append("1")
        letters = _LETTERS_TAIL.search(prefix)
        if letters:  # a keyword may follow a number directly: `1if x else y`, `3is x` (CPython warns, accepts)
            w = letters.group(0)
            out += [k[len(w):] for k in _keywords() if k.startswith(w) and k != w]
    if prefix[-1:] in ("!", "-", ":", ".", "=", "<", ">", "*", "/"):
        out += ["=", ">", "*", "/", ".", ".."]
    if err is not None and "unterminated string" in (err.msg or "") and prefix.endswith("\\"):
        out.append("n")  # a pending escape
    return out


def viable(prefix: str) -> bool:
    """True when some text can follow ``prefix`` to make valid Python (the rule above; CPython decides).
    Raises :class:`TooDeep` when CPython's compiler gives up on nesting.

    >>> [viable(p) for p in ("def f(x", "x = 1 an", "x = 1 if y", "x = (1 2", "x = \\n", "print(1)\\nelse")]
    [True, True, True, False, False, True]
    >>> [viable(p) for p in ("s = '''doc", "x = 'abc", "x = 1 + # c", "x = 1\\n  y = 2")]
    [True, True, False, False]
    """
    prefix = replace_surrogates(prefix)
    if "\x00" in prefix:
        return False
    ok, err = _viable(prefix)
    if ok:
        return True
    if not prefix or prefix[-1] in "\r\n":
        return False
    for cont in _continuations(prefix, err):
        for then in _THEN:
            if (cont or then) and _ok(prefix + cont + then):
                return True
    return False


def shortest_nonviable_prefix(code: str, cuts: Sequence[int] | None = None, deadline: float | None = None
                              ) -> int | None:
    """The length ``n`` of the shortest prefix ``code[:n]`` that is not viable (:func:`viable`), ``n`` taken from
    ``cuts`` (ascending prefix lengths, e.g. the character ends of the tokens; default every length); None when
    every such prefix is viable. Characters from ``n - 1`` on are past the violation.

    The scan is line by line first (a prefix ending at a line break is decided by one compilation), then within
    the first line whose end is not viable, by bisection over the cuts inside it. ``deadline`` (a
    ``time.monotonic()`` value) bounds it (:class:`TimeoutError`); :class:`TooDeep` as :func:`viable`.

    >>> shortest_nonviable_prefix("x = 1\\ny = = 2\\n")    # "x = 1\\ny = =": the second "=" (index 10)
    11
    >>> shortest_nonviable_prefix("def f(x):\\n    return x +"), shortest_nonviable_prefix("x = 1 an")
    (None, None)
    >>> shortest_nonviable_prefix("x = 1\\ny = = 2\\n", cuts=[1, 5, 6, 9, 12, 14])
    12
    """
    code = replace_surrogates(code)
    n = len(code)
    all_cuts = list(range(1, n + 1)) if cuts is None else sorted({c for c in cuts if 0 < c <= n})
    if not all_cuts:
        return None

    def check() -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("syntax check exceeded its time budget")

    if "\x00" in code:  # CPython refuses the text from its first NUL on
        nul = code.index("\x00")
        got = shortest_nonviable_prefix(code[:nul], [c for c in all_cuts if c <= nul], deadline)
        return got if got is not None else next(c for c in all_cuts if c > nul)
    if _ok(code):
        return None
    lines = _LINES.findall(code)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    complete = len(lines) if code and code[-1] in "\r\n" else len(lines) - 1
    # the first complete line whose end is not viable (prefixes ending at a line break: step 1 decides)
    k = 0
    if complete:
        if complete <= LINEAR_SCAN_LINES:
            for j in range(1, complete + 1):
                check()
                if not _ok(code[:starts[j]]):
                    k = j
                    break
        else:
            lo, hi = 0, complete + 1  # prefix[:starts[lo]] viable; starts[hi] not (complete + 1: unknown)
            if _ok(code[:starts[complete]]):
                lo = complete
            else:
                hi = complete
            while hi - lo > 1 and hi <= complete:
                check()
                mid = (lo + hi) // 2
                if _ok(code[:starts[mid]]):
                    lo = mid
                else:
                    hi = mid
            k = hi if hi <= complete else 0
    if k:
        lo, hi = starts[k - 1], starts[k]   # code[:lo] viable, code[:hi] not
    else:  # every complete line is viable: the last, unfinished line decides
        lo, hi = starts[complete], n
        check()
        if viable(code):
            return None
    inside = [c for c in all_cuts if lo < c < hi]
    a, b = 0, len(inside)  # inside[:a] viable, inside[b:] not
    while a < b:
        check()
        mid = (a + b) // 2
        if viable(code[:inside[mid]]):
            a = mid + 1
        else:
            b = mid
    if a < len(inside):
        return inside[a]
    return next((c for c in all_cuts if c >= hi), None)


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
