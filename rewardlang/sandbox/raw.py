"""What a sandboxed request returns, before any judging: the worker's runs as untrusted bytes and numbers.

The pool (:mod:`~rewardlang.sandbox.pool`) builds these from the worker's response; the judges
(:mod:`~rewardlang.sandbox.judge` for Python, :class:`~rewardlang.sandbox.languages.LanguagePlan` for the
other languages) read them. A module of its own, so that the judges need nothing of the pool.

    >>> r = RawResult([RawRun(exit=0, reason=None, cpu=0.01, wall=0.02, setup_failed=False, clean=True,
    ...                       res=b"", out=b"hi\\n")])
    >>> r.runs[0].out, r.infra
    (b'hi\\n', None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RawRun", "RawResult"]


@dataclass
class RawRun:
    """One program execution as the worker saw it (untrusted bytes; the judge interprets them)."""

    exit: int
    reason: str | None
    cpu: float
    wall: float
    setup_failed: bool
    clean: bool
    res: bytes
    out: bytes
    #: the judge process's records (tests that ran there; see ``_worker._judge_main``), None without one
    judge: bytes | None = None
    #: how the judge process ended, as the worker saw it (exit, cpu, cpu_limit, killed, overflow)
    judge_info: dict[str, Any] | None = None
    #: processes of the program the memory cgroup's OOM killer ended during this run (``reason`` is then
    #: ``"memory"`` unless it is a CPU timeout)
    oom: int = 0
    #: an argv step's executable could not be exec'd: a toolchain's (absent or unusable: a mask) or one the
    #: program's own earlier step built (its outcome, ``compile_error``; see ``languages.py``)
    exec_failed: bool = False
    #: an argv step was not started: the file it needs from the steps before it is not in the run directory
    #: (``Profile.needs``, Java's Main.class): the program's outcome, ``compile_error``
    not_built: bool = False


@dataclass
class RawResult:
    runs: list[RawRun] | None
    infra: str | None = None
    #: the largest memory charge of the program's cgroup during the request (bytes; None without one)
    memory_peak: int | None = None
    #: the program group's memory limit during the request (bytes; None without one)
    memory_limit: int | None = None
