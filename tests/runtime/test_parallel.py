"""The worker-process path of the per-sample phase gives exactly what the in-process path gives."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rewardlang
from rewardlang.runtime import parallel

SPEC = r'''
spec par "every kind of per-sample result: numbers, none, errors, spans, offsets"
input completion: text
input note: text?
let answer = tag(completion, "answer")
component fmt in [0, 1] = 1 if len(strip(answer)) > 0 else 0
component steps = count(completion, /Step\s\d+:/, /^\s*\d\./m, "→")
component rep = distinct(words(completion), 2)
component noted in [0, 4] = len(note)
    on_error none
component marks = len(matches(completion, /Step\s\d+:/))
    spans matches(answer or "", /x+/, value=-1, label="x")
reward = fmt + steps + rep + marks
advantage over batch = reward - mean
'''


def _rows(n: int) -> tuple[list[str], list[str | None]]:
    pieces = ["Step 1: a", "\n2. b", "→ ", "<answer>xx y</answer>", "\u2028", "é ", "\x85", "x x x", "", "<answer>",
              "😀 Step 22: z"]
    comps = ["".join(pieces[(i * 7 + j) % len(pieces)] for j in range(i % 9)) + f" {i % 50}" for i in range(n)]
    notes = [None if i % 5 == 0 else ("too long: out of range" if i % 13 == 0 else f"n{i % 100}") for i in range(n)]
    return comps, notes


@pytest.fixture(scope="module")
def programs():
    local = rewardlang.loads(SPEC)
    pooled = rewardlang.loads(SPEC)
    pooled.workers = 2
    pooled.pool_min_rows = 1
    yield local, pooled
    pooled.close()


def test_workers_equal_in_process(programs) -> None:
    local, pooled = programs
    comps, notes = _rows(3000)
    a = local.score(completion=comps, note=notes)
    b = pooled.score(completion=comps, note=notes)
    assert pooled._pool is not None, "the worker pool was not used"
    np.testing.assert_array_equal(a.total, b.total)
    np.testing.assert_array_equal(a.advantages, b.advantages)
    for k in a.components:
        np.testing.assert_array_equal(a.components[k], b.components[k])
        np.testing.assert_array_equal(a.masked[k], b.masked[k])
        assert a.errors[k] == b.errors[k]
    assert a.spans == b.spans
    assert any(a.spans["marks"]), "the sample must produce spans"
    assert any(e for e in a.errors["noted"]), "the sample must produce errors"
    assert b.stats["unique_rows"] == a.stats["unique_rows"]


def test_a_dead_worker_is_counted_and_the_batch_scored_here(programs) -> None:
    import signal

    local, pooled = programs
    comps, notes = _rows(1000)
    pooled.score(completion=comps[:300], note=notes[:300])  # the pool is up
    for p in list(pooled._pool.pool._processes.values()):
        os.kill(p.pid, signal.SIGKILL)
        p.join()
    with pytest.warns(RuntimeWarning, match="scoring worker process failed"):
        b = pooled.score(completion=comps, note=notes)
    a = local.score(completion=comps, note=notes)
    np.testing.assert_array_equal(a.total, b.total)
    assert b.stats["pool_failures"] == 1
    c = pooled.score(completion=comps, note=notes)  # fresh workers
    assert pooled._pool is not None and "pool_failures" not in c.stats
    np.testing.assert_array_equal(a.total, c.total)


def test_the_caller_takes_back_every_chunk_no_worker_has_started(programs) -> None:
    # the worker is held on an event until the caller releases it, so what it takes does not depend on timing: the
    # executor commits at most two calls to a busy worker (the one it runs and one queued), the caller scores the
    # rest of batch A from the end, and, waiting for A's committed chunks, every chunk of batch B
    import multiprocessing as mp

    local, pooled = programs
    comps, notes = _rows(3000)
    pooled.score(completion=comps[:300], note=notes[:300])  # the pool is up
    pool = pooled._pool
    with mp.get_context("spawn").Manager() as manager:
        go = manager.Event()
        held = pool.pool.submit(go.wait)
        ran_here: list[tuple[str, int]] = []

        def here(name: str):
            def run(c, m, step):
                ran_here.append((name, m))
                if name == "b" and sum(1 for x, _ in ran_here if x == "b") == len(b.bounds):
                    go.set()  # B's last chunk: the worker may now go on with A's committed chunks
                return pooled.row_phase(c, m, step, workers=1)
            return run

        try:
            cols_a = {"completion": comps[:1500], "note": notes[:1500]}
            cols_b = {"completion": comps[1500:], "note": notes[1500:]}
            a = pool.submit(cols_a, 1500, 0, here("a"))
            b = pool.submit(cols_b, 1500, 0, here("b"))
            assert len(a.bounds) == len(b.bounds) == 16
            out_a = a.result(helper=b)
            assert held.result() is True
        finally:
            go.set()  # never leave the worker held (the fixture's pool must close)
        assert sum(1 for x, _ in ran_here if x == "a") >= len(a.bounds) - 2
        assert [x for x, _ in ran_here if x == "b"] == ["b"] * len(b.bounds) and b.tail == -1
        out_b = b.result()
    for cols, out in ((cols_a, out_a), (cols_b, out_b)):
        ref = local.row_phase(cols, 1500, 0)
        for k in ref:
            np.testing.assert_array_equal(ref[k][0].v, out[k][0].v)
            assert (ref[k][0].err or [None] * 1500) == (out[k][0].err or [None] * 1500)


def test_doctests() -> None:
    import doctest

    assert doctest.testmod(parallel).failed == 0


def test_stopping_the_tracker_never_waits_on_a_pool_another_caller_left_running() -> None:
    # the tracker ends only when every process holding its pipe has ended; a worker of a pool still running holds
    # it, and stop_tracker once waited for the tracker forever (a pytest run hung at 83 % on a test that left one)
    import subprocess
    import sys

    script = (
        "import concurrent.futures as cf, multiprocessing as mp\n"
        "from rewardlang.runtime import parallel\n"
        "if __name__ == '__main__':\n"
        "    pool = cf.ProcessPoolExecutor(1, mp_context=mp.get_context('spawn'))\n"
        "    assert pool.submit(abs, -3).result() == 3\n"
        "    parallel.stop_tracker()\n"
        "    print('returned', flush=True)\n"
        "    pool.shutdown(wait=True)\n"
        "    parallel.stop_tracker()\n"
        "    print('stopped', flush=True)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and r.stdout.split() == ["returned", "stopped"], r.stderr
