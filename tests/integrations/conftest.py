"""Tests marked ``integration`` run verl, OpenRLHF and Ray code that the default environment does not install: they
are deselected unless REWARDLANG_INTEGRATION=1 (scripts/test-integrations.sh sets it after installing them), and
there a missing package fails, never skips."""

from __future__ import annotations

import os

import pytest

_COLLECTED: list[int] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("REWARDLANG_INTEGRATION") == "1":
        _COLLECTED.append(sum(1 for i in items if i.get_closest_marker("integration")))
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("integration") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # a run meant for these tests that deselects all of them (pyproject's -m 'not slow', say) would pass having
    # run none: it fails instead (a test that did not run never counts as passed)
    if _COLLECTED and _COLLECTED[0] and not any(i.get_closest_marker("integration") for i in session.items):
        raise pytest.UsageError(f"REWARDLANG_INTEGRATION=1 but all {_COLLECTED[0]} integration tests were deselected "
                                "(pass -m \"\" or -m integration; scripts/test-integrations.sh does)")
