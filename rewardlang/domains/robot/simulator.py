"""A symbolic service-robot simulator (written for rewardlang from the published API facts; no code copied).

A *world* is plain data::

    {"rooms": ["kitchen", "office", ...],            # lower case, no name a room and a thing at once
     "start": "office",                                # where the robot starts
     "objects": {"kitchen": ["apple", "cup"], ...},    # a multiset per room
     "people": {"alice": {"room": "kitchen", "likes": ["coffee", "yes"]}, ...},
     "seed": 7}                                        # breaks ties of ``ask`` deterministically

The robot API (what a program calls; every name is compared case-insensitively after stripping)::

    get_current_location() -> str          the room the robot is in
    get_all_rooms() -> list[str]           every room, in the world's order
    is_in_room(thing) -> bool              an object or person in the current room ("person": anyone)
    go_to(room)                            move to a room
    ask(person, question, options) -> str  the person (here) answers with one of the options
    say(message)                           speak
    pick(obj)                              take an object from the current room (hands must be empty)
    place(obj)                             put the held object down in the current room

An infeasible action raises :class:`SimulationError`: an unknown room, a room used as a thing (or a thing as
a room), picking what is not here, a person, or with full hands, placing with empty hands or something not
held, asking someone who is absent or unknown, arguments that are not non-empty strings, options that are not
a non-empty list of non-empty strings. Every call is recorded in ``trace`` *before* it is checked, so the
action that failed is the trace's last entry; a run of more than :data:`MAX_ACTIONS` calls raises
:class:`ActionLimit` (an endless loop, classed with timeouts).

This file is executed twice: inside the sandbox, where it answers the program's calls, and in the trusted
process, where :func:`replay` re-applies the trace the sandbox returned to a fresh copy of the world. Only the
replay's state and errors count, so a program that tampers with its own copy of the simulator can only
mislead itself. The file imports nothing, so that executing it inside the sandbox costs no module loads.
"""

MAX_ACTIONS = 1000
MAX_ARG_CHARS = 2000
MAX_OPTIONS = 32
API = ("get_current_location", "get_all_rooms", "is_in_room", "go_to", "ask", "say", "pick", "place")
ARITY = {"get_current_location": 0, "get_all_rooms": 0, "is_in_room": 1, "go_to": 1, "ask": 3, "say": 1,
         "pick": 1, "place": 1}
ANYONE = "person"


class SimulationError(Exception):
    """An action the robot cannot perform in this world."""


class ActionLimit(Exception):
    """More than MAX_ACTIONS calls in one run."""


def norm(name):
    """The canonical form of a name: stripped, lower case."""
    return name.strip().lower()


def words(text):
    """Lower-case alphanumeric words of a text (no ``re``: see the module docstring)."""
    out, cur = [], []
    for ch in text.lower():
        if ch.isalnum():
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def contains_words(text, phrase):
    """Whether the words of ``phrase`` occur consecutively among the words of ``text``."""
    t, p = words(text), words(phrase)
    if not p:
        return False
    return any(t[i:i + len(p)] == p for i in range(len(t) - len(p) + 1))


def fnv(text):
    """64-bit FNV-1a of a text: a hash that is the same in every process (``hash`` of a str is not)."""
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8", "surrogatepass"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def clean_arg(x):
    """A call argument as the trace records it: the string itself, or None for anything that is not a
    plain string of reasonable size (the action then fails; the trace stays plain data)."""
    if type(x) is str and len(x) <= MAX_ARG_CHARS:
        return x
    return None


def clean_options(x):
    if (type(x) is list or type(x) is tuple) and 0 < len(x) <= MAX_OPTIONS:
        out = tuple(clean_arg(o) for o in x)
        if None not in out:
            return out
    return None


class Robot:
    """The state of one run: the world's rooms, objects and people, the robot's place and hands."""

    def __init__(self, world):
        self.rooms = [norm(r) for r in world["rooms"]]
        self.room_set = set(self.rooms)
        self.location = norm(world["start"])
        self.holding = None
        self.objects = {r: [] for r in self.rooms}
        for room, things in world.get("objects", {}).items():
            self.objects[norm(room)] = [norm(t) for t in things]
        self.people = {}
        self.likes = {}
        for name, info in world.get("people", {}).items():
            self.people[norm(name)] = norm(info["room"])
            self.likes[norm(name)] = [norm(x) for x in info.get("likes", ())]
        self.seed = int(world.get("seed", 0))
        self.trace = []

    # -- the program's entry point (inside the sandbox) -----------------------------------------------------
    def call(self, name, args):
        """Record the call, then perform it (raises SimulationError or ActionLimit)."""
        if name == "ask":
            entry = (name, clean_arg(args[0]), clean_arg(args[1]), clean_options(args[2]))
        else:
            entry = (name,) + tuple(clean_arg(a) for a in args)
        self.trace.append(entry)
        if len(self.trace) > MAX_ACTIONS:
            raise ActionLimit(f"more than {MAX_ACTIONS} robot actions")
        return self.apply(entry)

    # -- the semantics, shared by the sandbox and the trusted replay -----------------------------------------
    def _name(self, x, what):
        if x is None:
            raise SimulationError(f"{what} must be a string")
        n = norm(x)
        if not n:
            raise SimulationError(f"{what} must not be empty")
        return n

    def _thing(self, x, what):
        n = self._name(x, what)
        if n in self.room_set:
            raise SimulationError(f"{n!r} is a room, not {what}")
        return n

    def apply(self, entry):
        """Perform one recorded call on this state and return its result."""
        name, args = entry[0], entry[1:]
        if name == "get_current_location":
            return self.location
        if name == "get_all_rooms":
            return list(self.rooms)
        if name == "go_to":
            room = self._name(args[0], "a room")
            if room not in self.room_set:
                raise SimulationError(f"there is no room called {room!r}")
            self.location = room
            return None
        if name == "is_in_room":
            thing = self._thing(args[0], "an object or a person")
            if thing == ANYONE:
                return any(r == self.location for r in self.people.values())
            if thing in self.people:
                return self.people[thing] == self.location
            return thing in self.objects[self.location]
        if name == "say":
            if args[0] is None:
                raise SimulationError("the message must be a string")
            return None
        if name == "pick":
            obj = self._thing(args[0], "an object")
            if obj in self.people or obj == ANYONE:
                raise SimulationError(f"cannot pick up a person ({obj!r})")
            if self.holding is not None:
                raise SimulationError(f"already holding {self.holding!r}: place it first")
            here = self.objects[self.location]
            if obj not in here:
                raise SimulationError(f"there is no {obj!r} in the {self.location}")
            here.remove(obj)
            self.holding = obj
            return None
        if name == "place":
            obj = self._thing(args[0], "an object")
            if self.holding is None:
                raise SimulationError(f"cannot place {obj!r}: the robot holds nothing")
            if obj != self.holding:
                raise SimulationError(f"cannot place {obj!r}: the robot holds {self.holding!r}")
            self.objects[self.location].append(obj)
            self.holding = None
            return None
        if name == "ask":
            person = self._thing(args[0], "a person")
            if args[1] is None:
                raise SimulationError("the question must be a string")
            options = args[2]
            if options is None:
                raise SimulationError("options must be a non-empty list of strings")
            if any(not norm(o) for o in options):
                raise SimulationError("options must not be empty strings")
            if person not in self.people:
                raise SimulationError(f"there is nobody called {person!r}")
            if self.people[person] != self.location:
                raise SimulationError(f"{person!r} is not in the {self.location}")
            return self.answer(person, args[1], options)
        raise SimulationError(f"unknown action {name!r}")

    def answer(self, person, question, options):
        """The option the person picks: the first of their likes (in their order) that an option names as
        whole words; otherwise a fixed choice from a hash of the world's seed, the person, the question and
        the options (the same answer in every process and replay)."""
        for like in self.likes.get(person, ()):
            for o in options:
                if contains_words(o, like):
                    return o
        key = f"{self.seed}|{person}|{norm(question)}|" + "|".join(norm(o) for o in options)
        return options[fnv(key) % len(options)]

    def state(self):
        """The final state as plain data."""
        return {"location": self.location, "holding": self.holding,
                "objects": {r: sorted(v) for r, v in self.objects.items()},
                "people": dict(self.people)}


def make_api(world):
    """A fresh robot for ``world`` and the eight API functions bound to it (used inside the sandbox)."""
    robot = Robot(world)
    call = robot.call

    def get_current_location():
        return call("get_current_location", ())

    def get_all_rooms():
        return call("get_all_rooms", ())

    def is_in_room(obj):
        return call("is_in_room", (obj,))

    def go_to(location):
        return call("go_to", (location,))

    def ask(person, question, options):
        return call("ask", (person, question, options))

    def say(message):
        return call("say", (message,))

    def pick(obj):
        return call("pick", (obj,))

    def place(obj):
        return call("place", (obj,))

    api = {"get_current_location": get_current_location, "get_all_rooms": get_all_rooms,
           "is_in_room": is_in_room, "go_to": go_to, "ask": ask, "say": say, "pick": pick, "place": place}
    return robot, api


class Event:
    """One replayed call: its name, arguments, result and the robot's room when it was made."""

    __slots__ = ("name", "args", "result", "location", "holding")

    def __init__(self, name, args, result, location, holding):
        self.name, self.args, self.result, self.location, self.holding = name, args, result, location, holding

    def __repr__(self):
        return f"Event({self.name}{self.args!r} -> {self.result!r} @ {self.location})"


class Replay:
    """The trusted re-execution of a trace: the events that succeeded, the error (if any), the final state."""

    def __init__(self, world, events, error, robot, forged):
        self.world, self.events, self.error, self.robot, self.forged = world, events, error, robot, forged

    @property
    def final(self):
        return self.robot.state()


def valid_entry(entry):
    """Whether an entry has the shape the sandbox's recorder produces (anything else was forged)."""
    if type(entry) is not tuple or not entry or type(entry[0]) is not str or entry[0] not in ARITY:
        return False
    args = entry[1:]
    if len(args) != ARITY[entry[0]]:
        return False
    if entry[0] == "ask":
        opts = args[2]
        if not (opts is None or (type(opts) is tuple and 0 < len(opts) <= MAX_OPTIONS
                                 and all(type(o) is str and len(o) <= MAX_ARG_CHARS for o in opts))):
            return False
        args = args[:2]
    return all(a is None or (type(a) is str and len(a) <= MAX_ARG_CHARS) for a in args)


def replay(world, trace):
    """Apply ``trace`` to a fresh robot in ``world``: stops at the first infeasible action (``error``), or at
    the first entry the recorder could not have written (``forged``)."""
    robot = Robot(world)
    events, error, forged = [], None, None
    if len(trace) > MAX_ACTIONS + 1:
        return Replay(world, events, None, robot, f"a trace of {len(trace)} actions")
    for entry in trace:
        if not valid_entry(entry):
            forged = "a malformed trace entry"
            break
        loc, held = robot.location, robot.holding
        try:
            result = robot.apply(entry)
        except SimulationError as e:
            error = str(e)
            events.append(Event(entry[0], entry[1:], None, loc, held))
            break
        events.append(Event(entry[0], entry[1:], result, loc, held))
    return Replay(world, events, error, robot, forged)
