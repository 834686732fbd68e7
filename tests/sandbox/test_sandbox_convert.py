"""Test conversion: asserts become (probe, judge) pairs; what cannot be converted runs inside, flagged."""

from __future__ import annotations

import ast
import json

import pytest

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.sandbox.convert import TestFormatError, detect_format, make_plan
from rewardlang.sandbox.safe_eval import SafeEvalError, safe_eval


def _judges(plan: object) -> list[str]:
    return [ast.unparse(t.judge) if t.judge is not None else "" for t in plan.tests]  # type: ignore[attr-defined]


def test_humaneval_asserts_become_probes_without_expected_values() -> None:
    plan = make_plan("def check(candidate):\n    assert candidate([1, 2], 3) == [4, 5], 'msg'\n"
                     "    assert abs(candidate([], 0.5) - 0.25) < 1e-6\n", "f")
    assert plan.format == "humaneval" and plan.mode == "call" and plan.entry == "f"
    assert [p["e"] for p in plan.probes] == ["(candidate([1, 2], 3),)", "(candidate([], 0.5),)"]
    assert _judges(plan) == ["__rl_v0 == [4, 5]", "abs(__rl_v0 - 0.25) < 1e-06"]
    wire = json.dumps(plan.wire())
    assert "[4, 5]" not in wire and "0.25" not in wire
    assert plan.n_inside == 0


def test_two_calls_in_one_assert() -> None:
    plan = make_plan("def check(c):\n    assert c(1) == c(2)\n", "f")
    assert plan.param == "c"
    assert plan.probes[0]["e"] == "(c(1), c(2),)"
    assert _judges(plan) == ["__rl_v0 == __rl_v1"]


def test_loops_and_locals_run_inside_and_are_flagged() -> None:
    code = ("import random\n\ndef check(candidate):\n    assert candidate(0) == 0\n"
            "    for i in range(3):\n        x = i * 2\n        assert candidate(i) == x\n"
            "    y = 5\n    assert candidate(y) == 10\n")
    plan = make_plan(code, "double")
    kinds = [t.kind for t in plan.tests]
    assert kinds == ["probe", "inside"]
    assert "import random" in plan.setup
    inside = plan.inside[0]
    assert inside.startswith("def __rl_test(candidate, __rl_eq):")
    assert "__rl_eq(candidate(i), x)" in inside and "__rl_eq(candidate(y), 10)" in inside
    assert plan.notes and "local name 'y'" in plan.notes[-1]


def test_trivial_and_non_candidate_statements() -> None:
    plan = make_plan("def check(candidate):\n    '''doc'''\n    assert True, 'always'\n    print('hi')\n"
                     "    assert candidate('a') == 'b'\n", "f")
    assert [t.kind for t in plan.tests] == ["probe"]  # print alone is no test


def test_conditional_calls_are_not_split() -> None:
    plan = make_plan("def check(candidate):\n    assert candidate(1) or candidate(2)\n", "f")
    assert [t.kind for t in plan.tests] == ["inside"]


def test_helper_functions_in_the_comparison_stay_inside() -> None:
    plan = make_plan("def check(candidate):\n    assert poly(candidate(1)) == 0\n", "f")
    assert [t.kind for t in plan.tests] == ["inside"]
    assert "uses the name 'poly'" in plan.notes[0]


def test_mbpp_calls_by_name() -> None:
    plan = make_plan(["assert similar((3, 4), (5, 4)) == (4,)",
                      "import math\nassert math.isclose(area(2), 12.56, rel_tol=0.01)",
                      "assert set(similar((1,), (1,))) == {1}"])
    assert plan.format == "mbpp"
    assert [p["e"] for p in plan.probes] == ["(similar((3, 4), (5, 4)),)", "(area(2),)", "(similar((1,), (1,)),)"]
    assert _judges(plan)[1] == "math.isclose(__rl_v0, 12.56, rel_tol=0.01)"
    assert "import math" in plan.setup


def test_mbpp_entry_point_even_when_named_like_a_builtin() -> None:
    plan = make_plan(["assert sum([1, 2]) == 3"], "sum", "mbpp")
    assert plan.probes[0]["e"] == "(sum([1, 2]),)"


def test_stdio_and_calls_formats() -> None:
    s = make_plan(json.dumps({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]}))
    assert s.mode == "stdio" and s.inputs == ("1 2\n", "3\n4")
    assert [t.expected for t in s.tests] == ["3\n", "7"]
    c = make_plan(json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]}))
    assert c.format == "calls" and c.entry == "add" and c.probes == ({"a": [1, 2]}, {"a": [3, 4]})
    c2 = make_plan(json.dumps([{"input": [1], "output": 2}]), "g", "calls")
    assert c2.entry == "g" and c2.tests[0].expected == 2


def test_detect_format() -> None:
    assert detect_format(["assert f(1) == 1"], None) == "mbpp"
    assert detect_format("def check(candidate):\n    pass", "f") == "humaneval"
    assert detect_format('{"inputs": ["1"], "outputs": ["1"]}', None) == "stdio"
    assert detect_format('{"fn_name": "f", "inputs": [[1]], "outputs": [1]}', None) == "calls"
    assert detect_format("assert f(1) == 2", None) == "mbpp"


@pytest.mark.parametrize("tests,entry,fmt,match", [
    ("def check(candidate):\n    assert candidate(1) == 1", None, "humaneval", "entry_point"),
    ("def check(a, b):\n    pass", "f", "humaneval", "exactly one argument"),
    ("def check(candidate):\n    pass", "f", "humaneval", "no test"),
    ("def check(:", "f", "humaneval", "do not parse"),
    ('{"inputs": [1, 2], "outputs": [1]}', None, "stdio", "different numbers"),
    ('{"inputs": [[1]], "outputs": [1]}', None, "calls", "function name"),
    ("x = 1", None, "mbpp", "no assert"),
    ("{", None, "stdio", "not valid JSON"),
])
def test_bad_test_suites_raise(tests: str, entry: str | None, fmt: str, match: str) -> None:
    with pytest.raises(TestFormatError, match=match):
        make_plan(tests, entry, fmt)


def test_humaneval_conversion_covers_most_tests() -> None:
    rows = load_humaneval()
    probes = inside = 0
    for r in rows:
        plan = make_plan(r["tests"], r["entry_point"], "humaneval")
        probes += sum(t.kind == "probe" for t in plan.tests)
        inside += plan.n_inside
        for probe in plan.probes:  # a probe is a tuple of calls of the candidate, nothing else
            tup = ast.parse(probe["e"], mode="eval").body
            assert isinstance(tup, ast.Tuple)
            assert all(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == plan.param
                       for c in tup.elts)
    assert probes > 1000
    assert inside <= 10  # only the loop/random-based checks (e.g. HumanEval/32, 38, 50, 53)


def test_safe_eval_bounds_and_refusals() -> None:
    e = ast.parse("__rl_v0 ** 10", mode="eval")
    assert safe_eval(e, {"__rl_v0": 2}) == 1024
    with pytest.raises(SafeEvalError):
        safe_eval(ast.parse("2 ** __rl_v0", mode="eval"), {"__rl_v0": 10**9})
    with pytest.raises(SafeEvalError):
        safe_eval(ast.parse("'ab' * __rl_v0", mode="eval"), {"__rl_v0": 10**9})
    with pytest.raises(SafeEvalError):
        safe_eval(ast.parse("list(range(__rl_v0))", mode="eval"), {"__rl_v0": 10**12})
    with pytest.raises(SafeEvalError):
        safe_eval(ast.parse("__rl_v0.__class__", mode="eval"), {"__rl_v0": 1})
    with pytest.raises(SafeEvalError):
        safe_eval(ast.parse("open('/etc/passwd')", mode="eval"), {})
    assert safe_eval(ast.parse("math.isclose(__rl_v0, 0.1 + 0.2)", mode="eval"), {"__rl_v0": 0.3}) is True
    assert safe_eval(ast.parse("sorted(__rl_v0.keys()) == ['a']", mode="eval"), {"__rl_v0": {"a": 1}}) is True
    assert safe_eval(ast.parse("type(__rl_v0) == int", mode="eval"), {"__rl_v0": True}) is False


@pytest.mark.parametrize("fmt", ["auto", "stdio", "calls"])
def test_tests_nested_past_the_json_parsers_depth_are_a_format_error(fmt: str) -> None:
    # json raises RecursionError, not ValueError, past its depth: one such row ended `prm-data` with a traceback
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(TestFormatError):
        make_plan(deep, "f", fmt)
