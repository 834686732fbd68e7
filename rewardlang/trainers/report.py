"""What a run changed: held-out pass@1 before and after training (``train.eval``), the run's README.md, the summary.

With ``train.eval = N`` (N > 0), N problems are held out of the training prompts by a fixed, seeded split
(:func:`rewardlang.trainers.data.split_heldout`; it depends on the dataset and N only, never on the model or the
run's seed) and evaluated greedily before the first step and after the last one, presented as in training. Results go
to ``RUN_DIR/eval-before.jsonl``, ``eval-after.jsonl`` (per problem) and ``eval.json`` (the summaries);
``RUN_DIR/README.md`` says what ran, the reward of the first and last steps, and the before/after pass@1, with the
reward curve (``curves.png``, :func:`rewardlang.trainers.plot.plot_run`).

    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "metrics.jsonl"), "w") as fh:
    ...     for s in range(1, 11):
    ...         _ = fh.write(json.dumps({"step": s, "reward": s / 10}) + "\\n")
    >>> reward_change(d)
    (0.3, 0.8, 10)
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, Sequence

from rewardlang.outputs import write_text
from rewardlang.trainers.audit import readme_lines, summary_line
from rewardlang.trainers.prefix import merged_adapter

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.trainers.config import TrainConfig

__all__ = ["heldout_rows", "evaluate_heldout", "evaluate_stage", "heldout_lines", "drop_leaked", "save_train_problems", "reward_change", "reward_cost", "files_line", "summary_lines", "write_run_readme"]

#: steps averaged at each end of the run for "first vs last" reward
ENDS = 5


def heldout_rows(cfg: "TrainConfig") -> list[dict[str, Any]]:
    """The problems ``cfg.eval`` holds out of training (empty when it is 0). They need HumanEval-style columns
    (``task_id``, ``prompt``, ``tests``, ``entry_point``), or the robot rows' (``task_id``, ``prompt``, ``task``)."""
    from rewardlang.trainers.data import DataError, is_translation, load_rows, split_heldout, translation_heldout

    if cfg.eval <= 0:
        return []
    if is_translation(cfg.dataset):
        # OORL's translation problems: N problems of the held-out split, each in every target (never trained on)
        return translation_heldout(str(cfg.dataset), cfg.eval)
    rows, source = load_rows(cfg.dataset)
    _, held = split_heldout(rows, cfg.eval)
    # robot rows (a `task` column, docs/robot.md) are judged by the simulator, the others by unit tests
    need = ("task_id", "prompt", "task") if _robot(held) else ("task_id", "prompt", "tests", "entry_point")
    bad = [c for c in need if any(not isinstance(r.get(c), str) for r in held)]
    if bad:
        raise DataError(f"{source}: train.eval needs text columns {', '.join(need)} in every row to run unit tests; "
                        f"missing or not text: {', '.join(bad)} (set train.eval=0 to train without evaluation)")
    return held


def _translation(rows: Sequence[dict[str, Any]]) -> bool:
    return bool(rows) and all(r.get("source_language") for r in rows)


def _robot(rows: Sequence[dict[str, Any]]) -> bool:
    return bool(rows) and all("task" in r and "tests" not in r for r in rows)


def evaluate_heldout(model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], cfg: "TrainConfig", run_dir: str,
                     when: str, *, progress: bool = True, program: Any = None) -> dict[str, Any]:
    """Greedy pass@1 on ``rows`` (``when``: ``before`` or ``after``) and, with ``program`` (the run's spec), each
    answer's reward and components as training scores them; each figure with its 95 % bootstrap interval over the
    problems. Writes ``eval-<when>.jsonl`` and updates ``eval.json``; ``after`` also records the paired change
    (:func:`rewardlang.trainers.evaluate.change_between`) against ``eval-before.jsonl``. Returns the summary."""
    from rewardlang.trainers.evaluate import DEFAULT_SYSTEM_PROMPT, ROBOT_SYSTEM_PROMPT, change_between, evaluate

    robot = _robot(rows)
    # translation prompts hold their own instruction (the target and the answer's form): shown as in training
    default = None if _translation(rows) else ROBOT_SYSTEM_PROMPT if robot else DEFAULT_SYSTEM_PROMPT
    chat = cfg.prompt_format == "chat" or (cfg.prompt_format == "auto" and bool(getattr(tokenizer, "chat_template",
                                                                                         None)))
    summary, records = evaluate(rows, model=model, tokenizer=tokenizer, n=1, ks=(1,), temperature=0.0,
                                max_new_tokens=cfg.eval_max_new_tokens,
                                system_prompt=cfg.system_prompt or default,
                                prompt_template=cfg.prompt_template, progress=progress, desc=f"eval {when}",
                                out_path=os.path.join(run_dir, f"eval-{when}.jsonl"),
                                dataset="robot" if robot else "translation" if _translation(rows) else "humaneval",
                                program=program, chat=chat, few_shot=cfg.few_shot, batch_size=cfg.eval_batch_size)
    path = os.path.join(run_dir, "eval.json")
    doc: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    doc[when] = {**summary, "task_ids": [r["task_id"] for r in rows], "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    before_path = os.path.join(run_dir, "eval-before.jsonl")
    if when == "after" and os.path.exists(before_path):
        from rewardlang.jsonl import read_jsonl

        before = [row for _, row in read_jsonl(before_path)]
        doc["change"] = {**change_between(before, records), "method": "paired percentile bootstrap over problems, "
                         "10,000 resamples, fixed seed"}
    write_text(path, json.dumps(doc, indent=2))
    return summary


def evaluate_stage(when: str, model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], cfg: "TrainConfig",
                   run_dir: str, *, main: bool, progress: bool = True, program: Any = None) -> dict[str, Any] | None:
    """The held-out evaluation of every generating trainer, ``before`` the first step or ``after`` the last one:
    on the main process only, and ``before`` not again when the run is resumed (its first figure stands)."""
    if not rows or not main:
        return None
    if when == "before" and os.path.exists(os.path.join(run_dir, "eval-before.jsonl")):
        return None
    # A LoRA adapter is merged into the weights while the answers are generated (trainers/prefix.py,
    # merged_adapter: ~13 % of SmolLM2-135M's decoding time on 2 CPU cores), the weights restored exactly after.
    # Before training the adapter is zero, so the answers are those of the base model.
    with merged_adapter(model):
        return evaluate_heldout(model, tokenizer, rows, cfg, run_dir, when, progress=progress, program=program)


def drop_leaked(rows: list[dict[str, Any]], heldout: Sequence[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """Preference rows (offline pairs or groups) without those whose prompt contains a held-out problem's prompt, so
    that ``train.eval`` evaluates problems never trained on; how many were left out is said, never silent."""
    import sys

    from rewardlang.trainers.data import DataError, leaked_rows

    if not heldout:
        return rows
    bad = set(leaked_rows([r.get("prompt", "") for r in rows], heldout))
    if not bad:
        return rows
    kept = [r for i, r in enumerate(rows) if i not in bad]
    print(f"{source}: {len(bad)} of {len(rows)} rows left out of training: their prompt is one of the "
          f"{len(heldout)} problems train.eval holds out (first: row {min(bad) + 1})", file=sys.stderr)
    if not kept:
        raise DataError(f"{source}: every row is a problem train.eval holds out; set train.eval=0, or mine the "
                        f"preference data from other problems")
    return kept


def save_train_problems(run_dir: str, summary: dict[str, Any]) -> None:
    """``RUN_DIR/train-problems.json``: the problems ``train.train_problems`` chose (the run's README lists them)."""
    if "subset" not in summary:
        return
    os.makedirs(run_dir, exist_ok=True)  # before the trainer, which makes it, exists
    path = os.path.join(run_dir, "train-problems.json")
    # every process writes the same list; each replaces atomically (its temporary is its own)
    write_text(path, json.dumps({"train_problems": summary["subset"], "available": summary["available_rows"]},
                                indent=1))


def _records(run_dir: str) -> list[dict[str, Any]]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    from rewardlang.trainers.metrics import read_metrics

    return [r for r in read_metrics(path) if "train_runtime" not in r and isinstance(r.get("reward"), (int, float))]


def reward_change(run_dir: str, ends: int = ENDS) -> tuple[float, float, int] | None:
    """``(mean reward of the first `ends` steps, of the last `ends` steps, steps)``; None without records."""
    recs = _records(run_dir)
    if not recs:
        return None
    first = [r["reward"] for r in recs[:ends]]
    last = [r["reward"] for r in recs[-ends:]]
    return round(sum(first) / len(first), 6), round(sum(last) / len(last), 6), len(recs)


def _eval(run_dir: str) -> dict[str, Any]:
    path = os.path.join(run_dir, "eval.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _step_seconds(run_dir: str) -> float | None:
    times = [r["time/step"] for r in _records(run_dir) if isinstance(r.get("time/step"), (int, float))]
    return sum(times) / len(times) if times else None


def reward_cost(records: Sequence[dict[str, Any]]) -> str | None:
    """One line on what the reward cost the run: its share of the step time (mean, and its tail: the worst step),
    the slowest program, the timeouts and the slowest component.

        >>> reward_cost([{"step": 1, "time/reward_share": 0.02, "time/reward_max": 0.3, "reward/timeouts": 0,
        ...               "time/component/correct": 0.5, "time/component/format": 0.01},
        ...              {"step": 2, "time/reward_share": 0.10, "time/reward_max": 1.2, "reward/timeouts": 1,
        ...               "time/component/correct": 1.5, "time/component/format": 0.01}])
        'reward time: 6.0% of the step on average, 10.0% at most (step 2); slowest program 1.20 s; 1 timeouts; slowest component `correct` (2.00 s in all)'
    """
    shares = [(float(r["time/reward_share"]), r.get("step")) for r in records
              if isinstance(r.get("time/reward_share"), (int, float))]
    if not shares:
        return None
    worst, at = max(shares, key=lambda x: x[0])
    line = (f"reward time: {100 * sum(v for v, _ in shares) / len(shares):.1f}% of the step on average, "
            f"{100 * worst:.1f}% at most (step {at})")
    slow = [float(r["time/reward_max"]) for r in records if isinstance(r.get("time/reward_max"), (int, float))]
    if slow and max(slow) > 0:
        line += f"; slowest program {max(slow):.2f} s"
    timeouts = [float(r["reward/timeouts"]) for r in records if isinstance(r.get("reward/timeouts"), (int, float))]
    if timeouts:
        line += f"; {int(sum(timeouts))} timeouts"
    comp: dict[str, float] = {}
    for r in records:
        for k, v in r.items():
            if k.startswith("time/component/") and isinstance(v, (int, float)):
                comp[k[len("time/component/"):]] = comp.get(k[len("time/component/"):], 0.0) + float(v)
    if comp:
        name = max(comp, key=lambda k: comp[k])
        line += f"; slowest component `{name}` ({comp[name]:.2f} s in all)"
    return line


def _all_records(run_dir: str) -> list[dict[str, Any]]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    from rewardlang.trainers.metrics import read_metrics

    return [r for r in read_metrics(path) if "train_runtime" not in r]


def summary_lines(run_dir: str) -> list[str]:
    """What the run changed, in a few lines (printed by ``rewardlang train``): the reward change, what the reward
    cost, the held-out pass@1, and the warnings of a run that could not learn."""
    out = []
    change = reward_change(run_dir)
    if change is not None:
        first, last, steps = change
        n = min(ENDS, steps)
        sec = _step_seconds(run_dir)
        out.append(f"mean reward: first {n} steps {first:.3f} -> last {n} steps {last:.3f} ({steps} steps"
                   + (f", {sec:.1f} s/step" if sec else "") + ")")
    records = _all_records(run_dir)
    cost = reward_cost(records)
    if cost:
        out.append(cost)
    no_ref = sum(float(r.get("limits/no_reference") or 0) for r in records)
    if no_ref:
        out.append(f"time limits: {int(no_ref)} program runs had no reference time and ran under the spec's "
                   "timeout (limits/no_reference)")
    from rewardlang.trainers.health import learning_warnings

    out += [f"warning: {w}" for w in learning_warnings(records)]
    audits = summary_line(run_dir, records)  # the spec's audits beside the reward, and the alarms
    if audits:
        out.append(audits)
    return out + heldout_lines(_eval(run_dir))  # last: what the run changed on problems it never saw


def _ci(ci: Sequence[float] | None, signed: bool = False) -> str:
    if not ci:
        return "no interval"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"95% CI {f.format(ci[0])} to {f.format(ci[1])}"


def heldout_lines(ev: dict[str, Any]) -> list[str]:
    """The held-out figures of ``eval.json`` in a few lines: the spec's reward before and after with their 95 %
    bootstrap intervals and the paired change with its own, each component's means and change, and pass@1 the
    same way (per target language too, and the outcome classes of robot tasks).

        >>> ev = {"before": {"scored": 2, "dataset": "humaneval", "pass@1": 0.5, "pass@1_ci95": [0.0, 1.0],
        ...                  "spec": "s", "reward": {"mean": 0.25, "ci95": [0.0, 0.5], "n": 2, "masked": 0}},
        ...       "after": {"scored": 2, "pass@1": 0.5, "pass@1_ci95": [0.0, 1.0],
        ...                 "reward": {"mean": 0.75, "ci95": [0.5, 1.0], "n": 2, "masked": 0}},
        ...       "change": {"reward": {"mean": 0.5, "ci95": [0.5, 0.5], "n": 2}, "pass@1": {"mean": 0.0,
        ...                  "ci95": [0.0, 0.0], "n": 2}}}
        >>> print("\\n".join(heldout_lines(ev)))
        held-out reward (spec `s`, 2 HumanEval problems never trained on, greedy): 0.250 (95% CI 0.000 to 0.500) before -> 0.750 (95% CI 0.500 to 1.000) after; change +0.500 (95% CI +0.500 to +0.500, paired over 2 problems)
        held-out pass@1 (2 HumanEval problems never trained on, greedy): 0.500 (95% CI 0.000 to 1.000) before -> 0.500 (95% CI 0.000 to 1.000) after; change +0.000 (95% CI +0.000 to +0.000) (1 -> 1 solved)
    """
    out: list[str] = []
    if not ("before" in ev and "after" in ev and "pass@1" in ev["before"] and "pass@1" in ev["after"]):
        return out
    b, a, ch = ev["before"], ev["after"], ev.get("change") or {}
    what = {"robot": "robot tasks", "translation": "translation problems"}.get(b.get("dataset"), "HumanEval problems")
    where = f"{b['scored']} {what} never trained on, greedy"
    rb, ra, rc = b.get("reward") or {}, a.get("reward") or {}, ch.get("reward") or {}
    if rb.get("mean") is not None and ra.get("mean") is not None:
        masked = (f"; {rb.get('masked', 0)} before and {ra.get('masked', 0)} after masked, left out"
                  if rb.get("masked") or ra.get("masked") else "")
        line = (f"held-out reward (spec `{b.get('spec', '?')}`, {where}{masked}): {rb['mean']:.3f} ({_ci(rb.get('ci95'))}) "
                f"before -> {ra['mean']:.3f} ({_ci(ra.get('ci95'))}) after")
        if rc.get("mean") is not None:
            line += f"; change {rc['mean']:+.3f} ({_ci(rc.get('ci95'), True)}, paired over {rc['n']} problems)"
        out.append(line)
        cb, ca, cc = b.get("components") or {}, a.get("components") or {}, ch.get("components") or {}
        parts = []
        for name in cb:
            if cb[name] is None or ca.get(name) is None:
                continue
            part = f"{name} {cb[name]:.3f} -> {ca[name]:.3f}"
            if (cc.get(name) or {}).get("mean") is not None:
                part += f" ({cc[name]['mean']:+.3f}, {_ci(cc[name].get('ci95'), True)})"
            parts.append(part)
        if parts:
            out.append("held-out components before -> after: " + "; ".join(parts))
    pc = ch.get("pass@1") or {}
    line = (f"held-out pass@1 ({where}): {b['pass@1']:.3f}"
            + (f" ({_ci(b['pass@1_ci95'])})" if b.get("pass@1_ci95") else "") + f" before -> {a['pass@1']:.3f}"
            + (f" ({_ci(a['pass@1_ci95'])})" if a.get("pass@1_ci95") else "") + " after")
    if pc.get("mean") is not None:
        line += f"; change {pc['mean']:+.3f} ({_ci(pc.get('ci95'), True)})"
    out.append(line + f" ({round(b['pass@1'] * b['scored'])} -> {round(a['pass@1'] * a['scored'])} solved)")
    lb, la = b.get("by_language") or {}, a.get("by_language") or {}
    if len(lb) > 1:  # a translation run: each target's pass@1
        out.append("held-out pass@1 per target language: " + ", ".join(
            f"{lang} {lb[lang].get('pass@1', 0):.3f} -> {la.get(lang, {}).get('pass@1', 0):.3f}" for lang in lb))
    if "outcome_classes" in b and "outcome_classes" in a:
        out.append("held-out outcome classes before -> after: " + ", ".join(
            f"{c} {b['outcome_classes'][c]} -> {a['outcome_classes'].get(c, 0)}" for c in b["outcome_classes"]))
    return out


#: what a run directory may hold, in the order the README lists it
_FILES = (("config.json", "resolved settings"), ("metrics.jsonl", "per step"),
          ("eval-before.jsonl", "held-out problems before training"), ("eval-after.jsonl", "after training"),
          ("eval.json", "held-out summaries"), ("train-problems.json", "the problems trained on"),
          ("curves.png", "the curves"), ("final", "the policy"), ("initial_model", "the starting policy"),
          ("audits.json", "the spec's audits"), ("audits", "the samples and probes each audited step scored"),
          ("alarms.jsonl", "the alarms"))


def files_line(run_dir: str) -> str:
    """The README's list of the run's files: those that are there (a run with ``train.eval = 0`` writes no
    ``eval-*``), each with what it holds; resumed runs' ``config.resume-*.json`` and checkpoints included."""
    names = set(os.listdir(run_dir)) if os.path.isdir(run_dir) else set()
    parts = [f"`{n}/` ({what})" if os.path.isdir(os.path.join(run_dir, n)) else f"`{n}` ({what})"
             for n, what in _FILES if n in names]
    resumes = sorted(n for n in names if n.startswith("config.resume-") and n.endswith(".json"))
    if resumes:
        parts.append(", ".join(f"`{n}`" for n in resumes) + " (settings of each resume)")
    ckpts = sorted((n for n in names if n.startswith("checkpoint-")), key=lambda n: int(n.split("-")[-1])
                   if n.split("-")[-1].isdigit() else 0)
    if ckpts:
        parts.append(", ".join(f"`{n}/`" for n in ckpts) + " (checkpoints)")
    known = {n for n, _ in _FILES} | set(resumes) | set(ckpts) | {"README.md"}
    # anything else the run's libraries wrote (TensorBoard's `runs/`, ...) is listed too, never left out
    parts += [f"`{n}/`" if os.path.isdir(os.path.join(run_dir, n)) else f"`{n}`"
              for n in sorted(names - known) if not n.startswith(".")]
    return "Files: " + ", ".join(parts) + "." if parts else "Files: none."


def write_run_readme(run_dir: str) -> str:
    """Write ``RUN_DIR/README.md`` (and ``curves.png``): what ran, the reward change, before/after pass@1."""
    from rewardlang.trainers.plot import plot_run

    cfg: dict[str, Any] = {}
    if os.path.exists(os.path.join(run_dir, "config.json")):
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
            cfg = json.load(fh)
    train = cfg.get("train", {})
    lines = [f"# Run {os.path.basename(os.path.abspath(run_dir))}", ""]
    lines.append(f"- spec: `{cfg.get('spec', {}).get('path', '?')}` ({cfg.get('spec', {}).get('name', '?')})")
    lines.append(f"- model: `{train.get('model') or 'tiny'}`, algorithm {train.get('algorithm', 'grpo')}, "
                 f"{train.get('max_steps')} steps x {train.get('prompts_per_step')} prompts x "
                 f"{train.get('num_generations')} generations, up to {train.get('max_completion_length')} tokens, "
                 f"learning rate {train.get('learning_rate')}, LoRA {'on' if train.get('lora') else 'off'}")
    subset = os.path.join(run_dir, "train-problems.json")
    if os.path.exists(subset):
        with open(subset, encoding="utf-8") as fh:
            chosen = json.load(fh)
        lines.append(f"- trained on {len(chosen['train_problems'])} of {chosen['available']} problems "
                     f"(train.train_problems): {', '.join(str(t) for t in chosen['train_problems'])}")
    if cfg.get("command"):
        lines.append(f"- command: `{' '.join(str(c) for c in cfg['command'])}`")
    lines.append("")
    lines += [f"{line}" for line in summary_lines(run_dir)] or ["(no training records)"]
    ev = _eval(run_dir)
    if ev.get("before", {}).get("task_ids"):
        # a translation run holds each problem out in every target: named once
        lines += ["", f"Held-out problems: {', '.join(dict.fromkeys(ev['before']['task_ids']))}"]
    if _records(run_dir):
        try:
            plot_run(run_dir)
            lines += ["", "![reward curve and the other training metrics](curves.png)"]
        except Exception as exc:  # a plot is a convenience: its failure must not lose the README
            lines += ["", f"(plot failed: {exc})"]
    lines += readme_lines(run_dir, _all_records(run_dir))  # the audits next to the reward, the alarms
    path = os.path.join(run_dir, "README.md")
    lines += ["", files_line(run_dir) + " `README.md`: this file."]
    write_text(path, "\n".join(lines) + "\n")
    return path
