"""Fault injection: a slot killed or frozen mid-program is an infrastructure failure (masked, counted,
respawned), never a verdict; and verdicts do not change when the other core is saturated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from rewardlang.runtime.api import Context
from rewardlang.sandbox import runner
from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.runner import Sandbox, Task

GOOD = "def f(x):\n    return 2 * x\n"
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
SLEEPER = "import time\ndef f(x):\n    time.sleep(30)\n    return 2 * x\n"


def _worker_pid(sb: Sandbox) -> int:
    for pid in sb.pool.slots[0].worker_pids():
        try:
            argv = open(f"/proc/{pid}/cmdline").read().split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) != "bwrap" and any(a.endswith("worker.py") for a in argv):
            return pid
    raise AssertionError("no worker process found")


def _when_program_runs(sb: Sandbox, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sb.stray_processes():  # the program's process (a child of the worker) exists
            return
        time.sleep(0.02)
    raise AssertionError("the program never started")


def _slot_root(sb: Sandbox) -> int:
    proc = sb.pool.slots[0].proc
    assert proc is not None
    return proc.pid


@pytest.mark.parametrize("victim", ["worker", "slot_root"])
def test_slot_killed_mid_program_is_masked_and_respawned(victim: str) -> None:
    with Sandbox(SandboxConfig(slots=1)) as sb:
        assert sb.run(GOOD, TESTS).outcome == "pass"
        starts = sb.pool.stats["slot_starts"]
        result: list = []
        t = threading.Thread(target=lambda: result.append(
            sb.evaluate([Task(SLEEPER, TESTS, limits=Limits(cpu=5, wall=20))], use_cache=False)[0]))
        t0 = time.monotonic()
        t.start()
        _when_program_runs(sb)
        os.kill(_worker_pid(sb) if victim == "worker" else _slot_root(sb), signal.SIGKILL)
        t.join(30)
        v = result[0]
        assert v.outcome == "infra" and v.infra and v.pass_rate == 0.0
        assert time.monotonic() - t0 < 15
        assert sb.stats["infra_failures"] == 1
        after = sb.evaluate([Task(GOOD, TESTS)], use_cache=False)[0]  # not from the cache: a real run
        assert after.outcome == "pass"
        assert sb.pool.stats["slot_starts"] == starts + 1
        assert sb.stray_processes() == []


def test_frozen_slot_hits_the_hard_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # a frozen worker never kills or cleans up after its program: the time allowed for that (RUN_END_S, 5 s by
    # default) would only make this wait longer before the trusted side's hard deadline declares the slot hung
    monkeypatch.setattr(runner, "RUN_END_S", 0.0)
    with Sandbox(SandboxConfig(slots=1, hard_timeout_slack=1.0)) as sb:
        assert sb.run(GOOD, TESTS).outcome == "pass"
        result: list = []
        lim = Limits(cpu=0.5, wall=1.0)
        t = threading.Thread(target=lambda: result.append(
            sb.evaluate([Task(SLEEPER, TESTS, limits=lim)], use_cache=False)[0]))
        t0 = time.monotonic()
        t.start()
        _when_program_runs(sb)
        os.kill(_worker_pid(sb), signal.SIGSTOP)
        t.join(30)
        elapsed = time.monotonic() - t0
        assert result[0].outcome == "infra" and "in time" in result[0].infra
        assert elapsed < (lim.hard_wall + runner.RUN_END_S) + 1.0 + 5.0  # the hard deadline plus a margin
        assert sb.evaluate([Task(GOOD, TESTS)], use_cache=False)[0].outcome == "pass"
        assert sb.stray_processes() == []


def test_component_masks_infrastructure_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlang.runtime import registry

    impl = registry.load_all()["tests_pass_rate"]
    with Sandbox(SandboxConfig(slots=1)) as sb:
        monkeypatch.setattr(runner, "_default", sb)
        ctx = Context(timeout=5)
        out: list = []
        t = threading.Thread(target=lambda: out.append(
            impl.fn([SLEEPER, GOOD], [TESTS, TESTS], None, params=None, ctx=ctx)))
        t.start()
        _when_program_runs(sb)
        os.kill(_worker_pid(sb), signal.SIGKILL)
        t.join(60)
        res = out[0]
        assert list(res.infra) == [True, False]
        assert res.values[0] is None and res.values[1] == 1.0
        assert ctx.stats["sandbox.infra_failures"] == 1
        assert ctx.stats["sandbox.isolation_level"] == sb.rank
        monkeypatch.setattr(runner, "_default", None)


def test_no_sandbox_at_all_masks_everything(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from rewardlang.runtime import registry

    runner.close_sandbox()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("REWARDLANG_SANDBOX_LEVEL", "bwrap")
    try:
        ctx = Context()
        res = registry.load_all()["tests_pass_rate"].fn([GOOD], [TESTS], None, params=None, ctx=ctx)
        assert list(res.infra) == [True] and res.values == [None]
        assert "no sandbox" in res.errors[0]
        assert ctx.stats["sandbox.unavailable"] == 1
    finally:
        runner.close_sandbox()


MIXED = [
    (GOOD, "pass"),
    ("def f(x):\n    return x + 2\n", "fail"),
    ("def f(x):\n    raise ValueError(x)\n", "runtime_error"),
    ("def f(x):\n    s = sum(range(2_000_000))\n    return 2 * x if s else 0\n", "pass"),
    ("def f(x):\n    while True:\n        pass\n", "timeout"),
    ("def f(x)\n    return 2\n", "compile_error"),
    ("def f(x):\n    return bytearray(1 << 36)\n", "memory"),
    ("import time\ndef f(x):\n    time.sleep(0.2)\n    return 2 * x\n", "pass"),
]


def test_identical_verdicts_with_the_other_core_saturated() -> None:
    lim = Limits(cpu=1.0, wall=6.0, memory_mb=256)
    with Sandbox(SandboxConfig(slots=2)) as sb:
        tasks = [Task(code, TESTS, limits=lim) for code, _ in MIXED]
        quiet = sb.evaluate(tasks, use_cache=False)
        assert [v.outcome for v in quiet] == [want for _, want in MIXED]
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
        try:
            time.sleep(0.3)
            busy = sb.evaluate(tasks, use_cache=False)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        assert [(v.outcome, [t.status for t in v.tests]) for v in busy] == \
               [(v.outcome, [t.status for t in v.tests]) for v in quiet]
        assert sb.stray_processes() == []


def test_batch_dedup_and_cache_counters() -> None:
    with Sandbox(SandboxConfig(slots=2)) as sb:
        stats: Counter[str] = Counter()
        tasks = [Task(GOOD, TESTS), Task(GOOD, TESTS), Task(GOOD, TESTS, entry_point=None),
                 Task("def f(x):\n    return 0\n", TESTS)]
        v = sb.evaluate(tasks, stats=stats)
        assert [x.outcome for x in v] == ["pass", "pass", "pass", "fail"]
        assert stats["sandbox.executions"] == 2 and stats["sandbox.batch_duplicates"] == 2
        v2 = sb.evaluate(tasks[:1], stats=stats)
        assert v2[0] is v[0] and stats["sandbox.cache_hits"] == 1 and stats["sandbox.executions"] == 2
        sb.evaluate(tasks[:1], stats=stats, use_cache=False)
        assert stats["sandbox.executions"] == 3
        # different limits are a different execution
        sb.evaluate([Task(GOOD, TESTS, limits=Limits(cpu=2.0))], stats=stats)
        assert stats["sandbox.executions"] == 4


def test_failed_start_is_not_reprobed_every_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from rewardlang.sandbox.launch import LevelUnavailable

    runner.close_sandbox()
    monkeypatch.setattr(runner, "_failed", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("REWARDLANG_SANDBOX_LEVEL", "bwrap")
    calls = []
    real = runner.probe_level
    monkeypatch.setattr(runner, "probe_level", lambda *a, **k: (calls.append(a[0]), real(*a, **k))[1])
    try:
        for _ in range(3):
            with pytest.raises(LevelUnavailable, match="not found"):
                runner.get_sandbox()
        assert calls == ["bwrap"]
        monkeypatch.setattr(runner, "_failed", (runner._failed[0] - runner.RETRY_AFTER_S - 1,) + runner._failed[1:])
        with pytest.raises(LevelUnavailable):
            runner.get_sandbox()
        assert calls == ["bwrap", "bwrap"]
    finally:
        runner.close_sandbox()
