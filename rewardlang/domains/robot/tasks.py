"""Robot tasks: instructions with a seeded world generator, a checker and a canonical program (written here).

A task is an instance of a *family* with parameters (``fetch`` with ``obj="apple", dest="kitchen"``). The
family gives the instruction text, ``generate(rng, params) -> world``, ``check(world, replay, params) ->
(ok, why)`` over the trusted replay of the trace and its final state, the canonical program, and mutants (wrong
programs each test must reject). Instructions are fixed per task; the worlds vary the rooms, the start, where
objects and people are, and what people answer, so a program must read the world through the API.

The last instance of every family is held out (``split == "heldout"``); the rest are ``train``.

    >>> t = get_task("robot/fetch/apple-kitchen")
    >>> t.instruction
    'Find the apple and bring it to the kitchen.'
    >>> w = t.world(3)
    >>> w["start"] in w["rooms"] and "kitchen" in w["rooms"]
    True
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rewardlang.domains.robot.simulator import Replay, contains_words, fnv, norm, words

__all__ = ["Family", "Task", "FAMILIES", "TOY_FAMILIES", "all_tasks", "get_task", "task_from_spec", "world_seeds", "ROOMS",
           "PEOPLE", "OBJECTS"]

ROOMS = ("kitchen", "living room", "office", "bedroom", "bathroom", "lobby", "lab", "conference room",
         "mail room", "storage room", "garage", "library", "break room", "gym", "laundry room", "dining room")
PEOPLE = ("alice", "bob", "carol", "dave", "eve", "frank", "grace", "heidi", "ivan", "judy")
OBJECTS = ("apple", "banana", "book", "cup", "pen", "stapler", "laptop", "umbrella", "key", "phone",
           "notebook", "bottle", "plate", "towel", "box", "flower", "tea", "coffee", "water", "juice",
           "newspaper", "pencil", "sandwich", "charger")

Params = dict[str, str]
Check = Callable[[dict, Replay, Params], tuple[bool, str]]


# ------------------------------------------------------------------------------------------------------------
# world building
# ------------------------------------------------------------------------------------------------------------

def _rooms(rng: random.Random, must: tuple[str, ...] = (), lo: int = 4, hi: int = 7) -> list[str]:
    k = max(len(must) + 1, rng.randint(lo, hi))
    rest = [r for r in ROOMS if r not in must]
    rooms = list(must) + rng.sample(rest, k - len(must))
    rng.shuffle(rooms)
    return rooms


def _world(rng: random.Random, rooms: list[str], start: str, objects: dict[str, list[str]],
           people: dict[str, dict[str, Any]], avoid: tuple[str, ...] = ()) -> dict:
    """A world with some distractor objects (never one of ``avoid``) added."""
    objs = {r: list(objects.get(r, [])) for r in rooms}
    pool = [o for o in OBJECTS if o not in avoid]
    for _ in range(rng.randint(1, 4)):
        objs[rng.choice(rooms)].append(rng.choice(pool))
    return {"rooms": rooms, "start": start, "objects": objs, "people": people, "seed": rng.randrange(1 << 30)}


def _others(rng: random.Random, params: Params, rooms: list[str], keys: tuple[str, ...]) -> dict[str, dict]:
    """A few bystanders (people not named in the task) in random rooms."""
    named = {params[k] for k in keys if k in params}
    out = {}
    for p in rng.sample([p for p in PEOPLE if p not in named], rng.randint(0, 2)):
        out[p] = {"room": rng.choice(rooms), "likes": []}
    return out


def _flip(seed: int) -> bool:
    """A binary feature of the world that alternates with the seed: a task's consecutive evaluation seeds
    (:func:`world_seeds`) then cover both cases, so a program that ignores the feature fails one of them."""
    return seed % 2 == 1


# ------------------------------------------------------------------------------------------------------------
# checker helpers (over the trusted replay)
# ------------------------------------------------------------------------------------------------------------

def _says(rep: Replay) -> list[tuple[str, str]]:
    return [(e.args[0], e.location) for e in rep.events if e.name == "say" and e.args[0] is not None]


def _said_at(rep: Replay, room: str, phrase: str) -> bool:
    return any(loc == room and contains_words(m, phrase) for m, loc in _says(rep))


def _numbers(text: str) -> list[str]:
    return [w for w in words(text) if w.isdigit()]


def _visited(rep: Replay) -> set[str]:
    seen = {norm(rep.world["start"])}
    seen.update(norm(e.args[0]) for e in rep.events if e.name == "go_to")
    return seen


def _answers(rep: Replay, person: str) -> list[str]:
    return [e.result for e in rep.events if e.name == "ask" and norm(e.args[0]) == person]


def _count(rep: Replay, room: str, obj: str) -> int:
    return rep.final["objects"][room].count(obj)


def _last_say(rep: Replay) -> tuple[str, str] | None:
    s = _says(rep)
    return s[-1] if s else None


def _hands_empty(rep: Replay) -> tuple[bool, str] | None:
    if rep.final["holding"] is not None:
        return False, f"still holding the {rep.final['holding']}"
    return None


# ------------------------------------------------------------------------------------------------------------
# families
# ------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """A kind of task: instruction template, world generator, checker, canonical program and mutants."""

    name: str
    instruction: str
    generate: Callable[[random.Random, Params, int], dict]
    check: Check
    canonical: str
    mutants: dict[str, str]
    instances: tuple[Params, ...]

    def fill(self, template: str, params: Params) -> str:
        values = dict(params)
        for k, v in params.items():
            values[k.capitalize()] = v.capitalize()
        return template.format(**values)


@dataclass(frozen=True)
class Task:
    """One instruction: its family, parameters, split, and the seeds of its evaluation worlds."""

    task_id: str
    family: Family
    params: Params
    split: str = "train"
    seeds: tuple[int, ...] = field(default_factory=tuple)

    @property
    def instruction(self) -> str:
        return self.family.fill(self.family.instruction, self.params)

    @property
    def canonical(self) -> str:
        return self.family.fill(self.family.canonical, self.params)

    def mutants(self) -> dict[str, str]:
        return {k: self.family.fill(v, self.params) for k, v in self.family.mutants.items()}

    def world(self, seed: int) -> dict:
        """The world of ``seed`` (the same for every process: the generator is seeded from the task and seed)."""
        rng = random.Random(fnv(f"{self.task_id}|{seed}"))
        return self.family.generate(rng, self.params, seed)

    def check(self, world: dict, rep: Replay) -> tuple[bool, str]:
        return self.family.check(world, rep, self.params)

    def spec(self, seeds: tuple[int, ...] | None = None) -> dict[str, Any]:
        """What a data row carries to rebuild the worlds and the checker (``task_from_spec``)."""
        return {"task_id": self.task_id, "family": self.family.name, "params": dict(self.params),
                "seeds": list(seeds if seeds is not None else self.seeds)}


def world_seeds(task_id: str, n: int = 5) -> tuple[int, ...]:
    """The fixed evaluation seeds of a task (derived from its id)."""
    base = fnv(task_id) % 1_000_000
    return tuple(base + i for i in range(n))


# -- go to a room and say something -------------------------------------------------------------------------

def _gen_go_say(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["room"],))
    start = rng.choice([r for r in rooms if r != p["room"]])
    return _world(rng, rooms, start, {}, _others(rng, p, rooms, ()))


def _check_go_say(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    if _said_at(rep, p["room"], p["msg"]):
        return True, ""
    return False, f"never said the message in the {p['room']}"


GO_SAY = Family(
    "go_say", 'Go to the {room} and say "{msg}".', _gen_go_say, _check_go_say,
    'def task_program():\n    go_to("{room}")\n    say("{msg}")\n',
    {"no_go": 'def task_program():\n    say("{msg}")\n',
     "bad_room": 'def task_program():\n    go_to("{room} number 2")\n    say("{msg}")\n'},
    ({"room": "kitchen", "msg": "Lunch is ready"}, {"room": "office", "msg": "The meeting starts in five minutes"},
     {"room": "lobby", "msg": "Welcome to the building"}, {"room": "lab", "msg": "Please wear your safety glasses"},
     {"room": "gym", "msg": "The gym closes at eight"}))


# -- find an object and bring it to a room ------------------------------------------------------------------

def _gen_fetch(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["dest"],))
    where = rng.choice([r for r in rooms[1:] if r != p["dest"]])
    start = rng.choice([r for r in rooms if r != p["dest"]])
    return _world(rng, rooms, start, {where: [p["obj"]]}, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _check_fetch(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    if _count(rep, p["dest"], p["obj"]) != 1:
        return False, f"the {p['obj']} is not in the {p['dest']}"
    return True, ""


_FETCH = '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{obj}"):
            pick("{obj}")
            break
    go_to("{dest}")
    place("{obj}")
'''
FETCH = Family(
    "fetch", "Find the {obj} and bring it to the {dest}.", _gen_fetch, _check_fetch, _FETCH,
    {"no_look": 'def task_program():\n    go_to(get_all_rooms()[0])\n    pick("{obj}")\n    go_to("{dest}")\n'
                '    place("{obj}")\n',
     "wrong_place": _FETCH.replace('    go_to("{dest}")\n', '').replace(
         "def task_program():\n", "def task_program():\n    start = get_current_location()\n").replace(
         '    place("{obj}")\n', '    go_to(start)\n    place("{obj}")\n'),
     "keeps_it": _FETCH.replace('    place("{obj}")\n', '')},
    ({"obj": "apple", "dest": "kitchen"}, {"obj": "stapler", "dest": "office"}, {"obj": "umbrella", "dest": "lobby"},
     {"obj": "book", "dest": "library"}, {"obj": "towel", "dest": "bathroom"}))


# -- bring an object back to the start ----------------------------------------------------------------------

def _gen_return(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng)
    start = rng.choice(rooms)
    where = rng.choice([r for r in rooms if r != start])
    return _world(rng, rooms, start, {where: [p["obj"]]}, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _check_return(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    if _count(rep, norm(w["start"]), p["obj"]) != 1:
        return False, f"the {p['obj']} is not where the robot started"
    return True, ""


_RETURN = '''def task_program():
    start = get_current_location()
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{obj}"):
            pick("{obj}")
            break
    go_to(start)
    place("{obj}")
'''
RETURN = Family(
    "return", "Find the {obj} and bring it back to where you started.", _gen_return, _check_return, _RETURN,
    {"place_there": _RETURN.replace('    go_to(start)\n', ''),
     "no_pick": _RETURN.replace('            pick("{obj}")\n', '')},
    ({"obj": "key"}, {"obj": "phone"}, {"obj": "notebook"}, {"obj": "cup"}, {"obj": "charger"}))


# -- count rooms with an object ------------------------------------------------------------------------------

def _gen_count(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, lo=4, hi=7)
    start = rng.choice(rooms[:-1])
    k = rng.randint(1, len(rooms) - 1)
    objs = {r: [p["obj"]] for r in rng.sample(rooms, k)}
    return _world(rng, rooms, start, objs, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _report(rep: Replay, w: dict, expected: int) -> tuple[bool, str]:
    """The last thing said is said at the start and names exactly the expected number."""
    last = _last_say(rep)
    start = norm(w["start"])
    if last is None or last[1] != start:
        return False, "did not report back where it started"
    if _numbers(last[0]) != [str(expected)]:
        return False, f"reported {last[0]!r}, expected the number {expected}"
    return True, ""


def _check_count(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    if _visited(rep) != set(w["rooms"]):
        return False, "did not check every room"
    k = sum(1 for r in w["rooms"] if p["obj"] in w["objects"][r])
    return _report(rep, w, k)


_COUNT = '''def task_program():
    start = get_current_location()
    count = 0
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{obj}"):
            count += 1
    go_to(start)
    say("I found " + str(count) + " rooms with a {obj}")
'''
COUNT = Family(
    "count", "Check every room, count how many rooms have a {obj}, then come back and tell me the number.",
    _gen_count, _check_count, _COUNT,
    {"no_increment": _COUNT.replace("count += 1", "pass"),
     "no_return": _COUNT.replace("    go_to(start)\n", "")},
    ({"obj": "apple"}, {"obj": "book"}, {"obj": "cup"}, {"obj": "laptop"}, {"obj": "plate"}))


# -- find a person and tell them something ---------------------------------------------------------------

def _gen_find_tell(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng)
    start = rng.choice(rooms)
    where = rng.choice([r for r in rooms[1:] if r != start])
    people = {p["person"]: {"room": where, "likes": []}, **_others(rng, p, rooms, ("person",))}
    return _world(rng, rooms, start, {}, people)


def _check_find_tell(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    room = w["people"][p["person"]]["room"]
    if _said_at(rep, room, p["msg"]):
        return True, ""
    return False, f"never said the message where {p['person']} is"


_FIND_TELL = '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{person}"):
            say("{msg}")
            break
'''
FIND_TELL = Family(
    "find_tell", 'Find {Person} and tell them "{msg}".', _gen_find_tell, _check_find_tell, _FIND_TELL,
    {"say_here": 'def task_program():\n    say("{msg}")\n',
     "ask_here": 'def task_program():\n    ask("{person}", "{msg}", ["ok"])\n',
     "no_check": _FIND_TELL.replace('        if is_in_room("{person}"):\n            say("{msg}")\n            break\n',
                                    '        say("{msg}")\n        break\n')},
    ({"person": "alice", "msg": "Your package has arrived"}, {"person": "bob", "msg": "The printer is fixed"},
     {"person": "carol", "msg": "Your guest is waiting in the lobby"},
     {"person": "dave", "msg": "The meeting was moved to tomorrow"}, {"person": "eve", "msg": "Please call your manager"}))


# -- ask a person to choose, bring what they chose ------------------------------------------------------------

def _gen_ask_bring(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, lo=4, hi=6)
    start = rng.choice(rooms)
    where = rng.choice([r for r in rooms if r != start])
    elsewhere = [r for r in rooms if r != where]
    objs: dict[str, list[str]] = {}
    for o in (p["a"], p["b"]):
        objs.setdefault(rng.choice(elsewhere), []).append(o)
    likes = [p["a"] if _flip(seed) else p["b"]]
    people = {p["person"]: {"room": where, "likes": likes}, **_others(rng, p, rooms, ("person",))}
    return _world(rng, rooms, start, objs, people, avoid=(p["a"], p["b"]))


def _check_ask_bring(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    person = p["person"]
    want = w["people"][person]["likes"][0]
    other = p["b"] if want == p["a"] else p["a"]
    if not _answers(rep, person):
        return False, f"never asked {person}"
    bad = _hands_empty(rep)
    if bad:
        return bad
    room = w["people"][person]["room"]
    if _count(rep, room, want) != 1 or _count(rep, room, other) != 0:
        return False, f"{person} did not get the {want} (and only it)"
    return True, ""


_ASK_BRING = '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{person}"):
            break
    target = get_current_location()
    choice = ask("{person}", "Would you like {a} or {b}?", ["{a}", "{b}"])
    for room in get_all_rooms():
        go_to(room)
        if is_in_room(choice):
            pick(choice)
            break
    go_to(target)
    place(choice)
'''
ASK_BRING = Family(
    "ask_bring", "Ask {Person} whether they would like {a} or {b}, and bring them the one they choose.",
    _gen_ask_bring, _check_ask_bring, _ASK_BRING,
    {"always_a": _ASK_BRING.replace('    choice = ask("{person}", "Would you like {a} or {b}?", ["{a}", "{b}"])\n',
                                    '    choice = "{a}"\n'),
     "ask_from_afar": _ASK_BRING.replace("def task_program():\n",
                                         'def task_program():\n    ask("{person}", "Hello?", ["yes", "no"])\n')},
    ({"person": "alice", "a": "tea", "b": "coffee"}, {"person": "bob", "a": "apple", "b": "banana"},
     {"person": "frank", "a": "book", "b": "newspaper"}, {"person": "grace", "a": "water", "b": "juice"},
     {"person": "heidi", "a": "pen", "b": "pencil"}))


# -- take an object from a room to a person ----------------------------------------------------------------

def _gen_deliver(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["src"],))
    start = rng.choice(rooms)
    where = rng.choice([r for r in rooms if r != p["src"]])
    people = {p["person"]: {"room": where, "likes": []}, **_others(rng, p, rooms, ("person",))}
    return _world(rng, rooms, start, {p["src"]: [p["obj"]]}, people, avoid=(p["obj"],))


def _check_deliver(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    room = w["people"][p["person"]]["room"]
    if _count(rep, room, p["obj"]) != 1:
        return False, f"the {p['obj']} did not reach {p['person']}"
    return True, ""


_DELIVER = '''def task_program():
    go_to("{src}")
    pick("{obj}")
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{person}"):
            place("{obj}")
            break
'''
DELIVER = Family(
    "deliver", "Pick up the {obj} from the {src} and give it to {Person}.", _gen_deliver, _check_deliver, _DELIVER,
    {"drop_at_source": 'def task_program():\n    go_to("{src}")\n    pick("{obj}")\n    place("{obj}")\n',
     "pick_twice": _DELIVER.replace('    pick("{obj}")\n', '    pick("{obj}")\n    pick("{obj}")\n')},
    ({"obj": "book", "src": "library", "person": "alice"}, {"obj": "laptop", "src": "office", "person": "bob"},
     {"obj": "cup", "src": "kitchen", "person": "carol"}, {"obj": "key", "src": "lobby", "person": "dave"},
     {"obj": "box", "src": "mail room", "person": "ivan"}))


# -- say something in every room ---------------------------------------------------------------------------

def _gen_everywhere(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, lo=3, hi=7)
    return _world(rng, rooms, rng.choice(rooms), {}, _others(rng, p, rooms, ()))


def _check_everywhere(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    missing = [r for r in w["rooms"] if not _said_at(rep, r, p["msg"])]
    if missing:
        return False, f"did not say it in the {missing[0]}"
    return True, ""


_EVERYWHERE = '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        say("{msg}")
'''
EVERYWHERE = Family(
    "say_everywhere", 'Go to every room and say "{msg}" in each one.', _gen_everywhere, _check_everywhere,
    _EVERYWHERE,
    {"first_two": _EVERYWHERE.replace("get_all_rooms()", "get_all_rooms()[:2]"),
     "say_once": 'def task_program():\n    say("{msg}")\n'},
    ({"msg": "The fire drill starts now"}, {"msg": "Good morning everyone"}, {"msg": "The building closes soon"},
     {"msg": "Cake in the break room"}, {"msg": "Please check your mailbox"}))


# -- collect every copy of an object -----------------------------------------------------------------------

def _gen_collect(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["dest"],), lo=4, hi=7)
    others = [r for r in rooms if r != p["dest"]]
    objs = {r: [p["obj"]] for r in rng.sample(others, rng.randint(2, min(4, len(others))))}
    if rng.random() < 0.5:  # sometimes two in one room
        objs[rng.choice(list(objs))].append(p["obj"])
    return _world(rng, rooms, rng.choice(rooms), objs, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _check_collect(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    total = sum(v.count(p["obj"]) for v in w["objects"].values())
    if _count(rep, p["dest"], p["obj"]) != total:
        return False, f"not every {p['obj']} is in the {p['dest']}"
    return True, ""


_COLLECT = '''def task_program():
    for room in get_all_rooms():
        if room == "{dest}":
            continue
        go_to(room)
        while is_in_room("{obj}"):
            pick("{obj}")
            go_to("{dest}")
            place("{obj}")
            go_to(room)
'''
COLLECT = Family(
    "collect", "Collect every {obj} in the building and put them all in the {dest}.", _gen_collect, _check_collect,
    _COLLECT,
    {"pick_all_first": '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{obj}"):
            pick("{obj}")
    go_to("{dest}")
    place("{obj}")
''', "only_first": _COLLECT.replace("            go_to(room)\n", "            return\n")},
    ({"obj": "cup", "dest": "kitchen"}, {"obj": "book", "dest": "library"}, {"obj": "towel", "dest": "laundry room"},
     {"obj": "pen", "dest": "office"}, {"obj": "bottle", "dest": "storage room"}))


# -- ask one person, tell another --------------------------------------------------------------------------

def _gen_relay(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng)
    r1, r2 = rng.sample(rooms, 2)
    people = {p["p1"]: {"room": r1, "likes": ["yes" if _flip(seed) else "no"]}, p["p2"]: {"room": r2, "likes": []},
              **_others(rng, p, rooms, ("p1", "p2"))}
    return _world(rng, rooms, rng.choice(rooms), {}, people)


def _check_relay(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    answer = w["people"][p["p1"]]["likes"][0]
    other = "no" if answer == "yes" else "yes"
    asked = [i for i, e in enumerate(rep.events) if e.name == "ask" and norm(e.args[0]) == p["p1"]]
    if not asked:
        return False, f"never asked {p['p1']}"
    room2 = w["people"][p["p2"]]["room"]
    for e in rep.events[asked[0] + 1:]:
        if e.name == "say" and e.location == room2 and contains_words(e.args[0], answer) \
                and not contains_words(e.args[0], other):
            return True, ""
    return False, f"did not tell {p['p2']} the answer ({answer})"


_RELAY = '''def task_program():
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{p1}"):
            answer = ask("{p1}", "{question}", ["yes", "no"])
            break
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{p2}"):
            say("{P1} said " + answer)
            break
'''
RELAY = Family(
    "relay", 'Ask {P1} "{question}" (yes or no) and tell {P2} the answer.', _gen_relay, _check_relay, _RELAY,
    {"always_yes": _RELAY.replace('say("{P1} said " + answer)', 'say("{P1} said yes")'),
     "tell_p1": _RELAY.replace('            answer = ask("{p1}", "{question}", ["yes", "no"])\n',
                               '            answer = ask("{p1}", "{question}", ["yes", "no"])\n'
                               '            say("{P1} said " + answer)\n            return\n')},
    ({"p1": "alice", "p2": "bob", "question": "Are you coming to the party?"},
     {"p1": "carol", "p2": "dave", "question": "Is the report finished?"},
     {"p1": "eve", "p2": "frank", "question": "Do you need the projector?"},
     {"p1": "grace", "p2": "heidi", "question": "Will you join us for lunch?"},
     {"p1": "ivan", "p2": "judy", "question": "Is the lab free this afternoon?"}))


# -- find where someone is and report ----------------------------------------------------------------------

def _gen_where(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng)
    start = rng.choice(rooms)
    where = rng.choice([r for r in rooms[1:] if r != start])
    people = {p["person"]: {"room": where, "likes": []}, **_others(rng, p, rooms, ("person",))}
    return _world(rng, rooms, start, {}, people)


def _check_where(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    last = _last_say(rep)
    if last is None or last[1] != norm(w["start"]):
        return False, "did not report back where it started"
    room = w["people"][p["person"]]["room"]
    named = [r for r in w["rooms"] if contains_words(last[0], r)]
    if named != [room]:
        return False, f"reported {last[0]!r}, expected the {room}"
    return True, ""


_WHERE = '''def task_program():
    start = get_current_location()
    found = "nowhere"
    for room in get_all_rooms():
        go_to(room)
        if is_in_room("{person}"):
            found = room
            break
    go_to(start)
    say("{Person} is in the " + found)
'''
WHERE = Family(
    "where_is", "Find out which room {Person} is in, then come back and tell me.", _gen_where, _check_where, _WHERE,
    {"first_room": _WHERE.replace("            found = room\n", "            found = get_all_rooms()[0]\n")
     .replace('        if is_in_room("{person}"):\n', '        if True:\n'),
     "no_return": _WHERE.replace("    go_to(start)\n", "")},
    ({"person": "alice"}, {"person": "bob"}, {"person": "carol"}, {"person": "dave"}, {"person": "grace"}))


# -- fetch only if present, else report ----------------------------------------------------------------------

def _gen_cond(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["room"], p["dest"]))
    start = rng.choice([r for r in rooms if r != p["room"]])
    objs = {p["room"]: [p["obj"]]} if _flip(seed) else {}
    return _world(rng, rooms, start, objs, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _check_cond(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    if p["obj"] in w["objects"][p["room"]]:
        if _count(rep, p["dest"], p["obj"]) != 1:
            return False, f"the {p['obj']} was there but is not in the {p['dest']}"
        return True, ""
    if _said_at(rep, norm(w["start"]), f"no {p['obj']}"):
        return True, ""
    return False, f"did not come back to say there is no {p['obj']}"


_COND = '''def task_program():
    start = get_current_location()
    go_to("{room}")
    if is_in_room("{obj}"):
        pick("{obj}")
        go_to("{dest}")
        place("{obj}")
    else:
        go_to(start)
        say("There is no {obj}")
'''
COND = Family(
    "conditional_fetch",
    'Go to the {room}. If there is a {obj} there, bring it to the {dest}; otherwise come back and say '
    '"There is no {obj}".', _gen_cond, _check_cond, _COND,
    {"always_fetch": _COND.replace('    if is_in_room("{obj}"):\n', '    if True:\n'),
     "always_report": _COND.replace('    if is_in_room("{obj}"):\n', '    if False:\n')},
    ({"obj": "apple", "room": "kitchen", "dest": "office"}, {"obj": "umbrella", "room": "lobby", "dest": "garage"},
     {"obj": "charger", "room": "conference room", "dest": "lab"},
     {"obj": "newspaper", "room": "mail room", "dest": "break room"},
     {"obj": "plate", "room": "dining room", "dest": "kitchen"}))


# -- make sure a room has an object ----------------------------------------------------------------------

def _gen_restock(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["room"],))
    others = [r for r in rooms if r != p["room"]]
    objs: dict[str, list[str]] = {r: [p["obj"]] for r in rng.sample(others, rng.randint(1, 2))}
    if _flip(seed):
        objs[p["room"]] = [p["obj"]]
    return _world(rng, rooms, rng.choice(rooms), objs, _others(rng, p, rooms, ()), avoid=(p["obj"],))


def _check_restock(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    before = w["objects"][p["room"]].count(p["obj"])
    after = _count(rep, p["room"], p["obj"])
    want = before if before else 1
    if after != want:
        return False, f"the {p['room']} has {after} {p['obj']}(s), expected {want}"
    return True, ""


_RESTOCK = '''def task_program():
    go_to("{room}")
    if is_in_room("{obj}"):
        return
    for room in get_all_rooms():
        if room == "{room}":
            continue
        go_to(room)
        if is_in_room("{obj}"):
            pick("{obj}")
            go_to("{room}")
            place("{obj}")
            return
'''
RESTOCK = Family(
    "restock", "Make sure there is a {obj} in the {room}: if there is none, bring one from another room.",
    _gen_restock, _check_restock, _RESTOCK,
    {"always_bring": _RESTOCK.replace('    if is_in_room("{obj}"):\n        return\n', ''),
     "never_bring": 'def task_program():\n    go_to("{room}")\n'},
    ({"obj": "pen", "room": "conference room"}, {"obj": "towel", "room": "bathroom"},
     {"obj": "cup", "room": "break room"}, {"obj": "stapler", "room": "mail room"},
     {"obj": "water", "room": "gym"}))


# -- count occupied or empty rooms ---------------------------------------------------------------------------

def _gen_people_count(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, lo=4, hi=7)
    start = rng.choice(rooms[:-1])
    people = {}
    for name in rng.sample(PEOPLE, rng.randint(1, 4)):
        people[name] = {"room": rng.choice(rooms), "likes": []}
    return _world(rng, rooms, start, {}, people)


def _check_people_count(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    if _visited(rep) != set(w["rooms"]):
        return False, "did not check every room"
    occupied = {info["room"] for info in w["people"].values()}
    k = len(occupied) if p["which"] == "occupied" else len(w["rooms"]) - len(occupied)
    return _report(rep, w, k)


_PEOPLE_COUNT = '''def task_program():
    start = get_current_location()
    count = 0
    for room in get_all_rooms():
        go_to(room)
        if {neg}is_in_room("person"):
            count += 1
    go_to(start)
    say("There are " + str(count) + " {which} rooms")
'''
PEOPLE_COUNT = Family(
    "people_count", "Go to every room and count the {which} rooms ({desc}). Come back and tell me how many.",
    _gen_people_count, _check_people_count, _PEOPLE_COUNT,
    {"inverted": _PEOPLE_COUNT.replace("{neg}is_in_room", "{inv}is_in_room"),
     "count_all": _PEOPLE_COUNT.replace("{neg}is_in_room(\"person\")", "True")},
    ({"which": "occupied", "desc": "rooms with at least one person in them", "neg": "", "inv": "not "},
     {"which": "empty", "desc": "rooms with nobody in them", "neg": "not ", "inv": ""}))


# -- swap two objects ----------------------------------------------------------------------------------------

def _gen_swap(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng, (p["r1"], p["r2"]))
    return _world(rng, rooms, rng.choice(rooms), {p["r1"]: [p["a"]], p["r2"]: [p["b"]]},
                  _others(rng, p, rooms, ()), avoid=(p["a"], p["b"]))


def _check_swap(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    bad = _hands_empty(rep)
    if bad:
        return bad
    ok = (_count(rep, p["r2"], p["a"]) == 1 and _count(rep, p["r1"], p["b"]) == 1
          and _count(rep, p["r1"], p["a"]) == 0 and _count(rep, p["r2"], p["b"]) == 0)
    return (True, "") if ok else (False, "the two objects were not swapped")


_SWAP = '''def task_program():
    go_to("{r1}")
    pick("{a}")
    go_to("{r2}")
    place("{a}")
    pick("{b}")
    go_to("{r1}")
    place("{b}")
'''
SWAP = Family(
    "swap", "The {a} is in the {r1} and the {b} is in the {r2}. Swap them.", _gen_swap, _check_swap, _SWAP,
    {"pick_both": 'def task_program():\n    go_to("{r1}")\n    pick("{a}")\n    go_to("{r2}")\n    pick("{b}")\n'
                  '    place("{a}")\n    go_to("{r1}")\n    place("{b}")\n',
     "move_one": 'def task_program():\n    go_to("{r1}")\n    pick("{a}")\n    go_to("{r2}")\n    place("{a}")\n'},
    ({"a": "book", "r1": "office", "b": "plate", "r2": "kitchen"},
     {"a": "laptop", "r1": "lab", "b": "umbrella", "r2": "lobby"},
     {"a": "flower", "r1": "living room", "b": "towel", "r2": "bathroom"},
     {"a": "box", "r1": "garage", "b": "newspaper", "r2": "mail room"},
     {"a": "cup", "r1": "break room", "b": "notebook", "r2": "library"}))


# -- poll several people ------------------------------------------------------------------------------------

def _gen_poll(rng: random.Random, p: Params, seed: int) -> dict:
    rooms = _rooms(rng)
    start = rng.choice(rooms)
    people = {}
    for k in ("p1", "p2", "p3"):
        people[p[k]] = {"room": rng.choice(rooms), "likes": [rng.choice([p["x"], p["y"]])]}
    people.update(_others(rng, p, rooms, ("p1", "p2", "p3")))
    return _world(rng, rooms, start, {}, people)


def _check_poll(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    for k in ("p1", "p2", "p3"):
        if not _answers(rep, p[k]):
            return False, f"never asked {p[k]}"
    n = sum(1 for k in ("p1", "p2", "p3") if w["people"][p[k]]["likes"][0] == p["x"])
    return _report(rep, w, n)


_POLL = '''def task_program():
    start = get_current_location()
    count = 0
    for person in ["{p1}", "{p2}", "{p3}"]:
        for room in get_all_rooms():
            go_to(room)
            if is_in_room(person):
                if ask(person, "Do you prefer {x} or {y}?", ["{x}", "{y}"]) == "{x}":
                    count += 1
                break
    go_to(start)
    say(str(count) + " chose {x}")
'''
POLL = Family(
    "poll", "Ask {P1}, {P2} and {P3} whether they prefer {x} or {y}, then come back and tell me how many chose {x}.",
    _gen_poll, _check_poll, _POLL,
    {"count_everyone": _POLL.replace('== "{x}"', '!= "nothing"'),
     "ask_two": _POLL.replace('["{p1}", "{p2}", "{p3}"]', '["{p1}", "{p2}"]')},
    ({"p1": "alice", "p2": "bob", "p3": "carol", "x": "tea", "y": "coffee"},
     {"p1": "dave", "p2": "eve", "p3": "frank", "x": "pizza", "y": "salad"},
     {"p1": "grace", "p2": "heidi", "p3": "ivan", "x": "monday", "y": "friday"},
     {"p1": "judy", "p2": "alice", "p3": "dave", "x": "the lab", "y": "the library"}))


# -- a toy for learning tests: say anything with a digit in it (no go_to needed) ---------------------------------

def _check_say_number(w: dict, rep: Replay, p: Params) -> tuple[bool, str]:
    if any(any(ch.isdigit() for ch in m) for m, _loc in _says(rep)):
        return True, ""
    return False, "said no number"


SAY_NUMBER = Family(
    "say_number", "Say a number.", _gen_everywhere, _check_say_number, 'def task_program():\n    say("42")\n',
    {"no_number": 'def task_program():\n    say("hello")\n', "silent": "def task_program():\n    pass\n"},
    ({},))

FAMILIES: tuple[Family, ...] = (GO_SAY, FETCH, RETURN, COUNT, FIND_TELL, ASK_BRING, DELIVER, EVERYWHERE, COLLECT,
                                RELAY, WHERE, COND, RESTOCK, PEOPLE_COUNT, SWAP, POLL)
#: families outside the task set (``all_tasks``), for tests: a tiny random model can learn ``say_number``
TOY_FAMILIES: tuple[Family, ...] = (SAY_NUMBER,)
_BY_NAME = {f.name: f for f in FAMILIES + TOY_FAMILIES}


_TEXT_PARAMS = ("msg", "question", "desc", "neg", "inv")


def _task_id(f: Family, params: Params) -> str:
    keys = [k for k in params if k not in _TEXT_PARAMS]
    parts = [params[k] for k in keys]
    if not keys and "msg" in params:
        parts = words(params["msg"])[:3]
    if not parts:
        return f"robot/{f.name}"
    return f"robot/{f.name}/" + "-".join(x.replace(" ", "_") for x in parts)


@functools.lru_cache(maxsize=1)
def all_tasks() -> tuple[Task, ...]:
    """Every task, in a fixed order; the last instance of each family is held out."""
    out = []
    for f in FAMILIES:
        for i, params in enumerate(f.instances):
            tid = _task_id(f, params)
            out.append(Task(tid, f, dict(params), "heldout" if i == len(f.instances) - 1 else "train",
                            world_seeds(tid)))
    return tuple(out)


def get_task(task_id: str) -> Task:
    """The task with this id (KeyError when unknown)."""
    for t in all_tasks():
        if t.task_id == task_id:
            return t
    raise KeyError(f"unknown robot task {task_id!r}")


def task_from_spec(spec: Any) -> Task:
    """Rebuild a task from a data row's ``task`` value (a dict, or its JSON text): ``family`` and ``params``
    name the generator and checker, ``seeds`` the worlds (default: the task's fixed seeds)."""
    import json

    if isinstance(spec, str):
        spec = json.loads(spec)
    if not isinstance(spec, dict):
        raise ValueError("a robot task is a JSON object with family, params and seeds")
    if "family" not in spec and "task_id" in spec:
        base = get_task(str(spec["task_id"]))
        fam, params = base.family, base.params
    else:
        fam = _BY_NAME.get(str(spec.get("family")))
        if fam is None:
            raise ValueError(f"unknown robot task family {spec.get('family')!r} (known: {', '.join(_BY_NAME)})")
        params = spec.get("params") or {}
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise ValueError("robot task params must be an object of strings")
        params = {str(k): norm(v) if k not in _TEXT_PARAMS else v
                  for k, v in params.items()}
    tid = str(spec.get("task_id") or _task_id(fam, params))
    seeds = spec.get("seeds")
    if seeds is None:
        seeds = world_seeds(tid)
    if not isinstance(seeds, list | tuple) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError("robot task seeds must be a list of integers")
    return Task(tid, fam, dict(params), str(spec.get("split", "train")), tuple(seeds))
