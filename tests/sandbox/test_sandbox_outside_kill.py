"""Issue 26, class 4: a program SIGKILLed by something other than the sandbox and its limits.

The kinds of kill are told apart (docs/sandbox.md, "Kills: whose were they"): the sandbox's own kills come with
a reason (CPU, wall clock, overload, output); RLIMIT_CPU's SIGKILL is a CPU timeout; the memory cgroup's OOM
kills move its counter (``memory``). Any other SIGKILL of the program's process is first an infrastructure
event: the request runs again once on a fresh slot and that run's verdict stands; the same kill on the re-run
is the program's own doing (its failure, never a mask, never a third run). A killed slot worker stays an
infrastructure failure (test_sandbox_faults.py).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from shared_programs import FOLLOW

from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.judge import judge
from rewardlang.sandbox.raw import RawResult, RawRun
from rewardlang.sandbox.runner import Sandbox, Task

LIMITS = Limits(cpu=3.0, wall=8.0, memory_mb=256, processes=12)
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
#: correct, and asleep long enough for the test to find and kill its process (once)
SLOW_GOOD = "import time\ndef f(x):\n    time.sleep(0.6)\n    return 2 * x\n"


@pytest.fixture()
def sb() -> Iterator[Sandbox]:
    s = Sandbox(SandboxConfig(slots=1))
    assert s.run("def f(x):\n    return 2 * x\n", TESTS).outcome == "pass"   # the slot is up
    yield s
    s.close()


def _asleep(pid: int) -> bool:
    """Whether ``pid`` is in ``clock_nanosleep``/``nanosleep`` (``/proc/<pid>/syscall``, root can read it):
    the program's own code is running, its set-up is over."""
    try:
        with open(f"/proc/{pid}/syscall") as fh:
            return fh.read().split()[0] in ("230", "35")
    except (OSError, IndexError):
        return False


def _kill_once(s: Sandbox, killed: list[int], stop: threading.Event) -> None:
    """From the trusted side, SIGKILL the first process of the program found asleep, then nothing more."""
    while not stop.is_set() and not killed:
        for pid in s.stray_processes():   # the slot uid's processes that are not the slot's own: the program's
            if _asleep(pid):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
        time.sleep(0.005)


def _run_with_one_outside_kill(s: Sandbox, task: Task) -> tuple[object, list[int]]:
    killed: list[int] = []
    stop = threading.Event()
    t = threading.Thread(target=_kill_once, args=(s, killed, stop))
    t.start()
    try:
        v = s.evaluate([task], use_cache=False)[0]
    finally:
        stop.set()
        t.join(10)
    return v, killed


def _follow(s: Sandbox) -> None:
    """A correct program that uses multiprocessing and tempfile passes on the same pool afterwards."""
    v = s.evaluate([Task(FOLLOW, ["assert double(21) == 42"], None, "mbpp", LIMITS)], use_cache=False)[0]
    assert v.infra is None and v.outcome == "pass", v.details()
    assert s.stray_processes() == []


def test_a_correct_program_killed_from_outside_is_run_again_and_passes(sb: Sandbox) -> None:
    starts = sb.pool.stats["slot_starts"]
    v, killed = _run_with_one_outside_kill(sb, Task(SLOW_GOOD, TESTS, None, "mbpp", LIMITS))
    assert len(killed) == 1
    assert v.infra is None and v.outcome == "pass" and v.pass_rate == 1.0, v.details()
    st = sb.pool.stats
    assert (st["outside_kills"], st["kill_reruns"], st["kills_again_on_rerun"]) == (1, 1, 0)
    assert st["slot_starts"] == starts + 1            # the re-run had a fresh slot
    assert sb.stats.get("infra_failures", 0) == 0
    assert sb.stats["outside_kills"] == 1 and sb.stats.get("kills_again_on_rerun", 0) == 0
    _follow(sb)


def test_a_stdio_program_killed_from_outside_is_run_again_and_passes(sb: Sandbox) -> None:
    code = "import time\na, b = map(int, input().split())\ntime.sleep(0.4)\nprint(a + b)\n"
    tests = json.dumps({"inputs": ["1 2\n", "10 20\n", "7 8\n"], "outputs": ["3\n", "30\n", "15\n"]})
    v, killed = _run_with_one_outside_kill(sb, Task(code, tests, None, "stdio", LIMITS))
    assert len(killed) == 1
    assert v.infra is None and v.outcome == "pass" and v.passed == 3, v.details()
    assert (sb.pool.stats["outside_kills"], sb.pool.stats["kill_reruns"]) == (1, 1)
    _follow(sb)


SELF_KILLS = {
    "own_pid": "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n    return 2 * x\n",
    "own_group": "import os, signal\ndef f(x):\n    os.killpg(0, signal.SIGKILL)\n    return 2 * x\n",
    "raise_signal": "import signal\ndef f(x):\n    signal.raise_signal(signal.SIGKILL)\n    return 2 * x\n",
    "from_a_thread": ("import os, threading\ndef f(x):\n"
                      "    t = threading.Thread(target=os.kill, args=(os.getpid(), 9))\n    t.start()\n    t.join()\n"
                      "    return 2 * x\n"),
    "by_its_child": ("import os, signal, subprocess, sys\ndef f(x):\n"
                     "    subprocess.run([sys.executable, '-c', 'import os; os.kill(os.getppid(), 9)'])\n"
                     "    return 2 * x\n"),
    "at_import": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\ndef f(x):\n    return 2 * x\n",
}


@pytest.mark.parametrize("name", sorted(SELF_KILLS))
def test_a_program_that_kills_itself_fails_after_two_runs_unmasked(name: str, sb: Sandbox) -> None:
    starts = sb.pool.stats["slot_starts"]
    v = sb.evaluate([Task(SELF_KILLS[name], TESTS, None, "mbpp", LIMITS)], use_cache=False)[0]
    assert v.infra is None and v.outcome == "runtime_error" and v.pass_rate == 0.0, v.details()
    assert "own doing" in v.tests[0].detail
    st = sb.pool.stats
    # run twice (the first kill taken for an outside one, the second the program's), never a third time
    assert (st["outside_kills"], st["kill_reruns"], st["kills_again_on_rerun"]) == (1, 1, 1)
    assert st["slot_starts"] == starts + 1
    _follow(sb)


def test_a_stdio_program_that_kills_itself_fails_unmasked(sb: Sandbox) -> None:
    code = "import os\nif input() == '2':\n    os.kill(os.getpid(), 9)\nprint('ok')\n"
    tests = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["ok\n", "ok\n", "ok\n"]})
    v = sb.evaluate([Task(code, tests, None, "stdio", LIMITS)], use_cache=False)[0]
    assert v.infra is None and v.outcome == "runtime_error", v.details()
    assert [t.status for t in v.tests][:2] == ["pass", "runtime_error"]
    assert (sb.pool.stats["outside_kills"], sb.pool.stats["kills_again_on_rerun"]) == (1, 1)
    _follow(sb)


@pytest.mark.parametrize("code,outcome", [
    # the memory cgroup's (or, without one, RLIMIT_AS's) end: its counter moved, never taken for an outside kill
    ("def f(x):\n    b = bytearray(1 << 30)\n    return 2 * x\n", "memory"),
    # the sandbox's own kill at the CPU limit
    ("def f(x):\n    while True:\n        pass\n", "timeout"),
])
def test_the_sandboxs_own_kills_are_never_run_again(sb: Sandbox, code: str, outcome: str) -> None:
    v = sb.evaluate([Task(code, TESTS, None, "mbpp", Limits(cpu=1.0, wall=4.0, memory_mb=128))],
                    use_cache=False)[0]
    assert v.infra is None and v.outcome == outcome, v.details()
    assert sb.pool.stats["outside_kills"] == 0 and sb.pool.stats["kill_reruns"] == 0
    _follow(sb)


def test_the_judge_names_a_second_kill_as_the_programs_own() -> None:
    """What the pool hands on after the re-run (a run whose reason is still ``killed``) is the program's
    failure, for call and stdio plans alike."""
    from rewardlang.sandbox.convert import make_plan

    plan = make_plan(TESTS, None, "mbpp")
    run = RawRun(exit=-9, reason="killed", cpu=0.01, wall=0.01, setup_failed=False, clean=True, res=b"", out=b"")
    v = judge(plan, RawResult([run]))
    assert v.outcome == "runtime_error" and v.infra is None
    assert [t.status for t in v.tests] == ["runtime_error", "not_run"]
    assert "own doing" in v.tests[0].detail
