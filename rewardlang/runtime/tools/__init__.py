"""Batched, time-bounded runners of external code-analysis tools (ruff, pylint, bandit, radon, vulture).

- :mod:`~rewardlang.runtime.tools.runner`: the generic part: one tool run over a directory of files for a
  whole batch, deadlines, process-group kills, health probe, isolation of a failing sample by bisection.
- :mod:`~rewardlang.runtime.tools.ruff`, :mod:`~rewardlang.runtime.tools.pylint`,
  :mod:`~rewardlang.runtime.tools.bandit`, :mod:`~rewardlang.runtime.tools.pyanalyzers`: the tools.
- :mod:`~rewardlang.runtime.tools.astchecks`: the AST analyzers of the quality score.
- :mod:`~rewardlang.runtime.tools.codequal`: the quality analysis and its scores.
- :mod:`~rewardlang.runtime.tools.text`: positions of tool reports as character offsets.

Nothing here is imported by ``rewardlang check``: component modules import these lazily.
"""
