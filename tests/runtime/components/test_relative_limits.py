"""Time limits relative to the task's reference solution (issue 27): max(time_floor, time_factor x the reference's
CPU time on the same tests), at most the spec's timeout; measured once per task, cached in memory and on disk.
Asserts are on CPU seconds the sandbox measured and on counters, never on wall-clock time."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

import rewardlang
from rewardlang.runtime import registry
from rewardlang.runtime.api import Context
from rewardlang.runtime.components.execution import ExecParams
from rewardlang.sandbox import reftime

TESTS = "def check(candidate):\n    assert candidate(3_000_000) == sum(range(3_000_000))\n"
# ~0.1-0.3 s of CPU: a loop the tests call once
REFERENCE = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
ENDLESS = "def f(n):\n    while True:\n        pass\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REWARDLANG_CACHE", str(tmp_path / "cache"))
    reftime.clear_memory_cache()
    yield
    reftime.clear_memory_cache()


def _label(codes: list[str | None], refs: list[str | None], ctx: Context, **opts: float):  # type: ignore[no-untyped-def]
    impl = registry.load_all()["outcome_label"]
    n = len(codes)
    return impl(codes, [TESTS] * n, ["f"] * n, reference=refs, params=ExecParams(**opts), ctx=ctx)


def test_an_endless_program_times_out_at_its_derived_limit_not_the_timeout() -> None:
    ctx = Context(timeout=10.0, use_cache=False)
    res = _label([ENDLESS], [REFERENCE], ctx, time_factor=4, time_floor=1)
    assert res.values == ["timeout"]
    from rewardlang.sandbox.runner import get_sandbox

    t_ref = reftime.reference_times(get_sandbox(),
                                    [(REFERENCE, TESTS, "f", "auto", "lines")], 10.0)[0]
    assert t_ref is not None and 0 < t_ref < 2.0
    limit = reftime.relative_limit(t_ref, factor=4, floor=1, cap=10.0)
    cpu = res.details[0]["cpu_s"]
    assert limit <= cpu < limit + 1.0 and cpu < 10.0, (limit, cpu)  # the derived limit, far below the timeout
    assert ctx.stats["sandbox.limit_relative"] == 1 and ctx.stats["sandbox.timeouts"] == 1
    assert ctx.stats["sandbox.reference_measured"] == 1


def _hog(seconds: float) -> None:
    import time

    end = time.time() + seconds
    while time.time() < end:
        pass


def test_a_correct_program_under_load_is_not_a_timeout() -> None:
    # two processes spinning on this machine's cores while the reference is measured and the program runs: CPU
    # limits do not count the time the program waits for a core
    hogs = [mp.get_context("fork").Process(target=_hog, args=(30.0,), daemon=True) for _ in range(os.cpu_count() or 2)]
    for h in hogs:
        h.start()
    try:
        ctx = Context(timeout=10.0, use_cache=False)
        same_work = REFERENCE.replace("s = 0", "s = 0  # the same work as the reference")
        res = _label([same_work, REFERENCE], [REFERENCE, REFERENCE], ctx, time_factor=4, time_floor=1)
    finally:
        for h in hogs:
            h.kill()
            h.join()
    assert res.values == ["pass", "pass"]
    assert ctx.stats["sandbox.limit_relative"] == 2


def test_no_reference_falls_back_to_the_timeout_and_is_counted() -> None:
    ctx = Context(timeout=3.0, use_cache=False)
    broken_reference = "def f(n):\n    return 0\n"  # fails its own tests: no reference time
    res = _label([ENDLESS, ENDLESS + "#"], [None, broken_reference], ctx, time_factor=4, time_floor=0.5)
    assert res.values == ["timeout", "timeout"]
    assert [d["cpu_s"] >= 3.0 for d in res.details] == [True, True]  # the timeout, not 0.5 s
    assert ctx.stats["sandbox.limit_no_reference"] == 2 and ctx.stats["sandbox.limit_relative"] == 0
    assert ctx.stats["sandbox.reference_failed"] == 1


def test_the_reference_time_is_measured_once_and_kept_on_disk() -> None:
    ctx = Context(timeout=10.0, use_cache=False)
    _label([REFERENCE], [REFERENCE], ctx, time_factor=4)
    assert ctx.stats["sandbox.reference_measured"] == 1
    files = [f for _, _, fs in os.walk(reftime.cache_dir()) for f in fs]
    assert len(files) == 1
    again = Context(timeout=10.0, use_cache=False)
    _label([REFERENCE + "#"], [REFERENCE], again, time_factor=4)
    assert again.stats["sandbox.reference_measured"] == 0  # from memory
    reftime.clear_memory_cache()
    disk = Context(timeout=10.0, use_cache=False)
    _label([REFERENCE + "##"], [REFERENCE], disk, time_factor=4)
    assert disk.stats["sandbox.reference_measured"] == 0 and disk.stats["sandbox.limit_relative"] == 1  # from disk


def test_the_spec_syntax_and_its_checks() -> None:
    src = ("input tests: text\ninput entry_point: text\ninput solution: code?\n"
           "component c in [0, 1] = tests_pass_rate(completion, tests, entry_point, reference=solution, "
           "time_factor=4, time_floor=1)\n    timeout 10\n")
    prog = rewardlang.loads(src)
    r = prog.score(completion=[REFERENCE, ENDLESS], tests=[TESTS] * 2, entry_point=["f"] * 2,
                   solution=[REFERENCE, REFERENCE])
    assert r.components["c"].tolist() == [1.0, 0.0]
    assert r.stats["sandbox.limit_relative"] == 2 and r.stats["sandbox.timeouts"] == 1
    from rewardlang.diagnostics import SpecError

    with pytest.raises(SpecError, match="time_factor"):
        rewardlang.loads(src.replace("time_factor=4", "time_factor=0"))


def test_score_summary_names_the_limits() -> None:
    from rewardlang.cli.score import _sandbox_line

    line = _sandbox_line({"sandbox.level.bwrap": 1, "sandbox.executions": 4, "sandbox.timeouts": 1,
                          "sandbox.limit_relative": 3, "sandbox.limit_no_reference": 1})
    assert line == ("sandbox: level bwrap, 4 executions, 1 timeouts, 3 limits relative to the reference, "
                    "1 without a reference time (the spec's timeout), 0 infrastructure failures (masked)")
