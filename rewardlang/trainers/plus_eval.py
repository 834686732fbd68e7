"""``rewardlang eval --plus``: pass@k on HumanEval's own tests and on its hidden tests, side by side.

A completion passes *plus* when it passes its problem's base tests **and** its plus tests (the extra inputs of
:mod:`rewardlang.datasets.plus`, in the format of the problem's tests and language), as EvalPlus reports HumanEval+.
A problem without plus inputs counts its base result for plus, and is counted (``problems_without_plus``).

    >>> from rewardlang.datasets.humaneval import load_humaneval
    >>> rows = load_humaneval()[:2]
    >>> recs = [{"task_id": r["task_id"], "completions": [r["reference"]], "outcomes": ["pass"]} for r in rows]
    >>> s = plus_summary(rows, recs, [1])                   # doctest: +SKIP
    >>> s["base"]["pass@1"], s["plus"]["pass@1"]           # doctest: +SKIP
    (1.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["plus_line", "plus_summary"]


def plus_summary(problems: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]], ks: Sequence[int],
                 *, dataset: str = "humaneval") -> dict[str, Any]:
    """pass@k on the base tests and on base + plus, from the records :func:`rewardlang.trainers.evaluate.evaluate`
    returns (their completions and base outcomes); the per-problem plus outcomes go in ``per_problem``."""
    from rewardlang.datasets.plus import attach_plus
    from rewardlang.trainers.evaluate import judge, pass_at_k, summarize

    if dataset != "humaneval":
        raise ValueError("--plus: hidden tests exist for HumanEval (Python and the translated languages)")
    rows = [dict(r) for r in problems]
    attach_plus(rows)
    with_plus = [i for i, r in enumerate(rows) if r.get("plus_tests")]
    plus_rows = [{**rows[i], "tests": rows[i]["plus_tests"]} for i in with_plus]
    plus_out = judge(plus_rows, [records[i]["completions"] for i in with_plus]) if plus_rows else []
    by_index = dict(zip(with_plus, plus_out, strict=True))
    base_recs, plus_recs, per_problem = [], [], []
    for i, rec in enumerate(records):
        base = list(rec["outcomes"])
        extra = by_index.get(i)
        both: list[str | None] = []
        for j, b in enumerate(base):
            p = extra[j] if extra is not None else b
            if b is None or p is None:
                both.append(None)  # an infrastructure failure on either side: left out of both figures
            else:
                both.append("pass" if b == "pass" and p == "pass" else (b if b != "pass" else p))
        kept = [j for j, o in enumerate(both) if o is not None]
        cb = sum(base[j] == "pass" for j in kept)
        cp = sum(both[j] == "pass" for j in kept)
        base_recs.append({"n": len(kept), "correct": cb, "infra": len(base) - len(kept)})
        plus_recs.append({"n": len(kept), "correct": cp, "infra": len(base) - len(kept)})
        per_problem.append({"task_id": rec["task_id"], "has_plus": extra is not None, "n": len(kept),
                            "correct_base": cb, "correct_plus": cp, "plus_outcomes": both,
                            **{f"pass@{k}_plus": pass_at_k(len(kept), cp, k) for k in ks if len(kept) >= k}})
    return {"base": summarize(base_recs, ks), "plus": summarize(plus_recs, ks),
            "problems_without_plus": len(records) - len(with_plus), "per_problem": per_problem}


def plus_line(s: Mapping[str, Any]) -> str:
    """``pass@1 base 0.120, plus 0.090 (-0.030); pass@5 ...`` for the command's output.

        >>> plus_line({"base": {"pass@1": 0.5}, "plus": {"pass@1": 0.25}, "problems_without_plus": 1})
        'pass@1: base 0.500, plus 0.250 (-0.250) (1 problem without plus inputs counts its base result)'
    """
    keys = [k for k in s["base"] if k.startswith("pass@") and k in s["plus"]]
    parts = [f"{k}: base {s['base'][k]:.3f}, plus {s['plus'][k]:.3f} ({s['plus'][k] - s['base'][k]:+.3f})"
             for k in keys]
    n = s.get("problems_without_plus") or 0
    tail = (" (1 problem without plus inputs counts its base result)" if n == 1 else
            f" ({n} problems without plus inputs count their base result)" if n else "")
    return "; ".join(parts) + tail
