"""SlotPool.stream: every request settled once, on the slot threads, as it completes; a lazy request source
read at most a window ahead; the first exception of ``settle`` raised in the caller once all have ended."""

from __future__ import annotations

import threading

import pytest
from lang_programs import lang_tests, require, unit

from rewardlang.sandbox.runner import Task


def _payload(sb1) -> tuple:
    require("sh")
    got = sb1._language_request(Task(unit("sh"), lang_tests("sh"), language="sh"))
    _key, payload, hard, plan = got
    return payload, hard, plan


def test_every_request_is_settled_once_on_a_slot_thread(sb1) -> None:
    payload, hard, plan = _payload(sb1)
    n = 150                                   # more than the window (64): the feeding waits for room
    window = max(64, 4 * len(sb1.pool.slots))
    fed: list[int] = []
    settled: list[tuple[int, str, bool]] = []
    ahead: list[int] = []

    def source():
        for i in range(n):
            fed.append(i)
            ahead.append(len(fed) - len(settled))
            yield i, payload, hard

    def settle(key: int, raw) -> None:
        v = plan.judge(raw, level=sb1.level)
        settled.append((key, v.outcome, threading.current_thread() is threading.main_thread()))

    sb1.pool.stream(source(), settle)
    assert sorted(k for k, _, _ in settled) == list(range(n))       # each once
    assert {o for _, o, _ in settled} == {"pass"}
    assert not any(on_main for _, _, on_main in settled)             # judged where it completed
    assert max(ahead) <= window + 1       # never read more than a window ahead (+1: the one waiting for room)


def test_the_first_settle_error_is_raised_after_every_request_ended(sb1) -> None:
    payload, hard, _plan = _payload(sb1)
    calls: list[int] = []

    def settle(key: int, raw) -> None:
        calls.append(key)
        if key == 3:
            raise ValueError("judge bug on 3")

    with pytest.raises(ValueError, match="judge bug on 3"):
        sb1.pool.stream(((i, payload, hard) for i in range(10)), settle)
    assert calls[-1] == 3 and len(calls) == len(set(calls))          # none settled after the error
    # the pool is still usable: every request of the failed stream ended, nothing is left in flight
    ok: list[int] = []
    sb1.pool.stream(((i, payload, hard) for i in range(3)), lambda k, raw: ok.append(k))
    assert sorted(ok) == [0, 1, 2]
