"""The batcher coalesces closed-loop callers into one batch (issue 38).

With one row per request, callers that each send their next row when they get their answer drift into two halves
when a batch closes before all of them are back; the previous rule (start as soon as as many requests wait as the
previous batch answered) then kept the halves apart for ever, each batch paying the per-batch cost for half the
rows. The batcher now waits, a bounded time, for as many requests as it has seen at once.

A stub scorer that blocks on its first batch orders the events; no assertion depends on how long anything takes.
"""

from __future__ import annotations

import threading

import pytest

from rewardlang.integrations.batching import Batcher


class _Stub:
    """Scores rows as their own length; the first batch waits until ``release`` is set."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def score_rows(self, rows: list[dict]) -> list[dict]:
        self.calls.append(len(rows))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(60)
        return [{"score": float(r["x"])} for r in rows]


def test_two_halves_of_the_callers_are_scored_together_again() -> None:
    stub = _Stub()
    b = Batcher(stub, window_s=0.05, max_batch=100, hold=1e6, max_hold_s=60.0)  # type: ignore[arg-type]
    with b._cond:  # both requests are queued before the batcher looks: the first batch holds exactly these two
        first = [b.submit([{"x": i}]) for i in range(2)]
    assert stub.started.wait(60)
    # the other half of the callers arrives while the first half is scored: four callers are in the batcher
    second = [b.submit([{"x": i}]) for i in (2, 3)]
    stub.release.set()
    assert [f.result(60)[0]["score"] for f in first] == [0.0, 1.0]
    # the first half is back: the batch waits for it (the previous rule scored the second half alone at once)
    again = [b.submit([{"x": i}]) for i in (4, 5)]
    assert [f.result(60)[0]["score"] for f in second + again] == [2.0, 3.0, 4.0, 5.0]
    b.close()
    assert stub.calls == [2, 4]


def test_a_caller_that_stops_is_waited_for_a_bounded_time_then_forgotten() -> None:
    stub = _Stub()
    stub.release.set()
    b = Batcher(stub, window_s=0.01, max_batch=3, hold=1e6, max_hold_s=0.05)  # type: ignore[arg-type]
    assert len(b.submit([{"x": 0}, {"x": 1}, {"x": 2}]).result(60)) == 3  # closed by max_batch
    # three callers were seen at once; only two come back: each batch waits at most max_hold_s for the third,
    # and after expect_batches batches it is no longer expected
    for _ in range(b.expect_batches + 2):
        futs = [b.submit([{"x": i}]) for i in range(2)]
        assert [f.result(60)[0]["score"] for f in futs] == [0.0, 1.0]
    b.close()
    assert stub.calls[0] == 3 and all(c <= 2 for c in stub.calls[1:])
    assert max(b._peaks) <= 2  # the third caller is forgotten


def _quality_rows() -> list[dict]:
    """quality_grpo rows that differ in what each part of the reward sees: the shipped samples (correct, wrong,
    findings), a completion with no code, one whose code does not parse, one whose block is unclosed, and a row
    whose `tests` column is missing (a bad row, masked with its reason)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    with open(root / "examples" / "code_samples.jsonl", encoding="utf-8") as f:
        rows = [json.loads(x) for x in f]
    base = rows[0]
    rows += [
        {**base, "completion": "I would compare every pair."},
        {**base, "completion": "```python\ndef has_close_elements(numbers, threshold):\n    return (\n```"},
        {**base, "completion": "```python\nimport os\ndef has_close_elements(numbers, threshold):\n    return False\n"},
        {k: v for k, v in base.items() if k != "tests"},
    ]
    return rows


def test_coalesced_one_row_requests_score_what_each_row_scores_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: rows sent one per request and coalesced by the batcher into one batch get exactly the results
    (every key, every float, every mask reason) each row gets scored alone, and a batch scored with each tool in
    runs of its own (as batches of more than TOGETHER_MAX codes are) gets them too. Three scorers: no result is
    read from another's cache."""
    from rewardlang.integrations.batching import SpecScorer
    from rewardlang.runtime.tools import codequal

    spec = "specs/quality_grpo.reward"
    rows = _quality_rows()
    b = Batcher(SpecScorer(spec), window_s=60.0, max_batch=len(rows))  # the last row closes the batch
    with b._cond:  # every request waits before the batcher looks: one batch of all of them
        futs = [b.submit([r]) for r in rows]
    coalesced = [f.result(300)[0] for f in futs]
    b.close()
    b.scorer.close()
    assert dict(b.batch_sizes) == {len(rows): 1}

    alone_scorer = SpecScorer(spec)
    alone = [alone_scorer.score_rows([r])[0] for r in rows]
    alone_scorer.close()

    monkeypatch.setenv("REWARDLANG_TOOL_TOGETHER", "0")
    apart_scorer = SpecScorer(spec)
    apart = apart_scorer.score_rows(rows)
    apart_scorer.close()
    assert len(rows) <= codequal.TOGETHER_MAX  # so the coalesced batch ran bandit and the analysers together

    def seen(results: list[dict]) -> list[tuple]:
        return [(dict(r), getattr(r, "reason", None)) for r in results]

    assert seen(coalesced) == seen(alone) == seen(apart)
    # the rows really differ: the comparison is not of identical constants
    scores = [r["score"] for r in alone]
    assert len(set(scores)) >= 4 and 0.0 in scores and max(scores) > 0.5
    assert alone[-1]["rl_masked"] == 1.0 and "tests" in alone[-1].reason
    assert sum(r["rl_masked"] for r in alone) == 1.0
