"""The robot simulator's semantics, the trusted replay and the task set (in-process: trusted programs only)."""

from __future__ import annotations

import json
import random

import pytest

from rewardlang.domains.robot import simulator as sim
from rewardlang.domains.robot.data import API_DOC, rows
from rewardlang.domains.robot.inside import prepare_program, run_in_process
from rewardlang.domains.robot.outcome import judge_claim, worst
from rewardlang.domains.robot.tasks import FAMILIES, all_tasks, get_task, task_from_spec

WORLD = {"rooms": ["kitchen", "office", "lobby"], "start": "office",
         "objects": {"kitchen": ["apple", "apple"], "office": ["pen"], "lobby": []},
         "people": {"alice": {"room": "kitchen", "likes": ["coffee", "yes"]}, "bob": {"room": "lobby", "likes": []}},
         "seed": 3}


def robot() -> sim.Robot:
    return sim.Robot(WORLD)


def test_queries_and_moves() -> None:
    r = robot()
    assert r.call("get_current_location", ()) == "office"
    assert r.call("get_all_rooms", ()) == ["kitchen", "office", "lobby"]
    assert r.call("is_in_room", ("pen",)) is True
    assert r.call("is_in_room", ("apple",)) is False
    assert r.call("is_in_room", ("person",)) is False
    r.call("go_to", ("Kitchen ",))  # names compare case-insensitively after stripping
    assert r.call("is_in_room", ("apple",)) is True
    assert r.call("is_in_room", ("Alice",)) is True
    assert r.call("is_in_room", ("person",)) is True
    r.call("pick", ("apple",))
    r.call("go_to", ("lobby",))
    r.call("place", ("apple",))
    assert r.state() == {"location": "lobby", "holding": None,
                         "objects": {"kitchen": ["apple"], "office": ["pen"], "lobby": ["apple"]},
                         "people": {"alice": "kitchen", "bob": "lobby"}}
    assert [e[0] for e in r.trace] == ["get_current_location", "get_all_rooms", "is_in_room", "is_in_room",
                                      "is_in_room", "go_to", "is_in_room", "is_in_room", "is_in_room", "pick",
                                      "go_to", "place"]


@pytest.mark.parametrize("calls, message", [
    ([("go_to", ("moon",))], "no room called 'moon'"),
    ([("pick", ("apple",))], "no 'apple' in the office"),
    ([("pick", ("pen",)), ("go_to", ("kitchen",)), ("pick", ("apple",))], "already holding 'pen'"),
    ([("place", ("pen",))], "holds nothing"),
    ([("pick", ("pen",)), ("place", ("apple",))], "holds 'pen'"),
    ([("ask", ("alice", "tea?", ["yes", "no"]))], "'alice' is not in the office"),
    ([("ask", ("zoe", "tea?", ["yes", "no"]))], "nobody called 'zoe'"),
    ([("ask", ("alice", "tea?", []))], "options must be"),
    ([("go_to", ("kitchen",)), ("ask", ("alice", "tea?", ["yes", ""]))], "options must not be empty"),
    ([("go_to", ("kitchen",)), ("ask", ("alice", "tea?", "yes"))], "options must be"),
    ([("is_in_room", ("kitchen",))], "is a room"),
    ([("go_to", ("kitchen",)), ("pick", ("alice",))], "cannot pick up a person"),
    ([("go_to", (3,))], "must be a string"),
    ([("say", (None,))], "must be a string"),
    ([("pick", ("",))], "must not be empty"),
])
def test_infeasible_actions_raise_and_are_the_last_trace_entry(calls: list, message: str) -> None:
    r = robot()
    with pytest.raises(sim.SimulationError, match=message):
        for name, args in calls:
            r.call(name, args)
    assert len(r.trace) == len(calls) and r.trace[-1][0] == calls[-1][0]


def test_answers_follow_likes_then_a_fixed_hash() -> None:
    r = robot()
    r.call("go_to", ("kitchen",))
    assert r.call("ask", ("alice", "Tea or coffee?", ["Tea", "A cup of Coffee"])) == "A cup of Coffee"
    assert r.call("ask", ("alice", "Free?", ["no", "yes"])) == "yes"
    first = r.call("ask", ("alice", "Which colour?", ["red", "green", "blue"]))
    # the same in another robot (another process would agree too: FNV, not hash())
    r2 = robot()
    r2.call("go_to", ("kitchen",))
    assert r2.call("ask", ("alice", "which colour? ", ["RED", "Green", "blue"])).lower() == first
    assert sim.fnv("abc") == 0xE71FA2190541574B  # FNV-1a 64 of b"abc"


def test_action_limit() -> None:
    r = robot()
    with pytest.raises(sim.ActionLimit):
        for _ in range(sim.MAX_ACTIONS + 1):
            r.call("say", ("hi",))
    assert len(r.trace) == sim.MAX_ACTIONS + 1


def test_replay_recomputes_results_and_rejects_forged_entries() -> None:
    r = robot()
    r.call("go_to", ("kitchen",))
    r.call("pick", ("apple",))
    rep = sim.replay(WORLD, list(r.trace))
    assert rep.error is None and rep.forged is None and rep.final == r.state()
    assert [(e.name, e.location, e.holding) for e in rep.events] == [("go_to", "office", None),
                                                                     ("pick", "kitchen", None)]
    assert sim.replay(WORLD, [("go_to", "kitchen", "extra")]).forged
    assert sim.replay(WORLD, [("fly", "kitchen")]).forged
    assert sim.replay(WORLD, [["go_to", "kitchen"]]).forged
    assert sim.replay(WORLD, [("ask", "alice", "q", ("a", 3))]).forged
    bad = sim.replay(WORLD, [("go_to", "kitchen"), ("pick", "pen")])
    assert bad.error == "there is no 'pen' in the kitchen" and bad.final["location"] == "kitchen"


def check_said_hi(world: dict, rep: sim.Replay) -> tuple[bool, str]:
    return (any(e.name == "say" and e.args[0] == "hi" for e in rep.events), "no hi")


def test_claims_can_only_make_the_outcome_worse() -> None:
    ok_trace = [("say", "hi")]
    assert judge_claim(WORLD, (ok_trace, "ok", ""), check_said_hi).label == "success"
    assert judge_claim(WORLD, (ok_trace, "python_error", "NameError"), check_said_hi).label == "python_error"
    assert judge_claim(WORLD, (ok_trace, "simulation_error", "x"), check_said_hi).label == "simulation_error"
    # an infeasible action claimed as fine is still a simulation error
    assert judge_claim(WORLD, ([("pick", "apple"), ("say", "hi")], "ok", ""), check_said_hi).label == \
        "simulation_error"
    assert judge_claim(WORLD, ([], "ok", ""), check_said_hi).label == "completion_error"
    for forged in ("success", ([], "success", ""), [ok_trace, "ok", ""], (ok_trace, "ok"), ([("x",)], "ok", "")):
        assert judge_claim(WORLD, forged, check_said_hi).label == "python_error"
    assert judge_claim(WORLD, ([("say", "hi")] * (sim.MAX_ACTIONS + 1), "ok", ""), check_said_hi).label == \
        "python_error"
    assert worst(["success", "completion_error"]) == "completion_error"


def test_in_process_runner_classes() -> None:
    ok = run_in_process('def task_program():\n    go_to("kitchen")\n    say("hi")\n', WORLD)
    assert ok == ([("go_to", "kitchen"), ("say", "hi")], "ok", "")
    assert run_in_process('def task_program():\n    go_to("moon")\n', WORLD)[1:] == \
        ("simulation_error", "line 2: there is no room called 'moon'")  # the program's raising line first
    assert run_in_process("def task_program():\n    undefined_name()\n", WORLD)[1].startswith("python_error")
    assert run_in_process("x = 1\n", WORLD)[1] == "python_error"  # no task_program
    # the program's own helper names survive the set-up code (the simulator's names stay in a function scope)
    assert run_in_process('def norm(x):\n    return "office"\nRobot = 1\n'
                          'def task_program():\n    go_to(norm("k"))\n    say(str(Robot))\n', WORLD)[1] == "ok"


def test_prepare_program_removes_top_level_entry_calls_keeping_lines() -> None:
    src = 'def task_program():\n    say("hi")\n\ntask_program()\nprint(1)\n'
    out = prepare_program(src)
    assert out == 'def task_program():\n    say("hi")\n\npass\nprint(1)\n'
    assert prepare_program("def task_program(:\n") == "def task_program(:\n"
    assert run_in_process(src, WORLD)[:2] == ([("say", "hi")], "ok")


def test_task_set_size_ids_and_splits() -> None:
    tasks = all_tasks()
    assert len(tasks) >= 60
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.instruction for t in tasks}) == len(tasks)
    assert {t.split for t in tasks} == {"train", "heldout"}
    assert sum(t.split == "train" for t in tasks) >= 60
    for f in FAMILIES:  # every family has a held-out instance
        assert any(t.family is f and t.split == "heldout" for t in tasks)
    assert get_task("robot/fetch/apple-kitchen").instruction == "Find the apple and bring it to the kitchen."


def outcome(task, code: str, seed: int) -> str:
    world = task.world(seed)
    return judge_claim(world, run_in_process(code, world), task.check).label


@pytest.mark.parametrize("task", all_tasks(), ids=lambda t: t.task_id)
def test_canonical_passes_on_5_random_worlds_and_mutants_fail(task) -> None:
    rng = random.Random(task.task_id)
    for seed in [rng.randrange(10**9) for _ in range(5)] + list(task.seeds):
        assert outcome(task, task.canonical, seed) == "success", seed
    mutants = task.mutants()
    assert len(mutants) >= 2
    for name, code in mutants.items():
        labels = [outcome(task, code, s) for s in task.seeds]
        assert worst(labels) != "success", name


def test_worlds_are_deterministic_and_vary() -> None:
    t = get_task("robot/fetch/apple-kitchen")
    assert t.world(5) == t.world(5)
    assert len({json.dumps(t.world(s), sort_keys=True) for s in t.seeds}) == 5


def test_task_from_spec_round_trip_and_errors() -> None:
    t = get_task("robot/relay/alice-bob")
    again = task_from_spec(json.dumps(t.spec()))
    assert again.task_id == t.task_id and again.params == t.params and again.seeds == t.seeds
    assert again.world(again.seeds[0]) == t.world(t.seeds[0])
    assert task_from_spec({"task_id": t.task_id}).seeds == t.seeds
    for bad in ("[1]", {"family": "nope"}, {"family": "fetch", "params": {"obj": 1}},
                {"family": "fetch", "params": {"obj": "a", "dest": "b"}, "seeds": ["x"]}):
        with pytest.raises(ValueError):
            task_from_spec(bad)


def test_rows() -> None:
    data = rows()
    assert len(data) == len(all_tasks())
    assert all(r["prompt"] == API_DOC + r["instruction"] + "\n" for r in data)
    assert len(rows("heldout")) + len(rows("train")) == len(data)
    assert json.loads(data[0]["task"])["family"] == "go_say"


def test_data_command_writes_rows(tmp_path) -> None:
    from typer.testing import CliRunner

    from rewardlang.cli import app

    out = tmp_path / "robot.jsonl"
    r = CliRunner().invoke(app, ["data", "robot", "-o", str(out), "--split", "heldout"])
    assert r.exit_code == 0, r.output
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [g["task_id"] for g in got] == [t.task_id for t in all_tasks() if t.split == "heldout"]
    assert all(g["split"] == "heldout" and task_from_spec(g["task"]).task_id == g["task_id"] for g in got)
    bad = CliRunner().invoke(app, ["data", "nope", "-o", str(tmp_path / "x.jsonl")])
    assert bad.exit_code == 1 and not (tmp_path / "x.jsonl").exists()
    bad = CliRunner().invoke(app, ["data", "robot", "-o", str(tmp_path / "y.jsonl"), "--split", "dev"])
    assert bad.exit_code == 1 and not (tmp_path / "y.jsonl").exists()


def test_toy_family_is_outside_the_task_set_but_readable() -> None:
    from rewardlang.domains.robot.tasks import TOY_FAMILIES

    assert all(t.family not in TOY_FAMILIES for t in all_tasks())
    toy = task_from_spec({"family": "say_number", "params": {}, "seeds": [1, 2, 3]})
    assert toy.task_id == "robot/say_number" and toy.instruction == "Say a number."
    for s in toy.seeds:
        assert outcome(toy, toy.canonical, s) == "success"
        assert outcome(toy, 'def task_program():\n    say("""r2d2""")\n', s) == "success"
        for code in toy.mutants().values():
            assert outcome(toy, code, s) == "completion_error"
