"""Unit-test rewards: run the program in the sandbox, judge it outside.

Functions (all take the same options, see :class:`ExecParams`)::

    tests_pass_rate(code, tests, entry_point = none, reference = none) -> number in [0, 1]   share of tests passed
    tests_all_pass(code, tests, entry_point = none, reference = none)  -> bool               every test passed
    tests_results(code, tests, entry_point = none, reference = none)   -> list[number]       1 or 0 per test, in order
    outcome(code, tests, entry_point = none, reference = none)         -> number in [-1, 1]  CodeRL-style outcome value
    outcome_label(code, tests, entry_point = none, reference = none)   -> text               pass, fail, runtime_error, ...
    executes(code)                                                     -> bool               runs to the end as a script

Argument shapes:

- ``code``: the program (``code?``; ``none``, e.g. no code block, counts as a compile error, never masked).
- ``tests``: ``text`` or ``list[text]``: HumanEval test code defining ``check(candidate)`` (with
  ``entry_point``); a list of MBPP assert strings (or one text of asserts); APPS/TACO stdin/stdout JSON
  ``{"inputs": [...], "outputs": [...]}``; call pairs ``{"fn_name": ..., "inputs": [[args]], "outputs": [...]}``.
  ``format="auto"`` (default) detects which; name it to be explicit.
- ``entry_point``: the function under test (``text?``; HumanEval needs it, MBPP and stdio do not).
- ``language``: ``python`` (default), ``c``, ``cpp``, ``java``, ``js``, ``php``, ``sh``, ``go`` (or a fence name
  such as ``c++``), a constant or a column; other languages take structured tests (``rewardlang-tests/1``,
  docs/languages.md). An unknown constant is a check error; an unknown per-row value is that row's error.

Outcome values (``outcome``): pass 1, fail -0.3, runtime_error -0.6, compile_error -1 as in CodeRL (Le et
al., 2022). CodeRL inherits APPS's classes, where a timeout is a runtime error, so ``timeout``, ``memory``
and ``output_limit`` default to -0.6 too; every value is an option (``outcome(..., timeout_value=-1)``).

Example spec lines::

    component correct in [0, 1] = tests_pass_rate(code_block(completion, "python") or "", tests, entry_point)
    component rule in [0, 1] = 1 if tests_all_pass(code, tests, entry_point, format="humaneval") else 0
    component coderl in [-1, 1] = outcome(code, tests, entry_point, timeout_value=-1, timeout=2)

Limits: ``timeout`` is CPU seconds per execution (default: the component's ``timeout``, else 5 s); the
wall clock only backs it up (``wall_timeout``, default 2 x timeout + 1 s). With ``reference=`` (the task's
reference program) and ``time_factor=k``, each program's limit is ``min(timeout, max(time_floor, k x T_ref))``,
``T_ref`` the reference's CPU time on the same tests, measured once per task and cached
(:mod:`rewardlang.sandbox.reftime`; EvalPlus's rule on CPU time)::

    component correct in [0, 1] = tests_pass_rate(code, tests, entry_point, reference=solution, time_factor=4)
        timeout 10
 For stdin/stdout tests each case
is its own execution, and the cases after a timeout are not run (they fail). An infrastructure failure
(a sandbox slot died or hung, no sandbox level available) masks the sample; it never scores 0.

Counters in ``ctx.stats``: ``sandbox.executions``, ``sandbox.cache_hits``, ``sandbox.batch_duplicates``,
``sandbox.infra_failures``, ``sandbox.timeouts``, ``sandbox.limit_relative`` / ``sandbox.limit_no_reference`` /
``sandbox.reference_measured`` / ``sandbox.reference_failed`` (relative limits), ``sandbox.max_wall_s`` (the
slowest execution so far: the trainers restart it each step), ``sandbox.judge_process_tests`` (tests that could not be
split into probes and ran whole in the sandbox's judge process), ``sandbox.isolation_level`` (3 bwrap, 2 namespaces, 1 uid, 0 limits) and
``sandbox.level.<name>``.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rewardlang.runtime.api import Context, Result, function, per_row
from rewardlang.signature import Arg
from rewardlang.types import CODE, TEXT

__all__ = ["ExecParams", "OutcomeParams", "tests_pass_rate", "tests_all_pass", "tests_results", "outcome",
           "outcome_label", "executes", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 5.0


class ExecParams(BaseModel):
    """Options shared by the execution functions."""

    model_config = ConfigDict(extra="forbid")

    #: how to read ``tests`` (auto-detected by default)
    format: Literal["auto", "humaneval", "mbpp", "stdio", "calls"] = "auto"
    #: CPU seconds per execution (default: the component's timeout, else 5)
    timeout: float | None = Field(None, gt=0, le=600)
    #: wall-clock backstop per execution (default: 2 x timeout + 1)
    wall_timeout: float | None = Field(None, gt=0, le=3600)
    #: address-space budget on top of the process's size at start
    memory_mb: int = Field(1024, ge=16, le=1 << 16)
    #: stdout cap per execution; more is an ``output_limit`` outcome
    max_output_bytes: int = Field(1 << 20, ge=1024, le=1 << 30)
    #: processes and threads a program may create
    max_processes: int = Field(16, ge=1, le=4096)
    #: stdin/stdout comparison: ``lines`` (same line count, trailing whitespace ignored), ``tokens``, ``exact``
    compare: Literal["lines", "tokens", "exact"] = "lines"
    #: CPU seconds of the compile step of a compiled language (default: its profile's, docs/languages.md)
    compile_timeout: float | None = Field(None, gt=0, le=600)
    #: a limit relative to the task's ``reference`` solution: ``max(time_floor, time_factor x`` its measured CPU
    #: time``)``, at most ``timeout`` (EvalPlus's rule, on CPU time). None: ``timeout`` for every sample
    time_factor: float | None = Field(None, gt=0, le=1000)
    #: the least relative limit in CPU seconds (a reference that runs in milliseconds still gives this much)
    time_floor: float = Field(1.0, gt=0, le=600)


class OutcomeParams(ExecParams):
    """``outcome``: the value of each outcome class (CodeRL defaults)."""

    pass_value: float = Field(1.0, ge=-1, le=1)
    fail_value: float = Field(-0.3, ge=-1, le=1)
    runtime_error_value: float = Field(-0.6, ge=-1, le=1)
    compile_error_value: float = Field(-1.0, ge=-1, le=1)
    #: APPS and CodeRL count a timeout (and running out of memory or output) as a runtime error
    timeout_value: float = Field(-0.6, ge=-1, le=1)
    memory_value: float = Field(-0.6, ge=-1, le=1)
    output_limit_value: float = Field(-0.6, ge=-1, le=1)


def _check_language(value: Any) -> tuple[str, str] | None:
    """A constant ``language`` is checked when the spec is compiled (a column is checked per row)."""
    from rewardlang.sandbox.languages import LANGUAGES, canonical_language, unknown_language_message

    if canonical_language(value) is None:
        return unknown_language_message(value), f"write one of {', '.join(repr(x) for x in LANGUAGES)}"
    return None


def _check_prelude(value: Any) -> tuple[str, str] | None:
    """A constant prelude must define something: Python source, or text holding a fenced Python block."""
    from rewardlang.sandbox.convert import prelude_statements

    _stmts, notes = prelude_statements(str(value), set())
    if notes:
        return notes[0], "give the helpers' Python source (the row's prompt: `prelude=prompt`), or leave it out"
    return None


_ARGS = {
    "code": "code?",
    "tests": "any",
    "entry_point": Arg("entry_point", TEXT.optional(), default=None),
    # python (default), c, cpp, java, js, php, sh, go, or a column of them: docs/languages.md
    "language": Arg("language", TEXT, default="python", check=_check_language),
    "reference": Arg("reference", CODE.optional(), default=None),
    # trusted helper code for the tests (e.g. the task's prompt): run in the judge process, never the program's
    "prelude": Arg("prelude", CODE.optional(), default=None, check=_check_prelude, trusted=True),
}


def forced_level_missing(params: Any) -> tuple[str, str] | None:
    """A sandbox level asked for by name (``REWARDLANG_SANDBOX_LEVEL``) that cannot be had, as ``(what, how to
    get it)``; None when it works or none is forced. Checked when a program is loaded for scoring, so such a run
    stops before any row (E603) instead of masking every row: a level that was asked for "fails loudly". The
    level this machine would choose itself is not checked here: its failure is an infrastructure failure,
    masked and retried (docs/sandbox.md)."""
    import os

    level = os.environ.get("REWARDLANG_SANDBOX_LEVEL")
    if not level or level == "auto":
        return None
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import get_sandbox

    how = ("install bubblewrap (apt-get install -y bubblewrap) and see `rewardlang doctor`, or unset "
           "REWARDLANG_SANDBOX_LEVEL to run at the level this machine gives")
    try:
        get_sandbox()  # the sandbox the scoring will use: started once, here
    except LevelUnavailable as e:
        return (f"the sandbox level {level!r} that REWARDLANG_SANDBOX_LEVEL asks for ({e})", how)
    except ValueError as e:
        return (f"a sandbox level: {e}", "set REWARDLANG_SANDBOX_LEVEL to bwrap, namespaces, uid or limits")
    return None


#: the counter key under which a task's tests that use names nothing defines are noted (prefix, task, names)
UNDEFINED_KEY = "tests.undefined_names"
#: the counter key under which tests that cannot be read are noted (prefix, task, why)
UNREADABLE_KEY = "tests.unreadable"
#: the counter key under which tests that call the function but assert nothing are noted (prefix, task)
ASSERTS_NOTHING_KEY = "tests.asserts_nothing"
_SEP = "\x1f"


def _task_label(task: Any, plan: Any) -> str:
    """How a task is named in the undefined-name report: its entry point, else its first test."""
    if task.entry_point:
        return str(task.entry_point)
    first = plan.tests[0].source.splitlines()[0] if plan.tests else "tests"
    return first if len(first) <= 60 else first[:57] + "..."


def note_plans(tasks: Sequence[Any], stats: Any) -> list[Any]:
    """Note in ``stats`` each task (Python, with tests) whose tests use names nothing defines: those tests fail for
    every program, so the run says so (``score``'s summary, ``report``, ``check --data``, ``eval``, the training
    log) instead of a silent 0. One key per task and names, so a run reports each once; tests that cannot be read
    are noted the same way (``UNREADABLE_KEY``), and ``tests.planned`` counts the distinct test suites read per
    call. Returns ``tasks`` with a prelude the tests do not use dropped (it changes nothing: the verdicts and the
    cached reference times of such tasks stay those of the task without it)."""
    from dataclasses import replace

    from rewardlang.sandbox.convert import TestFormatError, make_plan

    seen: dict[tuple[Any, ...], Any] = {}
    out = list(tasks)
    for i, t in enumerate(tasks):
        if t.language != "python" or t.tests is None:
            continue
        key = (id(t.tests), t.entry_point, t.format, t.prelude)
        if key not in seen:
            try:
                plan = make_plan(t.tests, t.entry_point, t.format, t.prelude)   # cached: the sandbox makes the same
            except TestFormatError as e:
                plan = None
                stats[_SEP.join((UNREADABLE_KEY, str(t.entry_point or "tests"), str(e)[:300]))] += 1
            seen[key] = plan
            stats["tests.planned"] += 1
            if plan is not None and plan.undefined:
                stats[_SEP.join((UNDEFINED_KEY, _task_label(t, plan), ",".join(plan.undefined)))] += 1
            if plan is not None and plan.asserts_nothing:
                stats[_SEP.join((ASSERTS_NOTHING_KEY, _task_label(t, plan)))] += 1
        plan = seen[key]
        if t.prelude is not None and plan is not None and not plan.uses_prelude:
            out[i] = replace(t, prelude=None)
    return out


def undefined_names(stats: Any) -> list[tuple[str, list[str], int]]:
    """The tasks whose tests use names nothing defines, from a run's counters: ``(task, names, batches that had
    it)``, sorted.

        >>> from collections import Counter
        >>> from rewardlang.sandbox import Task
        >>> st = Counter()
        >>> _ = note_plans([Task("def f(x):\\n    return x\\n",
        ...                                "def check(candidate):\\n    assert candidate(helper(1)) == 1\\n", "f")], st)
        >>> undefined_names(st)
        [('f', ['helper'], 1)]
    """
    out = []
    for k, v in stats.items():
        if isinstance(k, str) and k.startswith(UNDEFINED_KEY + _SEP):
            _, task, names = k.split(_SEP, 2)
            out.append((task, names.split(","), int(v)))
    return sorted(out)


def undefined_names_lines(stats: Any = None, found: Sequence[tuple[str, Sequence[str]]] | None = None,
                          level: str = "warning") -> list[str]:
    """The warning a run prints about those tasks (empty when there are none): once per run, tasks and names. From
    a run's counters, or from ``found`` (``(task, names)`` pairs); ``level="error"`` where it fails the command
    (``check --data``)."""
    found = [(t, n) for t, n, *_ in (found if found is not None else undefined_names(stats or {}))]
    if not found:
        return []
    shown = "; ".join(f"`{task}`: {', '.join(names)}" for task, names in found[:20])
    more = f" (and {len(found) - 20} more)" if len(found) > 20 else ""
    return [(f"{level}: the tests of {len(found)} task(s) use names nothing defines, so those tests fail for every "
             f"program: {shown}{more}"),
            ("hint: give the helpers the tests need as trusted code, `prelude=` of the test functions (the shipped "
             "specs pass the row's prompt), or put them at the head of the tests; the program's own definitions "
             "are never used for test code (docs/language.md, docs/sandbox.md)")]


def asserts_nothing_lines(stats: Any) -> list[str]:
    """The warning about tasks whose tests assert nothing (``check(candidate)`` that only calls it: every program
    that does not raise passes), from a run's counters; empty when there are none.

        >>> from collections import Counter
        >>> from rewardlang.sandbox import Task
        >>> st = Counter()
        >>> _ = note_plans([Task("def f(x):\\n    return x\\n", "def check(candidate):\\n    candidate(1)\\n", "f")], st)
        >>> asserts_nothing_lines(st)[0][:62]
        'warning: the tests of 1 task(s) assert nothing about what the '
    """
    tasks = sorted({k.split(_SEP, 1)[1] for k, v in stats.items()
                    if isinstance(k, str) and k.startswith(ASSERTS_NOTHING_KEY + _SEP) and v})
    if not tasks:
        return []
    shown = ", ".join(f"`{t}`" for t in tasks[:20]) + (f" (and {len(tasks) - 20} more)" if len(tasks) > 20 else "")
    return [f"warning: the tests of {len(tasks)} task(s) assert nothing about what the function returns (they only "
            f"call it), so every program that does not raise passes them: {shown}",
            "hint: such a reward can be earned without solving the task; add asserts on the results to the tests"]


def exec_limits(params: ExecParams | None, ctx: Context) -> Any:
    """The sandbox :class:`~rewardlang.sandbox.config.Limits` of one execution under ``params``: its ``timeout``
    (CPU seconds), else the component's, else the default; wall, memory, output and process caps as given.
    Shared by the execution functions here and the dense-reward ``script_tests_pass_rate``."""
    from rewardlang.sandbox.config import Limits

    p = params or ExecParams()
    cpu = p.timeout
    if cpu is None:
        cpu = float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT
    return Limits(cpu=float(cpu), wall=p.wall_timeout, memory_mb=p.memory_mb, output_bytes=p.max_output_bytes,
                  processes=p.max_processes)


def _verdicts(code: Sequence[Any], tests: Sequence[Any] | None, entry: Any, params: ExecParams | None,
              ctx: Context, language: Any = "python", reference: Any = None, prelude: Any = None) -> list[Any]:
    """Judge every sample; returns Verdicts (or a str: why the sandbox is unavailable).

    With ``reference`` (a per-sample program: the task's reference solution), each sample's CPU limit is
    :func:`~rewardlang.sandbox.reftime.relative_limit` of the reference's measured CPU time on the same
    tests, at most the ``timeout`` (rows without a reference, or whose reference does not pass, keep ``timeout``:
    counted in ``sandbox.limit_no_reference``)."""
    from rewardlang.sandbox.config import Limits
    from rewardlang.sandbox.judge import Verdict
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import Task, get_sandbox

    p = params or ExecParams()
    n = len(code)
    limits: Limits = exec_limits(p, ctx)
    from rewardlang.sandbox.languages import canonical_language, unknown_language_message

    entries = per_row(entry, n)
    langs = per_row(language, n)
    preludes = per_row(prelude, n)
    tasks = []
    bad_lang: dict[int, str] = {}
    for i in range(n):
        t = None if tests is None else tests[i]
        if isinstance(t, tuple):
            t = list(t)
        lang = canonical_language(langs[i]) if langs[i] is not None else "python"
        if lang is None:    # a per-row value that names no language: that row's error, counted
            bad_lang[i] = unknown_language_message(langs[i])
            ctx.stats["sandbox.unknown_language"] += 1
            lang = "python"
        # the prelude is Python helper code for Python tests; structured tests of other languages have none
        pre = preludes[i] if lang == "python" and isinstance(preludes[i], str) and preludes[i].strip() else None
        tasks.append(Task(code[i], t if tests is not None else None, entries[i], p.format, limits, p.compare,
                          lang, p.compile_timeout, pre))
    tasks = note_plans(tasks, ctx.stats)
    if ctx.extra.get("plan_only"):   # `rewardlang check --data`: the tests are read, no program runs
        return [Verdict("infra", infra="not run: the tests were only read (check --data)") for _ in range(n)]
    try:
        sandbox = get_sandbox()
    except LevelUnavailable as e:
        ctx.stats["sandbox.unavailable"] += 1
        ctx.stats["sandbox.infra_failures"] += n
        return [Verdict("infra", infra=f"no sandbox: {e}") for _ in range(n)]
    if p.time_factor is not None:
        tasks = _relative_limits(sandbox, tasks, per_row(reference, n), p, limits, ctx)
    out = []
    missing_tests = {i for i, t in enumerate(tasks) if tests is not None and t.tests is None}
    run = [i for i in range(n) if i not in bad_lang and i not in missing_tests]
    verdicts = sandbox.evaluate([tasks[i] for i in run], cache=ctx.cache if ctx.use_cache else None,
                                use_cache=ctx.use_cache, stats=ctx.stats)
    walls = [v.wall for v in verdicts if not v.infra]
    if walls:  # the slowest sample of this call (the trainers report the step's slowest: time/reward_max)
        ctx.stats["sandbox.max_wall_s"] = max(float(ctx.stats.get("sandbox.max_wall_s", 0.0)), max(walls))
    by_row = dict(zip(run, verdicts))
    for i in range(n):
        if i in bad_lang:
            out.append(Verdict("error", error=bad_lang[i]))
        elif i in missing_tests:
            out.append(Verdict("error", error="no tests (tests is none)"))
        else:
            out.append(by_row[i])
    return out


def _relative_limits(sandbox: Any, tasks: list[Any], refs: list[Any], p: ExecParams, cap: Any,
                     ctx: Context) -> list[Any]:
    """``tasks`` with each CPU limit derived from its reference's measured CPU time (see :mod:`reftime`)."""
    from dataclasses import replace

    from rewardlang.sandbox.reftime import reference_times, relative_limit

    assert p.time_factor is not None
    run = [i for i, t in enumerate(tasks) if t.code is not None and t.tests is not None]  # others never run
    # the reference is timed as Python; rows in other languages keep the timeout (counted as no reference)
    wanted = [i for i in run if isinstance(refs[i], str) and refs[i].strip()
              and getattr(tasks[i], "language", "python") == "python"]
    times = reference_times(sandbox, [(refs[i], tasks[i].tests, tasks[i].entry_point, tasks[i].format,
                                       tasks[i].compare, tasks[i].prelude) for i in wanted], cap.cpu, stats=ctx.stats)
    out = list(tasks)
    derived = 0
    for i, t_ref in zip(wanted, times, strict=True):
        if t_ref is None:  # the reference did not pass its own tests within the timeout: the timeout applies
            continue
        cpu = relative_limit(t_ref, factor=p.time_factor, floor=p.time_floor, cap=cap.cpu)
        # the wall-clock backstop follows the derived limit (2 x cpu + 1) unless the spec set one
        out[i] = replace(tasks[i], limits=replace(cap, cpu=cpu))
        derived += 1
    ctx.stats["sandbox.limit_relative"] += derived
    ctx.stats["sandbox.limit_no_reference"] += len(run) - derived
    return out


def _result(verdicts: list[Any], value: Any) -> Result:
    values, errors, infra, details = [], [], [], []
    for v in verdicts:
        if v.infra:
            values.append(None)
            errors.append(f"sandbox infrastructure failure: {v.infra}")
            infra.append(True)
            details.append({"infra": v.infra})
        elif v.error:
            values.append(None)
            errors.append(v.error)
            infra.append(False)
            details.append(None)
        else:
            values.append(value(v))
            errors.append(None)
            infra.append(False)
            details.append(v.details())
    return Result(values, errors=errors, infra=infra, details=details)


@function("tests_pass_rate", args=_ARGS, returns="number", params=ExecParams, range=(0.0, 1.0), accepts_none=True,
          in_workers=False, requires=forced_level_missing, tags=("plans",), doc="Share of the unit tests the program passes (sandboxed; see docs/sandbox.md).")
def tests_pass_rate(code: list[str | None], tests: list[Any], entry_point: Any = None, language: Any = "python",
                    reference: Any = None, prelude: Any = None, *, params: ExecParams | None, ctx: Context) -> Result:
    return _result(_verdicts(code, tests, entry_point, params, ctx, language, reference, prelude),
                   lambda v: v.pass_rate)


@function("tests_all_pass", args=_ARGS, returns="bool", params=ExecParams, accepts_none=True, in_workers=False, requires=forced_level_missing, tags=("plans",),
          doc="True when the program passes every unit test (sandboxed).")
def tests_all_pass(code: list[str | None], tests: list[Any], entry_point: Any = None, language: Any = "python",
                   reference: Any = None, prelude: Any = None, *, params: ExecParams | None, ctx: Context) -> Result:
    return _result(_verdicts(code, tests, entry_point, params, ctx, language, reference, prelude),
                   lambda v: v.all_passed)


@function("tests_results", args=_ARGS, returns="list[number]", params=ExecParams, accepts_none=True,
          in_workers=False, requires=forced_level_missing, tags=("plans",), doc="1 or 0 for each unit test, in the order of the tests (sandboxed).")
def tests_results(code: list[str | None], tests: list[Any], entry_point: Any = None, language: Any = "python",
                  reference: Any = None, prelude: Any = None, *, params: ExecParams | None, ctx: Context) -> Result:
    return _result(_verdicts(code, tests, entry_point, params, ctx, language, reference, prelude),
                   lambda v: [1.0 if t.passed else 0.0 for t in v.tests])


@function("outcome", args=_ARGS, returns="number", params=OutcomeParams, range=(-1.0, 1.0), accepts_none=True,
          in_workers=False, requires=forced_level_missing, tags=("plans",),
          doc="CodeRL-style outcome value: pass 1, fail -0.3, runtime error -0.6, compile error -1 "
              "(timeout, memory, output limit: -0.6 by default).")
def outcome(code: list[str | None], tests: list[Any], entry_point: Any = None, language: Any = "python",
            reference: Any = None, prelude: Any = None, *, params: OutcomeParams | None, ctx: Context) -> Result:
    p = params or OutcomeParams()
    values = {"pass": p.pass_value, "fail": p.fail_value, "runtime_error": p.runtime_error_value,
              "compile_error": p.compile_error_value, "timeout": p.timeout_value, "memory": p.memory_value,
              "output_limit": p.output_limit_value}
    return _result(_verdicts(code, tests, entry_point, p, ctx, language, reference, prelude),
                   lambda v: values[v.outcome])


@function("outcome_label", args=_ARGS, returns="text", params=ExecParams, accepts_none=True, in_workers=False, requires=forced_level_missing, tags=("plans",),
          doc="The outcome class: pass, fail, runtime_error, compile_error, timeout, memory or output_limit.")
def outcome_label(code: list[str | None], tests: list[Any], entry_point: Any = None, language: Any = "python",
                  reference: Any = None, prelude: Any = None, *, params: ExecParams | None, ctx: Context) -> Result:
    return _result(_verdicts(code, tests, entry_point, params, ctx, language, reference, prelude),
                   lambda v: v.outcome)


@function("executes", args={"code": "code?"}, returns="bool", params=ExecParams, accepts_none=True,
          in_workers=False, requires=forced_level_missing, tags=("plans",), doc="True when the program runs to the end as a script (empty stdin, sandboxed).")
def executes(code: list[str | None], *, params: ExecParams | None, ctx: Context) -> Result:
    return _result(_verdicts(code, None, None, params, ctx), lambda v: v.outcome == "pass")
