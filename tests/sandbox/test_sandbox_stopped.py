"""Issue 38's score mismatch: a verdict must not depend on the machine. A scoring job stopped from outside
(SIGSTOP of its processes, as the owner of another job on a shared machine may do, then SIGCONT) had its
programs' wall clocks run on while nothing of it ran, and a program that passes came back as a timeout (a 0,
trained on). Now the time in which the slot's monitor itself did not run is on neither of a program's wall
clocks (``_worker.RunClock``), and the pool's own deadline leaves out the time in which the pool's thread did
not run: a stopped and continued job gets the verdicts of a job that was never stopped.

What stays the program's own: a program stopped while its monitor runs is idle by its own doing (a program can
stop itself, and even have a timer continue it; taking that time as anything else would let it mask itself).

The tests stop processes at a point they wait for (the program asleep in its own code), never after a guessed
delay: no timing decides what they check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from rewardlang.sandbox._worker import STALL_S, RunClock
from rewardlang.sandbox.config import RUN_END_S, Limits, SandboxConfig
from rewardlang.sandbox.runner import Sandbox, Task

TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
#: correct; asleep for 0.8 s per test, well under its idle-wall limit (1.5 s) on any machine
NAPPER = "import time\ndef f(x):\n    time.sleep(0.8)\n    return 2 * x\n"
#: asleep for ever: its idle-wall limit is its own timeout
FOREVER = "import time\ndef f(x):\n    time.sleep(1000)\n    return 2 * x\n"
LIMITS = Limits(cpu=0.5, wall=1.5)


def _asleep(pid: int) -> bool:
    """``pid`` is in ``clock_nanosleep``/``nanosleep``: the program's own code runs, its set-up is over."""
    try:
        with open(f"/proc/{pid}/syscall") as fh:
            return fh.read().split()[0] in ("230", "35")
    except (OSError, IndexError):
        return False


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _sleeping_program(sb: Sandbox, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in sb.stray_processes():  # the slot uid's processes besides the slot's own: the program's
            if _asleep(pid):
                return pid
        time.sleep(0.005)
    raise AssertionError("the program never started")


def _slot_tree(sb: Sandbox) -> list[int]:
    """The slot's processes, outermost first: bubblewrap, the worker (the program's monitor), the program."""
    return sb.pool.slots[0]._descendants()


@pytest.fixture()
def sb() -> Iterator[Sandbox]:
    s = Sandbox(SandboxConfig(slots=1, hard_timeout_slack=0.5))
    assert s.run("def f(x):\n    return 2 * x\n", TESTS).outcome == "pass"   # the slot is up
    yield s
    s.close()


def _evaluate_in_thread(sb: Sandbox, code: str) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.append(sb.evaluate([Task(code, TESTS, limits=LIMITS)],
                                                               use_cache=False)[0]))
    t.start()
    return t, out


def test_run_clock_leaves_out_the_monitors_own_stops() -> None:
    """The accounting alone, on made-up times (no process, no clock): a pass that comes late is the monitor's
    stop, not the program's idle time; the idle wall and the hard wall both go on from where they were."""
    c = RunClock(0.0, wall_limit=1.5, hard_wall=8.5)
    t = 0.0
    for _ in range(10):              # 0.5 s watched, asleep
        t += 0.05
        c.woke(t, 0.05)
        assert c.reason(t, 0.0, runnable=False) is None
    t += 60.0                        # stopped with its slot for a minute
    c.woke(t, 0.05)
    assert c.lost == pytest.approx(60.0 - 0.05 + 0.05, abs=0.06)
    assert c.reason(t, 0.0, runnable=False) is None and c.idle(t) == pytest.approx(0.55, abs=0.06)
    assert c.deadline() == pytest.approx(60.0 + 8.5, abs=0.06)
    while (r := c.reason(t, 0.0, runnable=False)) is None:   # watched again: its own 1.5 s of sleep end it
        t += 0.05
        c.woke(t, 0.05)
    assert r == "wall" and c.observed(t) == pytest.approx(1.5, abs=0.06)
    # a late pass under STALL_S is time the monitor watched (a starved monitor still runs every few 100 ms)
    c2 = RunClock(0.0, wall_limit=1.5, hard_wall=8.5)
    c2.woke(STALL_S * 0.9, 0.05)
    assert c2.lost == 0.0
    # runnable now: busy, whatever the credited time says (its wait is credited when it runs)
    c3 = RunClock(0.0, wall_limit=1.5, hard_wall=8.5)
    c3.woke(1.0, 0.9)
    c3.woke(2.0, 0.9)
    assert c3.reason(2.0, 0.0, runnable=True) is None and c3.reason(2.0, 0.0, runnable=False) == "wall"
    # never watched long enough: the hard wall, an infrastructure outcome, not a timeout
    c4 = RunClock(0.0, wall_limit=1.5, hard_wall=8.5)
    for k in range(1, 90):
        c4.woke(k * 0.1, 0.1)
        r4 = c4.reason(k * 0.1, 0.1, runnable=False)   # busy all the time (waiting for a CPU)
        if r4:
            break
    assert r4 == "overload"


def test_slot_stopped_and_continued_keeps_the_verdict(sb: Sandbox) -> None:
    """The slot's whole tree (bubblewrap, the worker, the program) stopped mid-program for longer than the
    program's idle-wall limit, then continued: the program finishes, its verdict is a pass, as unstopped."""
    t, out = _evaluate_in_thread(sb, NAPPER)
    prog = _sleeping_program(sb)
    tree = _slot_tree(sb)
    assert prog in tree
    for pid in tree:
        os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while _state(prog) not in ("T", "t") and time.monotonic() < deadline:   # the stop is delivered
            time.sleep(0.001)
        assert _state(prog) in ("T", "t"), "the program was not stopped"   # stopped while in its own code
        time.sleep(LIMITS.wall_limit + 2 * STALL_S + 0.5)                  # longer than its idle-wall limit
    finally:
        for pid in tree:
            os.kill(pid, signal.SIGCONT)
    t.join(60)
    v = out[0]
    assert v.infra is None and v.outcome == "pass", v.details()
    assert sb.stats.get("timeouts", 0) == 0
    assert sb.stray_processes() == []


def test_program_stopped_alone_is_its_own_idle_time(sb: Sandbox) -> None:
    """Stopped while its monitor runs (which a program can do to itself): idle time, the program's timeout,
    never a mask. And a program asleep for ever still times out on its idle-wall limit."""
    t, out = _evaluate_in_thread(sb, NAPPER)
    prog = _sleeping_program(sb)
    os.kill(prog, signal.SIGSTOP)
    t.join(60)
    v = out[0]
    assert v.infra is None and v.outcome == "timeout", v.details()
    t, out = _evaluate_in_thread(sb, FOREVER)
    t.join(60)
    assert out[0].infra is None and out[0].outcome == "timeout"


@pytest.mark.slow
def test_whole_job_stopped_past_every_deadline_keeps_the_verdict(sb: Sandbox) -> None:
    """The scoring process itself (this one: the pool's thread waits for the slot's answer) and the slot's tree
    stopped together, longer than the program's hard wall and the pool's deadline for the request, by a helper
    process that then continues them: the verdict is the unstopped one, not a mask and not a timeout."""
    t, out = _evaluate_in_thread(sb, NAPPER)
    prog = _sleeping_program(sb)
    pids = [os.getpid(), *_slot_tree(sb)]
    hard = 1 * (LIMITS.hard_wall + RUN_END_S) + sb.config.hard_timeout_slack
    stop_s = hard + 2.0
    # the helper stops us too, so it must decide alone when to continue (and says whether the program was
    # still there to be stopped)
    script = ("p=$1; shift; kill -STOP \"$@\"; for i in $(seq 500); do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); "
              "[ \"$s\" = T ] && break; sleep 0.01; done; "
              f"sleep {stop_s}; kill -CONT \"$@\"; echo \"$s\"")
    helper = subprocess.Popen(["sh", "-c", script, "sh", str(prog), *map(str, pids)], stdout=subprocess.PIPE,
                              text=True)
    state = helper.communicate(timeout=stop_s + 60)[0].strip()
    assert state in ("T", "t"), f"the program was not stopped mid-run ({state!r})"
    t.join(60)
    v = out[0]
    assert v.infra is None and v.outcome == "pass", v.details()
    assert sb.stray_processes() == []
