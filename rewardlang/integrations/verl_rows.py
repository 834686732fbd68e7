"""A verl sample as a spec row: what both of rewardlang's verl reward managers (:mod:`rewardlang.integrations.verl`,
:mod:`rewardlang.integrations.verl_tokens`) and the ``compute_score`` function hand to the scorer. The completion is
``solution_str``; every other input comes, by its column name (or its input name), from ``extra_info`` or from
``ground_truth`` when that is a dict; a ``ground_truth`` that is not a dict fills ``ground_truth_input``, or else
the one input ``extra_info`` does not give.

    >>> from rewardlang.integrations.batching import SpecScorer
    >>> s = SpecScorer("specs/quality_grpo.reward")
    >>> row = verl_row(s, "humaneval", "x", "assert f() == 1", {"entry_point": "f", "prompt": "p"})
    >>> row["tests"], row["completion"], row["entry_point"]
    ('assert f() == 1', 'x', 'f')
"""

from __future__ import annotations

import logging
from typing import Any

from rewardlang.integrations.batching import SpecScorer

__all__ = ["verl_row"]

log = logging.getLogger("rewardlang.integrations")
_WARNED: list[str] = []

#: keys verl adds to ``extra_info`` itself (not spec columns)
_VERL_EXTRA = ("num_turns", "rollout_reward_scores")


def verl_row(scorer: SpecScorer, data_source: Any, solution_str: str, ground_truth: Any,
             extra_info: dict | None, ground_truth_input: str | None = None) -> dict[str, Any]:
    """The spec row of one verl sample (see the module docstring for the mapping)."""
    row: dict[str, Any] = {}
    if isinstance(extra_info, dict):
        row.update({k: v for k, v in extra_info.items() if k not in _VERL_EXTRA})
    if isinstance(ground_truth, dict):
        row.update(ground_truth)
    elif ground_truth is not None:
        target = ground_truth_input
        if target is None:
            open_ = [i for i in scorer.inputs if i.name != "completion" and i.column not in row and i.name not in row
                     and i.name != "data_source"]
            # the one required input left open takes it; optional ones (a reference solution for relative time
            # limits, say) may stay missing (none)
            required = [i for i in open_ if not getattr(i, "nullable", False)]
            if len(open_) == 1:
                target = open_[0].column
            elif len(required) == 1:
                target = required[0].column
                open_ = required
            else:  # the row lacks inputs: it is masked and counted as a bad row (same keys), and said once
                names = ", ".join(f"`{i.name}`" for i in open_) or "none"
                if not _WARNED:
                    _WARNED.append(names)
                    log.warning("rewardlang: verl's ground_truth cannot be mapped: the spec's inputs not given by "
                                "extra_info are %s; set reward_kwargs.ground_truth_input to one of them, or make "
                                "ground_truth a dict of columns (such samples are masked)", names)
        if target is not None:
            row[target] = ground_truth
    row.setdefault("data_source", data_source)
    comp = next(i for i in scorer.program.inputs if i.name == "completion")
    row[comp.column] = solution_str
    row["completion"] = solution_str
    return row
