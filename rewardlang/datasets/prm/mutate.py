"""Mutation and refactoring operators for PRLCoder's step pairs: stdlib ``ast`` to find sites, text splicing to
apply them, so everything outside the mutated segment stays byte-identical.

An operator looks at one segment of a program and proposes *edits* (character ranges inside the segment and
their replacement text); :func:`apply` picks one of them with a seeded RNG, splices it in and keeps it only if
the result parses. Mutations aim to break the program, refactorings to keep its behaviour; the tests decide
the label either way (pass: chosen, fail: rejected), so an operator needs diversity, not soundness.

    >>> code = "def f(n):\\n    s = 0\\n    for i in range(n):\\n        s += i\\n    return s\\n"
    >>> seg = (20, 58)                                    # the `for` block
    >>> apply("zero_iteration", code, seg, seed=0).segment
    '    for i in []:\\n        s += i\\n'
    >>> apply("aug_assign", code, seg, seed=0).segment
    '    for i in range(n):\\n        s = s + i\\n'
    >>> sorted(OPERATORS)[:3]
    ['and_or', 'arith_swap', 'aug_assign']

Adding an operator (e.g. a local teacher model that rewrites a segment)::

    @operator("teacher", kind="refactoring")
    def teacher(site: Site) -> list[Edit]:
        new = my_model.rewrite(site.code[:site.start], site.text)     # the prefix and the segment's text
        return [Edit(site.start, site.end, new)]

``for_to_while`` and ``swap_if_else`` rewrite a whole compound statement, so they apply at block level only.

A module holding such definitions can be loaded by ``rewardlang prm-data --plugin my_module``.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import random
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rewardlang.pycompile import compile_quietly
from rewardlang.runtime.code.segment import Source, parse_program

__all__ = [
    "MUTATIONS",
    "OPERATORS",
    "REFACTORINGS",
    "Edit",
    "Mutant",
    "Operator",
    "Site",
    "apply",
    "candidates",
    "names",
    "operator",
]


@dataclass(frozen=True)
class Edit:
    """Replace ``code[start:end]`` (character offsets of the whole program) with ``text``."""

    start: int
    end: int
    text: str


@dataclass
class Site:
    """What an operator sees: the whole program, its tree and the segment ``[start, end)`` it may change."""

    code: str
    tree: ast.Module
    src: Source
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.code[self.start:self.end]

    def rng(self, node: ast.AST) -> tuple[int, int]:
        return self.src.node_range(node)

    def inside(self, node: ast.AST) -> bool:
        """The node lies entirely inside the segment."""
        if not hasattr(node, "lineno") or getattr(node, "end_lineno", None) is None:
            return False
        a, b = self.rng(node)
        return self.start <= a and b <= self.end

    def nodes(self, *types: type, anywhere: bool = False) -> Iterator[ast.AST]:
        """Nodes of the given types inside the segment (``anywhere``: in the whole program, e.g. a compound
        statement whose header is the segment), in source order, outside f-strings."""
        found = []
        skip: set[int] = set()
        for n in ast.walk(self.tree):
            if isinstance(n, ast.JoinedStr):
                skip.update(id(c) for c in ast.walk(n) if c is not n)
        for n in ast.walk(self.tree):
            if isinstance(n, types) and id(n) not in skip and (anywhere or self.inside(n)):
                found.append(n)
        # comprehension clauses carry no position: they sort by their first condition
        found.sort(key=lambda n: _pos(n.ifs[0] if isinstance(n, ast.comprehension) and n.ifs else n))
        return iter(found)

    def seg(self, node: ast.AST) -> str:
        a, b = self.rng(node)
        return self.code[a:b]

    def indent_of(self, node: ast.AST) -> str:
        line = self.src.lines[node.lineno - 1]  # type: ignore[attr-defined]
        return line[:len(line) - len(line.lstrip(" \t"))]

    def starts_line(self, node: ast.AST) -> bool:
        """Only indentation precedes the node on its first line."""
        a, _ = self.rng(node)
        return self.code[self.src.line_start(node.lineno):a].strip() == ""  # type: ignore[attr-defined]


def _pos(n: ast.AST) -> tuple[int, int, int, int]:
    return (getattr(n, "lineno", 0), getattr(n, "col_offset", 0), -(getattr(n, "end_lineno", 0) or 0),
            -(getattr(n, "end_col_offset", 0) or 0))


@dataclass(frozen=True)
class Operator:
    name: str
    kind: str  # "mutation" or "refactoring"
    fn: Callable[[Site], list[Edit]]
    doc: str = ""


@dataclass(frozen=True)
class Mutant:
    """A changed program: ``code`` equals the original outside ``[start, new_end)``, which replaced
    ``[start, end)`` (the segment)."""

    operator: str
    kind: str
    code: str
    start: int
    end: int
    new_end: int
    edit: Edit

    @property
    def segment(self) -> str:
        return self.code[self.start:self.new_end]


OPERATORS: dict[str, Operator] = {}


def operator(name: str, *, kind: str) -> Callable[[Callable[[Site], list[Edit]]], Callable[[Site], list[Edit]]]:
    """Register an operator under ``name`` (``kind``: ``"mutation"`` or ``"refactoring"``): a function from a
    :class:`Site` to the edits it could make there (all inside the segment; none: not applicable)."""
    if kind not in ("mutation", "refactoring"):
        raise ValueError(f"operator kind must be 'mutation' or 'refactoring', not {kind!r}")

    def deco(fn: Callable[[Site], list[Edit]]) -> Callable[[Site], list[Edit]]:
        prev = OPERATORS.get(name)
        if prev is not None and prev.fn.__module__ != fn.__module__:
            raise ValueError(f"mutation operator {name!r} is registered twice ({prev.fn.__module__}, {fn.__module__})")
        OPERATORS[name] = Operator(name, kind, fn, (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "")
        return fn

    return deco


def names(kind: str | None = None) -> list[str]:
    """Registered operator names (of one kind), in registration order."""
    return [n for n, op in OPERATORS.items() if kind is None or op.kind == kind]


# -- helpers ----------------------------------------------------------------------------------------------

_ATOMIC = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Tuple, ast.Dict, ast.Set,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _paren(text: str, node: ast.AST) -> str:
    return text if isinstance(node, _ATOMIC) and "\n" not in text else f"({text})"


def _between(site: Site, left: ast.AST, right: ast.AST, pattern: str) -> tuple[int, int] | None:
    """The range of the operator token matching ``pattern`` between two operands (only brackets, blanks,
    comments and line continuations can sit there besides the operator)."""
    _, a = site.rng(left)
    b, _ = site.rng(right)
    gap = site.code[a:b]
    m = re.search(pattern, re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap))
    return (a + m.start(), a + m.end()) if m else None


# -- mutations --------------------------------------------------------------------------------------------

_CMP_FLIP = {ast.Lt: ">=", ast.LtE: ">", ast.Gt: "<=", ast.GtE: "<", ast.Eq: "!=", ast.NotEq: "==",
             ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is"}
_CMP_RE = r"not\s+in\b|is\s+not\b|<=|>=|==|!=|<|>|\bin\b|\bis\b"


@operator("comparison_flip", kind="mutation")
def comparison_flip(site: Site) -> list[Edit]:
    """Negate one comparison operator: < -> >=, == -> !=, in -> not in, is -> is not (and back)."""
    out = []
    for n in site.nodes(ast.Compare):
        operands = [n.left, *n.comparators]
        for i, op in enumerate(n.ops):
            r = _between(site, operands[i], operands[i + 1], _CMP_RE)
            if r:
                out.append(Edit(r[0], r[1], _CMP_FLIP[type(op)]))
    return out


def _int_const(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and type(n.value) is int


@operator("off_by_one", kind="mutation")
def off_by_one(site: Site) -> list[Edit]:
    """Add or subtract 1: an integer constant, or a (non-constant) bound of ``range(...)``."""
    out = []
    for n in site.nodes(ast.Constant, ast.Call):
        if _int_const(n):
            a, b = site.rng(n)
            out.append(Edit(a, b, str(n.value + 1)))
            if n.value > 0:
                out.append(Edit(a, b, str(n.value - 1)))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range":
            for arg in n.args[:2]:
                if not _int_const(arg) and not isinstance(arg, ast.Starred):
                    a, b = site.rng(arg)
                    t = _paren(site.code[a:b], arg)
                    out += [Edit(a, b, f"{t} + 1"), Edit(a, b, f"{t} - 1")]
    return out


_ARITH = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "+"), ast.Div: ("/", "*"),
          ast.FloorDiv: ("//", "*"), ast.Mod: ("%", "//"), ast.Pow: (r"\*\*", "*")}


@operator("arith_swap", kind="mutation")
def arith_swap(site: Site) -> list[Edit]:
    """Swap an arithmetic operator: + <-> -, * -> +, / -> *, // -> *, % -> //, ** -> * (also in ``x op= e``)."""
    out = []
    for n in site.nodes(ast.BinOp, ast.AugAssign):
        spec = _ARITH.get(type(n.op))
        if spec is None:
            continue
        pat, new = spec
        if isinstance(n, ast.BinOp):
            r = _between(site, n.left, n.right, r"(?<![*/])" + (re.escape(pat) if pat != r"\*\*" else pat)
                         + r"(?![*/=])")
            if r:
                out.append(Edit(r[0], r[1], new))
        else:
            r = _between(site, n.target, n.value, (re.escape(pat) if pat != r"\*\*" else pat) + "=")
            if r:
                out.append(Edit(r[0], r[1], new + "="))
    return out


@operator("and_or", kind="mutation")
def and_or(site: Site) -> list[Edit]:
    """Swap ``and`` and ``or`` (every operator of one boolean expression)."""
    out = []
    for n in site.nodes(ast.BoolOp):
        new = "or" if isinstance(n.op, ast.And) else "and"
        a, b = site.rng(n)
        parts, ok = [], True
        for left, right in zip(n.values, n.values[1:]):
            r = _between(site, left, right, r"\b(and|or)\b")
            if r is None:
                ok = False
                break
            parts.append(r)
        if ok and parts:
            text, prev = [], a
            for s, e in parts:
                text.append(site.code[prev:s] + new)
                prev = e
            text.append(site.code[prev:b])
            out.append(Edit(a, b, "".join(text)))
    return out


@operator("true_false", kind="mutation")
def true_false(site: Site) -> list[Edit]:
    """Flip a ``True``/``False`` literal."""
    return [Edit(*site.rng(n), "False" if n.value else "True") for n in site.nodes(ast.Constant)
            if n.value is True or n.value is False]


@operator("negate_condition", kind="mutation")
def negate_condition(site: Site) -> list[Edit]:
    """Negate the condition of an ``if``, ``while``, conditional expression or comprehension filter."""
    tests = []
    for n in site.nodes(ast.If, ast.While, ast.IfExp, ast.comprehension, ast.Assert, anywhere=True):
        if isinstance(n, ast.comprehension):
            tests += n.ifs
        else:
            tests.append(n.test)
    out = []
    for t in tests:
        if site.inside(t):
            a, b = site.rng(t)
            out.append(Edit(a, b, f"not ({site.code[a:b]})"))
    return out


def _is_docstring(site: Site, s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


@operator("statement_to_pass", kind="mutation")
def statement_to_pass(site: Site) -> list[Edit]:
    """Replace a statement (a whole compound statement included) with ``pass``."""
    out = []
    for n in site.nodes(ast.stmt):
        if isinstance(n, ast.Pass) or _is_docstring(site, n):
            continue
        a, b = site.rng(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.decorator_list:
            continue
        out.append(Edit(a, b, "pass"))
    return out


@operator("return_none", kind="mutation")
def return_none(site: Site) -> list[Edit]:
    """``return x`` -> ``return None``."""
    return [Edit(*site.rng(n.value), "None") for n in site.nodes(ast.Return)
            if n.value is not None and not (isinstance(n.value, ast.Constant) and n.value.value is None)]


@operator("break_continue", kind="mutation")
def break_continue(site: Site) -> list[Edit]:
    """Swap ``break`` and ``continue``."""
    return [Edit(*site.rng(n), "continue" if isinstance(n, ast.Break) else "break")
            for n in site.nodes(ast.Break, ast.Continue)]


@operator("zero_iteration", kind="mutation")
def zero_iteration(site: Site) -> list[Edit]:
    """Make a loop run zero times: ``for x in []:``, ``while False:``."""
    out = []
    for n in site.nodes(ast.For, ast.While, ast.AsyncFor, anywhere=True):
        expr = n.test if isinstance(n, ast.While) else n.iter
        if site.inside(expr):
            out.append(Edit(*site.rng(expr), "False" if isinstance(n, ast.While) else "[]"))
    return out


# -- refactorings -----------------------------------------------------------------------------------------

_BUILTINS = set(dir(builtins))


def _name_tokens(code: str) -> list[tuple[str, int, int]]:
    src = Source(code)
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and not keyword.iskeyword(tok.string):
                a = src.starts[tok.start[0] - 1] + tok.start[1]
                out.append((tok.string, a, a + len(tok.string)))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return out


def _module_symbols(code: str) -> set[str]:
    import symtable

    try:
        table = symtable.symtable(code, "<prm>", "exec")
    except (SyntaxError, ValueError):
        return set(_BUILTINS)
    return {s.get_name() for s in table.get_symbols()}


@operator("rename_local", kind="refactoring")
def rename_local(site: Site) -> list[Edit]:
    """Rename a local variable whose every occurrence lies in the segment (``symtable`` to leave module names,
    ``tokenize`` to find every occurrence, attributes and keyword-argument names excluded)."""
    bound: list[str] = []
    for n in site.nodes(ast.Name, ast.arg):
        name = n.id if isinstance(n, ast.Name) else n.arg
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store) and name not in bound:
            continue
        if name not in bound:
            bound.append(name)
    if not bound:
        return []
    blocked = {n.arg for n in ast.walk(site.tree) if isinstance(n, ast.keyword) and n.arg}
    blocked |= {n.attr for n in ast.walk(site.tree) if isinstance(n, ast.Attribute)}
    blocked |= {n.name for n in ast.walk(site.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.ClassDef))}
    blocked |= {n.id for n in ast.walk(site.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}
    for n in ast.walk(site.tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            blocked |= set(n.names)
    toks = _name_tokens(site.code)
    all_names = {t[0] for t in toks}
    module = _module_symbols(site.code) if site.src.text == site.code else set()
    out = []
    for name in bound:
        if name in blocked or name in module or name in _BUILTINS or name.startswith("__"):
            continue
        occ = [(a, b) for t, a, b in toks if t == name]
        if not occ or not all(site.start <= a and b <= site.end for a, b in occ):
            continue
        k = 1
        while f"{name}_{k}" in all_names:
            k += 1
        new = f"{name}_{k}"
        text, prev = [], site.start
        for a, b in occ:
            text.append(site.code[prev:a] + new)
            prev = b
        text.append(site.code[prev:site.end])
        out.append(Edit(site.start, site.end, "".join(text)))
    return out


def _loop_jumps(body: list[ast.stmt]) -> bool:
    """A ``continue`` or ``break`` belonging to this loop (not to a nested one)."""
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Continue, ast.Break)):
            return True
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                          ast.Lambda)):
            stack.extend(n.orelse if isinstance(n, (ast.For, ast.While, ast.AsyncFor)) else [])
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


@operator("for_to_while", kind="refactoring")
def for_to_while(site: Site) -> list[Edit]:
    """``for i in range(a, b[, step]):`` -> ``i = a`` / ``while i < stop:`` ... ``i += step`` (no ``else``, no
    ``continue``/``break`` of its own, a constant step, the variable not assigned in the body nor read after)."""
    out = []
    toks = _name_tokens(site.code)
    for n in site.nodes(ast.For):
        if n.orelse or not isinstance(n.target, ast.Name) or not isinstance(n.iter, ast.Call):
            continue
        call = n.iter
        if not (isinstance(call.func, ast.Name) and call.func.id == "range" and 1 <= len(call.args) <= 3
                and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)):
            continue
        step = 1
        if len(call.args) == 3:
            s = call.args[2]
            if _int_const(s):
                step = s.value
            elif isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub) and _int_const(s.operand):
                step = -s.operand.value
            else:
                continue
        if step == 0 or _loop_jumps(n.body) or n.body[0].lineno == n.lineno:
            continue
        var = n.target.id
        if any(isinstance(x, ast.Name) and x.id == var and isinstance(x.ctx, ast.Store)
               for b in n.body for x in ast.walk(b)):
            continue
        _, end = site.rng(n)
        if any(t == var and a >= end for t, a, _ in toks):
            continue  # read after the loop: a while loop leaves it one step further
        names_used = {t for t, _, _ in toks}
        stop, k = f"{var}_stop", 1
        while stop in names_used:
            stop, k = f"{var}_stop{k}", k + 1
        args = [site.seg(a) for a in call.args]
        lo, hi = (args[0], args[1]) if len(args) >= 2 else ("0", args[0])
        ind = site.indent_of(n)
        a, _ = site.rng(n)
        header_end = site.src.line_start(n.body[0].lineno) - 1  # the line break before the body
        header = site.code[a:header_end]
        if "#" in header.split(":")[-1]:
            pass  # a trailing comment on the header is dropped with it
        body_ind = site.indent_of(n.body[0])
        cmp = "<" if step > 0 else ">"
        inc = f"{var} += {step}" if step > 0 else f"{var} -= {-step}"
        new_header = f"{var} = {lo}\n{ind}{stop} = {hi}\n{ind}while {var} {cmp} {stop}:"
        body_text = site.code[header_end:end]
        out.append(Edit(a, end, new_header + body_text + f"\n{body_ind}{inc}"))
    return out


_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}


@operator("aug_assign", kind="refactoring")
def aug_assign(site: Site) -> list[Edit]:
    """``x += e`` <-> ``x = x + e`` (plain names; numbers and strings behave the same either way, lists are
    left to the tests)."""
    out = []
    for n in site.nodes(ast.AugAssign, ast.Assign):
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and type(n.op) in _AUG:
            e = site.seg(n.value)
            out.append(Edit(*site.rng(n), f"{n.target.id} = {n.target.id} {_AUG[type(n.op)]} {_paren(e, n.value)}"))
        elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and isinstance(n.value, ast.BinOp) and type(n.value.op) in _AUG
              and isinstance(n.value.left, ast.Name) and n.value.left.id == n.targets[0].id
              and site.inside(n.value.right)):
            e = site.seg(n.value.right)
            out.append(Edit(*site.rng(n), f"{n.targets[0].id} {_AUG[type(n.value.op)]}= {e}"))
    return out


def _pure_enough(expr: ast.AST) -> bool:
    for x in ast.walk(expr):
        if isinstance(x, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.Lambda, ast.ListComp, ast.SetComp,
                          ast.DictComp, ast.GeneratorExp, ast.Starred)):
            return False
    return True


@operator("extract_variable", kind="refactoring")
def extract_variable(site: Site) -> list[Edit]:
    """Move a sub-expression of a simple statement (or an ``if`` test) into a new variable on the line before
    (not under a short-circuit, conditional expression, lambda or comprehension, nor in a loop test)."""
    used = {t for t, _, _ in _name_tokens(site.code)}
    out = []
    for st in site.nodes(ast.Assign, ast.AugAssign, ast.Return, ast.Expr, ast.If, anywhere=True):
        if not site.starts_line(st) or not site.start <= site.src.line_start(st.lineno) < site.end or _is_docstring(site, st):
            continue
        if isinstance(st, ast.If) and not site.code[site.rng(st)[0]:].startswith("if"):
            continue  # an elif: nothing may be inserted before it
        root = st.test if isinstance(st, ast.If) else st.value
        if root is None:
            continue
        stack: list[ast.AST] = [root]
        while stack:
            e = stack.pop()
            if isinstance(e, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                              ast.GeneratorExp)):
                if isinstance(e, ast.BoolOp):
                    stack.append(e.values[0])  # only the first operand always runs
                elif isinstance(e, ast.IfExp):
                    stack.append(e.test)
                continue
            if isinstance(e, (ast.BinOp, ast.Call, ast.Compare, ast.Subscript)) and _pure_enough(e) \
                    and "\n" not in site.seg(e) and site.inside(e):
                base = "tmp"
                k = 1
                while f"{base}{k}" in used:
                    k += 1
                var = f"{base}{k}"
                a, b = site.rng(e)
                ls = site.src.line_start(st.lineno)
                line = f"{site.indent_of(st)}{var} = {site.code[a:b]}\n"
                out.append(Edit(ls, b, line + site.code[ls:a] + var))
            if isinstance(e, ast.expr):
                stack.extend(reversed([c for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)]))
    return out


@operator("swap_if_else", kind="refactoring")
def swap_if_else(site: Site) -> list[Edit]:
    """``if c: A else: B`` -> ``if not (c): B else: A`` (an ``if`` with a plain ``else``, bodies on their own
    lines)."""
    out = []
    for n in site.nodes(ast.If):
        if not n.orelse or not site.code[site.rng(n)[0]:].startswith("if"):
            continue
        first_else = n.orelse[0]
        if isinstance(first_else, ast.If) and site.code[site.rng(first_else)[0]:].startswith("elif"):
            continue
        if n.body[0].lineno == n.lineno or not site.starts_line(n.body[0]) or not site.starts_line(first_else):
            continue
        else_line = first_else.lineno - 1
        if site.src.lines[else_line - 1].strip() != "else:":
            continue
        body_a = site.src.line_start(n.body[0].lineno)
        body_b = site.src.line_start(else_line)
        else_a = site.src.line_start(first_else.lineno)
        _, end = site.rng(n)
        else_b = site.src.line_end(n.orelse[-1].end_lineno)
        if else_b > site.end or end > site.end:
            continue
        t_a, t_b = site.rng(n.test)
        body, orelse = site.code[body_a:body_b], site.code[else_a:else_b]
        if not body.endswith("\n"):
            continue
        tail = "" if orelse.endswith("\n") else "\n"
        else_hdr = site.code[body_b:else_a]
        new = (site.code[site.rng(n)[0]:t_a] + f"not ({site.code[t_a:t_b]})" + site.code[t_b:body_a]
               + orelse + tail + else_hdr + body)
        if tail:
            new = new[:-1]
        out.append(Edit(site.rng(n)[0], else_b, new))
    return out


MUTATIONS = tuple(names("mutation"))
REFACTORINGS = tuple(names("refactoring"))


# -- applying ---------------------------------------------------------------------------------------------

def candidates(name: str, code: str, segment: tuple[int, int]) -> list[Edit]:
    """Every edit operator ``name`` proposes in ``segment`` of ``code`` (source order; inside the segment)."""
    op = OPERATORS.get(name)
    if op is None:
        raise KeyError(f"unknown operator {name!r} (known: {', '.join(OPERATORS)})")
    prog = parse_program(code)
    if prog is None or prog.shift:
        return []
    site = Site(code, prog.tree, prog.source, segment[0], segment[1])
    return [e for e in op.fn(site) if segment[0] <= e.start <= e.end <= segment[1]]


def apply(name: str, code: str, segment: tuple[int, int], *, seed: int | str = 0) -> Mutant | None:
    """Apply operator ``name`` once inside ``segment`` of ``code``: the edits it proposes are shuffled with
    ``random.Random(seed)`` and the first one that changes the text and parses wins; None when none does."""
    edits = candidates(name, code, segment)
    rnd = random.Random(f"{seed}:{name}:{segment[0]}:{segment[1]}")
    rnd.shuffle(edits)
    for e in edits:
        new = code[:e.start] + e.text + code[e.end:]
        if new == code:
            continue
        try:
            compile_quietly(new)
        except (SyntaxError, ValueError):
            continue
        delta = len(e.text) - (e.end - e.start)
        return Mutant(name, OPERATORS[name].kind, new, segment[0], segment[1], segment[1] + delta, e)
    return None
