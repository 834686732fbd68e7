"""What the sandbox receives for one robot run: the set-up code (the simulator and a runner) and a probe.

The worker runs a request's program first, then its set-up code in the same globals, then evaluates each
probe (``rewardlang/sandbox/_worker.py::_run_program``). The set-up code executes the simulator's
source in a namespace of its own (so no helper name of the simulator can overwrite one of the program's), and
defines ``__rl_robot_run(world)``, which binds the eight API functions into the program's globals, calls
``task_program()`` and returns ``(trace, status, message)`` as plain data (a simulation error's message starts with
``line N:``, the program's line that raised, which places the penalty on tokens). That value is only a claim: the
trusted side replays the trace (:func:`rewardlang.domains.robot.simulator.replay`) and the status can only make
the outcome worse (:mod:`rewardlang.domains.robot.outcome`).
"""

from __future__ import annotations

import ast
import functools
from importlib import resources

from rewardlang.pycompile import compile_quietly

__all__ = ["simulator_source", "setup_code", "probe_expression", "prepare_program", "ENTRY"]

#: the function a program must define
ENTRY = "task_program"


@functools.lru_cache(maxsize=1)
def simulator_source() -> str:
    """The simulator module's own source text (the one file both sides execute)."""
    return resources.files("rewardlang.domains.robot").joinpath("simulator.py").read_text(encoding="utf-8")


# The simulator's source becomes the body of a function: it is compiled once with the set-up code (the worker
# caches compiled set-up code), where an ``exec`` of its text would compile it again in every run. Its names
# stay local to that function, so none of them can overwrite one of the program's globals.
_RUNNER = '''
def __rl_robot_boot():
%s
    return dict(locals())
__rl_robot_ns = __rl_robot_boot()
del __rl_robot_boot


def __rl_robot_line(e):
    # the program's line that raised: the deepest frame of solution.py (the worker's name for the program) in
    # the traceback; 0 when there is none. Only a claim: it places the penalty, never decides the class
    line = 0
    try:
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "solution.py":
                line = tb.tb_lineno
            tb = tb.tb_next
    except BaseException:
        line = 0
    return line if type(line) is int else 0


def __rl_robot_run(world):
    ns = __rl_robot_ns
    robot, api = ns["make_api"](world)
    globals().update(api)
    status, msg = "ok", ""
    try:
        %s()
    except ns["SimulationError"] as e:
        status, msg = "simulation_error", "line %%d: %%s" %% (__rl_robot_line(e), str(e)[:300])
    except ns["ActionLimit"] as e:
        status, msg = "python_error", "ActionLimit: " + str(e)[:300]
    except BaseException as e:
        status = "python_error"
        try:
            msg = (type(e).__name__ + ": " + str(e))[:300]
        except BaseException:
            msg = type(e).__name__
    return (robot.trace, status, msg)
'''


@functools.lru_cache(maxsize=1)
def setup_code() -> str:
    """The request's set-up code: identical for every program and world, so the worker compiles it once."""
    body = "".join("    " + ln if ln.strip() else ln for ln in simulator_source().splitlines(keepends=True))
    return _RUNNER % (body, ENTRY)


def probe_expression(world: dict) -> str:
    """The probe for one world: a call of the runner on the world as a Python literal (plain data only)."""
    return f"__rl_robot_run({world!r})"


def prepare_program(code: str) -> str:
    """The program as sent: top-level calls ``task_program()`` are replaced by ``pass`` on the same lines.

    The harness calls ``task_program()`` itself after the API exists (the set-up code runs after the
    program's module code), and models often end a program with that call; it would otherwise fail with a
    NameError on the first API function. Line numbers are kept, so a traceback still points at the statement.
    """
    try:
        tree = compile_quietly(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code  # the sandbox reports the compile error
    lines = code.splitlines(keepends=True)
    cuts = []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == ENTRY
                and not stmt.value.args and not stmt.value.keywords and stmt.end_lineno is not None
                and stmt.end_col_offset is not None):
            cuts.append(stmt)
    for stmt in reversed(cuts):
        first, last = stmt.lineno - 1, stmt.end_lineno - 1  # type: ignore[operator]
        # byte offsets of ast are UTF-8 offsets: cut in bytes
        head = lines[first].encode("utf-8")[:stmt.col_offset].decode("utf-8")
        tail = lines[last].encode("utf-8")[stmt.end_col_offset:].decode("utf-8")  # type: ignore[index]
        middle = "\n" * (last - first)
        lines[first:last + 1] = [head + "pass" + middle + tail]
    return "".join(lines)


@functools.lru_cache(maxsize=1)
def _compiled_setup() -> object:
    return compile(setup_code(), "setup.py", "exec")


def run_in_process(code: str, world: dict) -> tuple:
    """Run a *trusted* program (a task's canonical program or a hand-written mutant) here, without the sandbox,
    and return the same claim ``(trace, status, message)`` the sandbox would. For tests and for checking the
    task data; never call it on a model's output."""
    g: dict = {"__name__": "__solution__"}
    exec(compile(prepare_program(code), "solution.py", "exec"), g)
    exec(_compiled_setup(), g)
    trace, status, msg = g["__rl_robot_run"](world)
    return (list(trace), status, msg)
