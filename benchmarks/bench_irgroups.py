"""IR-group construction for GEPO (issue 21's benchmark): groups per minute and CPU per group.

    python benchmarks/bench_irgroups.py [--functions 100] [--losers 4]

Builds the GEPO groups of the first N functions of `rewardlang data cfuncs` twice in one run — on one process and
on every core (`rewardlang ir-groups`'s default) — and prints wall time, groups per minute, the CPU per group
(clang, the harness runs and the builder, from the children's rusage) and the ratio. Recording the harnesses is
done once before timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def _cpu() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--functions", type=int, default=100)
    ap.add_argument("--losers", type=int, default=4)
    args = ap.parse_args()

    from rewardlang.datasets import cfuncs
    from rewardlang.datasets.irgroups import build_groups, clang_version

    rows = cfuncs.rows(cfuncs.corpus()[: args.functions])
    print(f"{clang_version()}; {len(rows)} functions, {args.losers} losers per group, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    res = {}
    for workers in (1, os.cpu_count() or 1):
        c0, t0 = _cpu(), time.perf_counter()
        out = list(build_groups(rows, workers=workers, losers=args.losers))
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        ok = sum(r.group is not None for r in out)
        res[workers] = wall
        print(f"workers={workers}: {ok} groups in {wall:.1f} s = {60 * ok / wall:.1f} groups/min, "
              f"CPU {cpu / max(ok, 1):.2f} s per group, "
              f"{sum(r.distinct for r in out) / len(out):.2f} distinct winners, "
              f"{sum(sum(r.tried.values()) for r in out) / len(out):.1f} mutants tried per group")
    if len(res) == 2:
        one, many = res[1], res[max(res)]
        print(f"every core vs one process: {one / many:.2f}x")


if __name__ == "__main__":
    main()
