"""Syntax highlighting of ``.reward`` source: a Pygments lexer (``pygments.lexers`` entry point, alias
``reward``, files ``*.reward``) and the CLI's use of it.

The lexer is a hand-written scanner rather than a table of regexes because one character needs context: `/`
starts a /regex/ literal where an operand is expected and divides after one (the grammar's contextual lexer
makes the same choice). Words are keywords, literal constants, types (after `:` in `input`/`param`), function
names (before `(`), or names.

    >>> from pygments.token import Keyword, Name, String
    >>> [(t, v) for t, v in RewardLexer().get_tokens('let n = count(completion, /a+/i)')
    ...  if v.strip()][:5]  # doctest: +NORMALIZE_WHITESPACE
    [(Token.Keyword.Declaration, 'let'), (Token.Name.Variable, 'n'), (Token.Operator, '='),
     (Token.Name.Function, 'count'), (Token.Punctuation, '(')]
"""

from __future__ import annotations

import re
from typing import Iterator

from pygments.lexer import Lexer
from pygments.token import (Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace, _TokenType)

__all__ = ["RewardLexer", "scan", "highlight_source", "KEYWORDS", "DECLARATIONS"]

#: words that start a statement and introduce a name
DECLARATIONS = ("spec", "param", "input", "let", "component", "audit")
#: every other keyword of the grammar (`each component` is one keyword there; both words are keywords here)
KEYWORDS = ("import", "from", "in", "on_error", "timeout", "spans", "tokens", "reward", "advantage", "over",
            "group", "batch", "each", "then", "example", "expect", "train", "preference", "if", "else", "and",
            "or", "not", "for")
CONSTANTS = ("true", "false", "none")
#: an audit's clauses: `every N steps`, `window N steps` (N a number or a name) and `margin X` (X a number) are
#: keywords only in that shape, so a component named `margin` or `steps` stays a name (the TextMate grammar
#: matches the same shapes)
_PERIOD = re.compile(r"(?:every|window)[ \t]+(?:\d[\d_]*|[A-Za-z_][A-Za-z0-9_]*)[ \t]+(steps?)\b")
_MARGIN = re.compile(r"margin(?=[ \t]+(?:\d|\.\d))")
#: names every spec has without declaring them
BUILTIN_NAMES = ("completion", "prompt", "step")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?")
_STRING3 = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""', re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_REGEX = re.compile(r"/(?![/*\s])(?:[^/\\\n]|\\.)+/[imsx]*")
_WS = re.compile(r"\s+")
_OPS = ("**", "<=", ">=", "==", "!=", "->", "+-", "±", "<", ">", "+", "-", "*", "/", "%", "=", "?")

# kinds (a neutral vocabulary, shared with the TextMate check): comment, keyword, declaration, constant, type,
# function, variable, builtin, name, number, string, regex, operator, punctuation, whitespace, error
_PYGMENTS: dict[str, _TokenType] = {
    "comment": Comment.Single, "keyword": Keyword, "declaration": Keyword.Declaration,
    "constant": Keyword.Constant, "type": Keyword.Type, "function": Name.Function, "variable": Name.Variable,
    "builtin": Name.Builtin, "name": Name, "number": Number, "string": String.Double, "regex": String.Regex,
    "operator": Operator, "punctuation": Punctuation, "whitespace": Whitespace, "error": Error,
}


def scan(text: str) -> Iterator[tuple[int, str, str]]:
    """(offset, kind, text) for every piece of ``text``, in order, covering it entirely."""
    i, n = 0, len(text)
    operand_ended = False  # the last significant token ends an operand: a `/` now divides
    stmt = ""              # the keyword of the current statement (a word at the start of a line)
    prev = ""              # the last significant token's text
    line_start = True
    bracket_words: list[str] = []
    unit_at = -1           # where the `steps` of an audit's `every N steps` / `window N steps` starts
    while i < n:
        c = text[i]
        if c.isspace():
            m = _WS.match(text, i)
            assert m is not None
            piece = m.group()
            if "\n" in piece:
                line_start = True
            yield i, "whitespace", piece
            i = m.end()
            continue
        at_line_start, line_start = line_start and (i == 0 or text[i - 1] == "\n"), False
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield i, "comment", text[i:j]
            i = j
            continue
        if c == '"':
            m = _STRING3.match(text, i) or _STRING.match(text, i)
            if m is None:  # unterminated: the rest of the line
                j = text.find("\n", i)
                j = n if j < 0 else j
                yield i, "error", text[i:j]
                i = j
                continue
            yield i, "string", m.group()
            i, operand_ended, prev = m.end(), True, '"'
            continue
        if c == "/" and not operand_ended:
            m = _REGEX.match(text, i)
            if m is not None:
                yield i, "regex", m.group()
                i, operand_ended, prev = m.end(), True, "/"
                continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit() and not operand_ended):
            m = _NUMBER.match(text, i)
            assert m is not None
            yield i, "number", m.group()
            i, operand_ended, prev = m.end(), True, "0"
            continue
        m = _NAME.match(text, i)
        if m is not None:
            word = m.group()
            if at_line_start:
                stmt = word
            j = m.end()
            while j < n and text[j] in " \t":
                j += 1
            follows = text[j] if j < n else ""
            if stmt in ("input", "param") and (prev == ":" or (prev == "[" and bracket_words[-1:] == ["list"])):
                kind = "type"  # `input task: group`, `param keywords: list[text]`
            elif word in DECLARATIONS and at_line_start:
                kind = "declaration"
            elif word in ("every", "window") and _PERIOD.match(text, i) or _MARGIN.match(text, i) or i == unit_at:
                kind = "keyword"
                period = _PERIOD.match(text, i) if word in ("every", "window") else None
                unit_at = period.start(1) if period is not None else unit_at
            elif word in CONSTANTS:
                kind = "constant"
            elif word in KEYWORDS or word in DECLARATIONS:
                kind = "keyword"  # `each component`; `over(code)`, `spans(...)` of a tokens clause too
            elif follows == "(":
                kind = "function"
            elif prev in DECLARATIONS and stmt == prev:
                kind = "variable"
            elif word in BUILTIN_NAMES:
                kind = "builtin"
            else:
                kind = "name"
            yield i, kind, word
            i = m.end()
            operand_ended = kind not in ("keyword", "declaration")
            prev = word
            continue
        for op in _OPS:
            if text.startswith(op, i):
                yield i, "operator", op
                i += len(op)
                operand_ended, prev = False, op
                break
        else:
            if c in "([{":
                bracket_words.append(prev)
                operand_ended = False
            elif c in ")]}":
                if bracket_words:
                    bracket_words.pop()
                operand_ended = c != "}"
            elif c in ",:.":
                operand_ended = False
            else:
                yield i, "error", c
                i += 1
                operand_ended, prev = False, c
                continue
            yield i, "punctuation", c
            i += 1
            prev = c


class RewardLexer(Lexer):
    """Pygments lexer for rewardlang specs (``.reward`` files)."""

    name = "rewardlang"
    aliases = ["reward", "rewardlang"]
    filenames = ["*.reward"]
    mimetypes = ["text/x-reward"]
    url = "https://github.com/rewardlang/rewardlang"

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, _TokenType, str]]:  # type: ignore[override]
        for offset, kind, piece in scan(text):
            yield offset, _PYGMENTS[kind] if kind != "whitespace" else (Whitespace if piece.strip() == "" else Text), \
                piece


def highlight_source(text: str) -> str:
    """``text`` with ANSI colours for a terminal (the CLI calls this only when its output is a terminal)."""
    from pygments import highlight
    from pygments.formatters import TerminalFormatter

    return highlight(text, RewardLexer(), TerminalFormatter()).rstrip("\n")
