"""Soak: thousands of mixed programs, 40 % hostile, on both slots: zero wrong verdicts, zero infrastructure
failures, no respawns, no stray processes."""

from __future__ import annotations

import random

import pytest

from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.runner import Sandbox, Task

N = 2000
LIM = Limits(cpu=1.0, wall=3.0, memory_mb=256, output_bytes=1 << 16, processes=12)

# (template, expected outcome); {k} makes each program distinct so nothing is de-duplicated or cached
NORMAL = [
    ("def f(x):\n    k = {k}\n    return 2 * x\n", "pass"),
    ("def f(x):\n    return 2 * x + ({k} % 3 + 1)\n", "fail"),
    ("def f(x):\n    return [2 * x][{k} % 1]\n", "pass"),
    ("def f(x):\n    return {{}}[{k}]\n", "runtime_error"),
    ("def f(x):\n    return 2 * x  # {k}\ndef g(\n", "compile_error"),
    ("def f(x):\n    return float(2 * x) + 0 * {k}\n", "pass"),
]
HOSTILE = [
    ("import os\ndef f(x):\n    os._exit(0)  # {k}\n", "runtime_error"),
    ("import sys\ndef f(x):\n    return 2 * x\nsys.exit({k} % 2)\n", "runtime_error"),
    ("class A:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return A()  # {k}\n", "fail"),
    ("class I(int):\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return I({k})\n", "fail"),
    ("import os\ndef f(x):\n    for _ in range(3):\n        if os.fork() == 0:\n            os._exit(0)\n"
     "    return 2 * x  # {k}\n", "pass"),
    ("import os, time\ndef f(x):\n    if os.fork() == 0:\n        time.sleep(30)\n    return 2 * x  # {k}\n",
     "pass"),
    ("def f(x):\n    while True:\n        print('z' * 4096, {k})\n", "output_limit"),
    ("def f(x):\n    return bytearray(1 << 36)  # {k}\n", "memory"),
    ("import os\ndef f(x):\n    try:\n        os.kill(os.getppid(), 9)\n    except OSError:\n        pass\n"
     "    return 2 * x  # {k}\n", "pass"),
    ("import os, json, struct\ndef f(x):\n    b = json.dumps(['t', 0, 'pass']).encode()\n"
     "    os.write(3, struct.pack('<I', len(b)) + b)\n    print('passed', {k})\n    return -1\n", "fail"),
    ("import ctypes\ndef f(x):\n    ctypes.string_at(0)  # {k}\n", "runtime_error"),
    ("import builtins\nbuiltins.len = lambda o: 0\ndef f(x):\n    return x  # {k}\n", "fail"),
]


@pytest.mark.slow
def test_soak_thousands_of_mixed_programs() -> None:
    rng = random.Random(1234)
    items = []
    for k in range(N):
        tpl, want = rng.choice(HOSTILE) if rng.random() < 0.4 else rng.choice(NORMAL)
        items.append((tpl.format(k=k), want))
    with Sandbox(SandboxConfig(slots=2)) as sb:
        verdicts = []
        for i in range(0, N, 200):  # batches, as a trainer would send them
            chunk = items[i:i + 200]
            verdicts += sb.evaluate([Task(code, ["assert f(2) == 4", "assert f(5) == 10"], None, "mbpp", LIM)
                                     for code, _ in chunk], use_cache=False)
        wrong = [(code, want, v.outcome, v.details()) for (code, want), v in zip(items, verdicts) if v.outcome != want]
        assert wrong == []
        assert sum(v.infra is not None for v in verdicts) == 0
        assert sb.stats["executions"] == N and sb.stats["infra_failures"] == 0
        assert sb.pool.stats["slot_starts"] == 2
        assert sb.stray_processes() == []
