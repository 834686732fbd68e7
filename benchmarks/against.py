"""This tree against another checkout of rewardlang (before/after a change), in one run: each benchmark script runs
from each tree in turn, ``--rounds`` times, so that the machine's load falls on both sides alike; medians and the
ratio (other / this: above 1 means this tree is faster) are printed with the load.

    python benchmarks/against.py /path/to/other/checkout [--rounds 3] [--only score,server,grpo]

- ``score``: ``bench_score_cli.py --no-baseline --runs 1``: ``rewardlang score`` of the CodePO corpus, whole command;
- ``server``: ``bench_scale.py --only server --server-runs 1``: ``rewardlang serve`` at 32 rows and at 1 row per
  request under 16 clients (and in-process batch scoring);
- ``grpo``: ``bench_grpo.py --rounds 1``: the median GRPO step of SpecGRPOTrainer on the tiny policy, and its ratio
  to TRL's trainer with plain Python rewards paired step by step in the same tree (what the load does to one step
  it does to its pair, so this figure is the steadiest on a busy machine).

Each script is the tree's own (it puts its tree first on ``PYTHONPATH``), so each side runs its own code.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: name -> (script arguments, {figure: regex of its seconds in the script's output})
BENCHES: dict[str, tuple[list[str], dict[str, str]]] = {
    "score": (["bench_score_cli.py", "--no-baseline", "--runs", "1"],
              {"rewardlang score (s)": r"^rewardlang score\s+median ([\d.]+) s",
               "rewardlang score --workers 1 (s)": r"^rewardlang score --workers 1\s+median ([\d.]+) s",
               # CPU seconds (the command and its workers): what the machine's load changes least
               "rewardlang score, CPU (s)": r"^rewardlang score\s+median .*; CPU ([\d.]+) s",
               "rewardlang score --workers 1, CPU (s)": r"^rewardlang score --workers 1\s+median .*; CPU ([\d.]+) s"}),
    "server": (["bench_scale.py", "--only", "server", "--server-runs", "1", "--samples", "256"],
               {"in-process batch (s)": r"in-process batch scoring \(one Program.score\): median ([\d.]+) s",
                "serve, 16 rows/request (s)": r"rewardlang serve, 16 row\(s\) per request: median ([\d.]+) s",
                "serve, 1 row/request (s)": r"rewardlang serve, 1 row\(s\) per request: median ([\d.]+) s",
                "in-process batch, CPU (s)": r"in-process batch scoring \(one Program.score\): .*CPU median ([\d.]+) s",
                "serve, 16 rows/request, server CPU (s)": r"rewardlang serve, 16 row\(s\) per request: .*server "
                                                          r"([\d.]+) s",
                "serve, 1 row/request, server CPU (s)": r"rewardlang serve, 1 row\(s\) per request: .*server "
                                                        r"([\d.]+) s"}),
    "grpo": (["bench_grpo.py", "--rounds", "1", "--steps", "8"],
             {"GRPO step, spec (ms)": r"rewardlang compiled spec\s+median step\s+([\d.]+) ms",
              "GRPO step, plain Python rewards (ms)": r"plain Python rewards\s+median step\s+([\d.]+) ms",
              # the spec's step over the plain one, paired step by step in the same tree: the load cancels out
              "GRPO step, spec / plain Python (paired)": r"ratio \(spec / python\), median of \d+ paired steps: "
                                                        r"([\d.]+)x"}),
}


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(tree: str, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": tree}
    r = subprocess.run([sys.executable, os.path.join(tree, "benchmarks", args[0]), *args[1:]], cwd=tree, env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("other", help="the other checkout (its root directory)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="score,server,grpo")
    a = ap.parse_args()
    trees = {"other": os.path.abspath(a.other), "this": ROOT}
    names = [n for n in a.only.split(",") if n]
    got: dict[tuple[str, str, str], list[float]] = {}
    print(f"this: {ROOT}; other: {trees['other']}; {a.rounds} rounds; {load()}", flush=True)
    for k in range(a.rounds):
        for name in names:
            args, figures = BENCHES[name]
            for side in (("other", "this") if k % 2 == 0 else ("this", "other")):  # who goes first alternates
                out = run(trees[side], args)
                for fig, pattern in figures.items():
                    m = re.search(pattern, out, re.MULTILINE)
                    if m:
                        got.setdefault((name, fig, side), []).append(float(m.group(1)))
                print(f"  round {k + 1} {name} {side}: " + ", ".join(
                    f"{fig} {got[(name, fig, side)][-1]:g}" for fig in figures if (name, fig, side) in got)
                    + f"  [{load()}]", flush=True)
    print(f"medians ({load()}):")
    for name in names:
        for fig in BENCHES[name][1]:
            o, t = got.get((name, fig, "other")), got.get((name, fig, "this"))
            if o and t:
                mo, mt = statistics.median(o), statistics.median(t)
                print(f"  {fig:36s} other {mo:9.2f}  this {mt:9.2f}  other/this {mo / mt:.3f}x")


if __name__ == "__main__":
    main()
