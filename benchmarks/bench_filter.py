"""What installing the program seccomp filter costs, once per argv step (issue 20): this tree's filter beside a
baseline, interleaved in one run, with the ratio.

    python3 benchmarks/bench_filter.py                                   # baseline: the chain of compares
    python3 benchmarks/bench_filter.py --against /work/main/rewardlang/sandbox/_worker.py   # another tree's

The kernel converts a classic-BPF filter to eBPF, JIT-compiles it and runs it once per system call number
(its allow cache) at every installation: the spawner installs one per step (``spawn.c``), in the step's
process before exec, so a Bash program pays it twice. Each sample is one forked child that sets
no_new_privs and installs the filter; its thread CPU around the ``prctl`` is the figure (medians of the
rounds' means). The baseline is the chain of compares the tests keep as the reference
(``tests/sandbox/test_spawn.py``), or ``build_filter`` of another ``_worker.py`` with ``--against``.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "sandbox"))

from rewardlang.sandbox import _worker

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_us(raw: bytes, n: int) -> float:
    """Mean thread CPU (us) of installing ``raw`` in ``n`` fresh forked children."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(raw, len(raw))
    prog = _Fprog(len(raw) // 8, ctypes.addressof(buf))
    r, w = os.pipe()
    total = 0
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                ok = libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                t = time.thread_time_ns()
                ok = ok and libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
                d = time.thread_time_ns() - t
                os.write(w, d.to_bytes(8, "little"))
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise SystemExit("the filter could not be installed (seccomp unavailable?)")
            total += int.from_bytes(os.read(r, 8), "little")
    finally:
        os.close(r)
        os.close(w)
    return total / n / 1e3


def baseline(against: str | None) -> tuple[str, Callable[[int], bytes]]:
    deny = _worker.PROGRAM_DENY
    if against is None:
        from test_spawn import chain_filter

        return "the chain of compares", lambda pid: chain_filter(deny, pid, _worker._machine())
    spec = importlib.util.spec_from_file_location("rl_worker_baseline", against)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return against, lambda pid: mod.build_filter(mod.PROGRAM_DENY, pid=pid)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--installs", type=int, default=200, help="children per side and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", metavar="WORKER_PY", help="build_filter of another tree's _worker.py")
    args = ap.parse_args()
    name, base = baseline(args.against)
    ours = _worker.build_filter(_worker.PROGRAM_DENY, pid=4242)
    theirs = base(4242)
    a, b = [], []
    for _ in range(args.rounds):       # interleaved: a change of the machine's load hits both sides
        a.append(install_us(theirs, args.installs))
        b.append(install_us(ours, args.installs))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"program filter installation, {args.rounds} rounds of {args.installs} children, load "
          f"{os.getloadavg()[0]:.1f}: baseline ({name}, {len(theirs) // 8} instructions) {ma:.1f} us, this tree "
          f"({len(ours) // 8} instructions) {mb:.1f} us: {ma / mb:.2f}x")


if __name__ == "__main__":
    main()
