"""The runnable examples in the docstrings of the PRLCoder modules."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", [
    "rewardlang.runtime.code.segment", "rewardlang.datasets.prm.mutate", "rewardlang.datasets.prm.label",
    "rewardlang.runtime.components.segments", "rewardlang.runtime.components.prm_score",
])
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
