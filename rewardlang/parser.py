"""Parsing ``.reward`` source into the syntax tree of :mod:`rewardlang.syntax`.

The grammar lives beside this file (``grammar.lark``); :class:`ToSyntax` is its Transformer, one method per
rule, building nodes that carry their source location (Lark's ``propagate_positions``).

    >>> from rewardlang.parser import parse
    >>> mod = parse('let n = count(completion, "Thus")\\n', "x.reward")
    >>> type(mod.body[0]).__name__, mod.body[0].name, mod.body[0].loc.line
    ('Let', 'n', 1)
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from rewardlang import syntax as S
from rewardlang.diagnostics import Diagnostic, did_you_mean

__all__ = ["parse", "ParseFailure"]

_GRAMMAR = Path(__file__).with_name("grammar.lark")


class ParseFailure(Exception):
    """A spec that does not parse: ``diagnostics`` holds every syntax error found (at least one, in file order;
    after a syntax error the parser resumes at the next statement, see :func:`_recover`); ``diagnostic`` is the
    first."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic]) -> None:
        diags = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        if not diags:
            raise ValueError("a ParseFailure needs a diagnostic")
        super().__init__(diags[0].message)
        self.diagnostics = diags
        self.diagnostic = diags[0]


_SINK = threading.local()


def _on_comment(tok: Token) -> Token:
    # Comments are %ignore'd by the grammar; the lexer still reports them here, which is how fmt keeps them.
    sink = getattr(_SINK, "tokens", None)
    if sink is not None:
        sink.append(tok)
    return tok


def _cache_file() -> str | bool:
    """Where Lark keeps the built LALR tables (building them costs ~0.1 s per process; loading ~0.01 s).

    Lark names the file itself and checks it against the grammar and options, so a stale cache is rebuilt.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "rewardlang")
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            return False
    except OSError:
        return False
    import hashlib

    from lark import __version__ as lark_version

    digest = hashlib.sha256(_GRAMMAR.read_bytes() + lark_version.encode()).hexdigest()[:16]
    return os.path.join(path, f"grammar-{digest}.lark-cache")


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(
        _GRAMMAR.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        start="module",
        lexer_callbacks={"COMMENT": _on_comment},
        cache=_cache_file(),
    )


def _loc(file: str, meta_or_tok: Any) -> S.Loc:
    m = meta_or_tok
    if getattr(m, "empty", False):
        return S.Loc.unknown(file)
    return S.Loc(file, m.line, m.column, m.end_line, m.end_column,
                 getattr(m, "start_pos", 0), getattr(m, "end_pos", 0))


class _LiteralError(Exception):
    def __init__(self, message: str, tok: Token) -> None:
        super().__init__(message)
        self.tok = tok


def _decode_string(tok: Token) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = ast.literal_eval(str(tok))
        except (SyntaxError, ValueError) as exc:
            raise _LiteralError(f"invalid string literal: {exc.msg if isinstance(exc, SyntaxError) else exc}",
                                tok) from None
    if not isinstance(value, str):  # pragma: no cover - the token regex only admits strings
        raise _LiteralError("invalid string literal", tok)
    return value


@v_args(meta=True)
class ToSyntax(Transformer_NonRecursive):
    """Lark tree → :mod:`rewardlang.syntax` nodes (one method per grammar rule)."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    def _l(self, meta: Any) -> S.Loc:
        return _loc(self.file, meta)

    def _tl(self, tok: Token) -> S.Loc:
        return _loc(self.file, tok)

    # ---- statements
    def module(self, meta: Any, stmts: list) -> list:
        return stmts

    def spec_stmt(self, meta: Any, c: list) -> S.SpecStmt:
        name, doc = c
        return S.SpecStmt(self._l(meta), str(name), _decode_string(doc) if doc is not None else None)

    def import_stmt(self, meta: Any, c: list) -> S.Import:
        return S.Import(self._l(meta), _decode_string(c[0]), None)

    def from_import_stmt(self, meta: Any, c: list) -> S.Import:
        return S.Import(self._l(meta), _decode_string(c[0]), [(str(t), self._tl(t)) for t in c[1:]])

    def param_stmt(self, meta: Any, c: list) -> S.Param:
        name, typ, default, doc = c
        return S.Param(self._l(meta), str(name), typ, default, _decode_string(doc) if doc is not None else None)

    def input_stmt(self, meta: Any, c: list) -> S.Input:
        name, typ, column = c
        return S.Input(self._l(meta), str(name), typ, _decode_string(column) if column is not None else None)

    def let_stmt(self, meta: Any, c: list) -> S.Let:
        return S.Let(self._l(meta), str(c[0]), c[1])

    def range(self, meta: Any, c: list) -> tuple:
        return (c[0], c[1])

    def on_error_clause(self, meta: Any, c: list) -> tuple:
        return ("on_error", c[0], self._l(meta))

    def timeout_clause(self, meta: Any, c: list) -> tuple:
        return ("timeout", c[0], self._l(meta))

    def spans_clause(self, meta: Any, c: list) -> tuple:
        return ("spans", c[0], self._l(meta))

    def tokens_clause(self, meta: Any, c: list) -> tuple:
        return ("tokens", c[0], self._l(meta))

    def component_stmt(self, meta: Any, c: list) -> S.Component:
        name, rng, value, *clauses = c
        comp = S.Component(self._l(meta), str(name), rng, value)
        for kind, expr, loc in clauses:
            if kind in comp.clause_locs:
                raise _DuplicateClause(kind, loc)
            comp.clause_locs[kind] = loc
            setattr(comp, kind, expr)
        return comp

    def every_clause(self, meta: Any, c: list) -> tuple:
        return ("every", c[1], self._l(meta))

    def window_clause(self, meta: Any, c: list) -> tuple:
        return ("window", c[1], self._l(meta))

    def margin_clause(self, meta: Any, c: list) -> tuple:
        return ("margin", c[1], self._l(meta))

    def audit_stmt(self, meta: Any, c: list) -> S.Audit:
        name, rng, value, *clauses = c
        audit = S.Audit(self._l(meta), str(name), rng, value)
        for kind, expr, loc in clauses:
            if kind in audit.clause_locs:
                raise _DuplicateClause(kind, loc, "E218")
            audit.clause_locs[kind] = loc
            setattr(audit, kind, expr)
        return audit

    def weight_stmt(self, meta: Any, c: list) -> S.Weight:
        return S.Weight(self._l(meta), str(c[0]), c[1])

    def reward_stmt(self, meta: Any, c: list) -> S.Reward:
        return S.Reward(self._l(meta), c[0])

    def group_scope(self, meta: Any, c: list) -> S.Scope:
        return S.Scope(self._l(meta), "group", str(c[0]))

    def batch_scope(self, meta: Any, c: list) -> S.Scope:
        return S.Scope(self._l(meta), "batch", None)

    def stage(self, meta: Any, c: list) -> S.Stage:
        return S.Stage(self._l(meta), c[0], c[1])

    def advantage_stmt(self, meta: Any, c: list) -> S.Advantage:
        scope, each, *stages = c
        return S.Advantage(self._l(meta), scope, each is not None, stages)

    def tolerance(self, meta: Any, c: list) -> Any:
        return c[-1]

    def example_input(self, meta: Any, c: list) -> S.ExampleInput:
        return S.ExampleInput(self._l(meta), str(c[0]), c[1])

    def example_expect(self, meta: Any, c: list) -> S.ExampleExpect:
        name, value, tol = c
        return S.ExampleExpect(self._l(meta), str(name), value, tol)

    def example_stmt(self, meta: Any, c: list) -> S.Example:
        name, *items = c
        items = [i for i in items if i is not None]
        return S.Example(
            self._l(meta), _decode_string(name) if name is not None else None,
            [i for i in items if isinstance(i, S.ExampleInput)],
            [i for i in items if isinstance(i, S.ExampleExpect)],
        )

    def section_item(self, meta: Any, c: list) -> S.SectionItem:
        return S.SectionItem(self._l(meta), str(c[0]), c[1])

    def section_stmt(self, meta: Any, c: list) -> S.Section:
        return S.Section(self._l(meta), str(c[0]), [i for i in c[1:] if i is not None])

    def type(self, meta: Any, c: list) -> S.TypeRef:
        name, inner, opt = c
        text = str(name) + (f"[{inner.text}]" if inner is not None else "") + ("?" if opt is not None else "")
        return S.TypeRef(self._l(meta), text)

    # ---- expressions
    def number(self, meta: Any, c: list) -> S.Number:
        text = str(c[0])
        try:
            value = float(text.replace("_", ""))
        except ValueError:
            raise _LiteralError(f"invalid number `{text}`", c[0]) from None
        return S.Number(self._l(meta), value, text)

    def string(self, meta: Any, c: list) -> S.String:
        return S.String(self._l(meta), _decode_string(c[0]), str(c[0]))

    def regex(self, meta: Any, c: list) -> S.Regex:
        text = str(c[0])
        body, _, flags = text[1:].rpartition("/")
        return S.Regex(self._l(meta), body, flags, text)

    def true(self, meta: Any, c: list) -> S.Bool:
        return S.Bool(self._l(meta), True)

    def false(self, meta: Any, c: list) -> S.Bool:
        return S.Bool(self._l(meta), False)

    def none(self, meta: Any, c: list) -> S.NoneLit:
        return S.NoneLit(self._l(meta))

    def name(self, meta: Any, c: list) -> S.Name:
        return S.Name(self._l(meta), str(c[0]))

    def call(self, meta: Any, c: list) -> S.Call:
        name, *args = c
        out: list[S.CallArg] = []
        for a in args:
            if a is None:
                continue
            if isinstance(a, (S.Keyword, S.Arrow, S.Arm, S.ElseArm, S.Comprehension)):
                out.append(a)
            else:
                out.append(S.Positional(a.loc, a))
        return S.Call(self._l(meta), str(name), self._tl(name), out)

    def kwarg(self, meta: Any, c: list) -> S.Keyword:
        return S.Keyword(self._l(meta), str(c[0]), c[1])

    def arrow_arg(self, meta: Any, c: list) -> S.Arrow:
        return S.Arrow(self._l(meta), c[0], c[1])

    def arm(self, meta: Any, c: list) -> S.Arm:
        return S.Arm(self._l(meta), str(c[0]), c[1], c[2])

    def else_arm(self, meta: Any, c: list) -> S.ElseArm:
        return S.ElseArm(self._l(meta), c[0])

    def targets(self, meta: Any, c: list) -> list[str]:
        return [str(t) for t in c]

    def comprehension(self, meta: Any, c: list) -> S.Comprehension:
        value, targets, it, cond = c
        return S.Comprehension(self._l(meta), value, targets, it, cond)

    def index(self, meta: Any, c: list) -> S.Index:
        return S.Index(self._l(meta), c[0], c[1])

    def attr(self, meta: Any, c: list) -> S.Attr:
        return S.Attr(self._l(meta), c[0], str(c[1]))

    def unary(self, meta: Any, c: list) -> S.Unary:
        return S.Unary(self._l(meta), str(c[0]), c[1])

    def binop(self, meta: Any, c: list) -> S.BinOp:
        return S.BinOp(self._l(meta), str(c[1]), c[0], c[2])

    def pow_op(self, meta: Any, c: list) -> S.BinOp:
        return S.BinOp(self._l(meta), "**", c[0], c[1])

    def compare(self, meta: Any, c: list) -> S.Compare:
        return S.Compare(self._l(meta), str(c[1]), c[0], c[2])

    def and_op(self, meta: Any, c: list) -> S.BoolOp:
        return S.BoolOp(self._l(meta), "and", c[0], c[1])

    def or_op(self, meta: Any, c: list) -> S.BoolOp:
        return S.BoolOp(self._l(meta), "or", c[0], c[1])

    def not_op(self, meta: Any, c: list) -> S.Not:
        return S.Not(self._l(meta), c[0])

    def if_expr(self, meta: Any, c: list) -> S.IfExpr:
        then, cond, orelse = c
        return S.IfExpr(self._l(meta), cond, then, orelse)

    def tuple(self, meta: Any, c: list) -> S.TupleLit:
        return S.TupleLit(self._l(meta), [x for x in c if x is not None])

    def list(self, meta: Any, c: list) -> S.ListLit:
        return S.ListLit(self._l(meta), [x for x in c if x is not None])


class _DuplicateClause(Exception):
    def __init__(self, kind: str, loc: S.Loc, code: str = "E216") -> None:
        super().__init__(kind)
        self.kind = kind
        self.loc = loc
        self.code = code


_READABLE = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "REGEX": "a /regex/",
    "COMP_OP": "a comparison", "ADD_OP": "`+` or `-`", "MUL_OP": "`*`, `/` or `%`", "SECTION": "`train`",
    "EACH_COMPONENT": "`each component`", "OPTIONAL": "`?`", "$END": "end of file",
    "EVERY": "`every`", "WINDOW": "`window`", "MARGIN": "`margin`", "STEPS": "`steps`",
}


def _describe(terminal: str) -> str:
    if terminal in _READABLE:
        return _READABLE[terminal]
    for t in _lark().terminals:
        if t.name == terminal:
            p = t.pattern
            if type(p).__name__ == "PatternStr":
                return f"`{p.value}`"
    return terminal.lower()


def _expected_hint(expected: set[str]) -> str | None:
    names = sorted({_describe(e) for e in expected if not e.startswith("__")})
    if not names:
        return None
    if len(names) > 8:
        names = names[:8] + ["…"]
    return "expected " + ", ".join(names)


_REGEX_HINT = "a /regex/ must close on the same line (escape `/` inside it as `\\/`)"

#: the body of a /regex/ as the REGEX terminal reads it: anything but `/`, `\\` and a line break, or an escape
_REGEX_BODY = re.compile(r"(?:[^/\\\n]|\\.)*")


def _opens_unterminated_regex(exc: UnexpectedToken, source: str) -> bool:
    """Whether the parser stopped at a `/` where an operand (a /regex/ among them) must come, and that `/` starts
    a regex body which the line ends before closing.

    The contextual lexer reads such a `/` as the division operator (the REGEX terminal did not match), so the
    error is "unexpected '/'" although the user wrote an unterminated regex. A `/` followed by a space, `*`, `/`
    or the end of the line cannot start a regex (see REGEX in grammar.lark) and stays a misplaced operator.
    """
    tok = exc.token
    if tok.type != "MUL_OP" or str(tok) != "/" or tok.start_pos is None:
        return False
    if "REGEX" not in set(exc.accepts or exc.expected or ()):
        return False
    start = tok.start_pos + 1
    if start >= len(source) or source[start] in "/*" or source[start].isspace():
        return False
    end = _REGEX_BODY.match(source, start).end()
    return end >= len(source) or source[end] != "/"


#: the keywords that start a statement (a misspelt one is read as `<component>.weight = ...`)
STATEMENT_KEYWORDS = ("spec", "import", "from", "param", "input", "let", "component", "reward", "advantage",
                      "example", "train", "preference", "audit")

_IN_HINT = ("`in` is not an operator here: test text with contains(completion, \"x\"), startswith(...), "
            "endswith(...), or count(completion, /pattern/) > 0")


#: characters other languages use where rewardlang has a word or another character
_CHAR_HABITS = {
    "'": "strings are written in double quotes: \"text\"",
    "&": "write `and` (not `&&` or `&`)",
    "|": "write `or` (not `||` or `|`)",
    "!": "write `not` (not `!`); `!=` compares",
}


def _habit_hint(exc: UnexpectedToken, source: str) -> str | None:
    """A hint for what a Python (or other language) habit produced, when the syntax error looks like one."""
    tok = exc.token
    text = str(tok)
    expected = set(exc.accepts or exc.expected or ())
    if text == "in":  # `"x" in completion` (a comprehension's `in` is expected, so never lands here)
        return _IN_HINT
    if text == "is":  # `x is none`, `x is not none`
        return "`is` is not an operator: test for none with `== none` or `!= none`"
    start = tok.start_pos or 0
    line_start = source.rfind("\n", 0, start) + 1
    before = source[line_start:start]
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*", before)
    if m and expected and expected <= {"DOT", "LBRACE"}:
        # a line starting with a name that is not a keyword: the parser tried `<component>.weight = ...` (or an
        # unknown `<name> { ... }` section, which the checker reports as E501)
        word = m.group(1)
        close = did_you_mean(word, STATEMENT_KEYWORDS)
        if close:
            return close.replace("did you mean", "a statement starts with a keyword: did you mean")
        return ("a statement starts with a keyword (" + ", ".join(f"`{k}`" for k in STATEMENT_KEYWORDS[:8])
                + ", …) or sets a weight: `<component>.weight = 2`")
    line_end = source.find("\n", start)
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\{", source[line_start:line_end if line_end >= 0 else None])
    if m and m.group(1) not in STATEMENT_KEYWORDS:
        # `exmaple { completion: ... }` was read as an unknown `<name> { key = value }` section
        close = did_you_mean(m.group(1), STATEMENT_KEYWORDS)
        if close:
            return close.replace("did you mean", "a statement starts with a keyword: did you mean")
    return None


def _syntax_diagnostic(exc: UnexpectedInput, file: str, source: str) -> Diagnostic:
    line = getattr(exc, "line", 1) or 1
    column = getattr(exc, "column", 1) or 1
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END" or isinstance(exc, UnexpectedEOF):
        lines = source.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()  # a final newline ends the last line; it does not start one
        line = len(lines)
        column = len(lines[-1]) + 1
        expected = getattr(exc, "expected", None) or getattr(exc, "accepts", None) or set()
        return Diagnostic("E003", "unexpected end of file", S.Loc(file, line, column, line, column + 1),
                          hint=_expected_hint(set(expected)))
    if isinstance(exc, UnexpectedToken) and _opens_unterminated_regex(exc, source):
        tok = exc.token
        pos = tok.start_pos or 0
        return Diagnostic("E002", "unexpected character '/'",
                          S.Loc(file, tok.line or line, tok.column or column, tok.line or line,
                                (tok.column or column) + 1, pos, pos + 1),
                          hint=_REGEX_HINT)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        width = max(1, len(str(tok)))
        habit = _habit_hint(exc, source)
        loc = S.Loc(file, tok.line or line, tok.column or column, tok.line or line,
                    (tok.column or column) + (width if "\n" not in str(tok) else 1),
                    tok.start_pos or 0, (tok.start_pos or 0) + width)
        shown = str(tok) if len(str(tok)) <= 30 else str(tok)[:27] + "..."
        hint = habit or _expected_hint(set(exc.accepts or exc.expected))
        return Diagnostic("E001", f"unexpected {shown!r}", loc, hint=hint)
    if isinstance(exc, UnexpectedCharacters):
        ch = source[exc.pos_in_stream] if exc.pos_in_stream < len(source) else "?"
        loc = S.Loc(file, line, column, line, column + 1, exc.pos_in_stream, exc.pos_in_stream + 1)
        hint = None
        if ch == '"':
            hint = "unterminated string: close it with `\"` on the same line, or use a triple-quoted string"
        elif ch in _CHAR_HABITS:
            hint = _CHAR_HABITS[ch]
            if ch == "!" and source[exc.pos_in_stream + 1:exc.pos_in_stream + 2] == "=":
                hint = None
        elif ch == "/":
            hint = _REGEX_HINT
        else:
            allowed = getattr(exc, "allowed", None)
            if allowed:
                hint = _expected_hint(set(allowed))
        return Diagnostic("E002", f"unexpected character {ch!r}", loc, hint=hint)
    return Diagnostic("E001", "syntax error", S.Loc(file, line, column, line, column + 1))  # pragma: no cover


#: opening bracket tokens -> (closing token, opening text, closing text)
_OPENERS = {"LPAR": ("RPAR", "(", ")"), "LSQB": ("RSQB", "[", "]"), "LBRACE": ("RBRACE", "{", "}")}
_CLOSERS = {"RPAR": ")", "RSQB": "]", "RBRACE": "}"}
#: a line that starts a statement: a keyword, or `<component>.weight = ...`
_STATEMENT_START = re.compile(r"[ \t]*(?:(?:" + "|".join(STATEMENT_KEYWORDS) + r")\b"
                              r"|[A-Za-z_]\w*[ \t]*\.[ \t]*weight\b)")


def _tok_loc(file: str, tok: Token, width: int = 1) -> S.Loc:
    pos = tok.start_pos or 0
    return S.Loc(file, tok.line or 1, tok.column or 1, tok.line or 1, (tok.column or 1) + width, pos, pos + width)


def _where(tok: Token) -> str:
    return f"{tok.line}:{tok.column}"


def _bracket_diagnostic(source: str, file: str) -> Diagnostic | None:
    """The diagnostic of a syntax error that is a bracket or a string left open, said where it opens, as CPython
    3.10+ and rustc say it (issue 37, item 16): ``unclosed `(``` at the ``(`` when the file ends inside it, or when
    the parser stops at the start of the next statement (a keyword, a weight) with it still open; a closing
    bracket that does not match the one open (or none); ``unclosed string`` at a string's opening quote. None:
    the error is no such thing (the parser's own diagnostic stands).

    The brackets are the parser's own tokens up to the error (its lexer tells a /regex/ from a division, and
    skips strings and comments), so a bracket inside a string or a regex never counts."""
    ip = _lark().parse_interactive(source)
    stack: list[Token] = []
    tokens = ip.iter_parse()
    current: Token | None = None
    while True:
        try:
            tok = next(tokens)
        except StopIteration:
            try:
                ip.feed_eof()
            except UnexpectedInput:
                break
            return None  # no syntax error at all
        except UnexpectedCharacters as exc:
            return _unclosed_string(source, file, exc.pos_in_stream, stack)
        except UnexpectedToken as exc:
            err = exc.token
            if current is not None and (err is not current and err.start_pos != current.start_pos):
                _track(current, stack)  # the contextual lexer refused the next token: this one was accepted
            return _open_at(err, stack, source, file) if isinstance(err, Token) else None
        except UnexpectedInput:
            return None
        if current is not None:  # the token before was accepted: it counts
            _track(current, stack)
        current = tok
    # the end of the file: every token was accepted, the statement is not finished
    if current is not None:
        _track(current, stack)
    if stack:
        opener = stack[-1]
        closer = _OPENERS[opener.type][2]
        return Diagnostic("E006", f"unclosed `{opener}`", _tok_loc(file, opener),
                          hint=f"the file ends before it is closed: close it with `{closer}`")
    return None


def _track(tok: Token, stack: list[Token]) -> None:
    if tok.type in _OPENERS:
        stack.append(tok)
    elif tok.type in _CLOSERS and stack and _OPENERS[stack[-1].type][0] == tok.type:
        stack.pop()


def _open_at(err: Token, stack: list[Token], source: str, file: str) -> Diagnostic | None:
    """The parser refused ``err`` with the brackets of ``stack`` open."""
    if err.type in _CLOSERS:
        if not stack:
            return Diagnostic("E006", f"unmatched `{err}`", _tok_loc(file, err),
                              hint="no bracket is open here: remove it, or open one before it")
        opener = stack[-1]
        want = _OPENERS[opener.type][2]
        if _OPENERS[opener.type][0] != err.type:
            return Diagnostic("E006", f"closing `{err}` does not match `{opener}`", _tok_loc(file, err),
                              hint=f"`{opener}` opened at {_where(opener)} is closed by `{want}`: close it "
                                   f"before this `{err}`")
        return None
    if not stack or err.type == "$END":
        return None
    opener = stack[-1]
    # a line after the bracket's, up to the error's, that starts a statement: the parser read on into it (the
    # contextual lexer takes `component` there for a name), so the bracket was never closed
    lines = source.split("\n")
    for n in range((opener.line or 0) + 1, min(err.line or 0, len(lines)) + 1):
        m = _STATEMENT_START.match(lines[n - 1])
        if m is None:
            continue
        word = re.match(r"[ \t]*(\w+)", lines[n - 1])
        column = len(lines[n - 1]) - len(lines[n - 1].lstrip(" \t")) + 1
        return _unclosed_before(file, opener, n, column, word.group(1) if word else "")
    return None


def _unclosed_before(file: str, opener: Token, line: int, column: int, word: str) -> Diagnostic:
    """``opener`` is still open where the statement at line:column (starting with ``word``) starts."""
    closer = _OPENERS[opener.type][2]
    return Diagnostic("E006", f"unclosed `{opener}`", _tok_loc(file, opener),
                      hint=f"the next statement starts at {line}:{column} (`{word}`) before it is closed: close it "
                           f"with `{closer}`")


def _unclosed_string(source: str, file: str, pos: int, stack: list[Token]) -> Diagnostic | None:
    """A `"` the lexer cannot read as a string: a string that is not closed (on its line, or, triple-quoted,
    before the end of the file). A triple quote reaches the lexer as an empty string `""` and then a `"`."""
    if source[pos:pos + 1] != '"':
        return None
    triple = pos >= 2 and source[pos - 2:pos] == '""' and (pos < 3 or source[pos - 3] != '"')
    start = pos - 2 if triple else pos
    line = source.count("\n", 0, start) + 1
    column = start - (source.rfind("\n", 0, start) + 1) + 1
    width = 3 if triple else 1
    loc = S.Loc(file, line, column, line, column + width, start, start + width)
    if triple:
        return Diagnostic("E007", "unclosed string", loc,
                          hint='the file ends before it is closed: close it with `"""`')
    return Diagnostic("E007", "unclosed string", loc,
                      hint='a string closes on the line it opens: end it with `"` (a triple-quoted string, '
                           '`"""..."""`, may span lines)')


# ---------------------------------------------------------------- recovery: every statement's syntax error

#: words that may follow a name in an expression, a block or a statement's tail. A statement keyword is read as
#: a name where a name may come (the contextual lexer), so a line `input if flag else 0` may go on with an
#: expression left open above it; `input prompt: str` cannot
_GOES_ON = frozenset({"and", "or", "not", "if", "else", "for", "in", "then", "over", "from", "import", "on_error",
                      "timeout", "spans", "tokens", "every", "window", "margin", "step", "steps"})

#: the head of a statement: its keyword with what must follow it there, which no expression, block item, clause
#: or other statement can hold. `reward =` counts only outside brackets (inside one it is a keyword argument, a
#: setting or an expectation); `input` alone may be an operand; `from "x"` is never one (after `input x: text`
#: it is the input's column, and a whole parse reads `from "x" import y` on the next line so)
_HEAD = re.compile(
    r"(?P<indent>[ \t]*)(?:"
    r"(?:spec|param|input|let|component|audit)[ \t]+(?P<name>[A-Za-z_]\w*)\b"
    r'|import[ \t]*"'
    r"|advantage[ \t]+over\b"
    r'|example[ \t]*[{"]'
    r"|(?:train|preference)[ \t]*\{"
    r"|[A-Za-z_]\w*[ \t]*\.[ \t]*weight[ \t]*=(?!=)"
    r"|(?P<reward>reward[ \t]*=(?!=)))"
)
#: the lexical pieces of a line, for :func:`_scan_line`: a triple quote, a string (maybe unterminated), a comment,
#: a word, a number, a bracket, a `/`, blanks, any other character
_PIECE = re.compile(r'"""|"(?:[^"\\]|\\.)*"?|#.*|[A-Za-z_]\w*|\d[\w.]*|[(\[{]|[)\]}]|/|\s+|.')
#: the rest of a triple-quoted string on one line, and its closing quotes if the line holds them
_TRIPLE_REST = re.compile(r'(?:[^"\\]|\\.|"(?!""))*(""")?')
#: a /regex/ as the REGEX terminal reads it (grammar.lark)
_REGEX_TOKEN = re.compile(r"/(?![/*\s])(?:[^/\\\n]|\\.)+/[imsx]*")
#: words after which an operand comes (so a `/` there opens a /regex/, it does not divide)
_BEFORE_OPERAND = frozenset({"and", "or", "not", "if", "else", "in", "then", "on_error", "timeout", "spans",
                             "tokens", "every", "window", "margin"})


def _scan_line(text: str, in_triple: bool, depth: int, operand: bool) -> tuple[bool, int, bool]:
    """The state after one line, from the state before it: inside a triple-quoted string, how many brackets are
    open, whether the last piece was an operand. Strings, comments and /regexes/ are skipped as the lexer skips
    them (a `/` after an operand divides); an unterminated `"` string ends with its line, as the lexer fails it."""
    i, n = 0, len(text)
    while i < n:
        if in_triple:
            m = _TRIPLE_REST.match(text, i)
            if m.group(1) is None:
                return True, depth, operand
            in_triple, operand, i = False, True, m.end()
            continue
        m = _PIECE.match(text, i)
        piece, i = m.group(), m.end()
        c = piece[0]
        if piece == '"""':
            in_triple = True
        elif c == '"':
            operand = True
        elif c == "#":
            break
        elif c.isalpha() or c == "_":
            operand = piece not in _BEFORE_OPERAND
        elif c.isdigit():
            operand = True
        elif c in "([{":
            depth, operand = depth + 1, False
        elif c in ")]}":
            depth, operand = max(0, depth - 1), True
        elif c == "/" and not operand and (r := _REGEX_TOKEN.match(text, i - 1)):
            i, operand = r.end(), True
        elif not c.isspace():
            operand = False
    return in_triple, depth, operand


def _statement_heads(source: str) -> list[tuple[int, int, int, str]]:
    """(offset, line, column, first word) of each line where a statement starts for certain: its head
    (:data:`_HEAD`) at the statement indentation (the first head's), outside a triple-quoted string (and, for
    `reward =`, outside brackets). No statement, block or expression goes on across such a line, so a spec
    that does not parse is cut there into statements that parse (or fail) alone. A bracket left open does not
    keep a line from being a head: the head could not be inside it (the parser would stop there, and
    :func:`_open_at` says so), but the count of open brackets restarts at each head."""
    heads: list[tuple[int, int, int, str]] = []
    indent: str | None = None
    in_triple, depth, operand = False, 0, False
    offset = 0
    for n, text in enumerate(source.split("\n"), 1):
        m = None if in_triple else _HEAD.match(text)
        if m and m.group("name") not in _GOES_ON and (m.group("reward") is None or depth == 0):
            if indent is None:
                indent = m.group("indent")
            if m.group("indent") == indent:
                word = re.match(r"\w+", text[len(indent):])
                heads.append((offset, n, len(indent) + 1, word.group() if word else ""))
                depth, operand = 0, False
        in_triple, depth, operand = _scan_line(text, in_triple, depth, operand)
        offset += len(text) + 1
    return heads


#: said after the last syntax error: the checker needs a syntax tree, so no other error is known yet
_UNCHECKED = "names, types and examples are checked once the spec parses"


def _recover(source: str, file: str, exc: UnexpectedInput) -> list[Diagnostic]:
    """Every syntax error of ``source``, whose parse failed with ``exc``, in file order: panic-mode recovery at
    statement boundaries. The source is cut at the lines that start a statement (:func:`_statement_heads`) and
    each piece is parsed alone, at its own lines and columns (the lines before it stay as empty lines), so one
    statement's error neither hides nor causes another's. A piece that ends unfinished where the next statement
    starts gets the error of an unfinished statement (:func:`_cut_short`); any other one, the diagnostic a whole
    parse gives (:func:`_bracket_diagnostic`, :func:`_syntax_diagnostic`). The last one says that the checks
    after parsing have not run."""
    found = _piecewise(source, file, exc)
    if not found:  # one statement, or (not expected) every piece parsed alone: the whole parse's error
        found = [_bracket_diagnostic(source, file) or _syntax_diagnostic(exc, file, source)]
    found[-1] = dataclasses.replace(found[-1], notes=[*found[-1].notes, _UNCHECKED])
    return found


def _piecewise(source: str, file: str, exc: UnexpectedInput) -> list[Diagnostic]:
    """The errors of the statements of ``source`` parsed one by one (none: it holds one statement)."""
    heads = [h for h in _statement_heads(source) if h[0] > 0]
    if not heads:
        return []
    starts = [0] + [h[0] for h in heads]
    ends = [h[0] for h in heads] + [len(source)]
    lines = [1] + [h[1] for h in heads]
    # the whole parse accepted the statements before the one it failed in, or, when it read on into the next
    # statement (an unfinished one before it), before the one ahead of that
    first = 0
    tok = getattr(exc, "token", None)
    err_line = tok.line if isinstance(tok, Token) else getattr(exc, "line", None)
    if isinstance(err_line, int) and err_line > 0:
        first = max(0, bisect.bisect_right(lines, err_line) - 2)
    found: list[Diagnostic] = []
    seen: set[tuple] = set()
    for k in range(first, len(starts)):
        d = _segment_diagnostic(source, file, starts[k], ends[k], lines[k], heads[k] if k < len(heads) else None)
        if d is None:
            continue
        key = (d.code, d.loc.line, d.loc.column) if d.loc is not None else (d.code, d.message)
        if key not in seen:  # the same error twice is said once
            seen.add(key)
            found.append(d)
    found.sort(key=lambda d: (d.loc.line, d.loc.column) if d.loc is not None else (0, 0))
    return found


def _segment_diagnostic(source: str, file: str, start: int, end: int, line: int,
                        after: tuple[int, int, int, str] | None) -> Diagnostic | None:
    """The syntax error of ``source[start:end]`` (which starts line ``line``) parsed alone, or None; ``after``: the
    head of the statement that follows it (None: it runs to the end of the file)."""
    text = "\n" * (line - 1) + source[start:end]  # the lines before it, empty: lines and columns stay exact
    try:
        _lark().parse(text)
        return None
    except UnexpectedInput as exc:
        if after is not None and (isinstance(exc, UnexpectedEOF)
                                  or isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
            d = _cut_short(text, file, after, exc)
        else:
            d = _bracket_diagnostic(text, file) or _syntax_diagnostic(exc, file, text)
    loc = d.loc
    shift = start - (line - 1)  # offsets in `text` -> offsets in `source`
    if loc is not None and (loc.start or loc.end):
        d = dataclasses.replace(d, loc=dataclasses.replace(loc, start=loc.start + shift, end=loc.end + shift))
    return d


#: what an operator (by its text or token type) lacks when nothing follows it
_MISSING = {"ADD_OP": "operand", "MUL_OP": "operand", "COMP_OP": "operand", "**": "operand", "and": "operand",
            "or": "operand", "not": "operand", "+-": "tolerance", "±": "tolerance", "if": "condition",
            "else": "operand", "=": "value"}


def _cut_short(text: str, file: str, after: tuple[int, int, int, str], exc: UnexpectedInput) -> Diagnostic:
    """The statement of ``text`` (its whole text accepted) is unfinished where the next one, ``after``, starts: a
    whole parse read on into that statement (a keyword where a name may come is a name) and stopped somewhere in
    it. Said where the statement breaks off: at a bracket still open (E006, as :func:`_open_at` says it), at an
    operator or `=` with nothing after it (E001), or else at the next statement's first word, which the parser
    met where the statement needed more (E001, what it needed in the hint)."""
    _, line, column, word = after
    tokens: list[Token] = []
    try:
        for tok in _lark().parse_interactive(text).iter_parse():
            tokens.append(tok)
    except UnexpectedInput:  # pragma: no cover - the parse failed at the end only
        pass
    stack: list[Token] = []
    for tok in tokens:
        _track(tok, stack)
    if stack:
        return _unclosed_before(file, stack[-1], line, column, word)
    last = tokens[-1] if tokens else None
    what = last is not None and last.type != "NAME" and (_MISSING.get(last.type) or _MISSING.get(str(last)))
    if last is not None and what:
        op = str(last)
        fix = f"write the {what} after `{op}`" + (f", or remove the `{op}`" if what != "value" else "")
        return Diagnostic("E001", f"missing {what} after `{op}`", _tok_loc(file, last, len(op)),
                          hint=f"the statement runs on into the next one, at {line}:{column} (`{word}`): {fix}")
    pos = len(text) + column - 1  # the next statement starts on the line after the piece
    expected = getattr(exc, "expected", None) or getattr(exc, "accepts", None) or ()
    return Diagnostic("E001", f"unexpected {word!r}", S.Loc(file, line, column, line, column + len(word), pos,
                                                            pos + len(word)),
                      hint=_expected_hint(set(expected)))


def _comments(tokens: list[Token], source: str) -> list[S.Comment]:
    out = []
    for t in tokens:
        line_start = source.rfind("\n", 0, t.start_pos) + 1
        own = source[line_start:t.start_pos].strip() == ""
        out.append(S.Comment(t.line, t.column, str(t), own))
    return out


#: deeper *nesting* is refused before anything recurses over the tree: the transformer, the checker and the code
#: generator are recursive, and the process's recursion limit (which a host program may have raised, making a
#: C stack overflow possible) must not decide whether a spec compiles. Nesting is what a reader counts:
#: parentheses, calls, operands of a looser operator. A flat chain `a + b + ... + z` (and `and`/`or` chains)
#: is one level however long, although Lark builds it as a left-leaning tree; such chains are bounded apart,
#: by MAX_CHAIN, and walked under a recursion limit raised to fit them (see :func:`deep_recursion`).
MAX_TREE_DEPTH = 200
#: the longest left-leaning chain (terms of one flat sum, or such chains and nesting together)
MAX_CHAIN = 10_000
_CHAINS = {"binop", "and_op", "or_op"}


def _too_deep(tree: Any) -> tuple[Any, Any]:
    """(the first node nested more than MAX_TREE_DEPTH levels, the first node more than MAX_CHAIN tree levels
    down), each None when there is none; an iterative walk. The left operand of a chain node of the same kind
    continues the chain and adds no nesting level."""
    stack = [(tree, 1, 1)]
    deep = long = None
    while stack:
        node, d, raw = stack.pop()
        if d > MAX_TREE_DEPTH and deep is None:
            deep = node
        if raw > MAX_CHAIN and long is None:
            long = node
        if deep is not None and long is not None:
            break
        kids = [c for c in node.children if hasattr(c, "children")]
        for i, c in enumerate(kids):
            flat = i == 0 and node.data in _CHAINS and c.data == node.data and node.children[0] is c
            stack.append((c, d if flat else d + 1, raw + 1))
    return deep, long


class deep_recursion:
    """Raise the recursion limit for walking a spec's trees: a chain of MAX_CHAIN terms costs a few Python
    frames per term (which Python 3.11+ runs without growing the C stack). Re-entrant; restores the limit."""

    LIMIT = 8 * MAX_CHAIN + 2_000

    def __enter__(self) -> None:
        import sys

        self.before = sys.getrecursionlimit()
        if self.before < self.LIMIT:
            sys.setrecursionlimit(self.LIMIT)

    def __exit__(self, *exc: Any) -> None:
        import sys

        sys.setrecursionlimit(self.before)


def _meta_loc(file: str, node: Any) -> S.Loc:
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return S.Loc(file, 1, 1, 1, 2)
    return S.Loc(file, meta.line, meta.column, meta.line, meta.column + 1, meta.start_pos, meta.start_pos + 1)


def parse(source: str, file: str = "<string>") -> S.Module:
    """Parse one spec. Raises :class:`ParseFailure` (with a located diagnostic) on a syntax error."""
    if source.startswith("\ufeff"):
        source = source[1:]  # a UTF-8 byte-order mark (Windows editors write one) is not part of the spec
    comment_tokens: list[Token] = []
    lark = _lark()
    try:
        _SINK.tokens = comment_tokens
        try:
            tree = lark.parse(source)
        finally:
            _SINK.tokens = None
        deep, long = _too_deep(tree)
        if deep is not None:
            raise ParseFailure(Diagnostic("E001", "expression nested too deeply", _meta_loc(file, deep),
                                          hint=f"at most {MAX_TREE_DEPTH} levels of nesting: split it into "
                                               "`let` definitions"))
        if long is not None:
            raise ParseFailure(Diagnostic("E001", "expression too long", _meta_loc(file, long),
                                          hint=f"at most {MAX_CHAIN} terms in one expression: split it into "
                                               "`let` definitions"))
        with deep_recursion():
            body = ToSyntax(file).transform(tree)
    except UnexpectedInput as exc:
        raise ParseFailure(_recover(source, file, exc)) from None
    except VisitError as exc:
        orig = exc.orig_exc
        if isinstance(orig, _LiteralError):
            raise ParseFailure(Diagnostic("E005", str(orig), _loc(file, orig.tok))) from None
        if isinstance(orig, _DuplicateClause):
            raise ParseFailure(Diagnostic(orig.code, f"`{orig.kind}` is given twice", orig.loc,
                                          hint="keep one clause of each kind")) from None
        raise
    except RecursionError:
        raise ParseFailure(Diagnostic("E001", "expression nested too deeply", S.Loc(file, 1, 1, 1, 2),
                                      hint="split it into `let` definitions")) from None
    return S.Module(file, source, body, _comments(comment_tokens, source))
