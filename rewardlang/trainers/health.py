"""What a step's reward cost and showed, and whether the run can learn from it.

:class:`StepReward` turns one optimizer step's scoring into metrics, for every generating trainer (GRPO, PPO, OORL,
online GEPO and DPO):

- ``time/reward_max``: wall seconds of the step's slowest program execution in the sandbox (0 when the spec runs
  none); ``reward/timeouts``: programs that hit their time limit; ``time/component/NAME``: seconds in each component's
  functions (a ``let`` shared by components is counted under the function's name), for every component (0 for one
  that calls no timed function: pure arithmetic runs vectorised with the batch);
- ``limits/relative`` and ``limits/no_reference``: executions whose CPU limit was derived from the task's reference
  solution, and those that fell back to the spec's timeout (no reference, or one that failed its own tests);
- ``groups/zero_variance``: the share of prompt groups whose unmasked totals are all equal (GRPO-style advantages
  are 0 there: nothing is learned from them); ``reward/samples``: unmasked samples;
- ``components/NAME/min`` and ``components/NAME/max`` over the step's unmasked samples.

:func:`learning_warnings` reads a run's metric records and names what keeps it from learning: every group with zero
variance, no pair or group mined (``pref/groups`` 0), or a component constant on every sample, for ``steps``
consecutive steps. :class:`LearningGuard` prints each such warning once, while the run goes on; the run's README
lists them (:func:`rewardlang.trainers.report.write_run_readme`).

    >>> recs = [{"step": s, "components/format/min": 0.0, "components/format/max": 0.0, "reward/samples": 16}
    ...         for s in (1, 2, 3)]
    >>> print(learning_warnings(recs)[0])
    `format` was 0 on all 48 samples of steps 1-3: no sample differs from another in it, so it teaches nothing; `rewardlang report` on the run's samples shows why
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["WARN_STEPS", "LearningGuard", "StepReward", "learning_warnings"]

#: consecutive steps after which a run that cannot learn is warned about
WARN_STEPS = 3


class StepReward:
    """Collects one step's reward observations (:meth:`observe`) and the program's counters, and gives the step's
    metrics (:meth:`take`, which starts the next step).

        >>> import rewardlang
        >>> prog = rewardlang.loads("component n in [0, 9] = len(completion)")
        >>> sr = StepReward(prog)
        >>> r = prog.score(["ab", "ab", "abc", "abc"])
        >>> sr.observe(r.components, r.total, np.array([0, 0, 1, 1]))
        >>> m = sr.take()
        >>> m["groups/zero_variance"], m["components/n/min"], m["components/n/max"], m["reward/samples"]
        (1.0, 2.0, 3.0, 4.0)
    """

    def __init__(self, program: Any) -> None:
        self.program = program
        self._warned: set[tuple[str, tuple[str, ...]]] = set()
        self._reset()

    def _stats(self) -> Mapping[str, Any]:
        return getattr(self.program, "stats", {}) or {}

    def _reset(self) -> None:
        stats = self._stats()
        self._before = {k: float(v) for k, v in stats.items()
                        if isinstance(v, (int, float)) and (k.startswith("time:") or k in _COUNTERS)}
        if isinstance(stats, dict) and "sandbox.max_wall_s" in stats:
            stats["sandbox.max_wall_s"] = 0.0  # a maximum, not a sum: restarted each step
        self._lo: dict[str, float] = {}
        self._hi: dict[str, float] = {}
        self._groups = 0
        self._zero = 0
        self._samples = 0

    def begin(self) -> None:
        """Start a step (forget what was observed so far)."""
        self._reset()

    def observe(self, components: Mapping[str, Any], total: Any, groups: Any = None) -> None:
        """One scored batch: per-component values and totals (NaN where masked), and each sample's group id."""
        total = np.asarray(total, dtype=np.float64)
        ok = np.isfinite(total)
        self._samples += int(ok.sum())
        for name, vals in components.items():
            v = np.asarray(vals, dtype=np.float64)[ok]
            v = v[np.isfinite(v)]
            if len(v):
                self._lo[name] = min(self._lo.get(name, math.inf), float(v.min()))
                self._hi[name] = max(self._hi.get(name, -math.inf), float(v.max()))
        if groups is not None:
            g = np.asarray(groups)
            for k in np.unique(g):
                t = total[(g == k) & ok]
                if len(t) >= 2:
                    self._groups += 1
                    self._zero += int(np.all(t == t[0]))

    def take(self) -> dict[str, float]:
        """This step's metrics; the next step starts. Tasks whose tests use names nothing defines (they fail for
        every program) are said on stderr the first time they are seen, once per run."""
        stats = self._stats()
        self._warn_undefined(stats)

        def delta(key: str) -> float:
            v = stats.get(key, 0)
            return float(v) - self._before.get(key, 0.0) if isinstance(v, (int, float)) else 0.0

        out: dict[str, float] = {
            "time/reward_max": float(stats.get("sandbox.max_wall_s", 0.0) or 0.0),
            "reward/timeouts": delta("sandbox.timeouts"),
            "limits/relative": delta("sandbox.limit_relative"),
            "limits/no_reference": delta("sandbox.limit_no_reference"),
            "reward/samples": float(self._samples),
        }
        for k in stats:
            if k.startswith("time:"):
                out[f"time/component/{k[5:]}"] = max(delta(k), 0.0)
        # every component has its key: one that calls no timed function (pure arithmetic, run vectorised with the
        # batch, in `time/reward`) logs 0, never nothing (a dashboard or a comparison of runs finds every name)
        for c in getattr(self.program, "components", None) or ():
            out.setdefault(f"time/component/{c.name}", 0.0)
        if self._groups:
            out["groups/zero_variance"] = self._zero / self._groups
        for name in self._lo:
            out[f"components/{name}/min"] = self._lo[name]
            out[f"components/{name}/max"] = self._hi[name]
        self._reset()
        return out


    def _warn_undefined(self, stats: Mapping[str, Any]) -> None:
        from rewardlang.runtime.components.execution import (
            undefined_names,
            undefined_names_lines,
        )

        new = [(t, n) for t, n, _ in undefined_names(stats) if (t, tuple(n)) not in self._warned]
        if new:
            self._warned.update((t, tuple(n)) for t, n in new)
            for line in undefined_names_lines(found=new):
                print(line, file=sys.stderr, flush=True)


_COUNTERS = ("sandbox.timeouts", "sandbox.limit_relative", "sandbox.limit_no_reference")


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _runs(records: Sequence[Mapping[str, Any]], test: Any, steps: int) -> list[tuple[int, int, Any]]:
    """Maximal runs of consecutive records (by step) where ``test(record)`` gives a value that is not None and the
    same as the previous one's: ``(first step, last step, value)`` for each run of at least ``steps`` records."""
    out, cur, start, last, n = [], None, 0, 0, 0
    for r in records:
        v = test(r)
        if v is not None and n and v == cur:
            n += 1
        else:
            if n >= steps:
                out.append((start, last, cur))
            cur, start, n = v, int(r.get("step", 0)), (1 if v is not None else 0)
        last = int(r.get("step", 0))
    if n >= steps:
        out.append((start, last, cur))
    return out


def learning_warnings(records: Sequence[Mapping[str, Any]], steps: int = WARN_STEPS) -> list[str]:
    """The reasons a run could not learn, from its metric records (see the module docstring); one line each."""
    return [text for _, text in _warnings(records, steps)]


def _warnings(records: Sequence[Mapping[str, Any]], steps: int) -> list[tuple[tuple[str, int], str]]:
    """``((what, first step), line)`` for each condition that held ``steps`` consecutive steps."""
    recs = [r for r in records if "train_runtime" not in r]
    if steps <= 0 or not recs:
        return []
    out = []

    def samples(a: int, b: int) -> int:
        return int(sum(float(r.get("reward/samples") or 0) for r in recs if a <= int(r.get("step", 0)) <= b))

    for a, b, _ in _runs(recs, lambda r: True if r.get("groups/zero_variance") == 1.0 else None, steps):
        out.append((("zero_variance", a), (f"every prompt group had zero reward variance in steps {a}-{b}: group-relative advantages were 0 "
                   f"and nothing was learned; `rewardlang report` on the run's samples shows which components never "
                   f"vary")))
    for a, b, _ in _runs(recs, lambda r: True if r.get("pref/groups") == 0 else None, steps):
        out.append((("no_groups", a), (f"no pair or group was mined in steps {a}-{b} (every prompt's samples tied, or none passed the "
                   f"`preference` rules): no update was made")))
    names = sorted({k[len("components/"):-len("/min")] for r in recs for k in r
                    if k.startswith("components/") and k.endswith("/min")})
    for name in names:
        def constant(r: Mapping[str, Any], name: str = name) -> float | None:
            lo, hi = r.get(f"components/{name}/min"), r.get(f"components/{name}/max")
            return float(lo) if lo is not None and lo == hi else None

        for a, b, v in _runs(recs, constant, steps):
            n = samples(a, b)
            out.append(((f"constant:{name}", a), (f"`{name}` was {_fmt(v)} on all {n} samples of steps {a}-{b}: no sample differs from another "
                       f"in it, so it teaches nothing; `rewardlang report` on the run's samples shows why")))
    return out


class LearningGuard:
    """Prints each :func:`learning_warnings` line once, as soon as it holds, while the run goes on (a run that cannot
    learn is said, not stopped: the masked-run guard stops runs with no reward at all)."""

    def __init__(self, steps: int = WARN_STEPS, stream: Any = None) -> None:
        self.steps = steps
        self.records: list[dict[str, Any]] = []
        self.said: set[tuple[str, int]] = set()
        self.stream = stream

    def observe(self, step: int, logs: Mapping[str, Any]) -> list[str]:
        """One log record; returns (and prints) the warnings it starts."""
        self.records.append({"step": step, **logs})
        new = []
        for key, w in _warnings(self.records, self.steps):
            if key not in self.said:  # a condition that goes on is said once (its first 'steps' steps)
                self.said.add(key)
                new.append(w)
                print(f"warning: {w}", file=self.stream or sys.stderr, flush=True)
        return new
