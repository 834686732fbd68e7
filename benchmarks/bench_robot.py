"""Robot simulator runs through the sandbox: a batch of 64 programs x 5 worlds (issue 22's benchmark).

    python benchmarks/bench_robot.py [--repeats 3]

The 64 programs are the canonical programs and mutants of the robot tasks (every outcome class), each run on its
task's 5 worlds: 320 sandboxed executions per batch, judged by the trusted replay and checker. Prints the batch
time, runs/s, the CPU per run on the sandbox side, and the same check in-process (trusted programs only) as a
floor. No cache (every batch runs every program).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from rewardlang.domains.robot.inside import run_in_process
    from rewardlang.domains.robot.outcome import judge_claim
    from rewardlang.domains.robot.tasks import all_tasks
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.components.robot import robot_outcome_label
    from rewardlang.sandbox.runner import get_sandbox

    pairs = []
    for t in all_tasks():
        pairs.append((t.canonical, t))
        pairs.extend((m, t) for m in t.mutants().values())
    pairs = pairs[:: max(1, len(pairs) // 64)][:64]
    codes, tasks = [c for c, _ in pairs], [t.spec() for _, t in pairs]
    sb = get_sandbox()
    print(f"sandbox level {sb.level}, {len(sb.pool.slots)} slots; {len(codes)} programs x 5 worlds")
    times, labels = [], None
    for _ in range(args.repeats):
        ctx = Context(use_cache=False)
        t0 = time.perf_counter()
        res = robot_outcome_label.fn(codes, tasks, params=None, ctx=ctx)
        times.append(time.perf_counter() - t0)
        assert ctx.stats["sandbox.infra_failures"] == 0, dict(ctx.stats)
        labels = res.values
    runs = len(codes) * 5
    med = statistics.median(times)
    print(f"sandbox: batch {med:.2f} s median of {args.repeats} ({', '.join(f'{x:.2f}' for x in times)}), "
          f"{runs / med:.0f} runs/s; classes {dict(Counter(labels))}")
    t0 = time.perf_counter()
    local = []
    for (code, task) in pairs:
        worst = []
        for s in task.seeds:
            w = task.world(s)
            worst.append(judge_claim(w, run_in_process(code, w), task.check).label)
        local.append(min(worst, key=["python_error", "simulation_error", "completion_error", "success"].index))
    dt = time.perf_counter() - t0
    assert local == labels, "in-process and sandboxed labels differ"
    print(f"in-process (trusted programs only): {dt:.2f} s, {runs / dt:.0f} runs/s; labels identical")


if __name__ == "__main__":
    main()
