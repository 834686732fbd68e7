"""The execution components through the plug-in API and through a compiled spec."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

import rewardlang
from rewardlang.runtime import registry
from rewardlang.runtime.api import Context
from rewardlang.runtime.components.execution import ExecParams, OutcomeParams

HE_TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
SQ = "def sq(x):\n    return x * x\n"
HALF = "def sq(x):\n    return 4\n"
BAD_SYNTAX = "def sq(x)\n    return x\n"
CRASH = "def sq(x):\n    return x / 0\n"
LOOP = "def sq(x):\n    while True:\n        pass\n"


def impl(name: str):  # noqa: ANN201 - a registered Implementation
    return registry.load_all()[name]


@pytest.fixture()
def ctx() -> Context:
    return Context(timeout=1.0)


def test_registered_signatures() -> None:
    sigs = registry.signatures()
    for name in ("tests_pass_rate", "tests_all_pass", "tests_results", "outcome", "outcome_label", "executes"):
        assert name in sigs
        assert registry.load_all()[name].in_workers is False
    assert sigs["tests_pass_rate"].range == (0.0, 1.0)
    assert sigs["outcome"].range == (-1.0, 1.0)
    assert str(sigs["tests_results"].returns) == "list[number]"
    assert sigs["tests_pass_rate"].usage().startswith("tests_pass_rate(code: code?, tests: any, entry_point: text?")


def test_pass_rate_all_pass_results(ctx: Context) -> None:
    codes = [SQ, HALF, BAD_SYNTAX, CRASH, None]
    tests = [HE_TESTS] * 5
    r = impl("tests_pass_rate").fn(codes, tests, ["sq"] * 5, params=None, ctx=ctx)
    assert list(r.values) == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert not any(r.infra) and not any(r.errors)
    assert r.details[1]["tests"] == ["pass", "fail"] and r.details[1]["outcome"] == "fail"
    a = impl("tests_all_pass").fn(codes, tests, "sq", params=None, ctx=ctx)  # a constant entry point
    assert list(a.values) == [True, False, False, False, False]
    res = impl("tests_results").fn(codes, tests, ["sq"] * 5, params=None, ctx=ctx)
    assert list(res.values) == [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_outcome_values_and_labels(ctx: Context) -> None:
    codes = [SQ, HALF, CRASH, BAD_SYNTAX, LOOP, "def sq(x):\n    return bytearray(1 << 36)\n",
             "def sq(x):\n    while True:\n        print('x' * 10000)\n"]
    tests = [HE_TESTS] * len(codes)
    label = impl("outcome_label").fn(codes, tests, ["sq"] * len(codes), params=ExecParams(memory_mb=128), ctx=ctx)
    assert list(label.values) == ["pass", "fail", "runtime_error", "compile_error", "timeout", "memory",
                                  "output_limit"]
    val = impl("outcome").fn(codes, tests, ["sq"] * len(codes), params=OutcomeParams(memory_mb=128), ctx=ctx)
    assert list(val.values) == [1.0, -0.3, -0.6, -1.0, -0.6, -0.6, -0.6]
    custom = OutcomeParams(timeout_value=-1.0, fail_value=0.0, memory_mb=128)
    val = impl("outcome").fn(codes[:5], tests[:5], ["sq"] * 5, params=custom, ctx=ctx)
    assert list(val.values) == [1.0, 0.0, -0.6, -1.0, -1.0]
    with pytest.raises(ValidationError):
        OutcomeParams(pass_value=2.0)


def test_formats(ctx: Context) -> None:
    stdio = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    calls = json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    codes = ["a, b = map(int, input().split())\nprint(a + b)\n", "print(3)\n",
             "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 3\n",
             "def add(a, b):\n    return a + b\n"]
    tests = [stdio, stdio, calls, calls, ["assert add(1, 1) == 2", "assert add(0, 5) == 5"]]
    r = impl("tests_pass_rate").fn(codes, tests, [None] * 5, params=None, ctx=ctx)
    assert list(r.values) == [1.0, 0.5, 1.0, 0.5, 1.0]
    named = impl("tests_pass_rate").fn(codes[:2], [stdio] * 2, None, params=ExecParams(format="stdio"), ctx=ctx)
    assert list(named.values) == [1.0, 0.5]


def test_bad_tests_are_per_sample_errors_not_infra(ctx: Context) -> None:
    r = impl("tests_pass_rate").fn([SQ, SQ, SQ], [HE_TESTS, "def check(:", None], ["sq", "sq", "sq"],
                                   params=None, ctx=ctx)
    assert r.values[0] == 1.0 and r.values[1] is None and r.values[2] is None
    assert r.errors[0] is None and "do not parse" in r.errors[1] and "no tests" in r.errors[2]
    assert list(r.infra) == [False, False, False]


def test_executes(ctx: Context) -> None:
    r = impl("executes").fn(["print('hi')", "import sys\nsys.exit(0)", "import sys\nsys.exit(2)", "1/0",
                             "def f(:", None, "exit()", "import os\nos._exit(0)"], params=None, ctx=ctx)
    assert list(r.values) == [True, True, False, False, False, False, True, True]


def test_stats_cache_and_level(ctx: Context) -> None:
    f = impl("tests_pass_rate")
    f.fn([SQ, SQ, HALF], [HE_TESTS] * 3, ["sq"] * 3, params=None, ctx=ctx)
    first = dict(ctx.stats)
    assert first["sandbox.batch_duplicates"] >= 1
    assert first["sandbox.isolation_level"] in (0, 1, 2, 3)
    assert sum(v for k, v in first.items() if k.startswith("sandbox.level.")) == 1
    f.fn([SQ], [HE_TESTS], ["sq"], params=None, ctx=ctx)
    assert ctx.stats["sandbox.cache_hits"] == first.get("sandbox.cache_hits", 0) + 1
    assert ctx.stats["sandbox.executions"] == first["sandbox.executions"]
    nocache = Context(timeout=1.0, use_cache=False)
    f.fn([SQ], [HE_TESTS], ["sq"], params=None, ctx=nocache)
    assert nocache.stats["sandbox.executions"] == 1 and nocache.stats["sandbox.cache_hits"] == 0


def test_component_timeout_is_cpu_time(ctx: Context) -> None:
    sleepy = "import time\ndef sq(x):\n    time.sleep(0.3)\n    return x * x\n"  # wall time, no CPU
    r = impl("outcome_label").fn([sleepy], [HE_TESTS], ["sq"], params=ExecParams(timeout=0.25), ctx=ctx)
    assert list(r.values) == ["pass"]
    r = impl("outcome_label").fn([sleepy], [HE_TESTS], ["sq"], params=ExecParams(timeout=0.1, wall_timeout=0.4),
                                 ctx=ctx)
    assert list(r.values) == ["timeout"]


def test_in_a_compiled_spec() -> None:
    prog = rewardlang.loads('''
input tests: text
input entry_point: text
component correct in [0, 1] = tests_pass_rate(code_block(completion, "python") or "", tests, entry_point)
component coderl in [-1, 1] = outcome(code_block(completion, "python") or "", tests, entry_point, timeout=2)
''')
    completions = [f"```python\n{SQ}```", f"```python\n{HALF}```", "no code block"]
    out = prog.score(completion=completions, tests=[HE_TESTS] * 3, entry_point=["sq"] * 3)
    assert out.components["correct"].tolist() == [1.0, 0.5, 0.0]
    assert out.components["coderl"].tolist() == [1.0, -0.3, -1.0]
