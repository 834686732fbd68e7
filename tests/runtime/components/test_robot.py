"""Robot components through the sandbox: outcome classes, pass rates, caching, and programs that try to raise
their own outcome (patching the API, forging the trace or the result channel, tampering with the sandbox's
copy of the world, reading the checker)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from rewardlang.domains.robot.tasks import FAMILIES, all_tasks, get_task
from rewardlang.runtime.api import Context
from rewardlang.runtime.components.robot import (
    robot_outcome,
    robot_outcome_label,
    robot_pass_rate,
)

FETCH = get_task("robot/fetch/apple-kitchen")
SAY = get_task("robot/go_say/kitchen")


def label(code: str | None, task=FETCH, **params) -> tuple[str, dict]:
    from rewardlang.runtime.components.robot import RobotParams

    r = robot_outcome_label.fn([code], [json.dumps(task.spec())], params=RobotParams(**params) if params else None,
                               ctx=Context(use_cache=False))
    assert r.infra == [False], r.errors
    return r.values[0], r.details[0]


def prog(body: str) -> str:
    return textwrap.dedent(body).lstrip("\n")


def test_outcome_classes_and_values() -> None:
    codes = [FETCH.canonical, FETCH.mutants()["wrong_place"], FETCH.mutants()["no_look"],
             "def task_program(:\n", "def task_program():\n    go_to(undefined)\n", None]
    tasks = [FETCH.spec()] * len(codes)
    ctx = Context(use_cache=False)
    labels = robot_outcome_label.fn(codes, tasks, params=None, ctx=ctx).values
    assert labels == ["success", "completion_error", "simulation_error", "python_error", "python_error",
                      "python_error"]
    assert robot_outcome.fn(codes, tasks, params=None, ctx=Context()).values == [1.0, -0.3, -0.6, -1.0, -1.0, -1.0]
    rates = robot_pass_rate.fn(codes, tasks, params=None, ctx=Context()).values
    assert rates[0] == 1.0 and rates[1:] == [0.0] * 5
    assert ctx.stats["robot.runs"] == 25 and ctx.stats["sandbox.infra_failures"] == 0


def test_pass_rate_counts_worlds_and_label_is_the_worst() -> None:
    # "always report there is none" is right exactly in the worlds without the apple in the kitchen
    cond = get_task("robot/conditional_fetch/apple-kitchen-office")
    code = cond.mutants()["always_report"]
    absent = [("apple" not in cond.world(s)["objects"]["kitchen"]) for s in cond.seeds]
    assert 0 < sum(absent) < 5
    r = robot_pass_rate.fn([code], [cond.spec()], params=None, ctx=Context())
    assert r.values == [sum(absent) / 5]
    assert r.details[0]["labels"] == ["success" if a else "completion_error" for a in absent]
    assert label(code, cond)[0] == "completion_error"


def test_runs_option_and_timeouts_count_as_failures() -> None:
    from rewardlang.runtime.components.robot import RobotParams

    r = robot_pass_rate.fn([SAY.canonical], [SAY.spec()], params=RobotParams(runs=8), ctx=Context())
    assert r.values == [1.0] and r.details[0]["runs"] == 8
    lab, det = label("def task_program():\n    while True:\n        pass\n", SAY, timeout=0.5)
    assert lab == "python_error" and det["errors"] == ["timeout"] * 3
    lab, det = label("def task_program():\n    while True:\n        say('hi')\n", SAY)
    assert lab == "python_error" and "1000 robot actions" in det["errors"][0]
    # a trace past the result cap (128 KiB by default): what the trusted side reads stays bounded
    lab, det = label("def task_program():\n    for _ in range(200):\n        say('x' * 1500)\n", SAY)
    assert lab == "python_error" and det["errors"][0] == "output limit exceeded"


def test_top_level_entry_call_is_harmless() -> None:
    assert label(SAY.canonical + "\ntask_program()\n", SAY)[0] == "success"


def test_patching_the_api_does_not_help() -> None:
    # a "pick" that always works inside: the trace no longer holds the pick, the replay finds empty hands
    patched = prog('''
        def task_program():
            global pick, place
            pick = lambda obj: None
            place = lambda obj: None
            go_to("kitchen")
            pick("apple")
            place("apple")
    ''')
    assert label(patched)[0] in ("completion_error", "simulation_error")
    # catching the simulator's error and carrying on: the replay still fails at that action
    caught = prog('''
        def task_program():
            try:
                pick("apple")
            except Exception:
                pass
            for room in get_all_rooms():
                go_to(room)
                if is_in_room("apple"):
                    pick("apple")
                    break
            go_to("kitchen")
            place("apple")
    ''')
    assert label(caught)[0] == "simulation_error"


def test_tampering_with_the_sandbox_world_does_not_help() -> None:
    # put an apple in every room of the sandbox's copy: the program picks where the trusted world has none
    tamper = prog('''
        import gc
        def task_program():
            for o in gc.get_objects():
                if type(o).__name__ == "Robot":
                    for room in o.objects:
                        o.objects[room].append("apple")
            go_to(get_all_rooms()[0])
            if is_in_room("apple"):
                pick("apple")
            go_to("kitchen")
            place("apple")
    ''')
    assert label(tamper)[0] == "simulation_error"


def test_forging_the_trace_or_the_channel_does_not_help() -> None:
    # rewrite the recorded trace to claim a perfect run (without knowing where the apple is)
    rewrite = prog('''
        import gc
        def task_program():
            go_to("kitchen")
            for o in gc.get_objects():
                if type(o).__name__ == "Robot":
                    o.trace[:] = [("go_to", "office"), ("pick", "apple"), ("go_to", "kitchen"), ("place", "apple")]
    ''')
    assert label(rewrite)[0] in ("simulation_error", "completion_error")
    # forge the result record on the observation pipe, claiming success with a trace that says nothing
    forge = prog('''
        import json, os, struct
        def task_program():
            rec = json.dumps(["t", 0, "ok", ["t", [["l", []], ["s", "ok"], ["s", ""]]]]).encode()
            os.write(3, struct.pack("<I", len(rec)) + rec)
            os._exit(0)
    ''')
    assert label(forge, SAY)[0] == "completion_error"
    # forge an entry the recorder never writes: python_error
    forge_bad = forge.replace('["l", []]', '["l", [["t", [["s", "teleport"], ["s", "kitchen"]]]]]')
    assert label(forge_bad, SAY)[0] == "python_error"
    # forge a feasible claim: it earns what an honest program doing those actions earns, no more
    forge_ok = forge.replace('["l", []]', '["l", [["t", [["s", "go_to"], ["s", "kitchen"]]], '
                                          '["t", [["s", "say"], ["s", "Lunch is ready"]]]]]')
    assert label(forge_ok, SAY)[0] == "success"
    assert label(SAY.canonical, SAY)[0] == "success"


def test_the_checker_and_generator_are_not_in_the_sandbox() -> None:
    peek = prog('''
        def task_program():
            import rewardlang.domains.robot.tasks
    ''')
    assert label(peek)[0] == "python_error"
    noisy = prog('''
        def task_program():
            print("success " * 1000)
            go_to("kitchen")
    ''')
    assert label(noisy)[0] == "completion_error"


def test_a_bad_task_is_an_error_not_a_mask() -> None:
    r = robot_outcome_label.fn(["def task_program():\n    pass\n"], ['{"family": "nope"}'], params=None,
                               ctx=Context())
    assert r.values == [None] and r.infra == [False] and "unknown robot task family" in r.errors[0]


def test_cache_and_batch_duplicates() -> None:
    ctx = Context()
    codes = [SAY.canonical] * 3
    robot_pass_rate.fn(codes, [SAY.spec()] * 3, params=None, ctx=ctx)
    assert ctx.stats["robot.runs"] == 5 and ctx.stats["sandbox.batch_duplicates"] == 10
    robot_pass_rate.fn(codes[:1], [SAY.spec()], params=None, ctx=ctx)
    assert ctx.stats["sandbox.cache_hits"] == 5
    # the same program and worlds judged by another task's checker is another verdict
    other = json.dumps({"family": "go_say", "params": {"room": "kitchen", "msg": "Dinner is ready"},
                        "seeds": list(SAY.seeds)})
    assert robot_pass_rate.fn(codes[:1], [other], params=None, ctx=ctx).values == [0.0]


def test_one_task_per_family_canonical_and_mutants_in_the_sandbox() -> None:
    picked = [next(t for t in all_tasks() if t.family is f) for f in FAMILIES]
    codes, tasks, expect = [], [], []
    for t in picked:
        codes.append(t.canonical)
        tasks.append(t.spec())
        expect.append(True)
        for m in t.mutants().values():
            codes.append(m)
            tasks.append(t.spec())
            expect.append(False)
    r = robot_outcome_label.fn(codes, tasks, params=None, ctx=Context(use_cache=False))
    assert [v == "success" for v in r.values] == expect
    assert set(Counter(r.values)) == {"success", "completion_error", "simulation_error"}


@pytest.mark.slow
def test_every_task_canonical_and_mutants_in_the_sandbox() -> None:
    codes, tasks, expect = [], [], []
    for t in all_tasks():
        for code, ok in [(t.canonical, True)] + [(m, False) for m in t.mutants().values()]:
            codes.append(code)
            tasks.append(t.spec())
            expect.append(ok)
    r = robot_outcome_label.fn(codes, tasks, params=None, ctx=Context(use_cache=False))
    assert [v == "success" for v in r.values] == expect


def test_the_robot_spec_maps_the_simulator_reward_as_the_authors() -> None:
    """specs/dense_ppo_robot.reward: passed/5 on the code tokens when a world passes, else -0.1 on every response
    token (the authors' robot reward) unless a simulation error names its statement, weights 0.1 / 0.1 / 0.8 /
    0.8 / 0.8."""
    import rewardlang

    prog = rewardlang.load("specs/dense_ppo_robot.reward")
    task = json.dumps(SAY.spec())
    good = "Sure:\n```python\n" + SAY.canonical + "```"
    bad = "Sure:\n```python\ndef task_program():\n    go_to(undefined_room)\n```"  # a python error
    res = prog.score([good, bad], task=[task, task])
    assert res.components["simulation"].tolist() == [1.0, 0.0]
    assert res.components["simulation_fail"].tolist() == [0.0, -0.1]
    assert res.components["simulation_error"].tolist() == [0.0, 0.0]
    assert res.weights == {"lint": 0.1, "syntax": 0.1, "simulation": 0.8, "simulation_fail": 0.8,
                           "simulation_error": 0.8}
    code_start = good.index("def task_program")
    (a, b, v), = res.attribution["simulation"][0].ranges
    assert (a, v) == (code_start, 1.0) and good[a:b] == SAY.canonical.rstrip("\n")  # the block, no final newline
    (a, b, v), = res.attribution["simulation_fail"][1].ranges
    assert (a, b, v) == (0, len(bad), -0.1)
    assert res.attribution["simulation_fail"][0].ranges == ((0, len(good), 0.0),)
    assert res.attribution["simulation_error"][1].ranges == ()


THIRD = """\
Here:
```python
def task_program():
    go_to("kitchen")
    say("on my way")
    pick("unicorn")
    say("done")
```"""


def test_the_statement_that_raised_a_simulation_error_gets_the_penalty() -> None:
    """The program's 3rd statement raises (no unicorn anywhere): the -0.1 lands on that statement's tokens only,
    in every world; no other token gets a simulation value."""
    import torch

    import rewardlang
    from rewardlang.trainers.dense import DenseRewards
    from rewardlang.trainers.model import build_tokenizer

    prog = rewardlang.load("specs/dense_ppo_robot.reward")
    task = json.dumps(SAY.spec())
    res = prog.score([THIRD], task=[task])
    code = THIRD.split("```python\n")[1].split("```")[0]
    assert label(code, SAY)[1]["labels"] == ["simulation_error"] * 5
    assert res.components["simulation_fail"].tolist() == [0.0]
    assert res.components["simulation_error"].tolist() == [-0.1]
    stmt = THIRD.index('pick("unicorn")')
    assert res.attribution["simulation_error"][0].ranges == ((stmt, stmt + len('pick("unicorn")'), -0.1),)

    tok = build_tokenizer()
    ids = tok(THIRD)["input_ids"] + [tok.eos_token_id]
    out = DenseRewards(prog, tok)(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), {"task": [task]})
    ends, pos = [], 0
    for k in range(len(ids)):  # each token's end in the text (this tokenizer's pieces are whole characters)
        pos += len(tok.decode([ids[k]], skip_special_tokens=True))
        ends.append(pos)
    starts = [0] + ends[:-1]
    on_stmt = [a < stmt + len('pick("unicorn")') and e > stmt for a, e in zip(starts, ends)]
    assert any(on_stmt) and not all(on_stmt)
    sim_error = out.components["simulation_error"][0].tolist()
    assert sim_error == pytest.approx([-0.1 if hit else 0.0 for hit in on_stmt])
    assert not out.components["simulation_fail"].any() and not out.components["simulation"].any()
    # the total is syntax and lint plus 0.8 x the statement's penalty
    want = (0.1 * out.components["syntax"] + 0.1 * out.components["lint"] + 0.8 * out.components["simulation_error"])
    assert torch.allclose(out.rewards, want)


def test_error_spans_follow_the_raising_line_and_a_forged_line_falls_back() -> None:
    from rewardlang.runtime.components.robot import (
        RobotSpanParams,
        robot_error_spans,
        statement_span,
    )

    task = json.dumps(SAY.spec())
    nested = prog("""
        def task_program():
            for room in get_all_rooms():
                if room == "kitchen":
                    go_to("moon")
        """)
    # a compound statement's header holds no error here: the innermost statement, the go_to, is blamed
    forged = prog("""
        def task_program():
            go_to("kitchen")
            raise_it = go_to
            try:
                raise_it("moon")
            except Exception as e:
                e.__traceback__ = None
                raise e
        """)
    # a line no statement holds: code compiled under the program's file name, 500 lines down
    nowhere = prog("""
        def task_program():
            exec(compile("\\n" * 500 + "go_to('moon')", "solution.py", "exec"), globals())
        """)
    r = robot_error_spans.fn([nested, forged, None, "def task_program(:\n", nowhere], [task] * 5,
                             params=RobotSpanParams(), ctx=Context(use_cache=False))
    assert r.infra == [False] * 5
    (span,) = r.values[0]
    assert nested[span.start:span.end] == 'go_to("moon")' and span.value == -1.0
    assert "moon" in span.label
    # the re-raise from another line: the traceback's deepest program frame is still the raising call
    (span,) = r.values[1]
    assert forged[span.start:span.end] in ('raise_it("moon")', "raise e")
    assert r.values[2] == [] and r.values[3] == []
    # no span, so the spec keeps the penalty on every token: the forged line cannot make it vanish
    assert r.values[4] == [] and "moon" in r.details[4]["errors"][0]
    import rewardlang

    spec = rewardlang.load("specs/dense_ppo_robot.reward")
    res = spec.score([f"```python\n{nowhere}```"], task=[task])
    assert res.components["simulation_fail"].tolist() == [-0.1] and res.components["simulation_error"].tolist() == [0.0]
    assert statement_span(nested, 0) is None and statement_span("x = (", 1) is None
