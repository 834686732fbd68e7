"""IR-group construction for GEPO (issue 21's benchmark): groups per minute and CPU per group.

    python benchmarks/bench_irgroups.py [--functions 100] [--losers 4]

Builds the GEPO groups of the first N functions of `rewardlang data cfuncs` twice in one run — on one sandbox slot
and on one slot per core (`rewardlang ir-groups`'s default) — and prints wall time, groups per minute, the CPU per
group (clang, the harness runs and the builder: this process's and its children's rusage, the sandbox's slots
included) and the ratio. Recording the harnesses is done once before timing.

    python benchmarks/bench_irgroups.py --against REF [--functions 40] [--rounds 3]

this tree beside the `ir-groups` of an earlier commit (issue 32, class 2: before it, every compile and harness run
happened on the host, in a process pool; now in the sandbox's slots), in one run: fresh processes alternating
between the two trees (so both see the same machine load), every core, medians of ``--rounds``, the ratio of the
wall times, and whether both trees built the same groups and counts (hangs are CPU time over a limit: on a loaded
machine a mutant near the limit may hang in one run and not the other). The earlier tree is checked out into a
temporary git worktree.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

# --root DIR: measure the rewardlang of another tree (the --against mode runs this script that way)
_ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)


def _cpu() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


def _digest(out: list) -> tuple[str, int]:
    import hashlib
    import json

    blob = json.dumps([[r.id, r.group, r.error, r.distinct, r.winners_failed, sorted(r.tried.items()),
                        sorted(r.killed.items()), r.survived, r.timeouts, r.invalid] for r in out])
    return hashlib.sha256(blob.encode()).hexdigest()[:16], sum(r.timeouts for r in out)


def measure_only(functions: int, losers: int) -> None:
    """One measurement of the tree on sys.path, as JSON on stdout (the --against mode's unit)."""
    import json

    from rewardlang.datasets import cfuncs
    from rewardlang.datasets.irgroups import build_groups

    rows = cfuncs.rows(cfuncs.corpus()[:functions])
    t0 = time.perf_counter()
    out = list(build_groups(rows, workers=os.cpu_count() or 1, losers=losers))
    wall = time.perf_counter() - t0
    digest, hangs = _digest(out)
    print(json.dumps({"wall": wall, "groups": sum(r.group is not None for r in out), "digest": digest,
                      "hangs": hangs, "load": os.getloadavg()[0]}))


def against(ref: str, rounds: int, functions: int, losers: int) -> None:
    import json
    import shutil
    import statistics
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="rewardlang-bench-")
    old = os.path.join(tmp, "tree")
    subprocess.run(["git", "-C", here, "worktree", "add", "--detach", "-q", old, ref], check=True)
    try:
        sha = subprocess.run(["git", "-C", old, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        names = {"this tree": here, f"{ref} ({sha})": old}
        runs: dict[str, list[dict]] = {n: [] for n in names}
        for r in range(rounds):
            for name in (list(names) if r % 2 == 0 else list(names)[::-1]):
                cmd = [sys.executable, os.path.abspath(__file__), "--measure-only", "--root", names[name],
                       "--functions", str(functions), "--losers", str(losers)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                     env={**os.environ, "PYTHONPATH": names[name]}).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
                x = runs[name][-1]
                print(f"  round {r + 1} {name:24s} {x['wall']:6.1f} s  {x['groups']} groups  hangs {x['hangs']}  "
                      f"digest {x['digest']}  load {x['load']:.1f}", flush=True)
        med = {n: statistics.median(x["wall"] for x in rs) for n, rs in runs.items()}
        (a, wa), (b, wb) = med.items()
        same = [x["digest"] == y["digest"] for x, y in zip(runs[a], runs[b])]
        print(f"{functions} functions, {losers} losers per group, {os.cpu_count()} cores, {rounds} rounds "
              f"alternating; medians")
        for n, m in med.items():
            print(f"  {n:24s} {m:7.1f} s = {60 * runs[n][0]['groups'] / m:.1f} groups/min")
        print(f"  ratio this/{ref}: throughput {wb / wa:.2f}x (wall time {wa / wb:.2f}x); the same groups and counts "
              f"in {sum(same)} of {len(same)} rounds")
    finally:
        subprocess.run(["git", "-C", here, "worktree", "remove", "--force", old], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--functions", type=int, default=100)
    ap.add_argument("--losers", type=int, default=4)
    ap.add_argument("--against", metavar="REF", help="measure this tree beside git REF's, alternating")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_only:
        measure_only(args.functions, args.losers)
        return
    if args.against:
        against(args.against, args.rounds, args.functions, args.losers)
        return

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
        print(f"slots={workers}: {ok} groups in {wall:.1f} s = {60 * ok / wall:.1f} groups/min, "
              f"CPU {cpu / max(ok, 1):.2f} s per group, "
              f"{sum(r.distinct for r in out) / len(out):.2f} distinct winners, "
              f"{sum(sum(r.tried.values()) for r in out) / len(out):.1f} mutants tried per group")
    if len(res) == 2:
        one, many = res[1], res[max(res)]
        print(f"every core vs one slot: {one / many:.2f}x")


if __name__ == "__main__":
    main()
