"""Preference mining: scored samples -> DPO pairs and GEPO groups, as a spec's ``preference { }`` section says.

Samples are grouped (by prompt, or the column ``--group-by`` names). Inside a group every unmasked sample has a rank
(the section's ``rank``, default the total ``reward``) and, for groups, a winner/loser label (``winners``, default
none; ``losers``, default "not a winner"). Everything runs in NumPy over group boundaries: one stable sort by group
puts each group's rows side by side and every strategy is a handful of array operations, O(n) for max-min and
threshold splits and O(Σ group size²) for all pairs (each group's pairs are enumerated once).

>>> import numpy as np
>>> group = np.array([0, 0, 0, 1, 1])
>>> rank = np.array([1.0, 0.0, 0.5, 2.0, 2.0])
>>> ok = np.ones(5, bool)
>>> c, r = mine_pairs(group, rank, ok, strategy="max_min")
>>> c.tolist(), r.tolist()          # group 1 is all tied: no pair
([0], [1])
>>> c, r = mine_pairs(group, rank, ok, strategy="all", margin=0.4)
>>> c.tolist(), r.tolist()          # pairs with rank difference >= 0.4, largest first
([0, 0, 2], [1, 2, 1])
>>> g, rows, is_winner = mine_groups(group, rank >= 1, rank < 1)
>>> g.tolist(), rows.tolist(), is_winner.tolist()   # group 1 has no loser
([0, 0, 0], [0, 1, 2], [True, False, False])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from rewardlang.jsonl import read_jsonl
from rewardlang.outputs import atomic_write
from rewardlang.runtime.scoring import score_rows

__all__ = ["PreferenceSettings", "Ranked", "settings_of", "rank_rows", "group_ids", "mine_pairs", "mine_groups",
           "PairSummary", "summarize_pairs", "summarize_groups", "MiningError", "mine_file"]


@dataclass
class PreferenceSettings:
    """The `preference { }` settings with their defaults (docs/language.md, The preference section)."""

    pairs: str = "max_min"
    rank: str = "reward"
    margin: float = 0.0
    chosen_min: float | None = None
    rejected_max: float | None = None
    ties: str = "first"
    max_pairs: int | None = None
    winners: str | None = None
    losers: str | None = None
    min_winners: int = 1
    min_losers: int = 1
    max_group: int | None = None


def settings_of(spec: Mapping[str, Any]) -> PreferenceSettings:
    """The settings a compiled spec's ``SPEC`` dict records (defaults where the spec has no section)."""
    return PreferenceSettings(**(spec.get("preference") or {}))


@dataclass
class Ranked:
    """Per-sample arrays the miners read."""

    rank: np.ndarray        # float, NaN where masked
    valid: np.ndarray       # bool: may enter a pair or group (no masked component, rank known)
    winners: np.ndarray     # bool
    losers: np.ndarray      # bool


def rank_rows(prog: Any, total: np.ndarray, components: Mapping[str, np.ndarray], masked: np.ndarray,
              step: int = 0) -> Ranked:
    """Evaluate the spec's rank and winner/loser rules over scored columns (NaN = masked).

    ``masked`` is True for a sample with any masked component: such samples never enter a pair or a group.
    """
    total = np.asarray(total, dtype=np.float64)
    n = len(total)
    C = {k: np.asarray(v, dtype=np.float64) for k, v in components.items()}
    fn = getattr(prog.module, "preference", None)
    out = fn(total, C, prog.weights(step), step) if fn is not None else {}

    def col(name: str, default: np.ndarray) -> np.ndarray:
        v = out.get(name)
        return default if v is None else np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).copy()

    rank = col("rank", total)
    valid = ~np.asarray(masked, dtype=bool) & ~np.isnan(rank) & ~np.isnan(total)
    w = col("winners", np.zeros(n))
    winners = valid & (w == 1.0)
    lo = out.get("losers")
    losers = valid & ~winners & ((col("losers", np.zeros(n)) == 1.0) if lo is not None else True)
    return Ranked(np.where(valid, rank, np.nan), valid, winners, losers)


def group_ids(keys: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Dense group ids in order of first appearance (rows of a group need not be contiguous).

    >>> group_ids(["b", "a", "b"])[0].tolist()
    [0, 1, 0]
    """
    try:
        index = {k: i for i, k in enumerate(dict.fromkeys(keys))}   # C-level: one hash per row
        ids = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
        return ids, list(index)
    except TypeError:  # unhashable keys (lists, dicts): by their JSON text
        return group_ids([json.dumps(k, sort_keys=True) for k in keys])


def _order(group: np.ndarray, tie: np.ndarray | None) -> np.ndarray:
    """Rows sorted by group, then the tie-break key, then file order (all stable)."""
    return np.lexsort(([tie] if tie is not None else []) + [group])  # stable: file order among equals


def mine_pairs(group: np.ndarray, rank: np.ndarray, valid: np.ndarray, *, strategy: str = "max_min",
               margin: float = 0.0, chosen_min: float | None = None, rejected_max: float | None = None,
               max_pairs: int | None = None, tie: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(chosen row indices, rejected row indices), ordered by group, then largest rank difference first.

    A pair needs ``rank[chosen] - rank[rejected] > 0`` and ``>= margin``: tied samples never form a pair.
    ``tie`` orders samples of equal rank (smaller first, e.g. the completion length for ``ties = "shortest"``;
    default file order): it picks max-min's representatives and breaks ties among equal-margin pairs.
    """
    group = np.asarray(group, dtype=np.int64)
    rank = np.asarray(rank, dtype=np.float64)
    keep = np.asarray(valid, dtype=bool) & ~np.isnan(rank)
    rows = np.flatnonzero(keep)
    if len(rows) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    g, r = group[rows], rank[rows]
    t = None if tie is None else np.asarray(tie)[rows]
    if strategy == "max_min":
        o = np.argsort(g, kind="stable")            # group by group, file order inside
        gs, rs = g[o], r[o]
        starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(gs)]))
        ts = None if t is None else np.asarray(t, dtype=np.float64)[o]
        pos = np.arange(len(gs))

        def first_at(extreme: np.ndarray) -> np.ndarray:
            # the first row (smallest tie key, then file order) whose rank equals its group's extreme
            hit = rs == extreme[seg]
            if ts is not None:
                tmin = np.minimum.reduceat(np.where(hit, ts, np.inf), starts)
                hit &= ts == tmin[seg]
            return np.minimum.reduceat(np.where(hit, pos, len(gs)), starts)

        c = first_at(np.maximum.reduceat(rs, starts))
        w = first_at(np.minimum.reduceat(rs, starts))
        d = rs[c] - rs[w]
        ok = (d > 0) & (d >= margin)
        return rows[o[c[ok]]], rows[o[w[ok]]]
    if strategy not in ("all", "threshold"):
        raise ValueError(f"unknown pair strategy {strategy!r}")
    # every ordered pair inside a group: sort rows by group, lay the groups out as rows of a (groups x K) matrix
    # (K = the largest group, NaN padding) and compare every column with every column at once
    o = _order(g, t)
    gs = g[o]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    sizes = np.diff(np.r_[starts, len(gs)])
    seg = np.repeat(np.arange(len(starts)), sizes)
    col = np.arange(len(gs)) - starts[seg]
    K = int(sizes.max())
    M = np.full((len(starts), K), np.nan)
    M[seg, col] = r[o]
    # blocks of groups keep the (block x K x K) comparison within ~4M entries (one group's K² is inherent)
    step = max(1, 4_000_000 // (K * K))
    found = []
    for lo in range(0, len(starts), step):
        B = M[lo:lo + step]
        with np.errstate(invalid="ignore"):
            D = B[:, :, None] - B[:, None, :]              # (groups, chosen column, rejected column)
            ok = (D > 0) & (D >= margin)
            if strategy == "threshold":
                ok &= (B >= chosen_min)[:, :, None] & (B <= rejected_max)[:, None, :]  # type: ignore[operator]
        gb, a, b = np.nonzero(ok)                          # in (group, chosen, rejected) order
        found.append((gb + lo, a, b, D[gb, a, b]))
    gk, a, b, d = (np.concatenate(x) for x in zip(*found))
    i, j = starts[gk] + a, starts[gk] + b                  # sorted positions
    # largest difference first within a group; equal differences keep the tie order (i, then j), in which the
    # candidates were generated: lexsort is stable
    s = np.lexsort((-d, gk))
    i, j = i[s], j[s]
    if max_pairs is not None and len(i):
        gi = gk[s]
        first = np.flatnonzero(np.r_[True, gi[1:] != gi[:-1]])
        pos = np.arange(len(i)) - np.repeat(first, np.diff(np.r_[first, len(i)]))
        i, j = i[pos < max_pairs], j[pos < max_pairs]
    return rows[o[i]], rows[o[j]]


def mine_groups(group: np.ndarray, winners: np.ndarray, losers: np.ndarray, *, min_winners: int = 1,
                min_losers: int = 1, max_group: int | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group id, row index, is_winner) of every member of every kept group, grouped, winners first.

    A group is kept with at least ``min_winners`` winners and ``min_losers`` losers. Over ``max_group`` members,
    winners keep ``max(max_group // 2, max_group - n_losers)`` places (at most their number), losers the rest:
    the earliest rows of each side stay.
    """
    group = np.asarray(group, dtype=np.int64)
    w, lo = np.asarray(winners, bool), np.asarray(losers, bool) & ~np.asarray(winners, bool)
    member = w | lo
    rows = np.flatnonzero(member)
    if len(rows) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool)
    g, isw = group[rows], w[rows]
    o = np.lexsort((np.arange(len(rows)), ~isw, g))   # group, winners first, file order
    g, isw, rows = g[o], isw[o], rows[o]
    n_groups = int(g.max()) + 1
    nw = np.bincount(g, weights=isw, minlength=n_groups).astype(np.int64)
    nl = np.bincount(g, weights=~isw, minlength=n_groups).astype(np.int64)
    kw, kl = nw, nl
    if max_group is not None:
        kw = np.minimum(nw, np.maximum(max_group // 2, max_group - nl))
        kl = np.minimum(nl, max_group - kw)
    kept = (nw >= min_winners) & (nl >= min_losers)
    # position of each row inside its side of its group
    side = np.where(isw, 0, 1)
    key = g * 2 + side
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    pos = np.arange(len(key)) - np.repeat(first, np.diff(np.r_[first, len(key)]))
    limit = np.where(isw, kw[g], kl[g])
    sel = kept[g] & (pos < limit)
    return g[sel], rows[sel], isw[sel]


@dataclass
class PairSummary:
    """What mining made of each prompt (the `rewardlang pairs` summary)."""

    prompts: int = 0
    samples: int = 0
    masked: int = 0
    with_output: int = 0
    items: int = 0
    #: prompts without a pair or group, by reason
    reasons: dict[str, int] = field(default_factory=dict)
    #: number of pairs (or group members) -> prompts
    per_prompt: dict[int, int] = field(default_factory=dict)


def _per_prompt(counts: np.ndarray) -> dict[int, int]:
    vals, n = np.unique(counts[counts > 0], return_counts=True)
    return {int(v): int(c) for v, c in zip(vals, n)}


def summarize_pairs(group: np.ndarray, n_groups: int, ranked: Ranked, chosen: np.ndarray,
                    strategy: str, chosen_min: float | None = None, rejected_max: float | None = None
                    ) -> PairSummary:
    """Counts prompts with pairs and, for those without, why: fewer than two unmasked samples, all tied, none
    above the threshold (all failing), none below it, or no difference reaching the margin."""
    valid = ranked.valid
    nvalid = np.bincount(group[valid], minlength=n_groups)
    r = np.where(valid, ranked.rank, np.nan)
    with np.errstate(invalid="ignore"):
        hi = np.full(n_groups, -np.inf)
        lo = np.full(n_groups, np.inf)
        np.fmax.at(hi, group[valid], r[valid])
        np.fmin.at(lo, group[valid], r[valid])
    pairs = np.bincount(group[chosen], minlength=n_groups)
    none = pairs == 0
    reasons = {"fewer than 2 unmasked samples": int((none & (nvalid < 2)).sum())}
    rest = none & (nvalid >= 2)
    tied = rest & (hi == lo)
    reasons["all tied"] = int(tied.sum())
    rest &= ~tied
    if strategy == "threshold":
        fail = rest & (hi < chosen_min)  # type: ignore[operator]
        reasons["none reaches chosen_min (all failing)"] = int(fail.sum())
        rest &= ~fail
        top = rest & (lo > rejected_max)  # type: ignore[operator]
        reasons["none at or below rejected_max (all passing)"] = int(top.sum())
        rest &= ~top
    reasons["no difference reaches the margin"] = int(rest.sum())
    return PairSummary(n_groups, len(group), int((~valid).sum()), int((~none).sum()), len(chosen),
                       {k: v for k, v in reasons.items() if v}, _per_prompt(pairs))


def summarize_groups(group: np.ndarray, n_groups: int, ranked: Ranked, kept_group: np.ndarray,
                     min_winners: int, min_losers: int) -> PairSummary:
    """Counts prompts with a group and, for those without, why: no winners (all failing), no losers (all
    passing), or too few of either."""
    nw = np.bincount(group[ranked.winners], minlength=n_groups)
    nl = np.bincount(group[ranked.losers], minlength=n_groups)
    members = np.bincount(kept_group, minlength=n_groups)
    none = members == 0
    reasons = {
        "no winners (all failing)": int((none & (nw == 0)).sum()),
        "no losers (all passing)": int((none & (nw > 0) & (nl == 0)).sum()),
        f"fewer than {min_winners} winners or {min_losers} losers":
            int((none & (nw > 0) & (nl > 0)).sum()),
    }
    return PairSummary(n_groups, len(group), int((~ranked.valid).sum()), int((~none).sum()), len(kept_group),
                       {k: v for k, v in reasons.items() if v}, _per_prompt(members))


# ---------------------------------------------------------------------- files (`rewardlang pairs`)

class MiningError(ValueError):
    """A problem with the input file, with its line and column when there is one."""


def _read_jsonl(path: str) -> list[tuple[int, dict]]:
    return read_jsonl(path, MiningError)


def _scores(prog: Any, rows: list[dict], step: int, lines: list[int] | None = None, path: str = ""
            ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(total, components, masked) of the rows: read from a `rewardlang score` output, or scored here. A score
    that is neither a number nor null (masked) is a MiningError naming ``path:line`` and the field."""
    names = [c.name for c in prog.components]
    scored = all("reward" in r and isinstance(r.get("components"), dict) for r in rows)
    n = len(rows)
    if scored:
        where = iter(lines or range(1, n + 1))
        line = 0

        def num(x: Any, field: str = "reward") -> float:
            if x is None:
                return float("nan")
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                shown = json.dumps(x)
                raise MiningError(f"{path}:{line}: `{field}` must be a number (or null for a masked score), got "
                                  f"{shown[:40]}")
            return float(x)

        absent = [k for k in names if any(k not in r["components"] for r in rows)]
        if absent:  # scored by another spec: its numbers would be read as "masked" and silently drop every row
            raise MiningError(f"the rows were scored without component(s) {', '.join(f'`{k}`' for k in absent)} "
                              f"of this spec (scored by another spec?): score them with this spec, or pass the raw "
                              f"rows (prompt, completion and the spec's inputs) and they are scored here")
        total = np.empty(n, dtype=np.float64)
        comps = {k: np.empty(n, dtype=np.float64) for k in names}
        for i, r in enumerate(rows):
            line = next(where)
            total[i] = num(r["reward"])
            for k in names:
                comps[k][i] = num(r["components"].get(k), f"components.{k}")
        masked = np.array([bool(r.get("masked")) for r in rows], dtype=bool)
        return total, comps, masked
    # a bad value: ScoringError, located by the file's line where the rows came from one
    given = [(ln, r, None) for ln, r in zip(lines, rows)] if lines is not None else rows
    res = score_rows(prog, given, step=step, label=path).result
    masked = np.zeros(n, dtype=bool)
    for m in res.masked.values():
        masked |= m
    return res.total, res.components, masked


def mine_file(prog: Any, input_path: str, output_path: str, *, groups: bool = False, group_by: str = "prompt",
              step: int = 0) -> PairSummary:
    """Mine DPO pairs (TRL's format: prompt, chosen, rejected, plus score_chosen, score_rejected and margin) or,
    with ``groups``, GEPO groups (prompt, winners, losers, their scores) from a JSONL file of scored or raw rows.
    The output is written through :func:`rewardlang.outputs.atomic_write`: it is complete or absent.

    Raises :class:`MiningError` for unreadable lines and missing columns, and
    :class:`~rewardlang.runtime.scoring.ScoringError` (located D001 issues) for bad values of raw rows.
    """
    st = settings_of(prog.spec)
    numbered = _read_jsonl(input_path)
    rows = [r for _, r in numbered]
    for col in {"prompt", "completion", group_by}:
        missing = [ln for ln, r in numbered if col not in r]
        if missing:
            raise MiningError(f"{input_path}:{missing[0]}: no `{col}` column ({len(missing)} row(s) lack it)")
    bad = next(((ln, r["completion"]) for ln, r in numbered if not isinstance(r["completion"], str)), None)
    if bad is not None:
        raise MiningError(f"{input_path}:{bad[0]}: `completion` must be text, got {json.dumps(bad[1])[:40]}")
    total, comps, masked = _scores(prog, rows, step, [ln for ln, _ in numbered], input_path)
    ranked = rank_rows(prog, total, comps, masked, step)
    gid, keys = group_ids([r[group_by] for r in rows])
    completions = [r["completion"] for r in rows]
    score = ranked.rank

    def clean(x: float) -> float | None:
        return None if x != x else float(x)

    records: list[str] = []
    if groups:
        if st.winners is None:
            raise MiningError("the spec's `preference { }` section has no `winners` rule, which --groups needs "
                              "(e.g. `winners = rule == 1`)")
        g, members, isw = mine_groups(gid, ranked.winners, ranked.losers, min_winners=st.min_winners,
                                      min_losers=st.min_losers, max_group=st.max_group)
        summary = summarize_groups(gid, len(keys), ranked, g, st.min_winners, st.min_losers)
        # group boundaries; no group at all (every prompt too small, or all passing) gives no record
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True]) if len(g) else np.zeros(1, np.int64)
        for a, b in zip(bounds[:-1], bounds[1:]):
            m, w = members[a:b], isw[a:b]
            first = rows[int(m[0])]
            rec: dict[str, Any] = {"prompt": first["prompt"]}
            if group_by != "prompt":
                rec[group_by] = first[group_by]
            rec["winners"] = [completions[i] for i in m[w]]
            rec["losers"] = [completions[i] for i in m[~w]]
            rec["winner_scores"] = [clean(score[i]) for i in m[w]]
            rec["loser_scores"] = [clean(score[i]) for i in m[~w]]
            records.append(json.dumps(rec, ensure_ascii=False))
    else:
        tie = np.array([len(c) if isinstance(c, str) else 0 for c in completions]) if st.ties == "shortest" else None
        c, r = mine_pairs(gid, ranked.rank, ranked.valid, strategy=st.pairs, margin=st.margin,
                          chosen_min=st.chosen_min, rejected_max=st.rejected_max, max_pairs=st.max_pairs, tie=tie)
        summary = summarize_pairs(gid, len(keys), ranked, c, st.pairs, st.chosen_min, st.rejected_max)
        for i, j in zip(c.tolist(), r.tolist()):
            rec = {"prompt": rows[i]["prompt"]}
            if group_by != "prompt":
                rec[group_by] = rows[i][group_by]
            rec.update({"chosen": completions[i], "rejected": completions[j], "score_chosen": clean(score[i]),
                        "score_rejected": clean(score[j]), "margin": clean(score[i] - score[j])})
            records.append(json.dumps(rec, ensure_ascii=False))
    # complete or absent, mode 0644 like every output (mkstemp's 0600 was the odd one out); OutputError on a full
    # disk, naming the path
    with atomic_write(output_path) as f:
        for line in records:
            f.write(line + "\n")
    return summary
