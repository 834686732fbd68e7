"""What the sandbox can do on this machine, for ``rewardlang doctor``: every isolation level probed, the
memory accounting in force, and each language's toolchain with a hello-world run in the sandbox.

Apart from the runner and the language profiles because it uses both (the runner's sandbox runs the
languages' hello-worlds): neither of them needs the doctor.

    >>> r = doctor_report(all_levels=False)            # doctest: +SKIP
    >>> r["level"], r["security_boundary"]             # doctest: +SKIP
    ('bwrap', True)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

from rewardlang.sandbox import _worker, cgroups
from rewardlang.sandbox.config import (
    LEVEL_RANK,
    LEVELS,
    NOT_A_BOUNDARY,
    Limits,
    SandboxConfig,
)
from rewardlang.sandbox.languages import PROFILES, TESTS_FORMAT, Profile
from rewardlang.sandbox.launch import find_bwrap
from rewardlang.sandbox.runner import Sandbox, Task, expected_level, probe_level

__all__ = ["doctor_report", "doctor_languages", "core_dumps"]


def core_dumps(path: str = "/proc/sys/kernel/core_pattern") -> dict[str, Any]:
    """The host's core-dump handler as it concerns programs: ``kernel.core_pattern``, and a warning when it is
    a pipe. Programs run with ``RLIMIT_CORE`` 0 and those forked from the worker are not dumpable, but a
    process that execs (every step of a program in another language, a Python program's ``exec``) is
    dumpable again, and the kernel ignores ``RLIMIT_CORE`` for a pipe (fs/coredump.c): each crash of such a
    process starts the handler (systemd-coredump, apport) on the host, as root, outside every limit of the
    sandbox. A file pattern (``core``) is disabled by the limit.

        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix="core_pattern") as fh:
        ...     _ = fh.write("|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h\\n"); fh.flush()
        ...     r = core_dumps(fh.name)
        >>> r["pipe"], r["warning"][:40]
        (True, 'crashing programs start /usr/lib/systemd')
    """
    try:
        with open(path) as fh:
            pattern = fh.read().strip()
    except OSError:
        return {"core_pattern": None, "pipe": False, "warning": None}
    pipe = pattern.startswith("|")
    warning = None
    if pipe:
        handler = pattern[1:].split()[0] if pattern[1:].split() else "?"
        warning = (f"crashing programs start {handler} on the host, as root, once per crash, whatever the "
                   "sandbox's limits (the kernel ignores RLIMIT_CORE for a pipe): set kernel.core_pattern to a "
                   "file name (e.g. `sysctl kernel.core_pattern=core`) on machines that score untrusted programs")
    return {"core_pattern": pattern, "pipe": pipe, "warning": warning}


def _bwrap_version(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5,
                              env={}).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _max_userns() -> int | None:
    try:
        with open("/proc/sys/user/max_user_namespaces") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return None


def doctor_report(config: SandboxConfig | None = None, *, all_levels: bool = True) -> dict[str, Any]:
    """What the sandbox can do on this machine, for ``rewardlang doctor``.

    Probes every level of the ladder (``all_levels``) or stops at the first that works, and reports the
    level a sandbox would use, whether it is a security boundary, and the facts behind it::

        >>> r = doctor_report(all_levels=False)            # doctest: +SKIP
        >>> r["level"], r["security_boundary"]             # doctest: +SKIP
        ('bwrap', True)
    """
    config = config or SandboxConfig(slots=1)
    expected, why = (config.level, {}) if config.level else expected_level(config)
    ladder = list(LEVELS) if all_levels else [lv for lv in (expected,) if lv]
    levels: dict[str, dict[str, Any]] = {}
    for level in ladder:
        report, slot = probe_level(level, config)
        if slot is not None:
            slot.close()
        if level in why:
            report["prerequisite"] = why[level]
        levels[level] = report
    chosen = expected if expected and levels.get(expected, {}).get("available") else None
    bwrap = find_bwrap(config)
    out: dict[str, Any] = {
        "level": chosen,
        "expected_level": expected,
        "forced": bool(config.level),
        "rank": LEVEL_RANK[chosen] if chosen else None,
        "security_boundary": chosen is not None and chosen != "limits",
        "warning": NOT_A_BOUNDARY if chosen == "limits" else (
            None if chosen else (f"the expected level {expected!r} does not start: programs cannot be executed"
                                 if expected else "no isolating level on this machine: programs cannot be "
                                 "executed (REWARDLANG_SANDBOX_LEVEL=limits runs them without isolation)")),
        "levels": levels,
        "ladder": list(LEVELS),
        "bwrap": {"path": bwrap, "version": _bwrap_version(bwrap)},
        "user_namespaces": _max_userns(),
        "landlock_abi": _worker.landlock_abi(),
        "seccomp": _worker._machine() in _worker.AUDIT_ARCH,
        "arch": os.uname().machine,
        "root": os.geteuid() == 0,
        "uid_range": [config.uid_base, config.uid_base + config.uid_count],
        "default_slots": SandboxConfig().slots,
        "cpus": os.cpu_count(),
        "python": os.path.realpath(config.python or sys.executable),
        "install_hint": None if bwrap else "apt-get install -y bubblewrap",
        # which memory accounting bounds a program (all its processes, tmpfs, memfd, page cache) and
        # whether a slot's CPU weight is fixed (see docs/sandbox.md, "Memory" and the mask table)
        "memory": (cgroups.support().as_dict() if config.cgroups else
                   cgroups.CgroupSupport(None, reasons=("SandboxConfig(cgroups=False)",)).as_dict()),
        "core_dumps": core_dumps(),
    }
    if shutil.which("bwrap") is None and config.bwrap is None:
        out["bwrap"]["path"] = None
    return out


def _version(profile: Profile) -> str | None:
    try:
        r = subprocess.run(list(profile.version), capture_output=True, text=True, timeout=20, check=False,
                           env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    except (OSError, subprocess.SubprocessError):
        return None
    text = (r.stdout or r.stderr).strip()
    return text.splitlines()[0][:120] if text else None


def doctor_languages(sandbox: Any = None) -> dict[str, dict[str, Any]]:
    """For ``rewardlang doctor``: each language's toolchain (version, or what is missing and how to install
    it) and a hello-world compiled and run in the sandbox (``ok``, or its outcome and why).

        >>> r = doctor_languages()                                  # doctest: +SKIP
        >>> r["cpp"]["sandbox"], r["cpp"]["version"][:3]             # doctest: +SKIP
        ('ok', 'g++')
    """
    out: dict[str, dict[str, Any]] = {}
    tests = {"format": TESTS_FORMAT, "harness": "", "cases": [{"expected": "hello", "type": "str", "tolerance": None}]}
    tasks, codes = [], []
    for code, p in PROFILES.items():
        missing = [t for t in p.tools() if not os.access(t, os.X_OK)]
        if missing:
            out[code] = {"title": p.title, "version": None, "missing": ", ".join(missing),
                         "install": f"apt-get install -y {' '.join(p.packages)}", "sandbox": "not run"}
            continue
        out[code] = {"title": p.title, "version": _version(p)}
        # the harness is a comment in each language's syntax (the hello-world is the whole program)
        harness = "# hello" if code in ("sh", "php") else "// hello"
        tasks.append(Task(p.hello, dict(tests, harness=harness), language=code, limits=Limits(cpu=10)))
        codes.append(code)
    if not tasks:
        return out
    own = sandbox is None
    try:
        sb = sandbox or Sandbox(SandboxConfig(slots=1))
    except Exception as e:  # no sandbox level works: say so per language
        for code in codes:
            out[code]["sandbox"] = f"no sandbox: {e}"
        return out
    try:
        for code, v in zip(codes, sb.evaluate(tasks, use_cache=False)):
            if v.outcome == "pass":
                out[code]["sandbox"] = "ok"
            else:
                why = v.infra or v.error or (v.tests[0].detail if v.tests else "")
                out[code]["sandbox"] = f"FAILED ({v.outcome}): {why}"[:300]
    finally:
        if own:
            sb.close()
    return out
