"""The outcome of one robot run, decided in the trusted process from what the sandbox returned.

Classes, most severe first: ``python_error`` (the program did not compile, raised a Python exception, ran out
of time, memory, output or its action budget, or returned something the runner never produces),
``simulation_error`` (an infeasible action), ``completion_error`` (it ran but the task's checker rejects the
trace or the final state), ``success``.

The sandbox returns a claim ``(trace, status, message)``. The trace is replayed on a fresh robot built from the
trusted copy of the world (:func:`~rewardlang.domains.robot.simulator.replay`); the class is the worse of the
claimed status and the replay's, and the checker reads only the replay. So a program that patches the API,
rewrites its trace or forges the result channel can claim nothing better than an honest run of the actions it
claims, and a claim the recorder cannot produce is a ``python_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rewardlang.domains.robot import simulator

__all__ = ["LABELS", "RunOutcome", "judge_claim", "worst"]

#: most severe first
LABELS = ("python_error", "simulation_error", "completion_error", "success")
_RANK = {c: i for i, c in enumerate(LABELS)}
_CLAIMS = {"ok": "success", "simulation_error": "simulation_error", "python_error": "python_error"}


@dataclass(frozen=True)
class RunOutcome:
    """One world's result: the class, why, and (when the trace was replayed) the replay."""

    label: str
    detail: str = ""
    replay: Any = None

    @property
    def success(self) -> bool:
        return self.label == "success"


def worst(labels: list[str]) -> str:
    """The most severe class of several runs.

        >>> worst(["success", "completion_error", "simulation_error"])
        'simulation_error'
    """
    return min(labels, key=lambda c: _RANK[c])


def judge_claim(world: dict, claim: Any, check: Callable[[dict, Any], tuple[bool, str]]) -> RunOutcome:
    """The class of one run from the sandbox's decoded (untrusted) return value ``claim``."""
    if (type(claim) is not tuple or len(claim) != 3 or type(claim[0]) is not list or type(claim[1]) is not str
            or type(claim[2]) is not str or claim[1] not in _CLAIMS):
        return RunOutcome("python_error", "the run returned no trace (forged result)")
    trace, status, message = claim
    rep = simulator.replay(world, trace)
    if rep.forged:
        return RunOutcome("python_error", f"forged trace: {rep.forged}", rep)
    if len(trace) > simulator.MAX_ACTIONS:
        return RunOutcome("python_error", f"more than {simulator.MAX_ACTIONS} robot actions", rep)
    claimed = _CLAIMS[status]
    replayed = "simulation_error" if rep.error is not None else "success"
    label = worst([claimed, replayed])
    if label == "python_error":
        return RunOutcome(label, message or "python error", rep)
    if label == "simulation_error":
        return RunOutcome(label, rep.error or message or "simulation error", rep)
    ok, why = check(world, rep)
    return RunOutcome("success", "", rep) if ok else RunOutcome("completion_error", why, rep)
