"""Time limits relative to a task's reference solution (EvalPlus's rule, on CPU time).

A program's limit is ``min(cap, max(floor, factor x T_ref))``: ``T_ref`` is the CPU time the task's reference
solution takes on the same tests in the same sandbox, ``cap`` the spec's ``timeout``. EvalPlus (evalplus/config.py)
uses ``max(4 s, 4 x T_gt)`` on *wall* time; here both limits are CPU time, so a machine busy with other work does
not turn a correct program into a timeout and the floor can be lower (1 s by default).

``T_ref`` is measured once per (reference, tests, entry point, format, sandbox level, machine) and cached in this
process and on disk (``$REWARDLANG_CACHE`` or ``$XDG_CACHE_HOME/rewardlang``, ``reftime/``); a reference that does not
pass its own tests, or a sandbox failure while measuring, gives no ``T_ref`` (the caller falls back to the cap, and
counts it; a sandbox failure is not cached, so the next batch measures again).

    >>> relative_limit(0.02, factor=4.0, floor=1.0, cap=10.0)      # a fast reference: the floor
    1.0
    >>> relative_limit(0.5, factor=4.0, floor=1.0, cap=10.0)       # 4 x 0.5 s
    2.0
    >>> relative_limit(5.0, factor=4.0, floor=1.0, cap=10.0)       # never above the spec's timeout
    10.0
    >>> relative_limit(None, factor=4.0, floor=1.0, cap=10.0)      # no reference time: the spec's timeout
    10.0
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rewardlang.outputs import OutputError, atomic_write
from rewardlang.sandbox.config import Limits
from rewardlang.sandbox.runner import Task

__all__ = ["cache_dir", "clear_memory_cache", "machine_key", "reference_times", "relative_limit"]

#: bump when the way T_ref is measured changes (old disk entries are then never read)
_VERSION = 1

_memory: dict[str, float | None] = {}
_lock = threading.Lock()


def relative_limit(t_ref: float | None, *, factor: float, floor: float, cap: float) -> float:
    """``min(cap, max(floor, factor * t_ref))``; ``cap`` when there is no reference time."""
    if t_ref is None:
        return float(cap)
    return float(min(cap, max(floor, factor * t_ref)))


def cache_dir() -> str:
    """Where measured reference times are kept on disk."""
    base = os.environ.get("REWARDLANG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rewardlang")
    return os.path.join(base, "reftime")


@functools.lru_cache(maxsize=1)
def machine_key() -> str:
    """What makes a CPU time comparable: the processor model, architecture, core count and Python version."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "cpu model", "processor\t: ")) and ":" in line:
                    model = line.split(":", 1)[1].strip()
                    if model and not model.isdigit():
                        break
    except OSError:
        pass
    return f"{platform.machine()}|{model}|{os.cpu_count()}|{sys.version.split()[0]}"


def _key(code: str, tests: Any, entry: Any, fmt: str, compare: str, level: str, cap: float,
         prelude: str | None = None) -> str:
    parts = [_VERSION, code, tests if isinstance(tests, str) or tests is None else list(tests), entry, fmt,
             compare, level, cap, machine_key()]
    if prelude:   # the tests' trusted helpers (keys without one are those measured before it existed)
        parts.append(["prelude", prelude])
    blob = json.dumps(parts, ensure_ascii=False, default=repr)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _disk_get(key: str) -> tuple[bool, float | None]:
    path = os.path.join(cache_dir(), key[:2], key + ".json")
    try:
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
        cpu = rec.get("cpu")
        return True, (float(cpu) if cpu is not None else None)
    except (OSError, ValueError, TypeError, AttributeError):
        return False, None


def _disk_put(key: str, cpu: float | None, outcome: str) -> None:
    directory = os.path.join(cache_dir(), key[:2])
    try:
        os.makedirs(directory, exist_ok=True)
        with atomic_write(os.path.join(directory, key + ".json")) as fh:
            fh.write(json.dumps({"cpu": cpu, "outcome": outcome, "machine": machine_key()}))
    except (OSError, OutputError):
        pass  # a cache that cannot be written only costs a measurement next time


def clear_memory_cache() -> None:
    """Forget the reference times measured in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()


def reference_times(sandbox: Any, refs: Sequence[tuple[Any, ...]], cap: float, *,
                    stats: Counter[str] | None = None, use_disk: bool = True) -> list[float | None]:
    """The reference CPU time of each ``(reference code, tests, entry point, format, compare[, prelude])``,
    measured in ``sandbox`` under a CPU limit of ``cap`` (all unmeasured ones in one batch), from the caches when
    known.

    None where the reference does not pass its tests within ``cap`` (or the sandbox failed: not cached).
    """
    out: list[float | None] = [None] * len(refs)
    refs = [tuple(r) + (None,) * (6 - len(r)) for r in refs]
    keys = [_key(c, t, e, f, cmp, sandbox.level, cap, pre) for c, t, e, f, cmp, pre in refs]
    todo: dict[str, int] = {}
    for i, k in enumerate(keys):
        with _lock:
            known = k in _memory
            val = _memory.get(k)
        if not known and use_disk:
            known, val = _disk_get(k)
            if known:
                with _lock:
                    _memory[k] = val
        if known:
            out[i] = val
        elif k not in todo:
            todo[k] = i
    if todo:
        tasks = []
        for i in todo.values():
            c, t, e, f, cmp, pre = refs[i]
            tasks.append(Task(c, t, e, f, Limits(cpu=float(cap)), cmp, prelude=pre))
        verdicts = sandbox.evaluate(tasks, use_cache=False)
        for (k, _), v in zip(todo.items(), verdicts, strict=True):
            if v.infra:
                if stats is not None:
                    stats["sandbox.reference_infra"] += 1
                continue  # not cached: measured again next time
            cpu = float(v.cpu) if v.outcome == "pass" else None
            if stats is not None:
                stats["sandbox.reference_measured"] += 1
                if cpu is None:
                    stats["sandbox.reference_failed"] += 1
            with _lock:
                _memory[k] = cpu
            if use_disk:
                _disk_put(k, cpu, v.outcome)
        for i, k in enumerate(keys):
            with _lock:
                if k in _memory:
                    out[i] = _memory[k]
    return out
