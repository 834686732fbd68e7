"""The per-sample phase of a large batch on every core.

Worker processes are started by spawn (never fork: the caller may be a trainer holding CUDA contexts and
threads), each builds the program from its generated source once (and loads its compiled kernels), and scores
chunks of a batch's unique rows; the calling process scores the chunks no worker has started whenever it waits
(:class:`RowPool`). Rows travel through the pool's pipe, pickled: ~1 ms of the caller's CPU per 1,000 CodePO rows
(1.2 KB each), against ~400 ms to score them. Only programs whose functions all declare ``in_workers=True`` run
here; tools and sandboxes that manage their own parallelism keep the batch in the calling process.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from rewardlang.runtime import registry
from rewardlang.runtime.columns import Col

__all__ = ["Batch", "RowPool"]

_PROGRAM: Any = None


def _init(source: str, name: str, build: Callable[[str, str], Any]) -> None:
    # one Numba thread per worker: the workers already use every core
    os.environ["NUMBA_NUM_THREADS"] = "1"
    # the worker holds nothing that needs the interpreter's orderly finalisation (no files, no children: functions
    # that start processes never run here), which takes 0.3-0.5 s with the compiled kernels loaded, all of it at
    # the end of a run, with nothing else left to do: it exits at once instead (run last: atexit handlers are LIFO,
    # and multiprocessing's own clean-up has already run by then)
    atexit.register(os._exit, 0)
    global _PROGRAM
    _PROGRAM = build(source, name)  # Program.from_python, passed in: this module stands below the program
    # what the functions load on first use (compiled kernels: ~0.5 s) is loaded now, not inside the first batch
    warm_up(_PROGRAM.spec["functions"])


def warm_up(functions: Iterable[str]) -> None:
    """Load now what the named functions load on first use (compiled kernels: ~0.5 s), as a process that is about
    to score large batches does before its first one (a worker process here, a Ray actor)."""
    impls = registry.load_all()
    for warm in dict.fromkeys(impls[f].warm for f in functions):
        if warm is not None:
            warm()


def _work(cols: dict[str, Any], m: int, step: int) -> tuple[dict[str, tuple[Col, Col | None]], dict]:
    out = _PROGRAM.row_phase(cols, m, step, workers=1)  # one core each: the workers already use every core
    stats = dict(_PROGRAM.stats)
    _PROGRAM.stats.clear()
    # LazyWords and other lazy views never leave a worker: components are numbers, spans are lists
    return out, stats


def _ready() -> bool:
    return _PROGRAM is not None


def _concat(parts: list[Any]) -> Any:
    if not isinstance(parts[0], Col):
        return parts[0]
    v0 = parts[0].v
    v = np.concatenate([p.v for p in parts]) if isinstance(v0, np.ndarray) else [x for p in parts for x in p.v]
    none = np.concatenate([p.none if p.none is not None else np.zeros(p.n, dtype=bool) for p in parts])
    err = None
    if any(p.err is not None for p in parts):
        err = [e for p in parts for e in (p.err if p.err is not None else [None] * p.n)]
    off = None
    if any(p.off is not None for p in parts):
        off = np.concatenate([p.off if p.off is not None else np.full(p.n, -1, dtype=np.int64) for p in parts])
    return Col(v, none, err, off, parts[0].kind)


class RowPool:
    """``workers`` cores for the per-sample phase: ``workers - 1`` spawned processes and the calling process.

    A batch is cut into chunks (:meth:`submit`); the workers take them from the front, and the caller, whenever it
    waits for a batch (:meth:`Batch.result`), scores the chunks no worker has started from the back. The shares
    therefore follow each side's speed: a worker still starting (imports, compiled kernels: ~1 s), a caller busy
    reading and writing JSONL, a machine whose other core is taken. With fixed shares (half each) the faster side
    idled at every batch, and with a process per core the caller idled while the workers ran.

    >>> import rewardlang
    >>> prog = rewardlang.loads('component n = len(completion)')
    >>> pool = RowPool(prog.python_source, prog.name, 2, type(prog).from_python)
    >>> cols = {"completion": ["ab", None, "abcd"] * 100}
    >>> out = pool.submit(cols, 300, 0, lambda c, m, step: prog.row_phase(c, m, step, workers=1)).result()
    >>> out["n"][0].v[:3].tolist(), bool(out["n"][0].none[1])
    ([2.0, 0.0, 4.0], True)
    >>> pool.close()
    """

    #: rows of the smallest chunk: below it a chunk's fixed cost (pickling, the call, the program's per-call work)
    #: is no longer small against its rows'
    MIN_CHUNK = 64
    #: chunks per core in a batch: enough that the sides finish close together (the caller waits at most for the
    #: chunk a worker is running and the one queued behind it), few enough that the fixed costs stay small
    CHUNKS_PER_CORE = 8

    def __init__(self, source: str, name: str, workers: int, build: Callable[[str, str], Any]) -> None:
        self.workers = workers
        self.procs = max(1, workers - 1)
        # ``build`` (Program.from_python) makes each worker's program from the generated source
        self.pool = ProcessPoolExecutor(max_workers=self.procs, mp_context=mp.get_context("spawn"),
                                        initializer=_init, initargs=(source, name, build))

    def start(self) -> None:
        """Spawn every worker now without waiting: each imports and warms up while the caller goes on."""
        self._started = [self.pool.submit(_ready) for _ in range(self.procs)]

    def submit(self, cols: dict[str, list[Any]], m: int, step: int, local: Callable[..., Any],
               stats: Any = None) -> Batch:
        """Hand ``m`` unique rows to the workers now, in chunks; ``local(cols, m, step)`` (the caller's in-process
        phase) scores the chunks the caller takes back. The workers' counters are added to ``stats``."""
        size = max(self.MIN_CHUNK, -(-m // (self.CHUNKS_PER_CORE * self.workers)))
        bounds = [(a, min(a + size, m)) for a in range(0, m, size)]
        return Batch(self.pool, cols, bounds, step, local, stats)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def stop_tracker() -> None:
    """Stop multiprocessing's resource tracker (a process the pool's queues start) and wait for it, for a process
    about to exit: otherwise it outlives its parent by a moment and reads, to whoever watches the process tree, as
    a process left behind. Call it only where nothing else in the process uses multiprocessing any more (the CLI's
    last step): the tracker cleans up what is still registered with it."""
    import multiprocessing
    from multiprocessing import resource_tracker

    # a process of this one still alive holds the tracker's pipe open: the tracker would not end, and waiting for
    # it would never return (a pool some other caller in the process left running); it goes with the process then
    if multiprocessing.active_children():
        return
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if tracker is not None and getattr(tracker, "_pid", None) is not None and hasattr(tracker, "_stop"):
        tracker._stop()


class Batch:
    """One batch in flight: its chunks' futures in row order and the results gathered so far."""

    def __init__(self, pool: ProcessPoolExecutor, cols: dict[str, list[Any]], bounds: list[tuple[int, int]],
                 step: int, local: Callable[..., Any], stats: Any) -> None:
        self.cols, self.bounds, self.step, self.local, self.stats = cols, bounds, step, local, stats
        self.futures = [pool.submit(_work, {k: v[a:b] for k, v in cols.items()}, b - a, step) for a, b in bounds]
        self.results: list[Any] = [None] * len(bounds)
        self.tail = len(bounds) - 1  # the last chunk the caller may still take back

    def steal(self) -> bool:
        """Score here the last chunk no worker has started; False when there is none (the executor hands chunks
        out in order, so once one cannot be cancelled, none before it can)."""
        if self.tail < 0 or not self.futures[self.tail].cancel():
            self.tail = -1
            return False
        i, self.tail = self.tail, self.tail - 1
        a, b = self.bounds[i]
        self.results[i] = (self.local({k: v[a:b] for k, v in self.cols.items()}, b - a, self.step), {})
        return True

    def result(self, helper: Batch | None = None) -> dict[str, tuple[Col, Col | None]]:
        """Every chunk's results joined in row order. The caller scores what no worker has started, then, while
        it waits for the workers' chunks, takes chunks of ``helper`` (the next batch) rather than idle."""
        while self.steal():
            pass
        for i, f in enumerate(self.futures):
            if self.results[i] is None:
                while not f.done() and helper is not None and helper.steal():
                    pass
                self.results[i] = f.result()
                if self.stats is not None:
                    self.stats.update(self.results[i][1])
        names = self.results[0][0].keys()
        return {k: (_concat([r[0][k][0] for r in self.results]),
                    None if self.results[0][0][k][1] is None else _concat([r[0][k][1] for r in self.results]))
                for k in names}
