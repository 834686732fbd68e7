"""Independent out-of-process components at the same time (rewardlang/runtime/lanes.py): which components share a
lane, every value, mask, error, span and counter equal to one component after the other, and failures raised as
the sequential run raises them."""

from __future__ import annotations

import doctest
import json
import math
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import rewardlang
from rewardlang.runtime import lanes
from rewardlang.runtime.api import Context

ROOT = Path(__file__).resolve().parents[2]
TESTS = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"


def _groups(source: str) -> list[list[str]] | None:
    prog = rewardlang.loads(source)
    plan = lanes.plan(prog.python_source, prog.module)
    return None if plan is None else [sorted(c) for c in plan.components]


HEAD = "input tests: text\ninput entry_point: text\nlet code = code_block(completion, \"python\") or \"\"\n"


def test_components_that_share_nothing_out_of_process_get_lanes_of_their_own() -> None:
    assert _groups(HEAD + "component ok = tests_pass_rate(code, tests, entry_point)\n"
                          "component q = quality_score(code)\n"
                          "component n = len(completion)\n") == [["n", "ok"], ["q"]]


def test_one_call_serving_two_components_keeps_them_in_one_lane() -> None:
    # `passed` is one sandbox run read by two components: it runs once, so both are in its lane
    assert _groups(HEAD + "let passed = tests_pass_rate(code, tests, entry_point)\n"
                          "component a = passed\ncomponent b = 1 - passed\n"
                          "component q = quality_score(code)\n") == [["a", "b"], ["q"]]


def test_two_components_calling_one_module_out_of_process_share_a_lane() -> None:
    # the sandbox's functions share its pool: never used from two threads
    assert _groups(HEAD + "component a = tests_pass_rate(code, tests, entry_point)\n"
                          "component b = tests_all_pass(code, tests, entry_point)\n") is None
    assert _groups(HEAD + "component a = tests_pass_rate(code, tests, entry_point)\n"
                          "component b = tests_all_pass(code, tests, entry_point)\n"
                          "component q = quality_score(code)\n") == [["a", "b"], ["q"]]


def test_no_lanes_without_two_out_of_process_components() -> None:
    assert _groups("component n = len(completion)\ncomponent w = len(words(completion))\n") is None
    assert _groups("component q = quality_score(completion)\ncomponent n = len(completion)\n") is None


def _rows() -> dict[str, list]:
    with open(ROOT / "examples" / "code_samples.jsonl", encoding="utf-8") as f:
        base = [json.loads(x) for x in f][:6]
    extra = [  # no code, code that does not parse, a loop that never ends, a correct one
        "I would add one.", "```python\ndef inc(x):\n    return (x + \n```",
        "```python\ndef inc(x):\n    while True:\n        pass\n```", "```python\ndef inc(x):\n    return x + 1\n```"]
    rows = {k: [r[k] for r in base] for k in ("completion", "tests", "entry_point", "prompt")}
    rows["completion"] += extra
    rows["tests"] += [TESTS] * len(extra)
    rows["entry_point"] += ["inc"] * len(extra)
    rows["prompt"] += ["p"] * len(extra)
    return rows


@pytest.mark.slow
def test_every_value_mask_error_span_and_counter_is_the_sequential_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows()

    def score(flag: str):  # type: ignore[no-untyped-def]
        monkeypatch.setenv("REWARDLANG_COMPONENT_LANES", flag)
        prog = rewardlang.load(str(ROOT / "specs" / "quality_grpo.reward"))
        assert (prog._lanes() is not None) == (flag == "1")
        try:
            return prog.score(**rows), Counter(prog.stats)
        finally:
            prog.close()

    (seq, seq_stats), (par, par_stats) = score("0"), score("1")
    np.testing.assert_array_equal(seq.total, par.total)
    for c in seq.components:
        np.testing.assert_array_equal(seq.components[c], par.components[c])
        np.testing.assert_array_equal(seq.masked[c], par.masked[c])
        assert seq.errors[c] == par.errors[c] and list(seq.infra[c]) == list(par.infra[c])
    assert seq.spans == par.spans
    assert sum(1 for v in seq.components["correct"] if v == 1.0) >= 2 and any(seq.spans["quality"])
    assert seq.components["quality"][7] == 0.0  # the code that does not parse: the worst quality, not a mask

    def counters(st: Counter) -> dict:
        # times and the slowest run's wall time differ from run to run; the rest is counted the same
        return {k: v for k, v in st.items() if not k.startswith("time") and k != "sandbox.max_wall_s"}

    assert counters(seq_stats) == counters(par_stats)
    assert seq_stats["tool.pylint.runs"] >= 1 and any(k.startswith("sandbox.level.") for k in par_stats)


def test_counters_are_merged_as_what_each_lane_changed() -> None:
    target = Counter({"runs": 3, "sandbox.level.bwrap": 1, "max": 2.0, "level": "bwrap"})
    snapshot = Counter(target)
    a = Counter(snapshot)
    b = Counter(snapshot)
    a["runs"] += 2
    a["sandbox.level.bwrap"] = 1   # set again: unchanged
    a["max"] = max(a["max"], 5.0)  # a maximum one lane raises
    b["runs"] += 1
    b["new"] += 4
    b["level"] = "landlock"        # a value one lane sets
    lanes._merge(target, snapshot, a)
    lanes._merge(target, snapshot, b)
    assert target == Counter({"runs": 6, "sandbox.level.bwrap": 1, "max": 5.0, "new": 4, "level": "landlock"})


def test_a_failing_lane_is_raised_once_every_lane_has_finished() -> None:
    finished = threading.Event()

    def slow(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        time.sleep(0.2)
        ctx.stats["slow"] += 1
        finished.set()
        return {"b": (1.0, None)}

    def failing(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        raise ValueError("boom")

    ctx = Context(stats=Counter())
    with pytest.raises(ValueError, match="boom"):
        lanes.Lanes([failing, slow], [("a",), ("b",)], ["a", "b"]).run({}, ctx)
    assert finished.is_set() and ctx.stats["slow"] == 1  # not left running, its counters kept

    def value(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        return {"a": (math.pi, None)}

    out = lanes.Lanes([value, slow], [("a",), ("b",)], ["b", "a"]).run({}, Context(stats=Counter()))
    assert list(out) == ["b", "a"] and out["a"] == (math.pi, None)


def test_the_lanes_run_at_the_same_time() -> None:
    # lane 0 finishes only once lane 1 has started: one after the other, it would wait for ever (here: 30 s, a failure)
    started = threading.Event()

    def first(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        return {"a": (1.0 if started.wait(30) else 0.0, None)}

    def second(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        started.set()
        return {"b": (2.0, None)}

    out = lanes.Lanes([first, second], [("a",), ("b",)], ["a", "b"]).run({}, Context(stats=Counter()))
    assert out == {"a": (1.0, None), "b": (2.0, None)}


def test_an_interrupt_in_the_calling_thread_is_raised_at_once() -> None:
    release = threading.Event()
    done = threading.Event()

    def interrupted(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    def other(I, ctx, step=0, trace=None, shared=None):  # type: ignore[no-untyped-def]
        release.wait(30)  # still running when the interrupt is raised: it is not waited for
        done.set()
        return {"b": (1.0, None)}

    with pytest.raises(KeyboardInterrupt):
        lanes.Lanes([interrupted, other], [("a",), ("b",)], ["a", "b"]).run({}, Context(stats=Counter()))
    assert not done.is_set()
    release.set()
    assert done.wait(30)


def test_what_two_lanes_read_is_computed_once_before_them() -> None:
    # `code` (a code block both components read) is in the shared part; each lane unpacks it
    prog = rewardlang.loads(HEAD + "component ok = tests_pass_rate(code, tests, entry_point)\n"
                                   "component q = quality_score(code)\n")
    plan = lanes.plan(prog.python_source, prog.module)
    assert plan is not None and plan.shared is not None

    def called(f) -> set[str]:  # type: ignore[no-untyped-def]
        return {getattr(prog.module, n).signature.name for n in f.__code__.co_names
                if hasattr(getattr(prog.module, n, None), "signature")}

    assert called(plan.shared) == {"code_block"}
    assert [called(f) for f in plan.functions] == [{"tests_pass_rate"}, {"quality_score"}]
    assert all("code" in f.__code__.co_varnames for f in plan.functions)  # each lane reads the shared value


def test_lanes_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLANG_COMPONENT_LANES", "0")
    assert not lanes.enabled()


def test_doctests() -> None:
    result = doctest.testmod(lanes)
    assert result.failed == 0 and result.attempted > 0
