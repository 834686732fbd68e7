"""Real benchmark data shipped with installed packages (no network): HumanEval.

    >>> from rewardlang.runtime.datasets import load_humaneval
    >>> len(load_humaneval())
    164
"""

from rewardlang.runtime.datasets.humaneval import load_humaneval

__all__ = ["load_humaneval"]
