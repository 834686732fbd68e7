"""The runnable examples in the trainers' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["config", "model", "data", "metrics", "runlog", "plot", "cli", "grpo", "align", "dense", "authors", "algos", "ppo", "gepo", "dpo", "oorl", "run",
           "evaluate", "eval_lang", "defaults"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"rewardlang.trainers.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
