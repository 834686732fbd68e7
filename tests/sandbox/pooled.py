"""Hostile programs pooled as a trainer scores them: several slots, one batch, each hostile program followed
on its own slot by a correct one (issue 32, "Also" item 3).

Which slot runs which request is up to the pool's threads, so the batch interleaves every hostile program
with correct ones and a spy on :meth:`Slot.request` records, per slot, the programs in the order that slot ran
them (each program carries a marker comment of its own). After the batch, every hostile program must have
been followed on its slot by a correct program that passed; a slot whose last program was hostile gets more
correct programs (distinct ones, so none is de-duplicated) until it has run one. Nothing here depends on
timing: whichever way the requests are spread, the same assertions hold.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pytest

from rewardlang.sandbox import pool
from rewardlang.sandbox.judge import Verdict
from rewardlang.sandbox.runner import Sandbox, Task

_MARK = re.compile(rb"RL-POOL-(\d+)-")


def mark(task: Task, i: int) -> Task:
    """``task`` with a marker comment naming it ``i`` at the end of its program (the comment syntax of its
    language; appended to the unit, before any harness)."""
    token = "#" if task.language in ("python", "sh") else "//"
    return replace(task, code=(task.code or "") + f"\n{token} RL-POOL-{i}-\n")


@dataclass
class Pooled:
    verdicts: list[Verdict]           # of the hostile programs, in order
    by_slot: dict[int, list[int]]     # slot index -> task ids in the order the slot ran them
    followers: int                    # correct programs run in all


def run_pooled(sb: Sandbox, hostile: Sequence[Task], follower: Callable[[int], Task], *,
               monkeypatch: pytest.MonkeyPatch, per_hostile: int = 1) -> Pooled:
    """Run ``hostile`` in one batch on ``sb``'s slots, each followed in the batch by ``per_hostile`` correct
    programs (``follower(k)`` makes the k-th, distinct for each k), then check on every slot that each
    hostile program was followed by a correct program that passed. Asserts no respawn, no infrastructure
    outcome, no stray process. Returns the hostile programs' verdicts."""
    assert len(sb.pool.slots) >= 2, "pooled means several slots"
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()
    request = pool.Slot.request

    def spy(self: pool.Slot, req: object, hard: float) -> tuple:
        if isinstance(req, tuple) and len(req) > 1:
            m = _MARK.search(req[1])
            if m is not None:
                with lock:
                    seen.setdefault(self.index, []).append(int(m.group(1)))
        return request(self, req, hard)   # type: ignore[arg-type]

    monkeypatch.setattr(pool.Slot, "request", spy)
    # every slot started before the batch (a slot starts on its first request): a start during the batch is
    # then a respawn
    for w in range(20):
        if all(s.alive for s in sb.pool.slots):
            break
        sb.evaluate([follower(-1 - w * 100 - j) for j in range(2 * len(sb.pool.slots))], use_cache=False)
    assert all(s.alive for s in sb.pool.slots)
    starts = sb.pool.stats["slot_starts"]
    tasks: list[Task] = []
    kinds: dict[int, str] = {}            # task id -> "h" (hostile) or "f" (follower)
    hostile_ids: list[int] = []
    follower_verdicts: dict[int, Verdict] = {}
    k = 0

    def add_follower() -> None:
        nonlocal k
        tid = len(kinds)
        kinds[tid] = "f"
        tasks.append(mark(follower(k), tid))
        k += 1

    for h in hostile:
        tid = len(kinds)
        kinds[tid] = "h"
        hostile_ids.append(tid)
        tasks.append(mark(h, tid))
        for _ in range(per_hostile):
            add_follower()
    for _ in range(len(sb.pool.slots)):
        add_follower()
    ids = list(kinds)
    out = sb.evaluate(tasks, use_cache=False)
    for tid, v in zip(ids, out):
        assert v.infra is None, (tid, v.infra)
        if kinds[tid] == "f":
            follower_verdicts[tid] = v
    verdicts = [out[ids.index(t)] for t in hostile_ids]

    def last_is_hostile() -> list[int]:
        return [s for s, order in seen.items() if order and kinds[order[-1]] == "h"]

    for _ in range(20):          # top up a slot that ended the batch on a hostile program
        if not last_is_hostile():
            break
        extra: list[int] = []
        tasks = []
        for _ in range(2 * len(sb.pool.slots)):
            extra.append(len(kinds))
            add_follower()
        for tid, v in zip(extra, sb.evaluate(tasks, use_cache=False)):
            follower_verdicts[tid] = v
    assert not last_is_hostile(), seen
    for s, order in seen.items():
        # the first correct program a slot ran after each hostile one passed (another hostile program may
        # come between: which request a slot takes next is the pool's choice)
        for pos, tid in enumerate(order):
            if kinds[tid] != "h":
                continue
            nxt = next((t for t in order[pos + 1:] if kinds[t] == "f"), None)
            assert nxt is not None, (s, order)
            assert follower_verdicts[nxt].outcome == "pass", (tid, nxt, follower_verdicts[nxt].details())
    assert all(v.outcome == "pass" for v in follower_verdicts.values()), \
        [v.details() for v in follower_verdicts.values() if v.outcome != "pass"]
    assert sorted(t for order in seen.values() for t in order if kinds[t] == "h") == sorted(hostile_ids)
    assert sb.pool.stats["slot_starts"] == starts, "a hostile program cost a slot respawn"
    assert sb.stray_processes() == []
    return Pooled(verdicts, seen, k)
