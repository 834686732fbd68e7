"""The spec's audits while a policy trains, in every generating trainer (GRPO, PPO, OORL, online GEPO and DPO).

Two halves, one per place a trainer already has:

- :class:`TrainingAudits` sits where the trainer scores a step's samples. Every step it gives the values the
  statistics read (``completions/mean_chars``, ``stats/dominance``); at an audit's period
  (:func:`rewardlang.runtime.audits.due`: step 1, every ``every`` steps, the last step) it scores the spec's audits of
  samples on the step's **own** samples (``audit/NAME``: the mean over the samples where it is not masked), scores the
  report's reward-hack probes and the reference answer under the step's weights (``probe/NAME``,
  ``probe/reference``), and writes what it audited to ``RUN_DIR/audits/step-NNNNNN.jsonl`` (one row per sample:
  its completion, total, components, audit values and the columns the audits read; then one row per probe and the
  reference: ``kind`` says which). Nothing it does reaches the reward: the audits are a program of their own, the
  probes are scored by a copy of the spec's program (its caches and counters untouched), and the trainer adds the
  returned metrics to its log record only.
- :class:`AuditGuard` reads every log record (the run's :class:`~rewardlang.trainers.metrics.JsonlMetricsCallback`
  calls it): it adds each statistic's value and each audit's gap to the record, runs the alarm
  (:class:`rewardlang.runtime.audits.Watch`), prints each alarm once as one ``warning:`` line, appends it to
  ``RUN_DIR/alarms.jsonl`` (the run's README lists them), and with ``train.stop_on_alarm = true`` has the trainer save
  a checkpoint and stop; the run then ends with status 1 and the alarm's line (:class:`AlarmStop`).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewardlang.outputs import append_record
from rewardlang.report import probe_rows, row_groups
from rewardlang.runtime.audits import (
    PROBE_KEYS,
    Alarm,
    Watch,
    audits_of,
    due,
    reward_range,
    sample_stats,
    zero_variance_share,
)
from rewardlang.runtime.program import Program, chat_to_text
from rewardlang.runtime.scoring import score_rows
from rewardlang.trainers.data import DataError
from rewardlang.trainers.runlog import read_metrics

__all__ = ["PROBE_KEYS", "AlarmStop", "AuditGuard", "TrainingAudits", "audit_columns", "reference_completion"]

#: the columns a reference answer is read from, in order, when ``train.audit_reference`` names none
REFERENCE_COLUMNS = ("solution", "canonical")


class AlarmStop(RuntimeError):
    """A run stopped by an alarm (``train.stop_on_alarm = true``); the message is the alarm's line."""


def reference_completion(best: str, reference: str) -> str:
    """The reference answer laid out as the step's best completion: its first fenced block's content replaced by the
    reference program (a ``python`` block of it when the completion has none).

        >>> reference_completion("Here:\\n```python\\nreturn 1\\n```\\nDone.", "def f():\\n    return 2\\n")
        'Here:\\n```python\\ndef f():\\n    return 2\\n```\\nDone.'
        >>> reference_completion("no block", "x = 1")
        '```python\\nx = 1\\n```'
    """
    ref = reference if reference.endswith("\n") else reference + "\n"
    m = re.search(r"```([^\n`]*)\n.*?```", best, flags=re.DOTALL)
    if m is None:
        return f"```python\n{ref}```"
    return best[:m.start()] + f"```{m.group(1)}\n{ref}```" + best[m.end():]


def audit_columns(program: Any, rows: Sequence[Mapping[str, Any]], source: str, cfg: Any = None,
                  warn: Any = None) -> tuple[list[str], str | None]:
    """The dataset columns the run keeps for its audits (those the audits of samples read, and the reference column
    the probes use), and which one is the reference (None: the probes are scored without one). HumanEval rows (a ``task_id`` of HumanEval) without ``plus_tests`` get the shipped hidden tests
    (:func:`rewardlang.datasets.plus.attach_plus`). A column an audit needs and the data lacks is an error (a
    nullable input may be absent: its audit is then masked, and the run says so)."""
    out: list[str] = []
    ap = program.audit_program
    if ap is not None:
        need = ap.required_columns()
        if "plus_tests" in need and rows and all("plus_tests" not in r for r in rows) \
                and all(str(r.get("task_id", "")).startswith("HumanEval/") for r in rows):
            from rewardlang.datasets.plus import attach_plus

            attach_plus(list(rows))  # type: ignore[arg-type]
        for inp in ap.inputs:
            if not inp.used or inp.name in ("completion", "prompt"):
                continue
            missing = sum(1 for r in rows if inp.column not in r)
            if missing and not inp.nullable:
                names = ", ".join(f"`{a.name}`" for a in program.audits if a.kind == "samples")
                raise DataError(f"{source}: the spec's audits ({names}) read column `{inp.column}`, which "
                                f"{'is not in the dataset' if missing == len(rows) else f'is missing from {missing} of {len(rows)} rows'}"
                                f"; add it (for HumanEval: `rewardlang data humaneval --lang python --plus`), or "
                                f"declare the input `{inp.name}: {inp.type}?` to audit only the rows that have it")
            if missing and warn is not None:
                warn(f"{missing} of {len(rows)} rows have no `{inp.column}`: the audits that read it are masked "
                     f"there")
            out.append(inp.column)
    reference = None
    if program.audits and (cfg is None or getattr(cfg, "audit_probes", True)):
        wanted = getattr(cfg, "audit_reference", None) if cfg is not None else None
        if wanted is not None:
            if not rows or all(wanted not in r for r in rows):
                raise DataError(f"{source}: train.audit_reference names column `{wanted}`, which is not in the "
                                f"dataset")
            reference = wanted
        else:
            reference = next((c for c in REFERENCE_COLUMNS if rows and any(isinstance(r.get(c), str) for r in rows)),
                             None)
        if reference is not None:
            out.append(reference)
    return list(dict.fromkeys(out)), reference


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating,)):
        return _clean(float(v))
    return v


class TrainingAudits:
    """The audits of one run's samples (see the module docstring). ``main``: this process writes the files and
    scores the probes; ``gather``: a function gathering a (n,) float64 array over processes (default: this
    process's own samples)."""

    def __init__(self, program: Any, run_dir: str | None, max_steps: int, *, probes: bool = True,
                 reference_column: str | None = None, main: bool = True, gather: Any = None,
                 every_step: bool = False) -> None:
        self.program = program
        self.run_dir = run_dir
        self.max_steps = max_steps
        self.sampled = [a for a in program.audits if a.kind == "samples"]
        self.enabled = bool(program.audits)
        self.probes = probes and self.enabled
        #: the probes run at the audits' period: the shortest period of the audits of samples (10 without any)
        self.probe_every = min((a.every for a in self.sampled), default=10)
        self.reference_column = reference_column
        self.main = main
        self.gather = gather
        self.every_step = every_step  # audit every step (`rewardlang audit --all-steps`), not at the periods
        self._prober: Any = None
        self.seconds = 0.0  # time spent auditing (for the cost benchmark)

    def due(self, step: int) -> list[Any]:
        """The audits of samples scored at ``step``."""
        return [a for a in self.sampled if self.every_step or due(a.every, step, self.max_steps)]

    def observe(self, step: int, texts: Sequence[str], columns: Mapping[str, Sequence[Any]], totals: Any,
                components: Mapping[str, Any], groups: Any = None, prompts: Sequence[Any] | None = None
                ) -> dict[str, float]:
        """The step's audit metrics (empty when the spec has no audits). ``columns`` are the dataset columns of each
        sample (by column name), ``totals`` and ``components`` the spec's values of the same samples (NaN masked)."""
        if not self.enabled:
            return {}
        import time

        t0 = time.perf_counter()
        totals = np.asarray(totals, dtype=float)
        out: dict[str, float] = dict(sample_stats(texts, components, totals, None))
        now = self.due(step)
        audited: dict[str, np.ndarray] = {}
        errors: dict[str, list[Any]] = {}
        if now:
            res = self._score_audits(step, texts, columns)
            for a in now:
                vals = np.asarray(res.components[a.name], dtype=float) if res is not None else \
                    np.full(len(texts), np.nan)
                audited[a.name] = vals
                errors[a.name] = list(res.errors[a.name]) if res is not None else [None] * len(texts)
                allv = self._gather(vals)
                ok = allv[np.isfinite(allv)]
                if len(ok):
                    out[f"audit/{a.name}"] = float(ok.mean())
                out[f"audit/masked/{a.name}"] = float(np.isnan(allv).mean()) if len(allv) else 0.0
        probe_rows: list[dict[str, Any]] = []
        if self.probes and self.main and (self.every_step or due(self.probe_every, step, self.max_steps)) \
                and len(texts):
            probe_rows = self._probe(step, texts, columns, totals, prompts)
            for r in probe_rows:
                if _num(r.get("total")):
                    out[f"probe/{r['probe_key']}"] = float(r["total"])
        if (now or probe_rows) and self.main and self.run_dir is not None:
            self._write(step, texts, columns, totals, components, audited, errors, probe_rows, prompts)
        self.seconds += time.perf_counter() - t0
        out["time/audit"] = time.perf_counter() - t0
        return out

    def _gather(self, vals: np.ndarray) -> np.ndarray:
        return np.asarray(self.gather(vals), dtype=float) if self.gather is not None else vals

    def _score_audits(self, step: int, texts: Sequence[str], columns: Mapping[str, Sequence[Any]]) -> Any:
        ap = self.program.audit_program
        if ap is None:
            return None
        given = {k: list(v) for k, v in columns.items() if k not in ("completion", "completions")}
        given["completion"] = list(texts)
        cols = ap.columns(len(texts), {**{i.name: given[i.column] for i in ap.inputs
                                           if i.column in given and i.name != "completion"},
                                        "completion": given["completion"]})
        return ap.score_columns(cols, len(texts), step=step, raw=given)

    def _probe(self, step: int, texts: Sequence[str], columns: Mapping[str, Sequence[Any]], totals: np.ndarray,
               prompts: Sequence[Any] | None) -> list[dict[str, Any]]:
        """The probes built from the step's best sample (as ``rewardlang report`` builds them), and the reference
        answer in its layout, scored under the step's weights by a copy of the spec's program."""
        ok = np.isfinite(totals)
        best = int(np.argmax(np.where(ok, totals, -np.inf))) if ok.any() else 0
        template = {k: v[best] for k, v in columns.items()}
        if prompts is not None:
            template["prompt"] = chat_to_text(prompts[best], None)
        plan = [(PROBE_KEYS.get(name, name), row, what) for name, row, what in probe_rows(template, texts[best])
                if row is not None]
        ref_col = self.reference_column
        ref = template.get(ref_col) if ref_col else None
        if isinstance(ref, str) and ref.strip():
            plan.append(("reference", {**template, "completion": reference_completion(texts[best], ref)},
                         f"the reference answer (column `{ref_col}`) in the best sample's layout"))
        if self._prober is None:
            self._prober = Program.from_python(self.program.python_source, f"{self.program.name}_probes")
        given = {k: [r.get(k) for _, r, _ in plan] for k in set().union(*(r.keys() for _, r, _ in plan))}
        try:
            cols = self._prober.columns(len(plan), given, by="column")
            res = self._prober.score_columns(cols, len(plan), step=step, raw=given)
        except Exception as exc:  # noqa: BLE001 - a probe the data cannot make: said, never a crash of the run
            print(f"warning: the hack probes of step {step} could not be scored ({exc})", file=sys.stderr)
            return []
        return [{"probe": key, "probe_key": key, "what": what, "completion": row["completion"],
                 "total": _clean(float(res.total[i])),
                 "components": {k: _clean(float(v[i])) for k, v in res.components.items()}}
                for i, (key, row, what) in enumerate(plan)]

    def _write(self, step: int, texts: Sequence[str], columns: Mapping[str, Sequence[Any]], totals: np.ndarray,
               components: Mapping[str, Any], audited: Mapping[str, np.ndarray], errors: Mapping[str, list[Any]],
               probes: list[dict[str, Any]], prompts: Sequence[Any] | None) -> None:
        from rewardlang.outputs import atomic_write

        folder = os.path.join(self.run_dir, "audits")
        os.makedirs(folder, exist_ok=True)
        keep = {self.reference_column} if self.reference_column else set()
        ap = self.program.audit_program
        if ap is not None:
            keep |= {i.column for i in ap.inputs if i.used}
        with atomic_write(os.path.join(folder, f"step-{step:06d}.jsonl")) as fh:
            if audited:
                for i, text in enumerate(texts):
                    row: dict[str, Any] = {"kind": "sample", "step": step}
                    if prompts is not None:
                        row["prompt"] = prompts[i]
                    row["completion"] = text
                    row["reward"] = _clean(float(totals[i]))
                    row["components"] = {k: _clean(float(np.asarray(v, dtype=float)[i])) for k, v in
                                         components.items()}
                    row["audits"] = {k: _clean(float(v[i])) for k, v in audited.items()}
                    errs = {k: e[i] for k, e in errors.items() if e[i]}
                    if errs:
                        row["audit_errors"] = errs
                    for c in sorted(keep):
                        if c in columns and c not in row:
                            row[c] = columns[c][i]
                    if "task_id" in columns:
                        row["task_id"] = columns["task_id"][i]
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            for p in probes:
                fh.write(json.dumps({"kind": "probe" if p["probe"] != "reference" else "reference", "step": step,
                                     "probe": p["probe"], "what": p["what"], "completion": p["completion"],
                                     "reward": p["total"], "components": p["components"]}, ensure_ascii=False)
                         + "\n")


def write_meta(run_dir: str, program: Any) -> None:
    """``RUN_DIR/audits.json``: the spec's audits, the reward's range and each audit's gap definition (what
    ``rewardlang audit RUN_DIR`` and the README read)."""
    from rewardlang.outputs import write_text
    from rewardlang.runtime.audits import gap_definition

    rr = reward_range(program, 0)
    audits = [{**a, "range": list(a["range"]) if a.get("range") else None,
               "gap": gap_definition(a.get("range"), rr) if a["kind"] == "samples" else None}
              for a in audits_of(program)]
    os.makedirs(run_dir, exist_ok=True)
    write_text(os.path.join(run_dir, "audits.json"), json.dumps({"spec": program.name, "reward_range": list(rr)
                                                                 if rr else None, "audits": audits}, indent=1))


def load_meta(run_dir: str) -> dict[str, Any] | None:
    path = os.path.join(run_dir, "audits.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_alarms(run_dir: str) -> list[dict[str, Any]]:
    path = os.path.join(run_dir, "alarms.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


_GAP_WORDS = {"scaled": "the reward's mean minus the audit's, both on [0, 1] by their declared ranges",
              "change": "the reward's change since the first audited step minus the audit's (a range is unknown)"}


def readme_lines(run_dir: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The README's audit section: per audited step the reward beside each audit, its gap and the probes that
    earned at least as much as the reference; then the alarms."""
    from rewardlang.runtime.audits import table

    meta = load_meta(run_dir)
    if meta is None:
        return []
    audits = meta["audits"]
    rows = table(records, audits)
    sampled = [a for a in audits if a["kind"] == "samples"]
    stats = [a for a in audits if a["kind"] == "statistic"]
    out = ["", "## Audits", "",
           "Second verifiers the spec declares, scored on each audited step's own samples and never part of the reward "
           "(docs/language.md, Audits). " + " ".join(f"`{a['name']}` = `{a['text']}` every {a['every']} steps, gap: "
                                                      f"{_GAP_WORDS[a['gap']]}." for a in sampled)]
    if stats:
        out.append("Statistics of the run: " + ", ".join(f"`{a['name']}` = `{a['text']}`" for a in stats) + ".")
    shown = [r for r in rows if any(a["name"] in r for a in sampled) or any(k.startswith("probe/") for k in r)]
    if shown:
        head = ["step", "reward"] + [x for a in sampled for x in (a["name"], f"gap {a['name']}")] + \
            ["probes >= reference"]
        out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in shown:
            ref = r.get("probe/reference")
            beat = [k[len("probe/"):].replace("_", " ") for k, v in r.items() if k.startswith("probe/")
                    and k != "probe/reference" and _num(v) and _num(ref) and float(v) >= float(ref) - 1e-9]
            cells = [str(r["step"]), _f(r.get("reward"))] + [x for a in sampled for x in
                                                            (_f(r.get(a["name"])), _f(r.get(f"gap/{a['name']}")))]
            cells.append(", ".join(beat) if beat else ("none" if _num(ref) else "-"))
            out.append("| " + " | ".join(cells) + " |")
    alarms = load_alarms(run_dir)
    out += ["", "Alarms:" if alarms else "No alarm."]
    out += [f"- {a['line']}" for a in alarms]
    return out


def summary_line(run_dir: str, records: Sequence[Mapping[str, Any]]) -> str | None:
    """One line for ``rewardlang train``'s summary: each audit of samples first -> last beside the reward, and the
    alarms."""
    meta = load_meta(run_dir)
    if meta is None:
        return None
    parts = []
    for a in meta["audits"]:
        if a["kind"] != "samples":
            continue
        pts = [(r.get("reward"), r.get(f"audit/{a['name']}")) for r in records if _num(r.get(f"audit/{a['name']}"))]
        if pts:
            parts.append(f"`{a['name']}` {_f(pts[0][1])} -> {_f(pts[-1][1])} (reward {_f(pts[0][0])} -> "
                         f"{_f(pts[-1][0])} at the same steps)")
    alarms = load_alarms(run_dir)
    tail = f"{len(alarms)} alarm{'s' if len(alarms) != 1 else ''}" + (" (alarms.jsonl)" if alarms else "")
    return "audits: " + ("; ".join(parts) + "; " if parts else "") + tail


def _f(v: Any) -> str:
    return f"{float(v):.3f}" if _num(v) else "-"


class AuditGuard:
    """The alarm of one run, fed by its metrics callback (see the module docstring). Registered per metrics file
    like :class:`~rewardlang.trainers.metrics.MaskedRunGuard`, so every trainer gets it."""

    _REGISTRY: dict[str, AuditGuard] = {}

    def __init__(self, program: Any, run_dir: str, stop: bool = False) -> None:
        self.program = program
        self.run_dir = run_dir
        self.stop = stop
        self.watch = Watch(audits_of(program), reward_range(program, 0))
        self.stop_reason: str | None = None
        write_meta(run_dir, program)

    @classmethod
    def register(cls, metrics_path: str, program: Any, run_dir: str, stop: bool) -> AuditGuard | None:
        key = os.path.abspath(metrics_path)
        if not program.audits:
            cls._REGISTRY.pop(key, None)
            return None
        guard = cls._REGISTRY[key] = cls(program, run_dir, stop)
        return guard

    @classmethod
    def for_path(cls, metrics_path: str) -> AuditGuard | None:
        return cls._REGISTRY.get(os.path.abspath(metrics_path))

    @property
    def alarms_path(self) -> str:
        return os.path.join(self.run_dir, "alarms.jsonl")

    def restore(self, records: Sequence[Mapping[str, Any]], step: int) -> None:
        """A resumed run: the watch sees the records up to its checkpoint again (no alarm is said twice: those of
        ``alarms.jsonl`` up to ``step`` are known, later ones are dropped with the records after it)."""
        kept = []
        if os.path.exists(self.alarms_path):
            with open(self.alarms_path, encoding="utf-8") as fh:
                kept = [json.loads(line) for line in fh if line.strip()]
            kept = [a for a in kept if int(a.get("step", 0)) <= step]
            self._rewrite(kept)
        for r in records:
            if int(r.get("step", 0)) <= step and "train_runtime" not in r:
                self.watch.observe(r)
        self.watch.alarms = [a for a in self.watch.alarms if a.step <= step]

    def _rewrite(self, alarms: list[dict[str, Any]]) -> None:
        from rewardlang.outputs import atomic_write

        with atomic_write(self.alarms_path) as fh:
            for a in alarms:
                fh.write(json.dumps(a) + "\n")

    def annotate(self, step: int, logs: dict[str, Any]) -> None:
        """Add each statistic's value and each audit's gap to a log record before it is written."""
        if "train_runtime" in logs:
            return
        rec = self.watch.annotate({"step": step, **logs})
        for k, v in rec.items():
            if k != "step" and k not in logs:
                logs[k] = v

    def observe(self, step: int, logs: Mapping[str, Any], control: Any = None) -> list[Alarm]:
        """One record (already annotated and written): the alarms it fires, said and recorded."""
        if "train_runtime" in logs:
            return []
        new = self.watch.observe({"step": step, **logs})
        for a in new:
            print(f"warning: {a.line}", file=sys.stderr, flush=True)
            append_record(self.alarms_path, json.dumps(a.to_json()) + "\n")  # whole or cut back
        if new and self.stop and self.stop_reason is None:
            self.stop_reason = new[0].line
            if control is not None:  # a checkpoint of this step, then the loop ends (transformers' own flags)
                control.should_save = True
                control.should_training_stop = True
        return new

    def raise_if_stopped(self) -> None:
        if self.stop_reason is not None:
            raise AlarmStop(f"{self.stop_reason} (train.stop_on_alarm = true; a checkpoint of this step is in "
                            f"{self.run_dir})")


# ---------------------------------------------------------------------- after the fact: `rewardlang audit`


def audit_rollouts(program: Any, rows: Sequence[Mapping[str, Any]], *, step_column: str = "step",
                   group_by: str | None = None, all_steps: bool = False, probes: bool = True,
                   reference: str | None = None, lines: Sequence[int] | None = None,
                   label: str = "<rows>") -> tuple[list[dict[str, Any]], list[Alarm], Watch]:
    """The audit table and alarms of rollouts from any engine (rows with a step column, the completion and the
    columns the spec reads): each step's rows are scored with the spec (the reward) and audited as a trainer audits
    its samples (:class:`TrainingAudits`, at the audits' periods unless ``all_steps``), the statistics from the
    rows (``kl`` and ``entropy`` columns, when the rows have them, are averaged per step), and the records run
    through the same :class:`~rewardlang.runtime.audits.Watch`. Returns (one record per step, the alarms, the
    watch). The rows are scored as ``rewardlang score`` scores them (:func:`~rewardlang.runtime.scoring.score_rows`):
    a bad row is a :class:`~rewardlang.runtime.scoring.ScoringError` naming ``label`` and its line (``lines``: each
    row's line in its file; by default its position)."""
    by_step: dict[int, list[tuple[int, Mapping[str, Any]]]] = {}
    for i, r in enumerate(rows):
        by_step.setdefault(int(r[step_column]), []).append((lines[i] if lines is not None else i + 1, r))
    steps = sorted(by_step)
    if reference is None:
        reference = next((c for c in REFERENCE_COLUMNS if any(isinstance(r.get(c), str) for r in rows)), None)
    auditor = TrainingAudits(program, None, steps[-1] if steps else 0, probes=probes, reference_column=reference,
                             every_step=all_steps)
    watch = Watch(audits_of(program), reward_range(program, 0))
    records: list[dict[str, Any]] = []
    for s in steps:
        batch = [dict(r) for _, r in by_step[s]]
        given = {k: [r.get(k) for r in batch] for k in set().union(*(r.keys() for r in batch))}
        groups = row_groups(program, batch, group_by)
        res = score_rows(program, [(n, r, None) for (n, _), r in zip(by_step[s], batch)], step=s,
                         group=groups if group_by is not None else None, label=label).result
        texts = [str(chat_to_text(r.get("completion", ""), "assistant")) for r in batch]
        total = np.asarray(res.total, dtype=float)
        rec: dict[str, Any] = {"step": s, "reward": float(np.nanmean(total)) if np.isfinite(total).any() else None,
                               "samples": len(batch)}
        metrics = auditor.observe(s, texts, given, total, res.components, prompts=given.get("prompt"))
        rec.update({k: v for k, v in metrics.items() if k != "time/audit"})
        if groups is not None:
            z = zero_variance_share(total, groups)
            if z is not None:
                rec["groups/zero_variance"] = z
        for key in ("kl", "entropy"):
            vals = [float(r[key]) for r in batch if _num(r.get(key))]
            if vals:
                rec[key] = float(np.mean(vals))
        watch.observe(rec)
        records.append(watch.records[-1] if watch.records and watch.records[-1]["step"] == s else rec)
    return records, list(watch.alarms), watch


def audit_run(run_dir: str) -> tuple[list[dict[str, Any]], list[Alarm], Watch, dict[str, Any]]:
    """The audit table and alarms of a training run directory, recomputed from its ``metrics.jsonl`` and
    ``audits.json`` (the same watch the run had: the same alarms). ValueError for a directory that is not a run
    with audits."""
    meta = load_meta(run_dir)
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        raise ValueError(f"{run_dir}: no metrics.jsonl (is it a `rewardlang train` run directory?)")
    if meta is None:
        raise ValueError(f"{run_dir}: the run has no audits.json: its spec declared no audit (audit its samples "
                         f"with `rewardlang audit SPEC -i ROLLOUTS.jsonl`)")
    watch = Watch(meta["audits"], meta.get("reward_range"))
    for r in read_metrics(path):
        if "train_runtime" not in r and "step" in r:
            watch.observe(r)
    return watch.records, list(watch.alarms), watch, meta


def table_lines(records: Sequence[Mapping[str, Any]], audits: Sequence[Mapping[str, Any]]) -> list[str]:
    """The audit table as text: one line per step with a value: the reward, each audit (and an audit of samples'
    gap), the probes that earned at least as much as the reference."""
    from rewardlang.runtime.audits import table

    rows = table(records, audits)
    names = [a["name"] for a in audits]
    sampled = {a["name"] for a in audits if a["kind"] == "samples"}
    head = ["step", "reward"] + [x for n in names for x in ([n, f"gap/{n}"] if n in sampled else [n])] + \
        ["probes >= reference"]
    out = ["  ".join(f"{h:>10}" if i < len(head) - 1 else h for i, h in enumerate(head))]
    for r in rows:
        ref = r.get("probe/reference")
        beat = [k[len("probe/"):] for k, v in r.items() if k.startswith("probe/") and k != "probe/reference"
                and _num(v) and _num(ref) and float(v) >= float(ref) - 1e-9]
        cells = [str(r["step"]), _f(r.get("reward"))] + [_f(r.get(x)) for n in names
                                                          for x in ([n, f"gap/{n}"] if n in sampled else [n])]
        cells.append(", ".join(beat) if beat else ("none" if _num(ref) else "-"))
        out.append("  ".join(f"{c:>10}" if i < len(cells) - 1 else c for i, c in enumerate(cells)))
    return out
