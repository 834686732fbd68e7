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
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rewardlang.outputs import interrupts_deferred
from rewardlang.processes import kill_group

__all__ = ["Completed", "run_command"]


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

    def tail(self, n: int = 400) -> str:
        """The end of stderr (or stdout), for error messages."""
        text = (self.stderr or self.stdout or "").strip()
        return text[-n:]



def run_command(argv: Sequence[str], *, timeout: float, cwd: str | Path | None = None,
                env: dict[str, str] | None = None) -> Completed:
    """Run ``argv``, capturing its output, killing its whole process group after ``timeout`` seconds."""
    t0 = time.monotonic()
    with interrupts_deferred():  # an interrupt inside Popen would leave a child that nothing kills
        try:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
            return Completed(list(argv), None, "", f"{type(exc).__name__}: {exc}", missing=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=max(timeout, 0.01))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
            out, err = b"", b""
    except BaseException:  # an interrupt while the tool runs: the tool ends with the command
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        raise
    return Completed(
        list(argv), proc.returncode, out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"), timed_out=timed_out, elapsed=time.monotonic() - t0,
    )
