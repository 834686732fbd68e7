"""Data rows of the robot tasks (``rewardlang data robot -o FILE``).

Each row: ``task_id``, ``split`` (``train`` or ``heldout``), ``instruction``, ``prompt`` (the API description
followed by the instruction), ``task`` (the JSON text the robot components rebuild the worlds and the checker
from: family, params, seeds) and ``canonical`` (a program that solves every world).

    >>> r = rows()[0]
    >>> sorted(r)
    ['canonical', 'instruction', 'prompt', 'split', 'task', 'task_id']
    >>> r["prompt"].endswith(r["instruction"] + "\\n")
    True
"""

from __future__ import annotations

import json
from typing import Any

from rewardlang.domains.robot.tasks import all_tasks

__all__ = ["API_DOC", "prompt_for", "rows", "SPLITS"]

SPLITS = ("all", "train", "heldout")

API_DOC = '''You control a service robot in a building with Python. Write a function `task_program()` that takes no
arguments and uses only these functions (they are already defined; do not define or import them):

def get_current_location() -> str:
    """The name of the room the robot is in."""
def get_all_rooms() -> list[str]:
    """The names of all rooms in the building."""
def is_in_room(thing: str) -> bool:
    """Whether an object or a person is in the robot's current room. is_in_room("person") is True when
    anyone is there."""
def go_to(location: str) -> None:
    """Move to a room (one of get_all_rooms())."""
def ask(person: str, question: str, options: list[str]) -> str:
    """Ask a person in the current room a question; they answer with one of the options."""
def say(message: str) -> None:
    """Say a message aloud in the current room."""
def pick(obj: str) -> None:
    """Pick up an object in the current room. The robot can hold one object at a time."""
def place(obj: str) -> None:
    """Put down the object the robot holds in the current room."""

Names of rooms, objects and people are lower case; the robot starts in some room. An impossible action
(an unknown room, picking up something that is not in the room or while holding something, placing what the
robot does not hold, asking someone who is not in the room) stops the program with an error.

Task: '''


def prompt_for(instruction: str) -> str:
    """The prompt of a task: the API description, then the instruction."""
    return API_DOC + instruction + "\n"


def rows(split: str = "all") -> list[dict[str, Any]]:
    """Every task's row (``split``: all, train or heldout), in a fixed order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    out = []
    for t in all_tasks():
        if split != "all" and t.split != split:
            continue
        out.append({"task_id": t.task_id, "split": t.split, "instruction": t.instruction,
                    "prompt": prompt_for(t.instruction), "task": json.dumps(t.spec(), sort_keys=True),
                    "canonical": t.canonical})
    return out
