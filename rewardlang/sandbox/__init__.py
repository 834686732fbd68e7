"""Sandboxed execution of untrusted programs, for unit-test rewards.

Long-lived sandbox slots (one per core) each fork one process per program; the verdict is computed in the
trusted process from type-exactly encoded observations; infrastructure failures are masked, never scored.
See ``docs/sandbox.md`` for the design, the isolation levels and the test formats.

    >>> from rewardlang.sandbox import Sandbox, Task, Limits
    >>> with Sandbox() as sb:                                               # doctest: +SKIP
    ...     sb.run("def sq(x):\\n    return x * x\\n", ["assert sq(3) == 9"]).outcome
    'pass'

The heavy parts are imported on first use, so importing this package is cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Sandbox", "Task", "Limits", "SandboxConfig", "Verdict", "TestResult", "doctor_report",
           "get_sandbox", "close_sandbox", "make_plan", "LEVELS"]

_LAZY = {
    "Sandbox": "runner", "Task": "runner", "doctor_report": "doctor", "get_sandbox": "runner",
    "close_sandbox": "runner", "Limits": "config", "SandboxConfig": "config", "LEVELS": "config",
    "Verdict": "judge", "TestResult": "judge", "make_plan": "convert",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
