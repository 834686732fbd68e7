"""The baseline of the language benchmarks: one program compiled and run by its toolchain directly.

The profile's own argv, flags and environment (``rewardlang.sandbox.languages``), on a tmpfs as the slot's /tmp
is, the harness's records on fd 3 judged by the sandbox's comparator: the same work the sandbox does, minus the
isolation. Shared by ``bench_languages.py`` (the isolation's CPU cost) and ``bench_translation.py`` (throughput).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from rewardlang.sandbox.languages import BASE_ENV, language_plan
from rewardlang.sandbox.values import compare, has_value, parse_records


def run(lang: str, unit: str, tests: Any) -> tuple[float, float, bool]:
    """(CPU s of the toolchain's processes, wall s, every case passes) of ``unit`` with ``tests`` in ``lang``."""
    plan = language_plan(lang, tests)
    p = plan.profile
    # a tmpfs, as the slot's /tmp is (the host's /tmp may be a disk: Go's build cache then costs more CPU there)
    d = tempfile.mkdtemp(prefix="rl-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with open(os.path.join(d, p.file), "w") as fh:
            fh.write(plan.source(unit))
        env = {key: val.replace("{run}", d) for key, val in BASE_ENV + p.env}
        rec = os.path.join(d, ".records")
        cpu = 0.0
        t0 = time.perf_counter()
        for argv in (p.compile, p.run):
            if argv is None:
                continue
            exe = argv[0] if argv[0].startswith("/") else os.path.join(d, argv[0])
            cwd0 = os.getcwd()
            os.chdir(d)
            try:
                pid = os.posix_spawn(exe, list(argv), env, file_actions=[
                    (os.POSIX_SPAWN_OPEN, 3, rec, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
                    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
            finally:
                os.chdir(cwd0)
            _, status, ru = os.wait4(pid, 0)
            cpu += ru.ru_utime + ru.ru_stime
            if os.waitstatus_to_exitcode(status) != 0:
                return cpu, time.perf_counter() - t0, False
        wall = time.perf_counter() - t0
        with open(rec, "rb") as fh:
            values, _ = parse_records(fh.read(), plan.n)
        ok = all(has_value(v) and compare(c.expected, v, c.type, c.tolerance, integral_floats=p.integral_floats)
                 for v, c in zip(values, plan.tests.cases, strict=True))
        return cpu, wall, ok
    finally:
        shutil.rmtree(d, ignore_errors=True)
