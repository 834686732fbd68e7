"""Canonical formatting of specs: ``rewardlang fmt``.

Formatting is a pure function of the syntax tree plus the comments: one statement per line (component clauses,
example and train blocks one item per line), single spaces around operators, the fewest parentheses that keep
the meaning, blank lines kept (at most one). A parameter whose list default would pass 100 characters has its
items filled into indented lines. Literals keep their spelling. A trailing comment stays on the line it
trails (a component's clause, an example item, a train setting have lines of their own), and a comment on a line
of its own stays above what follows it. It is idempotent, and a formatted spec compiles to the same program (both
are property-tested).

    >>> print(format_source('let  x=count( completion,"a" )# n\\ncomponent c in [0,1]=min(x,1)'), end="")
    let x = count(completion, "a")  # n
    component c in [0, 1] = min(x, 1)
"""

from __future__ import annotations

import json

from rewardlang import syntax as S
from rewardlang.parser import parse

__all__ = ["format_source", "format_expr"]

_PREC = {"if": 1, "or": 2, "and": 3, "not": 4, "cmp": 5, "+": 6, "-": 6, "*": 7, "/": 7, "%": 7, "unary": 8,
         "**": 9, "postfix": 10, "atom": 11}


def _prec(e: S.Expr) -> int:
    if isinstance(e, (S.BoolOp, S.BinOp)):
        return _PREC[e.op]
    if isinstance(e, S.IfExpr):
        return _PREC["if"]
    if isinstance(e, S.Not):
        return _PREC["not"]
    if isinstance(e, S.Compare):
        return _PREC["cmp"]
    if isinstance(e, S.Unary):
        return _PREC["unary"]
    if isinstance(e, (S.Index, S.Attr)):
        return _PREC["postfix"]
    return _PREC["atom"]


def format_expr(e: S.Expr, need: int = 0) -> str:
    text = _expr(e)
    return f"({text})" if _prec(e) < need else text


def _expr(e: S.Expr) -> str:
    f = format_expr
    if isinstance(e, S.Number):
        return e.text
    if isinstance(e, (S.String, S.Regex)):
        return e.text
    if isinstance(e, S.Bool):
        return "true" if e.value else "false"
    if isinstance(e, S.NoneLit):
        return "none"
    if isinstance(e, S.Name):
        return e.id
    if isinstance(e, S.IfExpr):
        # `(a or b) if c else d`: the parentheses are redundant but keep `or` from reading as part of the test
        return f"{f(e.then, 3)} if {f(e.cond, 3)} else {f(e.orelse, 1)}"
    if isinstance(e, S.BoolOp):
        p = _PREC[e.op]
        return f"{f(e.left, p)} {e.op} {f(e.right, p + 1)}"
    if isinstance(e, S.Not):
        return f"not {f(e.operand, 4)}"
    if isinstance(e, S.Compare):
        return f"{f(e.left, 6)} {e.op} {f(e.right, 6)}"
    if isinstance(e, S.BinOp):
        if e.op == "**":
            return f"{f(e.left, 10)} ** {f(e.right, 8)}"
        p = _PREC[e.op]
        return f"{f(e.left, p)} {e.op} {f(e.right, p + 1)}"
    if isinstance(e, S.Unary):
        inner = f(e.operand, 8)
        # keep `- -x` from becoming `--x`, which is not a single token but reads badly
        return f"{e.op}{' ' if inner[:1] in '+-' else ''}{inner}"
    if isinstance(e, S.Index):
        return f"{f(e.target, 10)}[{f(e.index)}]"
    if isinstance(e, S.Attr):
        return f"{f(e.target, 10)}.{e.name}"
    if isinstance(e, S.TupleLit):
        items = [f(i) for i in e.items]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(e, S.ListLit):
        return "[" + ", ".join(f(i) for i in e.items) + "]"
    if isinstance(e, S.Call):
        return f"{e.func}(" + ", ".join(_arg(a) for a in e.args) + ")"
    raise TypeError(type(e).__name__)  # pragma: no cover


def _arg(a: S.CallArg) -> str:
    f = format_expr
    if isinstance(a, S.Positional):
        return f(a.value)
    if isinstance(a, S.Keyword):
        return f"{a.name}={f(a.value)}"
    if isinstance(a, S.Arrow):
        return f"{f(a.left)} -> {f(a.right)}"
    if isinstance(a, S.Arm):
        return f"{a.op} {f(a.bound)}: {f(a.value)}"
    if isinstance(a, S.ElseArm):
        return f"else: {f(a.value)}"
    if isinstance(a, S.Comprehension):
        out = f"{f(a.value)} for {', '.join(a.targets)} in {f(a.iter, 2)}"
        if a.cond is not None:
            out += f" if {f(a.cond, 2)}"
        return out
    raise TypeError(type(a).__name__)  # pragma: no cover


def _scope(s: S.Scope) -> str:
    return "batch" if s.kind == "batch" else f"group({s.key})"


def _string(s: str) -> str:
    """A double-quoted literal of ``s`` that the parser reads back as ``s`` (control and separator characters
    escaped, so the literal stays on one line however lines are counted)."""
    out = json.dumps(s, ensure_ascii=False)
    return "".join(ch if ch not in _LINE_BREAKING else f"\\u{ord(ch):04x}" for ch in out)


_LINE_BREAKING = {"\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"}


#: the line length past which a list default is wrapped (the shipped specs' width)
WIDTH = 100


def _fill(pieces: list[str], width: int = WIDTH - 4) -> list[str]:
    """``pieces`` joined by spaces into lines of at most ``width`` characters (a longer piece gets its own line).

    >>> _fill(["'a',", "'b',", "'c',"], width=9)
    ["'a', 'b',", "'c',"]
    """
    rows: list[str] = []
    for piece in pieces:
        if rows and len(rows[-1]) + 1 + len(piece) <= width:
            rows[-1] += " " + piece
        else:
            rows.append(piece)
    return rows


def _unit(e: S.Expr) -> str:
    """`step` after the number 1, `steps` otherwise (a param's value is not known here: `steps`)."""
    return "step" if isinstance(e, S.Number) and e.value == 1 else "steps"


def _stmt(s: S.Stmt) -> list[str]:
    f = format_expr
    if isinstance(s, S.SpecStmt):
        return [f"spec {s.name}" + (f" {_string(s.doc)}" if s.doc is not None else "")]
    if isinstance(s, S.Import):
        if s.names is None:
            return [f"import {_string(s.path)}"]
        return [f"from {_string(s.path)} import {', '.join(n for n, _ in s.names)}"]
    if isinstance(s, S.Param):
        head = f"param {s.name}" + (f": {s.type.text}" if s.type else "") + " = "
        doc = f" {_string(s.doc)}" if s.doc is not None else ""
        out = head + f(s.default) + doc
        if len(out) > WIDTH and isinstance(s.default, S.ListLit) and s.default.items:
            # a long list default (an operator list): its items filled into indented lines, one statement still
            return [head + "[\n" + "\n".join(f"    {row}" for row in _fill([f(i) + "," for i in s.default.items]))
                    + "\n]" + doc]
        return [out]
    if isinstance(s, S.Input):
        return [f"input {s.name}: {s.type.text}" + (f" from {_string(s.column)}" if s.column is not None else "")]
    if isinstance(s, S.Let):
        return [f"let {s.name} = {f(s.value)}"]
    if isinstance(s, S.Component):
        head = f"component {s.name}"
        if s.range is not None:
            head += f" in [{f(s.range[0])}, {f(s.range[1])}]"
        lines = [f"{head} = {f(s.value)}"]
        if s.on_error is not None:
            lines.append(f"    on_error {f(s.on_error)}")
        if s.timeout is not None:
            lines.append(f"    timeout {f(s.timeout)}")
        if s.spans is not None:
            lines.append(f"    spans {f(s.spans)}")
        if s.tokens is not None:
            lines.append(f"    tokens {f(s.tokens)}")
        return lines
    if isinstance(s, S.Audit):
        head = f"audit {s.name}"
        if s.range is not None:
            head += f" in [{f(s.range[0])}, {f(s.range[1])}]"
        head += f" = {f(s.value)}"
        # the period and the alarm's window and margin stay on the head line (short, and read as one sentence)
        if s.every is not None:
            head += f" every {f(s.every)} {_unit(s.every)}"
        if s.window is not None:
            head += f" window {f(s.window)} {_unit(s.window)}"
        if s.margin is not None:
            head += f" margin {f(s.margin)}"
        lines = [head]
        if s.on_error is not None:
            lines.append(f"    on_error {f(s.on_error)}")
        if s.timeout is not None:
            lines.append(f"    timeout {f(s.timeout)}")
        return lines
    if isinstance(s, S.Weight):
        return [f"{s.component}.weight = {f(s.value)}"]
    if isinstance(s, S.Reward):
        return [f"reward = {f(s.value)}"]
    if isinstance(s, S.Advantage):
        stages = []
        for st in s.stages:
            prefix = f"over {_scope(st.scope)}: " if st.scope is not None else ""
            stages.append(prefix + f(st.value))
        each = " each component" if s.each_component else ""
        return [f"advantage over {_scope(s.scope)}{each} = " + " then ".join(stages)]
    if isinstance(s, S.Example):
        lines = ["example" + (f" {_string(s.name)}" if s.name is not None else "") + " {"]
        for i in s.inputs:
            lines.append(f"    {i.name}: {f(i.value)},")
        for x in s.expects:
            tol = f" +- {f(x.tolerance)}" if x.tolerance is not None else ""
            lines.append(f"    expect {x.name} = {f(x.value)}{tol},")
        lines.append("}")
        return lines
    if isinstance(s, S.Section):
        return [f"{s.kind} {{"] + [f"    {i.name} = {f(i.value)}," for i in s.items] + ["}"]
    raise TypeError(type(s).__name__)  # pragma: no cover


def _anchors(s: S.Stmt) -> list[tuple[int, int, int]]:
    """Where each line that :func:`_stmt` writes for ``s`` came from: (first line, its column, last line) in the
    source, one entry per output line and in the same order."""
    whole = (s.loc.line, s.loc.column, s.loc.end_line)
    if isinstance(s, S.Component):
        out = [(s.loc.line, s.loc.column, s.value.loc.end_line)]
        for kind in ("on_error", "timeout", "spans", "tokens"):
            if getattr(s, kind) is not None:
                loc = s.clause_locs.get(kind, s.loc)
                out.append((loc.line, loc.column, loc.end_line))
        return out
    if isinstance(s, S.Audit):
        head_end = max([s.value.loc.end_line] + [s.clause_locs[k].end_line for k in ("every", "window", "margin")
                                                 if k in s.clause_locs])
        out = [(s.loc.line, s.loc.column, head_end)]
        for kind in ("on_error", "timeout"):
            if getattr(s, kind) is not None:
                loc = s.clause_locs.get(kind, s.loc)
                out.append((loc.line, loc.column, loc.end_line))
        return out
    if isinstance(s, (S.Example, S.Section)):
        items: list[S.Node] = [*s.inputs, *s.expects] if isinstance(s, S.Example) else list(s.items)
        closing = (s.loc.end_line, s.loc.end_column - 1, s.loc.end_line)
        return [(s.loc.line, s.loc.column, s.loc.line)] + [(i.loc.line, i.loc.column, i.loc.end_line)
                                                           for i in items] + [closing]
    return [whole]


def _attach(comments: list[S.Comment], anchors: list[tuple[int, int, int]]) -> list[list[S.Comment]]:
    """The comments inside one statement, per output line of the statement.

    A trailing comment stays with the line it trails: the statement's first line when the whole statement is on
    the comment's line, else the last output line whose source starts on that line, else the one whose source
    contains it (or comes last before it). A comment on a line of its own goes above the output line whose source
    contains it, else above the next one.
    """
    order = sorted(range(len(anchors)), key=lambda i: anchors[i][:2])
    first, last = anchors[order[0]][0], max(a[2] for a in anchors)
    per_line: list[list[S.Comment]] = [[] for _ in anchors]
    for c in comments:
        if not c.own_line:
            starting = [i for i in order if anchors[i][0] == c.line]
            before = [i for i in order if anchors[i][0] < c.line]
            k = order[0] if first == last else starting[-1] if starting else before[-1] if before else order[0]
        else:
            containing = [i for i in order if anchors[i][0] < c.line <= anchors[i][2]]
            after = [i for i in order if anchors[i][0] > c.line]
            k = containing[-1] if containing else after[0] if after else order[-1]
        per_line[k].append(c)
    return per_line


def format_source(source: str, file: str = "<string>") -> str:
    """The canonical text of a spec. Raises :class:`rewardlang.parser.ParseFailure` on a syntax error."""
    from rewardlang.parser import deep_recursion

    with deep_recursion():  # a long flat chain of terms is formatted recursively
        return _format_source(source, file)


def _format_source(source: str, file: str) -> str:
    mod = parse(source, file)
    comments = sorted(mod.comments, key=lambda c: (c.line, c.column))
    src_lines = source.split("\n")  # as the parser counts lines
    # items in source order: (first line, last line, output lines); comments inside a statement stay with the
    # output line they were written on (a statement's clauses, example items and train settings have their own)
    items: list[tuple[int, int, list[str]]] = []
    ci = 0
    for stmt in mod.body:
        start, end = stmt.loc.line, stmt.loc.end_line
        inner: list[S.Comment] = []
        while ci < len(comments) and comments[ci].line <= end:
            c = comments[ci]
            if c.own_line and c.line < start:
                items.append((c.line, c.line, [c.text.rstrip()]))
            else:
                inner.append(c)
            ci += 1
        body = _stmt(stmt)
        lines: list[str] = []
        for i, (text, attached) in enumerate(zip(body, _attach(inner, _anchors(stmt)))):
            # the last trailing comment trails the line; the others (and comments on lines of their own) go above
            trailing = [c for c in attached if not c.own_line][-1:]
            above = [c.text.rstrip() for c in attached if c not in trailing]
            if i == 0:
                items.extend((start, start, [t]) for t in above)
            else:
                lines.extend(f"    {t}" for t in above)
            lines.append(f"{text}  {trailing[0].text.rstrip()}" if trailing else text)
        items.append((start, end, lines))
    for c in comments[ci:]:
        items.append((c.line, c.line, [c.text.rstrip()]))
    out: list[str] = []
    prev_end = 0
    for first, last, lines in items:
        # keep one blank line wherever the source had at least one
        if out and any(not src_lines[k].strip() for k in range(prev_end, first - 1) if k < len(src_lines)):
            out.append("")
        out.extend(lines)
        prev_end = max(prev_end, last)
    return "\n".join(out) + "\n" if out else ""
