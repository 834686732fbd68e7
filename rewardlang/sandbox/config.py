"""Configuration of the sandbox: execution limits and pool settings.

    >>> from rewardlang.sandbox.config import Limits
    >>> Limits(cpu=2.0).wall_limit
    5.0
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["Limits", "SandboxConfig", "LEVELS", "LEVEL_RANK", "NOT_A_BOUNDARY", "RUN_END_S", "TOOLCHAIN_PATHS"]

#: isolation levels, strongest first (the start-up probe walks this ladder)
LEVELS = ("bwrap", "namespaces", "uid", "limits")
LEVEL_RANK = {"bwrap": 3, "namespaces": 2, "uid": 1, "limits": 0}
NOT_A_BOUNDARY = (
    "SANDBOX LEVEL 'limits' IS NOT A SECURITY BOUNDARY: untrusted programs run as the trainer's own user "
    "with only resource limits (and seccomp/Landlock where available). They can read and change anything "
    "that user can. Install bubblewrap (apt-get install -y bubblewrap) or use a remote sandbox."
)

#: read-only paths outside /usr that the language toolchains read, bound into every slot where they exist
#: (java, javac and php are /usr/bin/* -> /etc/alternatives/*; the JDK's conf/ links to /etc/java-17-openjdk)
TOOLCHAIN_PATHS = ("/etc/alternatives", "/etc/java-17-openjdk", "/etc/php")

#: per execution, the seconds past its ``Limits.hard_wall`` that the trusted side gives the worker to kill the
#: program (at most 3 s) and clean up (2 s) before it declares the slot hung (plus ``hard_timeout_slack`` per request)
RUN_END_S = 5.0


@dataclass(frozen=True)
class Limits:
    """Per-execution limits. CPU time decides timeouts; wall time is only a backstop (a busy machine must
    not flip verdicts), by default ``2 * cpu + 1`` seconds."""

    cpu: float = 5.0
    wall: float | None = None
    memory_mb: int = 1024
    output_bytes: int = 1 << 20
    #: the encoded values one execution returns (the result channel). Its cost in the trusted process grows
    #: with it: at 1 MiB, the worst a program can write costs at most ~0.3 s of decoding and ~30 MiB
    #: (benchmarks/bench_sandbox.py measures it); 8 MiB cost up to 2.2 s and 220 MiB.
    observation_bytes: int = 1 << 20
    processes: int = 16
    file_bytes: int = 16 << 20

    @property
    def wall_limit(self) -> float:
        return float(self.wall) if self.wall is not None else 2.0 * self.cpu + 1.0

    @property
    def hard_wall(self) -> float:
        """Real seconds after which a program that met neither its CPU limit nor its idle-wall backstop is
        given up as an infrastructure outcome (the machine was too loaded to decide; see docs/sandbox.md):
        with the default wall limit, the program got less than a sixth of a core.

            >>> Limits(cpu=1.0, wall=3.0).hard_wall
            13.0
        """
        return 3.0 * self.wall_limit + 4.0 * float(self.cpu)

    def to_wire(self, nproc_base: int) -> dict[str, float | int]:
        return {
            "cpu": float(self.cpu), "wall": self.wall_limit, "hard_wall": self.hard_wall, "mem": int(self.memory_mb) << 20,
            "out": int(self.output_bytes), "obs": int(self.observation_bytes),
            "nproc": nproc_base + int(self.processes) if nproc_base >= 0 else 0, "fsize": int(self.file_bytes),
        }


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    return int(v) if v else None


@dataclass
class SandboxConfig:
    """Settings of a sandbox pool. Environment variables override the defaults:
    ``REWARDLANG_SANDBOX_LEVEL`` (force a level or a weakest acceptable one, e.g. ``bwrap``),
    ``REWARDLANG_SANDBOX_SLOTS``, ``REWARDLANG_SANDBOX_UID_BASE``."""

    #: number of long-lived slots (default: one per core)
    slots: int | None = None
    #: ``None``/``"auto"``: strongest available; a level name forces that level
    level: str | None = None
    #: dedicated unprivileged host uids (one per slot) are taken from [uid_base, uid_base + uid_count)
    uid_base: int = 59000
    uid_count: int = 1000
    #: interpreter inside the sandbox (default: the trainer's own)
    python: str | None = None
    #: make the interpreter's site-packages importable by programs (read-only)
    site_packages: bool = False
    tmp_size_mb: int = 64
    #: extra seconds past a request's wall limits after which the slot is declared hung and killed
    hard_timeout_slack: float = 5.0
    #: seconds a slot may take to start
    start_timeout: float = 20.0
    #: bubblewrap executable (looked up on PATH by default)
    bwrap: str | None = None
    #: per-slot memory and cpu cgroups where the machine gives them (see ``cgroups.py``); False (or
    #: ``REWARDLANG_SANDBOX_CGROUPS=off``) keeps the documented fallback: RLIMIT_AS, memfd_create denied
    cgroups: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env_level = os.environ.get("REWARDLANG_SANDBOX_LEVEL")
        if self.level in (None, "auto") and env_level:
            self.level = env_level
        if self.level == "auto":
            self.level = None
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"unknown sandbox level {self.level!r}; choose one of {', '.join(LEVELS)}")
        if self.slots is None:
            self.slots = _env_int("REWARDLANG_SANDBOX_SLOTS") or (os.cpu_count() or 1)
        base = _env_int("REWARDLANG_SANDBOX_UID_BASE")
        if base is not None:
            self.uid_base = base
        if self.slots < 1:
            raise ValueError("a sandbox needs at least one slot")
