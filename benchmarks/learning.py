"""The learning table: every shipped spec's default training, for a fixed small budget, on the default model.

For each spec that trains a policy, ``rewardlang train --spec S`` runs with the spec's own defaults (its ``train``
section: algorithm, presentation, token budget, temperature, learning rate ...) on the default model
(SmolLM2-135M-Instruct), changed only in the budget: ``--max-steps N``, ``train.eval = E`` held-out problems, no
intermediate checkpoints, and one torch thread (``--threads``). Each run is its own process; what it wrote is read
back and one row per spec is printed and written (JSON, and a Markdown table for docs/training.md):

- the mean reward of the first and the last steps (``--ends`` steps each) and the share of groups whose rewards
  did not vary (``groups/zero_variance``: no group-relative signal), over the run and over its first 3 steps;
- the held-out reward (the spec's total, greedy answers to E problems never trained on) before and after, with the
  paired change and its 95 % bootstrap interval (``eval.json``), and pass@1 before and after;
- seconds per step and the run's CPU seconds, with the load average beside them (the machine may be shared).

Specs that train no policy have no row and are listed with the reason: ``prm.reward`` trains the process reward
model itself (a classifier), and ``constructs.reward`` is the language's reference by example (no dataset).
``prlcoder.reward`` needs that PRM: with ``--prm RUN_DIR/final`` it runs on it, else it is listed as skipped, and
so is ``prlcoder_dpo.reward`` without its pairs file (``data/prm/dpo.jsonl``, from ``rewardlang prm-data``).

    python benchmarks/learning.py                                   # every spec, 8 steps, 40 held-out problems
    python benchmarks/learning.py --specs codepo_text,quality_grpo --steps 4 --eval 10
    python benchmarks/learning.py --model tiny --steps 2 --eval 2   # the pipeline in minutes (no learning)
    python benchmarks/learning.py --specs oorl --steps 4 --eval 10 --merge -o learning.json   # add or redo a row

``--merge`` keeps the rows already in ``-o`` for the specs not run now (a table built one spec at a time on a
shared machine); every row carries its own date and load average, and the budgets must agree (else an error: a
table compares runs of one budget).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the specs that train a policy, in the table's order; the others and why they have no row
SPECS = ("quality_grpo", "codepo_text", "codepo", "dpo_tests", "oorl_python", "oorl", "dense_ppo", "dense_ppo_robot",
         "prlcoder", "prlcoder_dpo")
NO_ROW = {"prm": "trains the process reward model (a token classifier scored by accuracy, docs/prm.md), not a policy",
          "constructs": "the language's constructs by example (its own docstring: not a reward to train with)"}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize_run(run_dir: str, ends: int) -> dict[str, Any]:
    """One table row from a run directory: ``metrics.jsonl`` and ``eval.json``."""
    sys.path.insert(0, HERE)
    from rewardlang.trainers.metrics import read_metrics

    recs = [r for r in read_metrics(os.path.join(run_dir, "metrics.jsonl")) if "train_runtime" not in r]
    rewards = [float(r["reward"]) for r in recs if isinstance(r.get("reward"), (int, float))]
    zero = [float(r["groups/zero_variance"]) for r in recs if isinstance(r.get("groups/zero_variance"), (int, float))]
    no_group = [float(r["pref/no_group_share"]) for r in recs
                if isinstance(r.get("pref/no_group_share"), (int, float))]
    std = [float(r["reward_std"]) for r in recs if isinstance(r.get("reward_std"), (int, float))]
    steps = [float(r["time/step"]) for r in recs if isinstance(r.get("time/step"), (int, float))]
    # batches sampled and put aside because every group tied (train.resample_tied); the groups counted above are
    # those of the batches trained on
    put_aside = [int(r["resample/rounds"]) for r in recs if isinstance(r.get("resample/rounds"), (int, float))]
    # offline DPO samples nothing while it trains: no reward of its own samples, but TRL's implicit reward margin
    # (chosen minus rejected) over the fixed pairs, which is what it raises
    margins = [float(r["rewards/margins"]) for r in recs if isinstance(r.get("rewards/margins"), (int, float))]
    row: dict[str, Any] = {
        "steps": len(recs),
        "reward_first": _mean(rewards[:ends]), "reward_last": _mean(rewards[-ends:]),
        "reward_min": min(rewards) if rewards else None, "reward_max": max(rewards) if rewards else None,
        "reward_std_mean": _mean(std),
        "zero_variance": _mean(zero), "zero_variance_first3": _mean(zero[:3]),
        "no_group_share": _mean(no_group),
        "resampled": sum(put_aside) if put_aside else None,
        "seconds_per_step": _mean(steps),
    }
    if not rewards and margins:
        row["margin_first"], row["margin_last"] = _mean(margins[:ends]), _mean(margins[-ends:])
    path = os.path.join(run_dir, "eval.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            ev = json.load(fh)
        for when in ("before", "after"):
            side = ev.get(when) or {}
            row[f"heldout_{when}"] = (side.get("reward") or {}).get("mean")
            row[f"heldout_{when}_ci95"] = (side.get("reward") or {}).get("ci95")
            row[f"pass1_{when}"] = side.get("pass@1")
            row[f"pass1_{when}_ci95"] = side.get("pass@1_ci95")
            row[f"components_{when}"] = side.get("components")
        change = ev.get("change") or {}
        row["heldout_change"] = (change.get("reward") or {}).get("mean")
        row["heldout_change_ci95"] = (change.get("reward") or {}).get("ci95")
        row["pass1_change_ci95"] = (change.get("pass@1") or {}).get("ci95")
        row["heldout_problems"] = (ev.get("before") or {}).get("scored")
    return row


def run_spec(name: str, args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    """Train one spec with its defaults for the budget; the row, with the command, its CPU time and the load."""
    spec = os.path.join(HERE, "specs", f"{name}.reward")
    out = os.path.join(workdir, name)
    cmd = [sys.executable, "-m", "rewardlang", "train", "--spec", spec, "--output", out, "--max-steps",
           str(args.steps), "--set", f"train.eval={args.eval}", "--set", "train.save_steps=100000",
           "--set", f"train.torch_threads={args.threads}", "--seed", str(args.seed), "--no-progress"]
    if args.model:
        cmd += ["--model", args.model]
    if name == "prlcoder":
        cmd += ["--set", f"prm_checkpoint={args.prm}"]
    env = {**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TOKENIZERS_PARALLELISM": "false"}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    row: dict[str, Any] = {"spec": name, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "command": " ".join(["rewardlang", *cmd[3:]]).replace(HERE + "/", ""),
                           "exit": proc.returncode, "wall_s": round(wall, 1),
                           "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1),
                           "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}
    if proc.returncode != 0:
        row["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return row
    row.update(summarize_run(out, args.ends))
    row["last_lines"] = proc.stdout.strip().splitlines()[-6:]
    with open(os.path.join(out, "config.json"), encoding="utf-8") as fh:
        train = json.load(fh).get("train", {})
    row["settings"] = {k: train.get(k) for k in ("algorithm", "num_generations", "prompts_per_step",
                                                 "max_completion_length", "temperature", "learning_rate", "lora",
                                                 "dataset", "resample_tied")}
    return row


def _f(x: Any, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _ci(ci: Any) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "–"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The table for docs/training.md."""
    head = ("| spec | algorithm | reward first → last steps | zero-variance groups (first 3 steps) | held-out reward "
            "before → after | change, 95 % CI | pass@1 before → after | s/step | run (UTC), load |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        if "skipped" in r or r.get("exit"):
            lines.append(f"| `{r['spec']}` | | {r.get('skipped') or 'failed: ' + ' '.join(r.get('error', []))[-200:]} "
                         "| | | | | | |")
            continue
        zv = r["zero_variance"] if r["zero_variance"] is not None else r.get("no_group_share")
        zv_first = r["zero_variance_first3"]
        aside = f"; {r['resampled']} tied batches put aside" if r.get("resampled") else ""
        first_last = f"{_f(r['reward_first'])} → {_f(r['reward_last'])}"
        if r.get("reward_first") is None and r.get("margin_first") is not None:  # offline DPO: no samples
            first_last = f"offline pairs: margin {_f(r['margin_first'])} → {_f(r['margin_last'])}"
        lines.append(
            f"| `{r['spec']}` | {r['settings']['algorithm']} | {first_last} | "
            f"{'–' if zv is None else f'{zv:.2f}'}{'' if zv_first is None else f' ({zv_first:.2f})'}"
            f"{aside} | "
            f"{_f(r.get('heldout_before'))} → {_f(r.get('heldout_after'))} | {_f(r.get('heldout_change'), True)} "
            f"{_ci(r.get('heldout_change_ci95'))} | {_f(r.get('pass1_before'))} → {_f(r.get('pass1_after'))} | "
            f"{'–' if r['seconds_per_step'] is None else round(r['seconds_per_step'], 1)} | "
            f"{r.get('date', meta['date'])[5:]}, {'-'.join(str(x) for x in r.get('load', meta['load']))} |")
    done = {r["spec"] for r in rows}
    for name in meta.get("specs", ()):
        if name not in done:  # a table stopped part-way says which rows it lacks
            lines.append(f"| `{name}` | | not run (the table was stopped before this spec) | | | | | | |")
    note = (f"\n{meta['date']}, model `{meta['model']}`, {meta['steps']} steps (first/last: "
            f"the mean of the first and last {meta.get('ends', 3)}), {meta['eval']} held-out problems, "
            f"seed {meta['seed']}, {meta['threads']} torch thread(s); load average {meta['load'][0]}-{meta['load'][1]} "
            f"on {meta.get('cores', os.cpu_count())} cores (the last column: each run's start, and the load average "
            "before and after it). No row: " + "; ".join(f"`{k}` ({v})" for k, v in NO_ROW.items()) + ".\n")
    return head + "\n".join(lines) + "\n" + note


def merged_rows(path: str, names: list[str], args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of an earlier table at ``path`` that this invocation keeps (its specs not in ``names``), and the
    earlier table's spec order. An earlier table of another budget is an error: its rows would not compare."""
    with open(path, encoding="utf-8") as fh:
        earlier = json.load(fh)
    meta = earlier.get("meta", {})
    budget = {k: getattr(args, k) for k in ("steps", "eval", "ends", "seed", "threads")}
    budget["model"] = args.model or "smollm2"
    theirs = {k: meta.get(k) for k in budget}
    if theirs != budget:
        raise SystemExit(f"error: --merge: {path} was made with {theirs}, this run is {budget}: one budget per table")
    kept = [r for r in earlier.get("rows", []) if r.get("spec") not in names]
    return kept, [n for n in meta.get("specs", []) if n in SPECS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", default=",".join(SPECS), help="comma-separated spec names (default: every one)")
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps per spec")
    ap.add_argument("--eval", type=int, default=40, help="held-out problems evaluated before and after")
    ap.add_argument("--ends", type=int, default=3, help="steps averaged at each end for first vs last reward")
    ap.add_argument("--model", default=None, help="default: the CLI's (smollm2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (1 on a shared machine)")
    ap.add_argument("--prm", default=None, help="a PRM checkpoint (RUN_DIR/final) for prlcoder.reward")
    ap.add_argument("--workdir", default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("-o", "--out", default="learning.json", help="the rows as JSON (the table goes next to it, .md)")
    ap.add_argument("--merge", action="store_true", help="keep -o's rows of the specs not run now (same budget)")
    args = ap.parse_args()
    names = [s.strip() for s in args.specs.split(",") if s.strip()]
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        ap.error(f"unknown spec(s) {unknown}: choose among {', '.join(SPECS)}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="learning-")
    load = [os.getloadavg()[0]]
    rows: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    if args.merge and os.path.exists(args.out):
        kept, earlier = merged_rows(args.out, names, args)
        names = [n for n in SPECS if n in {*earlier, *names}]  # the table's order, whatever the invocations'
    sys.path.insert(0, HERE)
    from rewardlang.outputs import write_text

    def write() -> str:
        # after every spec, so a long table stopped part-way keeps the rows it finished (each file written whole)
        meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": args.model or "smollm2",
                "steps": args.steps, "eval": args.eval, "ends": args.ends, "seed": args.seed,
                "threads": args.threads,
                "load": [round(x, 1) for x in (*load[:1], os.getloadavg()[0])], "workdir": workdir,
                "specs": names}
        ordered = sorted([*kept, *rows], key=lambda r: names.index(r["spec"]))
        write_text(args.out, json.dumps({"meta": meta, "rows": ordered}, indent=1))
        table = markdown(ordered, meta)
        write_text(os.path.splitext(args.out)[0] + ".md", table)
        return table

    for name in [n for n in names if n not in {r["spec"] for r in kept}]:
        if name == "prlcoder" and not args.prm:
            rows.append({"spec": name, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                         "skipped": "needs a PRM: --prm RUN_DIR/final (rewardlang prm-data, then train "
                                    "specs/prm.reward)"})
            continue
        if name == "prlcoder_dpo" and not os.path.exists(os.path.join(HERE, "data", "prm", "dpo.jsonl")):
            rows.append({"spec": name, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                         "skipped": "offline DPO on data/prm/dpo.jsonl (rewardlang prm-data)"})
            continue
        print(f"{name}: training ...", file=sys.stderr, flush=True)
        row = run_spec(name, args, workdir)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("components_before", "components_after")}),
              flush=True)
        write()
    print(write())


if __name__ == "__main__":
    main()
