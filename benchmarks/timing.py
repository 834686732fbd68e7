"""Whole commands timed in turns: the wall time and the CPU (its own and its children's) of each run."""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Mapping, Sequence


def interleaved(cmds: Mapping[str, Sequence[str]], runs: int,
                env: Mapping[str, str] | None = None) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Run every command once per round, ``runs`` rounds, in turns (so that a change of the machine's load falls
    on all of them alike): ``(wall seconds, CPU seconds)`` per command name, one figure per round."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(list(cmd), check=True, capture_output=True, env=None if env is None else dict(env))
            times[k].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[k].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return times, cpu
