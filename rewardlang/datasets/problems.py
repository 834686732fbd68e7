"""HumanEval problems read into language-neutral form: typed parameters, a typed result, and cases of concrete
argument values with their expected results.

Values, not syntax: each argument and each expected value of an ``assert`` in ``check`` is *evaluated* in Python
(so ``candidate('abcde' + 'cade')`` folds to one string), and the canonical solution is run on every case's
arguments: a case whose expected value the canonical solution does not reproduce is dropped (counted). Asserts of
the shapes ``candidate(a) == x``, ``x == candidate(a)``, ``candidate(a) is True/False/None``, ``candidate(a)`` and
``not candidate(a)`` (on a bool result), and ``abs(candidate(a) - x) < eps`` (a tolerance case) become cases;
statements that assign or import run in order, ``for`` loops over those statements are unrolled (with the global
``random`` seeded, so the cases are the same every run); other asserts are skipped and counted with a reason.

Types come from the annotations where they are complete, else from the values (:mod:`.types`); an annotation that
a value contradicts makes the problem untypable.

    >>> p = problem(2)
    >>> p.entry_point, [(n, t) for n, t in p.params], p.result
    ('truncate_number', [('number', 'float')], 'float')
    >>> p.cases[0].args, p.cases[0].expected, p.cases[0].tolerance
    ((3.5,), 0.5, None)
    >>> p.cases[1].tolerance
    1e-06
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import random
from dataclasses import dataclass, field
from typing import Any

from rewardlang.datasets.types import (
    Type,
    Untypable,
    complete,
    conforms,
    from_annotation,
    type_of,
    unify,
)
from rewardlang.pycompile import compile_quietly

__all__ = ["Case", "Problem", "problem", "problems"]


@dataclass(frozen=True)
class Case:
    """One call of the function: its arguments, the expected result, and an absolute tolerance for floats
    (``None``: the comparator's default)."""

    args: tuple[Any, ...]
    expected: Any
    tolerance: float | None = None


@dataclass
class Problem:
    """A HumanEval problem in language-neutral form (``error`` set when it has no sound typing at all)."""

    task_id: str
    number: int
    entry_point: str
    prompt: str
    canonical_solution: str
    tests: str
    docstring: str
    params: list[tuple[str, Type]] = field(default_factory=list)
    result: Type = None
    cases: list[Case] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)   # asserts or cases not turned into cases, with reasons
    error: str | None = None


class _Skip(Exception):
    pass


def _strict_eq(a: Any, b: Any) -> bool:
    """Python equality that also tells bool from int and keeps container kinds (what a typed target sees)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_strict_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_eq(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (a == b or math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _is_call(node: ast.AST, param: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == param


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _shape(test: ast.expr, param: str) -> tuple[ast.Call, str, Any] | str:
    """(the call, kind, payload) for an assert of a known shape, else the reason it is skipped. Kinds: ``eq``
    (payload: the expected expression), ``wrapped`` (``tuple(candidate(a)) == b``; payload: (the wrapper,
    b)), ``truth`` (payload: True/False), ``close`` (payload: (expected
    expression, eps expression))."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            if _is_call(left, param) and not _mentions(right, param):
                return left, "eq", right
            if _is_call(right, param) and not _mentions(left, param):
                return right, "eq", left
            if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id in ("tuple", "list") \
                    and len(left.args) == 1 and _is_call(left.args[0], param) and not _mentions(right, param):
                return left.args[0], "wrapped", (left.func.id, right)  # tuple(candidate(a)) == tuple(b)
        if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Call) and isinstance(left.func, ast.Name) \
                and left.func.id == "abs" and len(left.args) == 1 and isinstance(left.args[0], ast.BinOp) \
                and isinstance(left.args[0].op, ast.Sub) and not _mentions(right, param):
            a, b = left.args[0].left, left.args[0].right
            if _is_call(a, param) and not _mentions(b, param):
                return a, "close", (b, right)
            if _is_call(b, param) and not _mentions(a, param):
                return b, "close", (a, right)
    if _is_call(test, param):
        return test, "truth", True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_call(test.operand, param):
        return test.operand, "truth", False
    return "an assert of another shape"


def _read_cases(tests: str, param_fn: Any, entry: str) -> tuple[list[tuple[tuple, Any, str, Any]], list[str]]:
    """Walk ``check``: [(args, payload value, kind, tolerance)] and the reasons of what was not read."""
    mod = compile_quietly(tests)
    ns: dict[str, Any] = {"__builtins__": __builtins__}
    check = None
    for stmt in mod.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "check":
            check = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef)):
            exec(compile(ast.Module([stmt], []), "<tests>", "exec"), ns)  # noqa: S102 - the package's tests
    if check is None:
        raise Untypable("the tests define no check(candidate)")
    param = check.args.args[0].arg
    out: list[tuple[tuple, Any, str, Any]] = []
    dropped: list[str] = []

    def ev(node: ast.expr) -> Any:
        return eval(compile(ast.Expression(node), "<tests>", "eval"), ns)

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and not _mentions(stmt, param):
                continue  # a docstring or a print
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign)) and not _mentions(stmt, param):
                exec(compile(ast.Module([stmt], []), "<tests>", "exec"), ns)  # noqa: S102 - trusted tests
                continue
            if isinstance(stmt, ast.For) and not stmt.orelse and not _mentions(stmt.iter, param):
                for value in list(ev(stmt.iter)):
                    ns["__rl_item"] = value
                    target = ast.Assign([stmt.target], ast.Name("__rl_item", ast.Load()))
                    exec(compile(ast.fix_missing_locations(ast.Module([target], [])), "<tests>", "exec"), ns)  # noqa: S102
                    walk(stmt.body)
                continue
            if isinstance(stmt, ast.Assert):
                if not _mentions(stmt.test, param):
                    continue  # `assert True`: tests nothing
                shape = _shape(stmt.test, param)
                if isinstance(shape, str):
                    dropped.append(f"{ast.unparse(stmt)[:60]}: {shape}")
                    continue
                call, kind, payload = shape
                if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
                    dropped.append(f"{ast.unparse(stmt)[:60]}: keyword or starred arguments")
                    continue
                try:
                    args = tuple(ev(a) for a in call.args)
                    if kind == "eq":
                        out.append((args, ev(payload), kind, None))
                    elif kind == "close":
                        out.append((args, ev(payload[0]), kind, float(ev(payload[1]))))
                    elif kind == "wrapped":
                        out.append((args, (payload[0], ev(payload[1])), kind, None))
                    else:
                        out.append((args, payload, kind, None))
                except Exception as exc:  # noqa: BLE001 - a test expression that does not evaluate alone
                    dropped.append(f"{ast.unparse(stmt)[:60]}: does not evaluate ({type(exc).__name__})")
                continue
            dropped.append(f"{ast.unparse(stmt)[:60]}: a statement of another kind")

    random.seed(0)  # loops over random inputs (HumanEval/53) give the same cases every run
    walk(check.body)
    return out, dropped


def _build(task: dict[str, str]) -> Problem:
    number = int(task["task_id"].split("/")[1])
    entry = task["entry_point"]
    pmod = compile_quietly(task["prompt"])
    fns = [n for n in pmod.body if isinstance(n, ast.FunctionDef)]
    fn = next(n for n in fns if n.name == entry)
    doc = ast.get_docstring(fn, clean=True) or ""
    p = Problem(task["task_id"], number, entry, task["prompt"], task["reference"], task["tests"], doc)
    try:
        if len(fns) > 1:
            raise Untypable("the prompt defines helper functions the tests or solution use")
        if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults:
            raise Untypable("variadic, keyword-only or defaulted parameters")
        names = [a.arg for a in fn.args.args]
        ann = [from_annotation(a.annotation) for a in fn.args.args]
        ret_ann = from_annotation(fn.returns)
        glb: dict[str, Any] = {"__builtins__": __builtins__}
        exec(compile(task["prompt"] + task["reference"], task["task_id"], "exec"), glb)  # noqa: S102 - trusted canonical code
        canonical = glb[entry]
        raw, p.dropped = _read_cases(task["tests"], canonical, entry)
        cases: list[Case] = []
        for args, payload, kind, tol in raw:
            if len(args) != len(names):
                p.dropped.append(f"a call with {len(args)} arguments")
                continue
            got = canonical(*copy.deepcopy(args))
            if kind == "truth":
                if not isinstance(got, bool) or got is not payload:
                    p.dropped.append(f"{entry}{args!r:.50}: a truth assert on a non-bool result")
                    continue
                expected = got
            elif kind == "close":
                if not isinstance(got, (int, float)) or abs(got - payload) >= tol:
                    p.dropped.append(f"{entry}{args!r:.50}: the canonical solution is not within the tolerance")
                    continue
                expected = payload
            elif kind == "wrapped":
                wrap = tuple if payload[0] == "tuple" else list
                if not isinstance(got, (list, tuple)) or not _strict_eq(wrap(got), payload[1]):
                    p.dropped.append(f"{entry}{args!r:.50}: the canonical solution gives another value")
                    continue
                expected = got  # the assert compares a conversion: the canonical result carries the type
            else:
                if not _strict_eq(got, payload):
                    p.dropped.append(f"{entry}{args!r:.50}: the canonical solution gives another value")
                    continue
                expected = payload
            cases.append(Case(args, expected, tol))
        if not cases:
            raise Untypable("no assert could be read as a case")
        params: list[tuple[str, Type]] = []
        for i, (name, t) in enumerate(zip(names, ann)):
            params.append((name, _settle(t, [c.args[i] for c in cases], f"parameter {name}")))
        result = _settle(ret_ann, [c.expected for c in cases], "the result")
        # An int passed where the type says float is a float in every target: the case stands only if the
        # canonical solution gives the same result on the coerced arguments (HumanEval/92 tells 3 from 3.0).
        kept: list[Case] = []
        for c in cases:
            coerced = tuple(_coerce(a, t) for a, (_, t) in zip(c.args, params))
            if repr(coerced) != repr(c.args) or repr(_coerce(c.expected, result)) != repr(c.expected):
                got = canonical(*copy.deepcopy(coerced))
                if not _strict_eq(_coerce(got, result), _coerce(c.expected, result)):
                    raise Untypable("the result depends on int versus float (Python's dynamic types)")
                c = Case(coerced, _coerce(c.expected, result), c.tolerance)
            kept.append(c)
        p.params, p.result, p.cases = params, result, kept
    except Untypable as exc:
        p.error = str(exc)
    return p


def _coerce(v: Any, t: Type) -> Any:
    """``v`` with every int where ``t`` says float made a float (the value every target receives)."""
    if t == "float" and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if isinstance(t, tuple) and v is not None:
        if t[0] == "optional":
            return _coerce(v, t[1])
        if t[0] == "list" and isinstance(v, list):
            return [_coerce(x, t[1]) for x in v]
        if t[0] == "tuple" and isinstance(v, tuple):
            return tuple(_coerce(x, y) for x, y in zip(v, t[1:]))
        if t[0] == "dict" and isinstance(v, dict):
            return {_coerce(a, t[1]): _coerce(b, t[2]) for a, b in v.items()}
    return v


def _settle(annotated: Type, values: list[Any], what: str) -> Type:
    """The annotation when complete (every value must conform), else the type unified from the values."""
    if annotated is not None and complete(annotated):
        for v in values:
            if not conforms(v, annotated):
                raise Untypable(f"{what} is annotated {_text(annotated)} but a test gives {v!r:.40}")
        return annotated
    t: Type = None
    try:
        for v in values:
            t = unify(t, type_of(v))
    except Untypable as exc:
        raise Untypable(f"{what}: {exc}") from None
    if not complete(t):
        raise Untypable(f"{what}: the element type of empty containers is unknown")
    if t == "none":
        raise Untypable(f"{what} is always None")
    return t


def _text(t: Type) -> str:
    from rewardlang.datasets.types import type_text
    return type_text(t)


@functools.lru_cache(maxsize=1)
def _all() -> tuple[Problem, ...]:
    from rewardlang.datasets.humaneval import load_humaneval
    return tuple(_build(t) for t in load_humaneval())


def problems() -> list[Problem]:
    """All 164 problems in task order (a fresh copy each call; built once per process, ~0.2 s)."""
    return copy.deepcopy(list(_all()))


def problem(number: int) -> Problem:
    """One problem by its HumanEval number."""
    return copy.deepcopy(_all()[number])

