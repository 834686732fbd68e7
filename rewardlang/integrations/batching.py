"""One compiled program per process, fed in batches: what the verl and OpenRLHF adapters and ``rewardlang serve``
share.

Engines call a reward once per sample, from many threads or tasks at once. :class:`Batcher` parks those calls for
a short window (or until ``max_batch`` rows wait) and scores them together through one :class:`SpecScorer`: one
compiled program, one sandbox pool, the row-deduplication and caches of :meth:`Program.score_columns`.

Every sample gets the same keys whatever happens (verl takes the key list from its first sample): ``score`` (always
finite), ``rl_masked`` (1.0 when rewardlang masks the sample: an infrastructure failure, a component that is none, a
bad input row) and ``rl_<component>`` for each component (0.0 where the component is masked). A masked sample's
``score`` is 0.0; see docs/scale.md for what that means for each engine's advantages.

Example::

    >>> from rewardlang.integrations.batching import SpecScorer
    >>> s = SpecScorer("specs/codepo_text.reward")
    >>> out = s.score_rows([{"prompt": "p", "completion": "```python\\ndef f():\\n    return 1\\n```"}])
    >>> list(out[0])[:2], out[0]["rl_masked"], s.keys == list(out[0])
    (['score', 'rl_masked'], 0.0, True)
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from rewardlang.compiler import load_program
from rewardlang.runtime.scoring import ScoringError, score_rows

__all__ = ["Batcher", "Overloaded", "Scored", "SpecScorer", "batcher_for", "log_masks", "result_keys",
           "scorer_for"]

log = logging.getLogger("rewardlang.integrations")

#: key of the mask flag in every result
MASK_KEY = "rl_masked"


def result_keys(component_names: Sequence[str]) -> list[str]:
    """The keys of every result dict, in order: ``score``, ``rl_masked``, then ``rl_<component>``."""
    return ["score", MASK_KEY] + [f"rl_{c}" for c in component_names]


def _finite(x: Any) -> float:
    x = float(x)
    return x if math.isfinite(x) else 0.0


class Scored(dict):
    """A result dict (the keys above) that also says where its value reaches the completion's characters:
    ``places`` is ``[(weight, Placement), ...]``, one per unmasked component (its ``tokens`` clause's placement,
    or its value on the last token when it has none), for a spec with ``tokens`` clauses whose reward is the
    weighted sum; None otherwise (the ``score`` goes on the last token). Made only where a scorer's
    ``keep_places`` is set (the verl managers, which turn it into per-token rewards)."""

    places: list[tuple[float, Any]] | None = None
    #: why a masked sample is masked (:meth:`SpecScorer.masked_result`); None for one that is not
    reason: str | None = None


def _mask_reason(res: Any, j: int, reward_components: Sequence[str]) -> str:
    """Why row ``j`` of a :class:`~rewardlang.runtime.program.ScoreResult` is masked: the first component of the
    reward that is masked, with its error (an infrastructure failure says so), or a reward that is not finite."""
    for c in reward_components:
        m = res.masked.get(c)
        if m is not None and m[j]:
            err = res.errors.get(c, [None] * (j + 1))[j]
            infra = " (an infrastructure failure)" if bool(res.infra[c][j]) else ""
            return f"component `{c}`: {err or 'none'}{infra}"
    return "the reward is not a finite number"


def log_masks(logger: logging.Logger, where: str, results: Sequence[Any], shown: int = 50) -> None:
    """One warning naming every masked result of ``results`` (by position) with its reason; past ``shown``
    rows, the rest are counted by reason."""
    masked = [(k, getattr(r, "reason", None) or "masked") for k, r in enumerate(results) if r.get(MASK_KEY)]
    if not masked:
        return
    parts = [f"row {k}: {why}" for k, why in masked[:shown]]
    if len(masked) > shown:
        rest = Counter(why for _, why in masked[shown:])
        parts.append(f"and {len(masked) - shown} more: " + ", ".join(f"{c} x {w}" for w, c in rest.most_common()))
    logger.warning("rewardlang: %d of %d row(s) of %s masked: %s", len(masked), len(results), where,
                   "; ".join(parts))


class SpecScorer:
    """A compiled spec that scores lists of row dicts (keys: the spec's input names or their columns).

    A row whose values are bad (a missing column, a wrong type) is masked and counted in ``stats["bad_rows"]``,
    not dropped and not an exception; a failure of the scoring run itself masks the batch and counts
    ``stats["infra_failures"]``. Every masked result is a :class:`Scored` whose ``reason`` says why (logged too);
    with ``keep_places`` set, every result is a :class:`Scored`.
    """

    #: return :class:`Scored` results that carry the spec's per-token placement (set by the verl managers)
    keep_places: bool = False
    #: log every masked row with its reason (one line per batch); the server turns this off and logs per request
    log_masks: bool = True

    def __init__(self, spec: str, params: dict[str, Any] | None = None, program: Any = None) -> None:
        self.spec = str(spec)
        # a bad spec raises SpecError here: every sample would fail the same way, so the engine must stop
        self.program = program if program is not None else load_program(self.spec, params=params)
        self.program.require_resources()
        self.names = [c.name for c in self.program.components]
        self.keys = result_keys(self.names)
        self.stats: Counter = Counter()
        self.inputs = [i for i in self.program.inputs if i.used or i.name == "completion"]
        #: the spec places values on tokens (a `tokens` clause) and its reward is their weighted sum
        self.dense = (any(c.tokens is not None for c in self.program.components)
                      and bool(self.program.spec.get("reward_is_weighted_sum")))

    def masked_result(self, reason: str | None = None) -> dict[str, float]:
        """The result of a masked sample (same keys as every other); ``reason``, why it is masked, rides along as
        the dict's ``reason`` attribute (the reward server puts it in its answer), never as a key."""
        out = Scored.fromkeys(self.keys, 0.0)
        out[MASK_KEY] = 1.0
        out.reason = reason or "masked"
        return out

    def _missing(self, row: Any) -> str | None:
        """Why ``row`` cannot be read: not a dict, or a column the spec needs is absent (an optional input's column
        may be absent: it is none)."""
        if not isinstance(row, dict):
            return f"a row must be an object of the spec's columns, not {type(row).__name__}"
        for inp in self.inputs:
            if not inp.nullable and inp.column not in row and inp.name not in row:
                return f"column `{inp.column}` missing (the spec's input `{inp.name}` reads it)"
        return None

    def score_rows(self, rows: Sequence[dict[str, Any]], step: int = 0) -> list[dict[str, float]]:
        """Score rows together; one dict per row with :attr:`keys` (see the module docstring). A masked row's dict
        says why in its ``reason`` attribute (:meth:`masked_result`); every mask is logged, one line per batch,
        unless :attr:`log_masks` is off (the server logs them per request)."""
        n = len(rows)
        if n == 0:
            return []
        self.stats["rows"] += n
        self.stats["batches"] += 1
        out: list[dict[str, float] | None] = [None] * n
        good = []
        for i, r in enumerate(rows):
            why = self._missing(r)
            if why is None:
                good.append(i)
            else:
                out[i] = self.masked_result(why)
        self.stats["bad_rows"] += n - len(good)
        if good:
            self._score_part(good, rows, step, out)
        results = [o if o is not None else self.masked_result() for o in out]
        if self.log_masks:
            log_masks(log, "a batch", results)
        return results

    def _score_part(self, idx: list[int], rows: Sequence[dict[str, Any]], step: int,
                    out: list[dict[str, float] | None], sibling_failed: bool = False) -> bool:
        """Score rows ``idx`` of ``rows`` into ``out`` through :func:`rewardlang.runtime.scoring.score_rows` (a bad
        row masked and counted); False when no row could be scored.

        A call that raises is split in halves, so that one row whose scoring raises masks itself and not the other
        rows of its batch; when both halves raise too, the failure is the infrastructure's and all are masked."""
        try:
            scored = score_rows(self.program, [self._row(rows[i]) for i in idx], step=step, on_bad_row="skip",
                                warn=log.warning)
        except ScoringError as exc:  # the batch's columns cannot be read at all: each row is bad
            why = "; ".join(issue.message for issue in exc.issues)
            self.stats["bad_rows"] += len(idx)
            for i in idx:
                out[i] = self.masked_result(why)
            return False
        except Exception as exc:  # noqa: BLE001 - an infrastructure failure: masked and counted, not a 0
            if len(idx) > 1 and not sibling_failed:
                h = len(idx) // 2
                ok0 = self._score_part(idx[:h], rows, step, out)
                ok1 = self._score_part(idx[h:], rows, step, out, sibling_failed=not ok0)
                return ok0 or ok1
            self.stats["infra_failures"] += len(idx)
            log.error("rewardlang: scoring %d row(s) failed (%s: %s); masked", len(idx), type(exc).__name__, exc)
            for i in idx:
                out[i] = self.masked_result(f"an infrastructure failure: scoring raised {type(exc).__name__}: "
                                            f"{exc}")
            return False
        bad: dict[int, str] = {}
        for r, why in scored.bad_rows:  # a row with two bad values is one bad row, masked for the first
            bad.setdefault(r, why)
        self.stats["bad_rows"] += len(bad)
        for r, why in bad.items():
            out[idx[r]] = self.masked_result(why)
        res = scored.result
        if res is None:
            return True
        for j, r in enumerate(scored.kept):
            i = idx[r]
            total = float(res.total[j])
            masked = not math.isfinite(total)
            d = {"score": 0.0 if masked else total, MASK_KEY: 1.0 if masked else 0.0}
            for c in self.names:
                d[f"rl_{c}"] = _finite(res.components[c][j])
            if masked:
                self.stats["masked"] += 1
                if any(bool(res.infra[c][j]) for c in self.names):
                    self.stats["infra_failures"] += 1
                d = Scored(d)
                d.reason = _mask_reason(res, j, self.program.spec.get("reward_components") or self.names)
            elif self.keep_places:
                d = Scored(d)
                if self.dense and not masked:
                    d.places = self._places(res, j)
            out[i] = d
        for k, v in res.stats.items():
            # the sandbox's and the analysers' counters (timeouts, infrastructure failures): /metrics shows them
            if k.startswith(("sandbox.", "tool.")) and k != "sandbox.isolation_level" and isinstance(v, (int, float)):
                self.stats[k] += v
        return True

    def _row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row's values of the spec's inputs, by column name (an engine may send an input under its name)."""
        return {i.column: row[i.column] if i.column in row else row.get(i.name) for i in self.inputs}

    def _places(self, res: Any, j: int) -> list[tuple[float, Any]]:
        """Row ``j``'s components as ``(weight, Placement)`` (rewardlang.trainers.dense.DenseRewards's rule)."""
        from rewardlang.runtime.attribution import Placement

        out = []
        for c in self.names:
            w = float(res.weights[c])
            if res.masked[c][j] or w == 0.0 or not math.isfinite(w):
                continue  # a component outside the reward may be masked alone: it contributes nothing
            p = res.attribution[c][j] if c in res.attribution else Placement(last=float(res.components[c][j]))
            out.append((w, p))
        return out

    def sandbox_level(self) -> str | None:
        """The isolation level the sandbox ran at so far (None: nothing ran in it)."""
        levels = sorted(k[len("sandbox.level."):] for k in self.stats if k.startswith("sandbox.level."))
        return "/".join(levels) or None

    def close(self) -> None:
        self.program.close()


class Overloaded(RuntimeError):
    """The batcher's queue is full: the caller should retry later (the server answers 503)."""


class Batcher:
    """Coalesces concurrent submissions into batches scored by one thread through one :class:`SpecScorer`.

    A batch is scored when ``max_batch`` rows wait, or once the requests it expects are all there, or when its
    wait is over. It expects as many requests as were in the batcher at once (being scored or waiting) during the
    last few batches: with callers that each send their next rows when they get their answer (closed-loop clients,
    a rollout worker per request), that is every caller, so with one row per request 16 callers make batches of 16
    (the previous rule, as many as the previous batch answered, kept two alternating halves of ~8 once the callers
    had drifted apart: each half found the other waiting, and every row paid the per-batch cost twice). Its wait
    runs from its first request's arrival and from the moment the previous batch was answered (the callers it
    answered get that long to send their next rows): ``window_s``, or, while fewer requests wait than it
    expects, up to ``hold`` of the previous batch's scoring time (at most ``max_hold_s``, at least ``window_s``):
    a caller waits a small part of what its own rows take to score, never longer (issue 38: p50/p99 per-row
    latency in ``benchmarks/bench_scale.py``). A quarter: on 2 cores shared with other jobs, the callers
    answered took more than a tenth of a 16-row batch's scoring time to be back (the earlier ``hold``), the
    batches held ~13.5 of 16 rows and the few left over paid the per-batch cost again in the next one; a caller
    that misses a batch waits for the whole next one, far longer than the hold. A caller that stops sending is
    expected for a few more batches at most (:attr:`expect_batches`). More than
    ``max_pending`` waiting rows make :meth:`submit` raise :class:`Overloaded` at once (a bounded queue, never an
    unbounded wait). A submission whose future is cancelled before its batch starts leaves the queue, unscored
    (the server cancels the requests of clients that went away). :meth:`close` stops accepting, scores everything
    accepted, then returns (or, with a ``timeout``, returns when that is over; :attr:`running` says whether the
    thread still scores).
    """

    #: batches over which the most requests seen at once is remembered (a caller that stops is expected no longer)
    expect_batches: int = 4

    def __init__(self, scorer: SpecScorer, *, window_s: float = 0.02, max_batch: int = 512,
                 max_pending: int = 8192, hold: float = 0.25, max_hold_s: float = 0.5) -> None:
        self.scorer = scorer
        self.window_s = window_s
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.hold = hold
        self.max_hold_s = max_hold_s
        self._queue: deque[tuple[list[dict], Future, float]] = deque()
        self._pending = 0
        self._cond = threading.Condition()
        self._closing = False
        self._draining = False  # no window is waited for: a batch is taken as soon as its rows are there
        self.batch_sizes: Counter = Counter()
        self.latency_sum = 0.0
        self.latency_n = 0
        #: seconds spent scoring batches (over a run's wall time: how much of it the server was scoring)
        self.scoring_s = 0.0
        self.requests = 0
        self.rejected = 0
        #: when the last batch's results were handed out (the coalescing window also counts from there)
        self._last_done = 0.0
        #: seconds the last batch took to score (a batch waits for the requests it expects a part of that)
        self._last_seconds = 0.0
        #: requests in the batch being scored, and the most requests in the batcher at once since it was taken
        self._scoring = 0
        self._peak = 0
        #: that most, for each of the last few batches: the requests the next batch expects
        self._peaks: deque[int] = deque(maxlen=self.expect_batches)
        self._thread = threading.Thread(target=self._loop, name="rewardlang-batcher", daemon=True)
        self._thread.start()

    def submit(self, rows: list[dict]) -> Future:
        """Queue rows; the future's result is their result dicts, in order."""
        fut: Future = Future()
        with self._cond:
            if self._closing:
                raise Overloaded("the reward batcher is shutting down")
            if self._pending + len(rows) > self.max_pending:
                self.rejected += 1
                raise Overloaded(f"overloaded: {self._pending} rows already wait (limit {self.max_pending})")
            self.requests += 1
            item = (list(rows), fut, time.perf_counter())
            self._queue.append(item)
            self._pending += len(rows)
            self._peak = max(self._peak, self._scoring + len(self._queue))
            self._cond.notify()
        fut.add_done_callback(lambda f, item=item: self._withdraw(item) if f.cancelled() else None)
        return fut

    def _withdraw(self, item: tuple[list[dict], Future, float]) -> None:
        """A submission cancelled before it was taken (its caller left) leaves the queue at once: its rows no
        longer count against ``max_pending`` and are never scored."""
        with self._cond:
            for k, other in enumerate(self._queue):
                if other is item:
                    del self._queue[k]
                    self._pending -= len(item[0])
                    self._cond.notify()
                    return

    def score(self, rows: list[dict]) -> list[dict[str, float]]:
        """Submit and wait (for callers on threads, such as verl's per-sample ``compute_score``)."""
        return self.submit(rows).result()

    def _take(self) -> list[tuple[list[dict], Future, float]]:
        with self._cond:
            while not self._queue:
                if self._closing:
                    return []
                self._cond.wait()
            start = max(self._queue[0][2], self._last_done)
            expected = max(self._peaks, default=0)
            hold = max(self.window_s, min(self.max_hold_s, self.hold * self._last_seconds))
            while self._pending < self.max_batch and not (self._closing or self._draining):
                if expected and len(self._queue) >= expected:
                    break  # every caller expected is here: waiting longer only adds idle time
                left = start + (hold if expected else self.window_s) - time.perf_counter()
                if left <= 0:
                    break
                self._cond.wait(left)
            taken: list[tuple[list[dict], Future, float]] = []
            size = 0
            # whole requests only: a request's rows are scored together (a group is never split)
            while self._queue and (not taken or size + len(self._queue[0][0]) <= self.max_batch):
                item = self._queue.popleft()
                if not item[1].set_running_or_notify_cancel():
                    # cancelled while this thread held the lock (its _withdraw finds it gone): nobody wants its rows
                    self._pending -= len(item[0])
                    continue
                taken.append(item)
                size += len(item[0])
            self._pending -= size
            self._scoring = len(taken)
            self._peak = len(taken) + len(self._queue)
            return taken

    def _loop(self) -> None:
        while True:
            taken = self._take()
            if not taken:
                if self._closing and not self._queue:
                    return
                continue  # every request taken had been cancelled
            rows = [r for item in taken for r in item[0]]
            self.batch_sizes[len(rows)] += 1
            t0 = time.perf_counter()
            try:
                results = self.scorer.score_rows(rows)
            except BaseException as exc:  # noqa: BLE001 - never leave a caller waiting forever
                self._scored(t0)
                for _, fut, _ in taken:
                    fut.set_exception(exc)
                self._last_done = time.perf_counter()
                continue
            self._scored(t0)  # before the answers: a caller answered may be back at once
            now = time.perf_counter()
            k = 0
            for item_rows, fut, t in taken:
                fut.set_result(results[k:k + len(item_rows)])
                k += len(item_rows)
                self.latency_sum += now - t
                self.latency_n += 1
            self._last_done = time.perf_counter()

    def _scored(self, t0: float) -> None:
        """A batch scored from ``t0`` is about to be answered: what the next batch expects, how long it may
        wait."""
        with self._cond:
            self._last_seconds = time.perf_counter() - t0
            self.scoring_s += self._last_seconds
            self._peaks.append(self._peak)
            self._scoring = 0
            self._peak = len(self._queue)

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def running(self) -> bool:
        """Whether the batcher's thread is still scoring (after :meth:`close` with a timeout, it may be)."""
        return self._thread.is_alive()

    def drain(self) -> None:
        """Stop waiting for windows: what waits, and what is submitted from now on, is scored at once. Submissions
        are still accepted (the server drains at SIGTERM, while the requests it accepted are still being read, and
        closes once they are answered)."""
        with self._cond:
            self._draining = True
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        """Accept nothing more, finish every accepted submission, stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)


_SCORERS: dict[tuple, SpecScorer] = {}
_BATCHERS: dict[tuple, Batcher] = {}
_LOCK = threading.Lock()


def _key(spec: str, params: dict[str, Any] | None) -> tuple:
    return (os.path.abspath(spec), tuple(sorted((params or {}).items())))


def scorer_for(spec: str, params: dict[str, Any] | None = None) -> SpecScorer:
    """The process's scorer for ``spec`` (compiled once per process: engines import the adapter in every worker)."""
    k = _key(spec, params)
    with _LOCK:
        if k not in _SCORERS:
            _SCORERS[k] = SpecScorer(spec, params)
        return _SCORERS[k]


def batcher_for(spec: str, params: dict[str, Any] | None = None, **kw: Any) -> Batcher:
    """The process's batcher for ``spec`` (see :class:`Batcher` for ``window_s``, ``max_batch``, ``max_pending``)."""
    scorer = scorer_for(spec, params)
    k = _key(spec, params)
    with _LOCK:
        if k not in _BATCHERS:
            _BATCHERS[k] = Batcher(scorer, **kw)
        return _BATCHERS[k]
