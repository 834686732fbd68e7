"""Robot-program rewards: run a program against a task's worlds in the sandbox, judge each run outside.

Functions (options in :class:`RobotParams`)::

    robot_outcome_label(code, task) -> text              python_error | simulation_error | completion_error | success
    robot_outcome(code, task)       -> number in [-1, 1] the label's value (success 1, completion -0.3,
                                                         simulation -0.6, python -1 by default)
    robot_pass_rate(code, task)     -> number in [0, 1]  share of the runs that succeed
    robot_error_spans(code, task)   -> spans             the statements that raised a simulation error

``code`` is a program defining ``task_program()`` that calls the robot API (docs/robot.md); ``task`` is a data
row's ``task`` value (a JSON object or its text: ``family``, ``params``, ``seeds``, from ``rewardlang data robot``).
Each of the first ``runs`` seeds (default 5) gives a world; each world is one sandboxed execution with a CPU
limit (``timeout``, default the component's timeout, else 2 s). The label is the worst over the runs; a run that
times out, runs out of memory or output, or does more than 1,000 robot actions is a ``python_error`` and a
failure of ``robot_pass_rate``.

What stays outside the sandbox: the world generator, the checker, and the trusted replay of the trace the
program's run returns (:mod:`rewardlang.domains.robot.outcome`). The sandbox receives the program, the
simulator's source (set-up code) and one world as plain data; it returns ``(trace, status, message)`` through
the type-exact result channel. The verdict object of the unit-test path carries no returned values, so this
module sends its requests through the sandbox's slot pool (``Sandbox.pool.submit``) and reads the records
with the judge's own parser and decoder (``judge.parse_records``, ``judge.decode_value``). An infrastructure
failure in any run masks the sample (counted in ``sandbox.infra_failures``).

``robot_error_spans`` is the simulator's token attribution, as the syntax term's first violation is the
compiler's: one span over each statement of ``code`` that raised a simulation error in some run (value
``value``, default −1, label the error), so a ``tokens spans`` clause puts the penalty on that statement's tokens
only. Which line raised is the deepest frame of the program in the exception's traceback, read in the sandbox
(``line N:`` in the run's message); it is only a claim, used for placement and never for the class: a line that
holds no statement of ``code`` gives no span, and a spec then keeps its penalty on every token
(specs/dense_ppo_robot.reward's ``simulation_fail``), so a forged line cannot make a penalty disappear.

Example spec lines::

    input task: any
    let code = code_block(completion, "python") or ""
    component sim in [-1, 1] = robot_outcome(code, task)
    component solved in [0, 1] = robot_pass_rate(code, task, runs=5)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rewardlang.pycompile import compile_quietly
from rewardlang.runtime.api import Context, Result, function

__all__ = [
    "DEFAULT_TIMEOUT",
    "RobotOutcomeParams",
    "RobotParams",
    "RobotSpanParams",
    "robot_error_spans",
    "robot_outcome",
    "robot_outcome_label",
    "robot_pass_rate",
    "run_robot",
    "statement_span",
]

DEFAULT_TIMEOUT = 2.0


class RobotParams(BaseModel):
    """Options of the robot functions."""

    model_config = ConfigDict(extra="forbid")

    #: worlds per program (the task's seeds first, then more derived from its id)
    runs: int = Field(5, ge=1, le=64)
    #: CPU seconds per run (default: the component's timeout, else 2)
    timeout: float | None = Field(None, gt=0, le=600)
    #: wall-clock backstop per run (default: 2 x timeout + 1)
    wall_timeout: float | None = Field(None, gt=0, le=3600)
    memory_mb: int = Field(512, ge=16, le=1 << 16)
    max_output_bytes: int = Field(1 << 16, ge=1024, le=1 << 30)
    max_processes: int = Field(4, ge=1, le=4096)
    #: the encoded (trace, status, message) one run may return; more is a python_error (output limit). A real
    #: trace of 1,000 actions is ~50 KB; the cap bounds what the trusted replay and checker read (the sandbox's
    #: default for unit-test values is 1 MiB)
    max_result_bytes: int = Field(128 << 10, ge=4096, le=1 << 24)


class RobotOutcomeParams(RobotParams):
    """``robot_outcome``: the value of each class (the CodeRL-like ladder; a choice, documented)."""

    success_value: float = Field(1.0, ge=-1, le=1)
    completion_error_value: float = Field(-0.3, ge=-1, le=1)
    simulation_error_value: float = Field(-0.6, ge=-1, le=1)
    python_error_value: float = Field(-1.0, ge=-1, le=1)


class RobotSpanParams(RobotParams):
    """``robot_error_spans``: the value of each span."""

    value: float = Field(-1.0, ge=-1e6, le=1e6)


_ARGS = {"code": "code?", "task": "any"}


class _Sample:
    """The runs of one (program, task) pair."""

    __slots__ = ("details", "error", "infra", "labels", "lines")

    def __init__(self, n: int) -> None:
        self.labels: list[str | None] = [None] * n
        self.details: list[str] = [""] * n
        #: the program's line that raised a run's simulation error (as the run claims it), else 0
        self.lines: list[int] = [0] * n
        self.infra: str | None = None
        self.error: str | None = None


def _limits(p: RobotParams, ctx: Context) -> Any:
    from rewardlang.sandbox.config import Limits

    cpu = p.timeout if p.timeout is not None else (float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT)
    return Limits(cpu=float(cpu), wall=p.wall_timeout, memory_mb=p.memory_mb, output_bytes=p.max_output_bytes,
                  processes=p.max_processes, observation_bytes=p.max_result_bytes)


def _python_error(run: Any) -> str:
    """Why a run produced no result record (it ended before the runner returned)."""
    if run.reason in ("cpu", "wall"):
        return "timeout"
    if run.reason in ("output", "obs"):
        return "output limit exceeded"
    if run.exit < 0:
        return f"killed by signal {-run.exit}"
    return f"exited ({run.exit}) before the run finished"


def _claimed_line(claim: Any) -> int:
    """The raising line a simulation error's message claims (``line N: ...``), else 0."""
    import re

    if type(claim) is tuple and len(claim) == 3 and claim[1] == "simulation_error" and type(claim[2]) is str:
        m = re.match(r"line (\d{1,7}): ", claim[2])
        if m:
            return int(m.group(1))
    return 0


def _decide(raw: Any, world: dict, task: Any) -> tuple[str | None, str]:
    """(label, detail) of one run from the slot's raw result; label None: infrastructure failure."""
    label, detail, _line = _decide_line(raw, world, task)
    return label, detail


def _decide_line(raw: Any, world: dict, task: Any) -> tuple[str | None, str, int]:
    """(label, detail, line) of one run: ``line`` is the claimed raising line of a simulation error, else 0."""
    from rewardlang.domains.robot.outcome import judge_claim
    from rewardlang.sandbox.judge import (
        RECORD_SLACK,
        MalformedObservation,
        decode_value,
        parse_records,
    )

    if raw.runs is None or not raw.runs:
        return None, raw.infra or "sandbox failure", 0
    run = raw.runs[0]
    # one record is expected (the probe's); a program writing more on the channel only costs bounded parsing
    recs, _malformed = parse_records(run.res, limit=1 + RECORD_SLACK)
    for rec in recs:
        if rec[0] == "c":
            return "python_error", "compile error: " + (str(rec[1])[:300] if len(rec) > 1 else ""), 0
        if rec[0] == "L":
            return "python_error", "error while loading: " + (str(rec[2])[:300] if len(rec) > 2 else ""), 0
    for rec in recs:
        if rec[0] != "t" or len(rec) < 3 or rec[1] != 0 or type(rec[1]) is not int:
            continue
        if rec[2] != "ok" or len(rec) < 4:
            return ("python_error", str(rec[3])[:300] if len(rec) > 3 and isinstance(rec[3], str) else "no result",
                    0)
        try:
            claim = decode_value(rec[3])
        except (MalformedObservation, ValueError, TypeError, RecursionError, OverflowError) as e:
            return "python_error", f"malformed result: {e}", 0
        out = judge_claim(world, claim, task.check)
        return out.label, out.detail, _claimed_line(claim) if out.label == "simulation_error" else 0
    return "python_error", _python_error(run), 0


def _seeds(task: Any, runs: int) -> list[int]:
    from rewardlang.domains.robot.tasks import world_seeds

    seeds = list(task.seeds)[:runs]
    if len(seeds) < runs:
        more = world_seeds(task.task_id + "#more", runs)
        seeds += [s for s in more if s not in seeds][:runs - len(seeds)]
    return seeds


def run_robot(code: Sequence[str | None], tasks: Sequence[Any], params: RobotParams | None,
              ctx: Context) -> list[_Sample]:
    """Run every program on its task's worlds in the sandbox; one :class:`_Sample` per program."""
    from rewardlang.domains.robot import inside
    from rewardlang.domains.robot.tasks import task_from_spec
    from rewardlang.sandbox.config import RUN_END_S
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import NPROC_BASE, get_sandbox

    p = params or RobotParams()
    n = len(code)
    samples = [_Sample(p.runs) for _ in range(n)]
    try:
        sandbox = get_sandbox()
    except LevelUnavailable as e:
        ctx.stats["sandbox.unavailable"] += 1
        ctx.stats["sandbox.infra_failures"] += n
        for s in samples:
            s.infra = f"no sandbox: {e}"
        return samples
    limits = _limits(p, ctx)
    wire_limits = limits.to_wire(NPROC_BASE[sandbox.level])
    hard = limits.hard_wall + RUN_END_S + sandbox.config.hard_timeout_slack
    setup = inside.setup_code()
    # key -> (payload, world, task, [(sample, run)])
    pending: dict[str, tuple[dict[str, Any], Any, Any, list[tuple[int, int]]]] = {}
    counts: dict[str, int] = {}

    def bump(k: str, by: int = 1) -> None:
        counts[k] = counts.get(k, 0) + by

    for i in range(n):
        try:
            task = task_from_spec(tasks[i])
        except (ValueError, KeyError, TypeError) as e:
            samples[i].error = f"bad robot task: {e}"
            continue
        if code[i] is None:
            for r in range(p.runs):
                samples[i].labels[r], samples[i].details[r] = "python_error", "no code"
            continue
        program = inside.prepare_program(code[i])  # type: ignore[arg-type]
        for r, seed in enumerate(_seeds(task, p.runs)):
            world = task.world(seed)
            req = {"mode": "call", "code": program, "setup": setup, "entry": None, "param": "candidate",
                   "probes": [{"e": inside.probe_expression(world)}], "inside": [], "limits": wire_limits}
            payload = json.dumps(req).encode("utf-8", "surrogatepass")
            h = hashlib.sha256(payload)
            # the checker is part of the key: the same program and world judged by another task's checker
            # is another verdict
            h.update(json.dumps([sandbox.level, task.family.name, task.params], sort_keys=True).encode())
            key = "rewardlang.robot.run.v2:" + h.hexdigest()  # v2: the cached verdict holds the raising line
            if key in pending:
                pending[key][3].append((i, r))
                bump("sandbox.batch_duplicates")
                continue
            if ctx.use_cache:
                hit = ctx.cache.get(key)
                if hit is not None:
                    samples[i].labels[r], samples[i].details[r], samples[i].lines[r] = hit
                    bump("sandbox.cache_hits")
                    continue
            pending[key] = (req, world, task, [(i, r)])  # the pool splits the program's text into its own frame

    def settle(key: str, raw: Any) -> None:
        _req, world, task, where = pending.pop(key)
        label, detail, line = _decide_line(raw, world, task)
        bump("sandbox.executions")
        bump("robot.runs")
        if label is None:
            bump("sandbox.infra_failures")
            for i, _r in where:
                samples[i].infra = detail
            return
        if detail == "timeout":
            bump("sandbox.timeouts")
        if ctx.use_cache:
            ctx.cache.put(key, (label, detail, line))
        for i, r in where:
            samples[i].labels[r], samples[i].details[r], samples[i].lines[r] = label, detail, line

    sandbox.pool.stream(((k, p[0], hard) for k, p in list(pending.items())), settle)
    for k, v in counts.items():
        ctx.stats[k] += v
    ctx.stats[f"sandbox.level.{sandbox.level}"] = 1
    return samples


def _result(samples: list[_Sample], value: Any) -> Result:
    from rewardlang.domains.robot.outcome import worst

    values, errors, infra, details = [], [], [], []
    for s in samples:
        if s.error:
            values.append(None)
            errors.append(s.error)
            infra.append(False)
            details.append(None)
        elif s.infra or any(lb is None for lb in s.labels):
            values.append(None)
            errors.append(f"sandbox infrastructure failure: {s.infra or 'a run is missing'}")
            infra.append(True)
            details.append({"infra": s.infra})
        else:
            labels = [lb for lb in s.labels if lb is not None]
            values.append(value(labels))
            errors.append(None)
            infra.append(False)
            failing = [d for lb, d in zip(labels, s.details) if lb != "success" and d][:3]
            details.append({"label": worst(labels), "labels": labels, "passed": labels.count("success"),
                            "runs": len(labels), **({"errors": failing} if failing else {})})
    return Result(values, errors=errors, infra=infra, details=details)


@function("robot_outcome_label", args=_ARGS, returns="text", params=RobotParams, accepts_none=True,
          in_workers=False,
          doc="The worst outcome over the task's worlds: python_error, simulation_error, completion_error or "
              "success (robot simulator, sandboxed; see docs/robot.md).")
def robot_outcome_label(code: list[str | None], task: list[Any], *, params: RobotParams | None,
                        ctx: Context) -> Result:
    from rewardlang.domains.robot.outcome import worst

    return _result(run_robot(code, task, params, ctx), worst)


@function("robot_outcome", args=_ARGS, returns="number", params=RobotOutcomeParams, range=(-1.0, 1.0),
          accepts_none=True, in_workers=False,
          doc="The value of the worst robot outcome: success 1, completion_error -0.3, simulation_error -0.6, "
              "python_error -1 (each an option).")
def robot_outcome(code: list[str | None], task: list[Any], *, params: RobotOutcomeParams | None,
                  ctx: Context) -> Result:
    from rewardlang.domains.robot.outcome import worst

    p = params or RobotOutcomeParams()
    values = {"success": p.success_value, "completion_error": p.completion_error_value,
              "simulation_error": p.simulation_error_value, "python_error": p.python_error_value}
    return _result(run_robot(code, task, p, ctx), lambda labels: values[worst(labels)])


@function("robot_pass_rate", args=_ARGS, returns="number", params=RobotParams, range=(0.0, 1.0),
          accepts_none=True, in_workers=False,
          doc="Share of the task's worlds in which the robot program succeeds (timeouts count as failures).")
def robot_pass_rate(code: list[str | None], task: list[Any], *, params: RobotParams | None,
                    ctx: Context) -> Result:
    return _result(run_robot(code, task, params, ctx), lambda labels: labels.count("success") / len(labels))


def statement_span(code: str, line: int) -> tuple[int, int] | None:
    """The characters of the innermost statement of ``code`` that holds ``line`` (1-based): a simple statement
    whole, a compound one by its header (up to its body); None when no statement holds the line (or the code does
    not parse).

    >>> code = "def task_program():\\n    go_to('a')\\n    if x:\\n        pick('b')\\n"
    >>> [code[slice(*statement_span(code, n))] for n in (2, 3, 4)]
    ["go_to('a')", 'if x:', "pick('b')"]
    >>> statement_span(code, 9) is None
    True
    """
    import ast

    try:
        tree = compile_quietly(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        body = [b for f in ("body", "orelse", "finalbody", "handlers", "cases") for b in getattr(node, f, []) or []]
        last = node.end_lineno if not body else max(node.lineno, min(b.lineno for b in body) - 1)
        if node.lineno <= line <= last and (best is None or _depth_key(node) > _depth_key(best)):
            best = node
    if best is None:
        return None
    lines = code.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def offset(row: int, col_bytes: int) -> int:  # ast columns are UTF-8 byte offsets
        text = lines[row - 1] if row - 1 < len(lines) else ""
        return starts[row - 1] + len(text.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))

    body = [b for f in ("body", "orelse", "finalbody", "handlers", "cases") for b in getattr(best, f, []) or []]
    start = offset(best.lineno, best.col_offset)
    if not body:
        end = offset(best.end_lineno, best.end_col_offset or 0)  # type: ignore[arg-type]
    else:  # the header: to the end of the line before the body, or to the body on the same line
        first = min(body, key=lambda b: (b.lineno, b.col_offset))
        if first.lineno > best.lineno:
            end = starts[first.lineno - 1]
            end -= len(lines[first.lineno - 2]) - len(lines[first.lineno - 2].rstrip("\r\n"))
        else:
            end = offset(first.lineno, first.col_offset)
            end = start + len(code[start:end].rstrip())
    return (start, end) if end > start else None


def _depth_key(node: Any) -> tuple[int, int]:
    """Innermost first: a later start, then a narrower end."""
    return (node.lineno * 100000 + node.col_offset, -(node.end_lineno or 0))


@function("robot_error_spans", args=_ARGS, returns="spans", params=RobotSpanParams, spans_of="code",
          accepts_none=True, in_workers=False,
          doc="The statements of the program that raised a simulation error in some world, one span each (value "
              "`value`, default -1, label the error): the simulator's token attribution (`tokens spans`). Empty "
              "when no run raised one, or when the claimed line holds no statement.")
def robot_error_spans(code: list[str | None], task: list[Any], *, params: RobotSpanParams | None,
                      ctx: Context) -> Result:
    from rewardlang.runtime.api import Span

    p = params or RobotSpanParams()
    samples = run_robot(code, task, p, ctx)
    base = _result(samples, lambda labels: 0)
    values: list[Any] = []
    for c, s, v in zip(code, samples, base.values):
        if v is None or c is None:
            values.append(None if v is None else [])
            continue
        spans: dict[tuple[int, int], str] = {}
        for label, line, detail in zip(s.labels, s.lines, s.details):
            where = statement_span(c, line) if label == "simulation_error" and line > 0 else None
            if where is not None and where not in spans:
                spans[where] = detail
        values.append([Span(a, b, p.value, why) for (a, b), why in sorted(spans.items())])
    return Result(values, errors=base.errors, infra=base.infra, details=base.details)
