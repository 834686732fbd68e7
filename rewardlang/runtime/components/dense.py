"""Functions for dense (per-token) rewards: ``split_at``, ``first_violation`` and ``without_ruff_lines``.

``split_at(text, at, before=, after=)`` is what the ``tokens split(...)`` clause compiles to: two spans of
``text``, before and from character ``at``.

Two functions serve ``mapping = "authors"`` of specs/dense_ppo.reward (the authors' code token by token,
:mod:`rewardlang.trainers.authors`): ``ruff_rows(code, ...)``, each ruff finding with its first and last row as
ruff reports them (the rows the authors' lint map reads), and ``script_tests_pass_rate(code, tests, ...)``, the
authors' per-test execution: every test is its own run of ``code + "\n" + test`` as a script, passed when it
exits with status 0 within the limit (their ``python -c`` with a 2 s wall timeout; here in the sandbox, 2 s of CPU).

The dense-reward PPO paper's terms are written with the ``tokens`` clause (docs/language.md, Token attribution)
over functions the runtime already has (``ruff_lines``, ``tests_pass_rate``, ``dataflow_match``) and these two:

- ``first_violation(code)``: the character of ``code`` where it stops being valid Python, found by CPython's own
  compiler with the prefix scan of :mod:`rewardlang.runtime.code.validity` (none when the code compiles). It is
  the ``at=`` of the syntax term::

      component syntax = 1 if parses(code) else 0
          tokens split(code, at=first_violation(code), before=1, after=-1, edges=2)

- ``without_ruff_lines(code, select=[...])``: the code with every line ruff flags deleted. The paper's public
  implementation runs the unit tests on that text (a bug: a flagged line may be needed); specs/dense_ppo.reward
  offers it as the named quirk ``tests_on_linted_code`` (default off).

Bad input: empty code is valid (no violation) and has no flagged lines; code nested too deeply for CPython's
compiler, and code longer than ``max_chars`` (not compiled), are invalid from their start (0): the completion's
own outcome, never a mask; ``ctx.timeout`` bounds the scan (running out of it is an infrastructure failure). See docs/specs/dense_ppo.md.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rewardlang.pycompile import compile_quietly
from rewardlang.runtime.api import Context, Result, Span, function, per_row
from rewardlang.runtime.code import validity
from rewardlang.runtime.components.execution import ExecParams, exec_limits, forced_level_missing
from rewardlang.runtime.components.lint import (
    RuffParams,
    crash_flags_every_line,
    findings_result,
    line_spans,
    run_ruff,
)
from rewardlang.runtime.components.syntax import DEFAULT_TIMEOUT, SyntaxParams
from rewardlang.runtime.tools.text import SourceText
from rewardlang.signature import Arg
from rewardlang.types import TEXT

__all__ = ["first_violation", "ruff_rows", "script_tests", "script_tests_pass_rate", "split_at", "without_ruff_lines"]


@function("first_violation", args={"code": "code"}, params=SyntaxParams, returns="number?", tags=("heavy",),
          doc="The character of the code where it stops being valid Python (CPython's compiler, prefix scan; for "
              "code that is merely unfinished, the start of the line where the unfinished construct begins); none "
              "when it compiles. The `at=` of `tokens split(...)`.")
def first_violation(code: list[str], *, params: SyntaxParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> first_violation.fn(["x = 1\\ny = = 2\\n", "x = 1\\n", "def f(:\\n"], params=None, ctx=Context()).values
    [10, None, 6]
    """
    params = params or SyntaxParams()
    if params.method != "cpython":
        raise ValueError('first_violation uses CPython\'s compiler: method="cpython" only')
    budget = float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT
    values: list[int | None] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for c in code:
        if len(c) > params.max_chars:  # not compiled: invalid from its start (the completion's own outcome)
            values.append(0)
            errors.append(None)
            infra.append(False)
            ctx.stats["first_violation:too_long"] += 1
            continue
        try:
            bad = validity.first_violation(c, deadline=time.monotonic() + budget)
        except validity.TooDeep:
            values.append(0)
            errors.append(None)
            infra.append(False)
            continue
        except TimeoutError as exc:  # an overloaded machine (see syntax.py): infrastructure, masked
            values.append(None)
            errors.append(f"first_violation: {exc} ({budget} s)")
            infra.append(True)
            ctx.stats["first_violation:timeouts"] += 1
            continue
        values.append(None if bad is None else bad.start)
        errors.append(None)
        infra.append(False)
    return Result(values, errors=errors, infra=infra)


@function("without_ruff_lines", args={"code": "code"}, params=RuffParams, returns="code", in_workers=False,
          tags=("lint", "tool"),
          doc="The code with every line ruff flags deleted (line break included), as the dense-reward paper's "
              "implementation runs the tests on it (a quirk; see docs/specs/dense_ppo.md).")
def without_ruff_lines(code: list[str], *, params: RuffParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> without_ruff_lines.fn(["x = 1\\nimport os\\ny = 2\\n"], params=RuffParams(), ctx=Context()).values
    ['x = 1\\ny = 2\\n']
    """
    params = params or RuffParams()
    results = run_ruff(code, params, ctx)
    values: list[str | None] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for c, res in zip(code, results):
        infra.append(bool(not res.ok and res.infra))
        if not res.ok:
            values.append(None)
            errors.append(f"without_ruff_lines: {res.error}")
            continue
        drop = line_spans(SourceText(c), res.findings)
        kept, pos = [], 0
        for sp in drop:
            kept.append(c[pos:sp.start])
            pos = sp.end
        kept.append(c[pos:])
        values.append("".join(kept))
        errors.append(None)
    return Result(values, errors=errors, infra=infra)


@function("ruff_rows", args={"code": "code"}, returns="spans", params=RuffParams, spans_of="code", in_workers=False,
          tags=("lint", "tool", "dense"),
          doc="ruff findings as spans from the start of their first row to the end of their last (line break "
              "included), labelled 'FIRST-LAST CODE' with ruff's own 1-based rows: the rows the authors' lint map "
              "of dense-reward PPO reads (mapping = \"authors\"). A finding that ends at the start of a row "
              "counts that row, as their code does.")
def ruff_rows(code: list[str], *, params: RuffParams | None, ctx: Context) -> Result:
    """>>> from rewardlang.runtime.api import Context
    >>> ruff_rows.fn(["import sys\\nimport os\\n\\nx = 1\\n"], params=RuffParams(select=["I"]), ctx=Context()).values
    [[Span(start=0, end=21, value=-1.0, label='1-2 I001')]]
    """
    def spans(src: SourceText, findings: list) -> list[Span]:
        out = []
        for f in findings:
            first = min(max(f.line, 1), max(src.n_lines, 1))
            last = min(max(f.end_line, first), max(src.n_lines, 1))
            a = src.line_bounds_with_break(first)[0] if src.n_lines else 0
            b = src.line_bounds_with_break(last)[1] if src.n_lines else 0
            out.append(Span(a, b, -1.0, f"{f.line}-{f.end_line} {f.code}"))
        return out

    params = params or RuffParams()
    results = crash_flags_every_line(code, run_ruff(code, params, ctx), ctx, "ruff_rows")
    return findings_result(code, results, spans, ctx, "ruff_rows")


def script_tests(tests: Any, entry_point: str | None, check: str = "asserts") -> list[str]:
    """The tests as the authors' per-test runner takes them (``rewards/extra_rewards.py``, ``calculate_pass_at_k``:
    each test run as ``code + "\\n" + test``, the share that exit with 0 is the value): a list of test statements,
    or a text holding a Python list literal of them (OpenCodeInstruct's column, which their code reads with
    ``ast.literal_eval``).

    A HumanEval ``check(candidate)`` text cannot go through their ``literal_eval``. With ``check="asserts"`` (the
    default) it is read as their tests are: **each assert a test**, as the sandbox's converter splits them: one
    test per statement of ``check``'s body that holds an ``assert`` (a loop of asserts is one test; an ``assert`` of
    a true constant, a debugging aid, is none), each a script with the module-level test code, ``check`` holding
    the statements before it that hold no assert (its set-up) and that one statement, then
    ``check(ENTRY_POINT)``. With ``check="whole"`` the text is one test, ``check(ENTRY_POINT)`` after it. A text
    that does not parse, or defines no ``check``, is one test either way.

    >>> script_tests("['assert f(1) == 2', 'assert f(2) == 3']", None)
    ['assert f(1) == 2', 'assert f(2) == 3']
    >>> tests = "M = 2\\ndef check(c):\\n    x = M\\n    assert c(1) == x\\n    assert True\\n    assert c(x) == 3\\n"
    >>> for t in script_tests(tests, "f"):
    ...     print(t, end="\\n--\\n")
    M = 2
    <BLANKLINE>
    def check(c):
        x = M
        assert c(1) == x
    check(f)
    --
    M = 2
    <BLANKLINE>
    def check(c):
        x = M
        assert c(x) == 3
    check(f)
    --
    >>> script_tests("def check(candidate):\\n    assert candidate(1) == 2\\n", "f", check="whole")
    ['def check(candidate):\\n    assert candidate(1) == 2\\n\\ncheck(f)']
    """
    if isinstance(tests, (list, tuple)):
        return [str(t) for t in tests]
    text = str(tests)
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        parsed = None
    if isinstance(parsed, (list, tuple)) and all(isinstance(t, str) for t in parsed):
        return list(parsed)
    whole = [f"{text}\ncheck({entry_point})" if entry_point else text]
    if check != "asserts" or not entry_point:
        return whole
    try:
        mod = compile_quietly(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return whole
    fn = next((st for st in mod.body if isinstance(st, ast.FunctionDef) and st.name == "check"), None)
    if fn is None:
        return whole
    # module-level code stays (helpers, constants); a call of check() is made once, at the end of each script
    setup = [st for st in mod.body if st is not fn and not _calls_check(st)]
    out: list[str] = []
    before: list[ast.stmt] = []
    for st in fn.body:
        asserts = [n for n in ast.walk(st) if isinstance(n, ast.Assert)]
        if not asserts:
            before.append(st)
            continue
        if all(isinstance(n.test, ast.Constant) and bool(n.test.value) for n in asserts):
            continue  # `assert True, "..."`: a debugging aid of HumanEval's, no test (as the sandbox's converter)
        one = ast.FunctionDef(name="check", args=fn.args, body=[*before, st], decorator_list=[], returns=None,
                              type_comment=None, **({"type_params": []} if sys.version_info >= (3, 12) else {}))
        call = ast.Expr(ast.Call(ast.Name("check", ast.Load()), [ast.Name(entry_point, ast.Load())], []))
        out.append(ast.unparse(ast.fix_missing_locations(ast.Module([*setup, one, call], []))))
    return out or whole


def _calls_check(st: ast.stmt) -> bool:
    """A module-level ``check(...)`` call statement of a HumanEval test text."""
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
        isinstance(st.value.func, ast.Name) and st.value.func.id == "check"


class ScriptTestsParams(ExecParams):
    """Options of ``script_tests_pass_rate``: the execution's, and how a HumanEval ``check()`` is read."""

    #: ``asserts``: each assert-holding statement of ``check()`` a test (their fraction); ``whole``: one test
    check: Literal["asserts", "whole"] = "asserts"


@function("script_tests_pass_rate", args={"code": "code?", "tests": "any",
                                          "entry_point": Arg("entry_point", TEXT.optional(), default=None)},
          returns="number", params=ScriptTestsParams, range=(0.0, 1.0), accepts_none=True, in_workers=False,
          requires=forced_level_missing,
          doc="The authors' per-test execution (dense-reward PPO, mapping = \"authors\"): each test is its own "
              "sandboxed run of code + newline + test as a script, passed when it exits with status 0; the share "
              "passed. Their semantics, exploitable: a program that exits 0 first passes every test.")
def script_tests_pass_rate(code: list[str | None], tests: list[Any], entry_point: Any = None, *,
                           params: ScriptTestsParams | None, ctx: Context) -> Result:
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import Task, get_sandbox

    p = params or ScriptTestsParams()
    n = len(code)
    limits = exec_limits(p, ctx)
    entries = per_row(entry_point, n)
    of_row: list[list[int]] = []
    tasks: list[Any] = []
    for i in range(n):
        ts = script_tests(tests[i], entries[i], p.check) if code[i] is not None and tests[i] is not None else []
        of_row.append(list(range(len(tasks), len(tasks) + len(ts))))
        tasks.extend(Task(f"{code[i]}\n{t}", None, None, "auto", limits) for t in ts)
    try:
        verdicts = get_sandbox().evaluate(tasks, cache=ctx.cache if ctx.use_cache else None,
                                          use_cache=ctx.use_cache, stats=ctx.stats) if tasks else []
    except LevelUnavailable as e:
        ctx.stats["sandbox.infra_failures"] += n
        return Result([None] * n, errors=[f"no sandbox: {e}"] * n, infra=[True] * n)
    values: list[float | None] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for i in range(n):
        vs = [verdicts[k] for k in of_row[i]]
        bad = next((v for v in vs if v.infra), None)
        if bad is not None:  # a test whose run failed for the machine's reasons: the row is masked, never a 0
            values.append(None)
            errors.append(f"sandbox infrastructure failure: {bad.infra}")
            infra.append(True)
            continue
        values.append(sum(v.outcome == "pass" for v in vs) / len(vs) if vs else 0.0)
        errors.append(None)
        infra.append(False)
    return Result(values, errors=errors, infra=infra)


class SplitParams(BaseModel):
    """Options of ``split_at``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    before: float = Field(1.0, description="value of the characters before `at`")
    after: float = Field(-1.0, description="value of the characters from `at` to the end")


@function("split_at", args={"text": "text", "at": "number"}, returns="spans", params=SplitParams, spans_of="text",
          tags=("no_dedup",),
          doc="Two spans: `text` before character `at` (label before) and from it on (label after); all of it "
              "`before` when `at` is negative or past the end, a zero-width `before` span for empty text (what "
              "`tokens split` compiles to: the edges of an empty code block are its fences).")
def split_at(text: list[str], at: Sequence[float], *, params: SplitParams, ctx: Context) -> list[list[Span]]:
    out = []
    for t, a in zip(text, at):
        k = int(a)
        if k < 0 or k >= len(t):
            # empty text: a zero-width span still marks where it is (a `split` clause's edges go around it)
            out.append([Span(0, len(t), params.before, "before")])
        else:
            out.append(([Span(0, k, params.before, "before")] if k > 0 else [])
                       + [Span(k, len(t), params.after, "after")])
    return out
