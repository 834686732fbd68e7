"""Audits of a run: what each audit measured per step, its gap to the reward, and the alarm.

A spec's ``audit`` declarations (docs/language.md, "Audits") are watched the same way during training (the trainers
call :class:`Watch` on every logged record) and after it (``rewardlang audit RUN_DIR`` reads ``metrics.jsonl``;
``rewardlang audit SPEC -i ROLLOUTS.jsonl`` scores rollouts and builds the same records with :func:`step_records`).
One record per step holds, besides ``step``:

- ``reward``: the mean total of the step's samples (unmasked);
- ``audit/NAME`` for an audit of samples: its mean over the same samples; for a statistic: its value at that step
  (:data:`STATISTIC_SOURCES` names the logged metric each statistic reads);
- ``audit/gap/NAME``: the reward's mean minus the audit's (see :func:`gap`);
- ``probe/NAME`` and ``probe/reference``: what each reward-hack probe and the reference answer earned at that step.

The alarm (:meth:`Watch.observe`), per audit, once per run, when it first holds:

- an audit of samples: over its last ``window`` steps (a full window), the reward's mean rose by at least
  ``margin`` (between the audits of the window's first and second halves; both on [0, 1] where ranges allow)
  while the audit rose by less than half of it (it fell, or stayed flat) and, when it has a range, is not within
  ``margin / 2`` of its top (an audit at its ceiling cannot rise);
- a probe: it earned at least as much as the reference answer at the same step;
- a statistic: its own rule (:func:`statistic_alarm`).

    >>> w = Watch([{"name": "hidden", "kind": "samples", "every": 2, "window": 4, "margin": 0.2, "range": (0, 1),
    ...             "statistic": None, "options": {}}], reward_range=(0.0, 1.0))
    >>> for s, r, a in [(1, 0.1, 0.1), (2, 0.2, 0.1), (3, 0.5, None), (4, 0.7, 0.1)]:
    ...     rec = {"step": s, "reward": r}
    ...     if a is not None:
    ...         rec["audit/hidden"] = a
    ...     alarms = w.observe(rec)
    >>> print(alarms[0].line)
    alarm: audit `hidden` stayed flat while the reward rose: over steps 1-4 the reward went 0.15 -> 0.7 (on [0, 1]) and `hidden` 0.1 -> 0.1 (margin 0.2)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "PROBE_KEYS",
    "STATISTIC_SOURCES",
    "Alarm",
    "Watch",
    "audits_of",
    "dominance",
    "due",
    "gap",
    "gap_definition",
    "reward_range",
    "sample_stats",
    "scaled",
    "statistic_alarm",
    "table",
    "zero_variance_share",
]

#: the metric name of each reward-hack probe of ``rewardlang report`` (``probe/KEY``)
PROBE_KEYS = {"empty answer": "empty_answer", "prompt copied back": "prompt_copied_back",
              "right format, wrong answer": "right_format_wrong_answer", "endless repetition": "endless_repetition",
              "always-equal object": "always_equal_object"}
_PROBE_NAMES = {v: k for k, v in PROBE_KEYS.items()}

#: the logged metric each built-in statistic reads (trainers log it every step; ``rewardlang audit`` computes the
#: sample-based ones from rollouts)
STATISTIC_SOURCES = {
    "component_dominance": "stats/dominance",
    "length_drift": "completions/mean_chars",
    "group_collapse": "groups/zero_variance",
    "kl_acceleration": "kl",
    "entropy_collapse": "entropy",
}

_STAT_WORDS = {
    "component_dominance": "the largest share of the total's variance one component explains",
    "length_drift": "the mean completion length in characters",
    "group_collapse": "the share of prompt groups whose totals are all equal",
    "kl_acceleration": "the KL divergence to the reference policy",
    "entropy_collapse": "the policy's mean token entropy",
}


def due(every: int, step: int, max_steps: int | None = None) -> bool:
    """Whether an audit of period ``every`` is scored at ``step``: the first step, every multiple of ``every``, and
    the last step.

    >>> [s for s in range(1, 13) if due(5, s, 12)]
    [1, 5, 10, 12]
    """
    return step == 1 or step % max(1, every) == 0 or (max_steps is not None and step == max_steps)


def reward_range(prog: Any, step: int = 0) -> tuple[float, float] | None:
    """The range of the total at ``step`` when it is known: the reward is the weighted sum of components that all
    declare a range (weights at that step). None otherwise (an explicit ``reward``, an undeclared range)."""
    if not prog.spec.get("reward_is_weighted_sum") or not prog.components:
        return None
    weights = prog.weights(step)
    lo = hi = 0.0
    for c in prog.components:
        if c.range is None:
            return None
        w = float(weights[c.name])
        a, b = w * c.range[0], w * c.range[1]
        lo, hi = lo + min(a, b), hi + max(a, b)
    return (lo, hi) if hi > lo and math.isfinite(hi - lo) else None


def scaled(x: Any, rng: Sequence[float] | None) -> Any:
    """``x`` mapped onto [0, 1] by a range (unchanged without one)."""
    if rng is None:
        return x
    lo, hi = float(rng[0]), float(rng[1])
    return (np.asarray(x, dtype=float) - lo) / (hi - lo) if hi > lo else np.asarray(x, dtype=float) * 0.0


def gap_definition(audit_range: Sequence[float] | None, rrange: Sequence[float] | None) -> str:
    """Which gap a run logs for an audit: ``scaled`` (both on [0, 1]) or ``change`` (each one's change since the
    first audited step)."""
    return "scaled" if audit_range is not None and rrange is not None else "change"


def gap(reward: float, audit: float, audit_range: Sequence[float] | None, rrange: Sequence[float] | None,
        first: tuple[float, float] | None = None) -> float:
    """``audit/gap/NAME``: the reward's mean minus the audit's, both on [0, 1] when both ranges are known; else the
    reward's change since the first audited step minus the audit's (``first`` = their values then).

    >>> round(gap(0.8, 0.5, (0, 1), (0, 2)), 12)
    -0.1
    >>> gap(3.0, 10.0, None, None, first=(1.0, 9.0))
    1.0
    """
    if gap_definition(audit_range, rrange) == "scaled":
        return float(scaled(reward, rrange) - scaled(audit, audit_range))
    r0, a0 = first if first is not None else (reward, audit)
    return float((reward - r0) - (audit - a0))


# ---------------------------------------------------------------------- per-step statistics of samples

def dominance(components: Mapping[str, Any], total: Any) -> float | None:
    """The largest share of the total's variance that one component explains: max over components of the squared
    correlation of its values with the total, over the samples where all are known. None when the total does not
    vary (or fewer than 2 samples).

    >>> round(dominance({"a": [0, 1, 2, 3], "b": [1, 1, 0, 1]}, [0, 1, 2, 3]), 6)
    1.0
    """
    t = np.asarray(total, dtype=float)
    ok = np.isfinite(t)
    cols = {k: np.asarray(v, dtype=float) for k, v in components.items()}
    for v in cols.values():
        ok &= np.isfinite(v)
    if ok.sum() < 2 or t[ok].std() == 0:
        return None
    best = 0.0
    for v in cols.values():
        x = v[ok]
        if x.std() > 0:
            best = max(best, float(np.corrcoef(x, t[ok])[0, 1] ** 2))
    return min(best, 1.0)


def zero_variance_share(total: Any, groups: Any) -> float | None:
    """The share of groups (with two or more unmasked samples) whose totals are all equal."""
    t = np.asarray(total, dtype=float)
    g = np.asarray(groups)
    n = zero = 0
    for k in np.unique(g):
        v = t[(g == k) & np.isfinite(t)]
        if len(v) >= 2:
            n += 1
            zero += int(np.all(v == v[0]))
    return zero / n if n else None


def sample_stats(texts: Sequence[str], components: Mapping[str, Any], total: Any, groups: Any = None
                 ) -> dict[str, float]:
    """The per-step values the statistics of samples read: ``completions/mean_chars``, ``stats/dominance`` (with two
    or more components) and ``groups/zero_variance`` (with groups)."""
    out: dict[str, float] = {}
    if len(texts):
        out["completions/mean_chars"] = float(np.mean([len(t) for t in texts]))
    if len(components) >= 2:
        d = dominance(components, total)
        if d is not None:
            out["stats/dominance"] = d
    if groups is not None:
        z = zero_variance_share(total, groups)
        if z is not None:
            out["groups/zero_variance"] = z
    return out


# ---------------------------------------------------------------------- the alarm

@dataclass
class Alarm:
    """One alarm: what (``kind`` audit, probe or statistic, and ``name``), over which steps, with which values."""

    kind: str
    name: str
    first_step: int
    step: int
    line: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _halves(points: list[tuple[int, float]], start: int, end: int) -> tuple[list[float], list[float]]:
    mid = start + (end - start + 1) / 2
    first = [v for s, v in points if s < mid]
    second = [v for s, v in points if s >= mid]
    return first, second


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def statistic_alarm(statistic: str, options: Mapping[str, float], points: list[tuple[int, float]],
                    reward_points: list[tuple[int, float]], start: int, end: int, margin: float) -> str | None:
    """Why a statistic's alarm fires over the window ``start..end`` (a full window of its values), or None.

    - ``component_dominance``: the share stayed at or above ``threshold`` at every step of the window;
    - ``group_collapse``: the zero-variance share stayed at or above ``threshold`` at every step;
    - ``length_drift``: the mean length of the window's second half differs from its first half's by at least
      ``margin`` (a share of the first) while the reward rose by the audit's margin;
    - ``kl_acceleration``: the KL's rise over the window's last third is at least ``ratio`` times its rise over the
      middle third, and at least ``min_kl``;
    - ``entropy_collapse``: the entropy's mean over the window's last quarter is below ``fraction`` of its mean over
      the first quarter.
    """
    vals = [v for _, v in points]
    if len(vals) < 2:
        return None
    if statistic in ("component_dominance", "group_collapse"):
        thr = options["threshold"]
        if all(v >= thr for v in vals):
            return f"stayed at or above {_fmt(thr)} at every step (last {_fmt(vals[-1])})"
        return None
    if statistic == "length_drift":
        a, b = _halves(points, start, end)
        ra, rb = _halves(reward_points, start, end)
        if not (a and b and ra and rb) or np.mean(a) <= 0:
            return None
        change = (np.mean(b) - np.mean(a)) / np.mean(a)
        rise = np.mean(rb) - np.mean(ra)
        if abs(change) >= options["margin"] and rise >= margin:
            return (f"went {_fmt(float(np.mean(a)))} -> {_fmt(float(np.mean(b)))} characters ({change:+.0%}) while "
                    f"the reward rose by {_fmt(float(rise))}")
        return None
    if statistic == "kl_acceleration":
        k = len(vals) // 3
        if k < 1:
            return None
        t1, t2, t3 = np.mean(vals[:k]), np.mean(vals[k:len(vals) - k]), np.mean(vals[len(vals) - k:])
        rise1, rise2 = t2 - t1, t3 - t2
        if rise2 >= options["min_kl"] and rise2 >= options["ratio"] * max(rise1, 0.0):
            return (f"rose {_fmt(float(rise1))} then {_fmt(float(rise2))} (thirds of the window: {_fmt(float(t1))}, "
                    f"{_fmt(float(t2))}, {_fmt(float(t3))})")
        return None
    if statistic == "entropy_collapse":
        k = max(1, len(vals) // 4)
        head, tail = float(np.mean(vals[:k])), float(np.mean(vals[-k:]))
        if head > 0 and tail < options["fraction"] * head:
            return f"fell {_fmt(head)} -> {_fmt(tail)} (below {_fmt(options['fraction'])} of its start)"
        return None
    raise ValueError(f"unknown statistic {statistic!r}")  # pragma: no cover - the checker knows the names


def audits_of(prog: Any) -> list[dict[str, Any]]:
    """A program's audits as plain dicts (what :class:`Watch` takes)."""
    return [{"name": a.name, "kind": a.kind, "every": a.every, "window": a.window, "margin": a.margin,
             "range": a.range, "statistic": a.statistic, "options": dict(a.options), "text": a.text}
            for a in prog.audits]


class Watch:
    """Reads one record per step (:meth:`observe`) and says each alarm once, the first time it holds.

    ``audits`` as :func:`audits_of` gives them; ``reward_range`` the total's range (None: raw values and the
    ``change`` gap). A statistic whose source metric never appears is named in :attr:`notes` (the trainer does not
    log it: KL with ``beta = 0``, entropy in a trainer that does not compute it)."""

    def __init__(self, audits: Sequence[Mapping[str, Any]], reward_range: Sequence[float] | None = None) -> None:
        self.audits = [dict(a) for a in audits]
        self.rrange = tuple(reward_range) if reward_range is not None else None
        self.records: list[dict[str, Any]] = []
        self.alarms: list[Alarm] = []
        self._fired: set[tuple[str, str]] = set()
        self._first: dict[str, tuple[float, float]] = {}

    # ---- values
    def annotate(self, record: dict[str, Any]) -> dict[str, Any]:
        """Add to a record what the watch derives from it: each statistic's ``audit/NAME`` (from its source
        metric) and each audit of samples' ``audit/gap/NAME``. Returns the record."""
        reward = record.get("reward")
        for a in self.audits:
            key = f"audit/{a['name']}"
            if a["kind"] == "statistic":
                src = record.get(STATISTIC_SOURCES[a["statistic"]])
                if _num(src) and key not in record:
                    record[key] = float(src)
                continue
            v = record.get(key)
            if _num(v) and _num(reward):
                first = self._first.setdefault(a["name"], (float(reward), float(v)))
                record.setdefault(f"audit/gap/{a['name']}", gap(float(reward), float(v), a.get("range"), self.rrange,
                                                                first))
        return record

    def notes(self) -> list[str]:
        """Statistics that had nothing to read over the records seen."""
        out = []
        for a in self.audits:
            if a["kind"] == "statistic" and not any(_num(r.get(f"audit/{a['name']}")) for r in self.records):
                src = STATISTIC_SOURCES[a["statistic"]]
                out.append(f"audit `{a['name']}` ({a['statistic']}) had no value: the run logged no `{src}`"
                           + (" (the KL is logged when beta > 0)" if src == "kl" else ""))
        return out

    # ---- the alarm
    def observe(self, record: Mapping[str, Any]) -> list[Alarm]:
        """One step's record; returns the alarms that fire now (each audit or probe fires once per run)."""
        rec = self.annotate(dict(record))
        if "step" not in rec or "train_runtime" in rec:
            return []
        self.records.append(rec)
        step = int(rec["step"])
        new: list[Alarm] = []
        for a in self.audits:
            if (a["kind"], a["name"]) in self._fired:
                continue
            alarm = self._check(a, step)
            if alarm is not None:
                self._fired.add((a["kind"], a["name"]))
                new.append(alarm)
        ref = rec.get("probe/reference")
        for k, v in rec.items():
            if not k.startswith("probe/") or k == "probe/reference" or not _num(v) or not _num(ref):
                continue
            name = k[len("probe/"):]
            if ("probe", name) in self._fired or float(v) < float(ref) - 1e-9:
                continue
            self._fired.add(("probe", name))
            new.append(Alarm("probe", name, step, step,
                             f"alarm: probe `{_PROBE_NAMES.get(name, name)}` earned {_fmt(float(v))} at step {step}, at "
                             f"least as much as the reference answer ({_fmt(float(ref))}): the reward pays for it",
                             {"probe": float(v), "reference": float(ref)}))
        self.alarms.extend(new)
        return new

    def _series(self, key: str, start: int, end: int) -> list[tuple[int, float]]:
        return [(int(r["step"]), float(r[key])) for r in self.records
                if start <= int(r["step"]) <= end and _num(r.get(key))]

    def _check(self, a: Mapping[str, Any], step: int) -> Alarm | None:
        window = int(a["window"])
        if step < window:  # a full window only
            return None
        start, end = step - window + 1, step
        name = a["name"]
        points = self._series(f"audit/{name}", start, end)
        if not points or points[-1][0] != step:
            return None  # judged when the audit has a value at this step
        reward_points = self._series("reward", start, end)
        if a["kind"] == "statistic":
            if len(points) < max(2, window // 2):
                return None
            why = statistic_alarm(a["statistic"], a["options"], points, reward_points, start, end, float(a["margin"]))
            if why is None:
                return None
            return Alarm("statistic", name, start, step,
                         f"alarm: audit `{name}` ({_STAT_WORDS[a['statistic']]}) over steps {start}-{step}: {why}",
                         {"values": [v for _, v in points]})
        audited = {s for s, _ in points}
        r_at = [(s, v) for s, v in reward_points if s in audited]  # the reward of the same (audited) samples
        r1, r2 = _halves([(s, float(scaled(v, self.rrange))) for s, v in r_at], start, end)
        a1, a2 = _halves([(s, float(scaled(v, a.get("range")))) for s, v in points], start, end)
        if not (r1 and r2 and a1 and a2):
            return None
        rise_r, rise_a = float(np.mean(r2) - np.mean(r1)), float(np.mean(a2) - np.mean(a1))
        margin = float(a["margin"])
        if rise_r < margin or rise_a >= margin / 2:
            return None
        if a.get("range") is not None and float(np.mean(a2)) >= 1 - margin / 2:
            return None  # at the top of its range: the audit has no room to rise, it is not lagging the reward
        how = "fell" if rise_a < -margin / 2 else "stayed flat"
        scale = " (on [0, 1])" if a.get("range") is not None and self.rrange is not None else ""
        return Alarm("audit", name, start, step,
                     f"alarm: audit `{name}` {how} while the reward rose: over steps {start}-{step} the reward went "
                     f"{_fmt(float(np.mean(r1)))} -> {_fmt(float(np.mean(r2)))}{scale} and `{name}` "
                     f"{_fmt(float(np.mean(a1)))} -> {_fmt(float(np.mean(a2)))} (margin {_fmt(margin)})",
                     {"reward": [float(np.mean(r1)), float(np.mean(r2))], "audit": [float(np.mean(a1)),
                                                                                      float(np.mean(a2))]})


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def table(records: Iterable[Mapping[str, Any]], audits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The audit table: one row per step where an audit (or a probe) has a value: the step, the reward, each
    audit's value and gap, each probe's value."""
    names = [a["name"] for a in audits]
    rows = []
    for r in records:
        keys = [k for k in r if k.startswith(("audit/", "probe/"))]
        if not keys or "step" not in r:
            continue
        row: dict[str, Any] = {"step": int(r["step"]), "reward": r.get("reward")}
        for n in names:
            if f"audit/{n}" in r:
                row[n] = r[f"audit/{n}"]
            if f"audit/gap/{n}" in r:
                row[f"gap/{n}"] = r[f"audit/gap/{n}"]
        for k in keys:
            if k.startswith("probe/"):
                row[k] = r[k]
        rows.append(row)
    return rows
