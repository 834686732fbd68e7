"""The runnable examples in the docstrings of the lint, quality and metrics modules and their tools."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rewardlang.runtime.tools.text", "rewardlang.runtime.tools.runner", "rewardlang.runtime.tools.ruff",
    "rewardlang.runtime.tools.pylint", "rewardlang.runtime.tools.bandit", "rewardlang.runtime.tools.pyanalyzers",
    "rewardlang.runtime.tools.astchecks", "rewardlang.runtime.tools.codequal",
    "rewardlang.runtime.components.lint", "rewardlang.runtime.components.quality",
    "rewardlang.runtime.components.metrics",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no runnable example"
