"""The whole CodePO spec on the HumanEval-derived corpus (1,312 rows, 8 varied completions per problem) against a
per-sample implementation that calls the `codebleu` package (0.7.0) for the accuracy term.

Both run in one process; the script prints both throughputs, the ratio, and checks that every value is identical
except where the package is wrong: its `dataflow or 1` turns a zero dataflow match into a full one (an empty
answer gets CodeBLEU 0.30 under CodePO's weights). Those rows are counted and listed by kind.

    python benchmarks/bench_codepo_full.py [--repeats 3] [--repeats-baseline 2]

Each side's best run is reported (a shared machine only ever slows a run down); every run of the spec starts
fresh worker processes, so its caches are cold.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_codepo_text import baseline_row  # noqa: E402  (format, reason, rep as plain Python)
from benchmarks.corpus import as_completion, load_corpus  # noqa: E402

REASONINGS = ["Step 1: read the task. Step 2: write the function. Thus done.", "I think it works.",
              "(1) parse (2) loop (3) return. Therefore it is correct.", "Step 1: think."]


def baseline(completions: list[str], references: list[str]) -> dict[str, np.ndarray]:
    from codebleu import calc_codebleu

    out: dict[str, list[float]] = {"format": [], "reason": [], "rep": [], "acc": [], "dataflow": []}
    import re

    answer_re = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
    block_re = re.compile(r"```python\n(.*?)```", re.DOTALL)
    for text, ref in zip(completions, references):
        fmt, reason, rep = baseline_row(text)
        a = answer_re.search(text)
        answer = a.group(1) if a else ""
        b = block_re.search(answer)
        code = b.group(1) if b else answer
        code = code[:-1] if code.endswith("\n") else code
        res = calc_codebleu([ref], [code], lang="python", weights=(0.4, 0.0, 0.3, 0.3))
        cb = res["codebleu"]
        acc = 0.0 if cb <= 0.2 else (0.5 if cb <= 0.4 else 1.0)
        for k, v in zip(("format", "reason", "rep", "acc", "dataflow"), (fmt, reason, rep, acc,
                                                                          res["dataflow_match_score"])):
            out[k].append(v)
    return {k: np.array(v) for k, v in out.items()}


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # the package's dataflow edges depend on set iteration order, i.e. on the hash seed; rewardlang
        # reproduces seed 0 (docs/components/codebleu.md), so the comparison runs under it
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3, help="cold runs of the spec (the best is reported)")
    ap.add_argument("--repeats-baseline", type=int, default=2, help="runs of the baseline (the best is reported)")
    args = ap.parse_args()
    import rewardlang

    rows = load_corpus()
    completions = [as_completion(r.candidate, REASONINGS[i % len(REASONINGS)]) for i, r in enumerate(rows)]
    references = [r.reference for r in rows]
    prompts = [r.task_id for r in rows]
    print(f"{len(rows)} rows ({len(set(prompts))} problems x {len(rows) // len(set(prompts))} completions)")

    def ours() -> tuple[float, Any]:
        """One cold run: fresh worker processes (no cache holds anything), started and warmed before timing."""
        prog = rewardlang.load(os.path.join(ROOT, "specs/codepo.reward"))
        prog.workers = os.cpu_count() or 1  # both cores, as in training, where the workers stay up between steps
        # warm-up on other programs (a statement, not a comment: CodeBLEU strips comments before parsing, so a
        # comment would leave the parse cache holding the timed run's trees)
        warm = [c.replace("\n```</answer>", "\n_warm_up = 0\n```</answer>") for c in completions[:300]]
        prog.score(completion=warm, reference=[r + "\n_warm_up = 1\n" for r in references[:300]],
                   prompt=prompts[:300])
        t0 = time.perf_counter()
        out = prog.score(completion=completions, reference=references, prompt=prompts)
        dt = time.perf_counter() - t0
        prog.close()
        return dt, out

    t_base = float("inf")
    for _ in range(args.repeats_baseline):
        t0 = time.perf_counter()
        ref = baseline(completions, references)
        t_base = min(t_base, time.perf_counter() - t0)
    t_ours, out = min((ours() for _ in range(args.repeats)), key=lambda x: x[0])

    for k in ("format", "reason", "rep"):
        assert np.max(np.abs(out.components[k] - ref[k])) <= 1e-12, k
    differ = out.components["acc"] != ref["acc"]
    package_wrong = ref["dataflow"] == 0.0
    unexplained = differ & ~package_wrong
    kinds = Counter(rows[i].kind for i in np.flatnonzero(differ))
    print(f"accuracy: identical on {int((~differ).sum())} rows; differs on {int(differ.sum())} "
          f"(all where the package's dataflow is 0 and it counts it as 1: {dict(kinds)})")
    assert not unexplained.any(), [rows[i].kind for i in np.flatnonzero(unexplained)][:10]
    print(f"baseline (per sample, codebleu package): {t_base:.2f} s  {len(rows) / t_base:,.0f} rows/s")
    print(f"rewardlang (compiled spec):              {t_ours:.2f} s  {len(rows) / t_ours:,.0f} rows/s")
    print(f"ratio: {t_base / t_ours:.1f}x")


if __name__ == "__main__":
    main()
