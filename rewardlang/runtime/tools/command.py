"""One subprocess run of a tool, bounded in time: :func:`run_command` and what it returns, :class:`Completed`.
Both the batch runner (:mod:`~rewardlang.runtime.tools.runner`) and the warm helper's client
(:mod:`~rewardlang.runtime.tools.warm`), whose runs come back as the same :class:`Completed`, stand on it.

    >>> import sys
    >>> r = run_command([sys.executable, "-c", "print('hi')"], timeout=30)
    >>> (r.returncode, r.stdout.strip(), r.timed_out)
    (0, 'hi', False)
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rewardlang.outputs import interrupts_deferred
from rewardlang.processes import kill_group

__all__ = ["Bound", "Completed", "run_command", "session_cpu", "tool_environ"]

#: how long, as a multiple of its time budget, a run the machine held back may take before it is given up
OVERRUN = 3.0
#: a wait that returned this many seconds later than it asked: the caller itself did not run meanwhile
STALL_S = 1.0


def tool_environ() -> dict[str, str]:
    """``os.environ`` without ``PYTHONWARNINGS``: a Python tool parses the program under its own warning filters,
    never the host's (with ``PYTHONWARNINGS=error`` pylint, bandit and the in-Python analysers turned the warnings
    CPython gives about valid code, ``"\\d"`` or ``1if x else 2``, into syntax errors). The warm helpers start with
    it too: their runs are forks that keep the helper's filters.

        >>> import os
        >>> os.environ["PYTHONWARNINGS"] = "error"
        >>> "PYTHONWARNINGS" in tool_environ()
        False
        >>> del os.environ["PYTHONWARNINGS"]
    """
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return env


@dataclass
class Completed:
    """The outcome of one subprocess run."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    #: the executable could not be started at all (not found, not executable)
    missing: bool = False
    elapsed: float = 0.0
    #: ended (killed) without having had its time: under its budget of CPU when its real-time backstop passed
    #: (the machine was too loaded, or the run was stopped): an infrastructure outcome, never the sample's
    #: timeout (``timed_out`` is then True too)
    starved: bool = False

    def tail(self, n: int = 400) -> str:
        """The end of stderr (or stdout), for error messages."""
        text = (self.stderr or self.stdout or "").strip()
        return text[-n:]



def session_cpu(sid: int) -> float:
    """CPU seconds (user + system, with what they reaped of their children) of the processes of session ``sid``
    (a run started in a session of its own: the run and every process it started), from ``/proc``."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid:
                total += sum(int(x) for x in fields[11:15])
    return total / tck


class Bound:
    """When a tool run is over. Its ``timeout`` is what the run may use of its own CPU (the processes of its
    session), as a quiet machine gives it in ``timeout`` seconds: at that deadline a run that has used its budget
    timed out (the sample's outcome), but one that has used less was held back by the machine (other jobs, a stop
    from outside) and goes on, until it has used its budget or until ``OVERRUN`` x ``timeout`` of real time has
    passed; then it is ``starved``: an infrastructure outcome (its samples masked and counted, or the run made
    again), never the sample's timeout (issue 38: a stop of the scoring job had made analysers time out on
    samples they analyse in milliseconds). Time in which the caller itself did not run (a wait that returned
    over :data:`STALL_S` late) moves every deadline.

        >>> import time
        >>> b = Bound(time.monotonic() - 2.0, timeout=1.0)     # its second is over, and it never started
        >>> b.left(None) <= 0, b.starved
        (True, True)
    """

    def __init__(self, t0: float, timeout: float) -> None:
        self.t0, self.timeout = t0, timeout
        self.end = t0 + timeout
        self.lost = 0.0
        #: CPU seconds the session had used before the run (a reused process's earlier runs): not the run's
        self.base = 0.0
        self.timed_out = False
        self.starved = False

    def left(self, sid: int | None) -> float:
        """Seconds to wait before the run (session ``sid``; None: not started yet) is over; 0 or less: kill it
        now (set :attr:`timed_out` then, and :meth:`killed`)."""
        now = time.monotonic()
        left = self.end - now
        if left > 0 or self.timed_out:
            return left
        if sid is None:  # at its deadline the run had not even started: not the sample's doing
            self.starved = True
            return left
        cpu = session_cpu(sid) - self.base
        if cpu < self.timeout:
            backstop = self.t0 + self.lost + OVERRUN * self.timeout
            if now < backstop:
                self.end = min(backstop, now + max(self.timeout - cpu, 0.25))
                return self.end - now
            self.starved = True
        return left

    def killed(self, grace: float) -> None:
        """The run was killed: wait ``grace`` seconds more for its end to be reported."""
        self.timed_out = True
        self.end = time.monotonic() + grace

    def waited(self, before: float, asked: float) -> None:
        """A wait of at most ``asked`` seconds begun at ``before`` has returned."""
        late = time.monotonic() - before - asked
        if late > STALL_S:
            self.lost += late
            self.end += late

    def select(self, fds: list[int], left: float) -> bool:
        """Wait up to ``left`` seconds (at most 1 s at a time) for one of ``fds``; whether one is ready."""
        asked = min(left, 1.0)
        before = time.monotonic()
        ready = select.select(fds, [], [], asked)[0]
        self.waited(before, asked)
        return bool(ready)


def run_command(argv: Sequence[str], *, timeout: float, cwd: str | Path | None = None,
                env: dict[str, str] | None = None) -> Completed:
    """Run ``argv``, capturing its output, killing its whole process group once :class:`Bound` says its time
    (``timeout`` seconds of its CPU) is over."""
    t0 = time.monotonic()
    with interrupts_deferred():  # an interrupt inside Popen would leave a child that nothing kills
        try:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
            return Completed(list(argv), None, "", f"{type(exc).__name__}: {exc}", missing=True)
    bound = Bound(t0, max(timeout, 0.01))
    try:
        while True:
            left = bound.left(proc.pid)
            if left <= 0:
                bound.killed(10.0)
                kill_group(proc)
                try:
                    out, err = proc.communicate(timeout=10)
                except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
                    out, err = b"", b""
                break
            asked = min(left, 1.0)
            before = time.monotonic()
            try:
                out, err = proc.communicate(timeout=asked)
                break
            except subprocess.TimeoutExpired:
                bound.waited(before, asked)
    except BaseException:  # an interrupt while the tool runs: the tool ends with the command
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        raise
    return Completed(
        list(argv), proc.returncode, out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"), timed_out=bound.timed_out, elapsed=time.monotonic() - t0,
        starved=bound.starved,
    )
