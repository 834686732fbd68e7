"""Preference mining over 100,000 scored rows: the vectorized miners of rewardlang.runtime.preference against a
straightforward per-row Python implementation (dicts of lists per prompt, nested loops), same output checked.

    PYTHONPATH=. python3 benchmarks/bench_mining.py [--rows 100000] [--group 8]

The baselines below are also the reference implementation the mining tests compare against
(tests/runtime/test_preference_mining.py).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any, Sequence

import numpy as np


# ---------------------------------------------------------------------- baseline: per-row Python
def baseline_pairs(groups: Sequence[Any], rank: Sequence[float], valid: Sequence[bool], *, strategy: str,
                   margin: float = 0.0, chosen_min: float | None = None, rejected_max: float | None = None,
                   max_pairs: int | None = None, tie: Sequence[float] | None = None) -> list[tuple[int, int]]:
    """The pairs a hand-written miner makes: rows collected per prompt, then loops."""
    by: dict[Any, list[int]] = {}   # prompts in order of their first row (masked or not)
    for i, g in enumerate(groups):
        members = by.setdefault(g, [])
        if valid[i] and not math.isnan(rank[i]):
            members.append(i)
    out: list[tuple[int, int]] = []
    for _g, idx in by.items():
        if not idx:
            continue
        key = (lambda i: (tie[i], i)) if tie is not None else (lambda i: i)
        idx = sorted(idx, key=key)
        if strategy == "max_min":
            best = worst = idx[0]
            for i in idx[1:]:
                if rank[i] > rank[best]:
                    best = i
                if rank[i] < rank[worst]:
                    worst = i
            d = rank[best] - rank[worst]
            if d > 0 and d >= margin:
                out.append((best, worst))
            continue
        cand = []
        for a, i in enumerate(idx):
            for b, j in enumerate(idx):
                d = rank[i] - rank[j]
                if d <= 0 or d < margin:
                    continue
                if strategy == "threshold" and not (rank[i] >= chosen_min and rank[j] <= rejected_max):
                    continue
                cand.append((-d, a, b, i, j))
        cand.sort()
        if max_pairs is not None:
            cand = cand[:max_pairs]
        out.extend((i, j) for _, _, _, i, j in cand)
    return out


def baseline_groups(groups: Sequence[Any], winners: Sequence[bool], losers: Sequence[bool], *, min_winners: int = 1,
                    min_losers: int = 1, max_group: int | None = None) -> list[tuple[int, int, bool]]:
    by: dict[Any, tuple[list[int], list[int]]] = {}
    order: list[Any] = []
    for i, g in enumerate(groups):
        if g not in by:
            by[g] = ([], [])
            order.append(g)
        if winners[i]:
            by[g][0].append(i)
        elif losers[i]:
            by[g][1].append(i)
    out = []
    for gi, g in enumerate(order):
        w, lo = by[g]
        if len(w) < min_winners or len(lo) < min_losers:
            continue
        if max_group is not None:
            kw = min(len(w), max(max_group // 2, max_group - len(lo)))
            w, lo = w[:kw], lo[:max_group - kw]
        out += [(gi, i, True) for i in w] + [(gi, i, False) for i in lo]
    return out


# ---------------------------------------------------------------------- data
def scored_rows(n: int, group: int, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Prompt keys, ranks (pass/fail plus a small quality term, some exact ties) and a 3% mask."""
    rng = np.random.default_rng(seed)
    prompts = [f"prompt {i // group}" for i in range(n)]
    rank = (rng.random(n) < 0.4).astype(float) + np.round(rng.random(n), 1) * 0.1
    valid = rng.random(n) > 0.03
    return prompts, rank, valid


def main() -> None:
    from rewardlang.runtime.preference import group_ids, mine_groups, mine_pairs

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--group", type=int, default=8)
    args = ap.parse_args()
    prompts, rank, valid = scored_rows(args.rows, args.group)
    rank_l, valid_l = rank.tolist(), valid.tolist()
    cases = [("max_min", {}), ("all, margin 0.5, max 4", dict(strategy="all", margin=0.5, max_pairs=4)),
             ("threshold 1 / 0.1", dict(strategy="threshold", chosen_min=1.0, rejected_max=0.1))]
    print(f"{args.rows:,} scored rows, groups of {args.group}")
    for name, kw in cases:
        kw = {"strategy": "max_min", **kw}
        t0 = time.perf_counter()
        ref = baseline_pairs(prompts, rank_l, valid_l, **kw)
        t1 = time.perf_counter()
        gid, _ = group_ids(prompts)           # part of ours: the prompt keys -> dense ids
        c, r = mine_pairs(gid, rank, valid, **kw)
        t2 = time.perf_counter()
        ours = list(zip(c.tolist(), r.tolist()))
        assert ours == ref, f"{name}: outputs differ"
        print(f"  pairs {name:<24} {len(ours):>7,} pairs  baseline {t1 - t0:7.3f} s  ours {t2 - t1:7.3f} s  "
              f"ratio {(t1 - t0) / (t2 - t1):5.1f}x")
    win, lose = rank >= 1, rank < 1
    t0 = time.perf_counter()
    ref_g = baseline_groups(prompts, (win & valid).tolist(), (lose & valid).tolist(), max_group=6)
    t1 = time.perf_counter()
    gid, _ = group_ids(prompts)
    g, rows, isw = mine_groups(gid, win & valid, lose & valid, max_group=6)
    t2 = time.perf_counter()
    assert list(zip(g.tolist(), rows.tolist(), isw.tolist())) == ref_g, "groups differ"
    print(f"  groups (max_group 6)           {len(ref_g):>7,} members baseline {t1 - t0:7.3f} s  ours {t2 - t1:7.3f} s  "
          f"ratio {(t1 - t0) / (t2 - t1):5.1f}x")


if __name__ == "__main__":
    main()
