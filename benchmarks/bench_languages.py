"""CPU and wall time per program in each language: the bare toolchain vs the same program through the sandbox,
in one run, with the ratio (acceptance: the sandbox costs at most 1.25x the bare compile + run CPU).

    python3 benchmarks/bench_languages.py                 # 3 rounds of 20 programs per language, one slot
    python3 benchmarks/bench_languages.py --programs 10 --rounds 2 --langs c,cpp
    python3 benchmarks/bench_languages.py --pch 6          # bits/stdc++.h: the precompiled header vs none

*Bare*: the profile's own compile and run argv (same flags, same environment: HOME/TMPDIR in a fresh
directory on a tmpfs like the slot's, GOCACHE there, the JVM flags) spawned directly, fd 3 opened on a file; its CPU is the children's
rusage of each step (``wait4``), nothing of this process. *Sandbox*: the same programs as tasks of a one-slot
``Sandbox`` (bwrap where available); its CPU is everything the sandbox spends: the slot's processes (the
worker and every program and compiler it reaped) plus this whole process (the pool's threads, framing,
judging). Both must pass every case (the records of the bare runs are judged by the same comparison).
Each program is distinct (a comment with its number), so nothing is served from a cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "sandbox"))  # the programs of the tests

from lang_programs import LANGS, lang_tests, unit  # noqa: E402
import bare_toolchain  # noqa: E402 (benchmarks/, the baseline both benchmarks share)

from rewardlang.sandbox.config import Limits, SandboxConfig  # noqa: E402
from rewardlang.sandbox.languages import PROFILES  # noqa: E402
from rewardlang.sandbox.runner import Sandbox, Task  # noqa: E402

COMMENT = {"sh": "# {k}\n", "php": "\n// {k}\n"}


def program(lang: str, k: int) -> str:
    return unit(lang) + COMMENT.get(lang, "// {k}\n").format(k=k)


def cpu_seconds(sb: Sandbox) -> tuple[float, float]:
    """CPU seconds so far: (the slot's own processes (its init and worker, not what they reaped) + this whole
    process, in nanoseconds and microseconds; the same + everything the slot reaped, in the kernel's clock
    ticks). The programs' CPU, which the first leaves out, is the kernel's rusage of the children the worker
    reaped, in microseconds: each verdict's ``cpu`` (see main)."""
    tck = os.sysconf("SC_CLK_TCK")
    fine = ticks = 0.0
    for slot in sb.pool.slots:
        for pid in slot.worker_pids():
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    f = fh.read().rsplit(")", 1)[1].split()
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        fine += int(fh.read().split()[0]) / 1e9
            except OSError:
                continue
            ticks += sum(int(x) for x in f[11:15]) / tck
    r = resource.getrusage(resource.RUSAGE_SELF)
    return fine + r.ru_utime + r.ru_stime, ticks + r.ru_utime + r.ru_stime


def bare(lang: str, k: int) -> tuple[float, float, bool]:
    """(CPU s, wall s, all cases pass) of one program run by its toolchain directly."""
    return bare_toolchain.run(lang, program(lang, k), lang_tests(lang))


def bench_pch(sb: Sandbox, n: int) -> None:
    """C++ programs that include bits/stdc++.h through the sandbox: the profile as shipped (the precompiled
    header's -I) against the same profile without it, interleaved; CPU per program (compile + run)."""
    import dataclasses

    from rewardlang.sandbox import languages

    shipped = languages.PROFILES["cpp"]
    argv = list(shipped.compile or ())
    i = argv.index("-I")
    plain = dataclasses.replace(shipped, compile=tuple(argv[:i] + argv[i + 2:]))
    have = os.path.exists(os.path.join(languages.PCH_DIR, "bits", "stdc++.h.gch"))
    cpu: dict[str, list[float]] = {"pch": [], "header": []}
    try:
        for k in range(n):
            for name, prof in (("pch", shipped), ("header", plain)):
                languages.PROFILES["cpp"] = prof
                code = "#include <bits/stdc++.h>\n" + program("cpp", 10_000 + 2 * k + (name == "pch"))
                v = sb.evaluate([Task(code, lang_tests("cpp"), language="cpp", limits=Limits(cpu=10))],
                                use_cache=False)[0]
                assert v.outcome == "pass", v.details()
                cpu[name].append(v.cpu)
    finally:
        languages.PROFILES["cpp"] = shipped
    a, b = statistics.median(cpu["header"]), statistics.median(cpu["pch"])
    state = "present" if have else "MISSING: python3 -m rewardlang.sandbox.languages --build-pch"
    print(f"C++ with bits/stdc++.h ({n} programs each, compile + run CPU of the program, medians): without the "
          f"precompiled header {1e3 * a:.0f} ms, with it {1e3 * b:.0f} ms ({state}): {a / b:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=20, help="programs per language and round (each side)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the medians are printed)")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--json", action="store_true", help="print one JSON line per language as well")
    ap.add_argument("--pch", type=int, default=0, metavar="N",
                    help="only: N C++ programs including bits/stdc++.h with and without the precompiled header")
    args = ap.parse_args()
    if args.pch:
        with Sandbox(SandboxConfig(slots=1)) as sb:
            bench_pch(sb, args.pch)
        return
    langs = [x for x in args.langs.split(",") if x]
    n = args.programs
    with Sandbox(SandboxConfig(slots=1)) as sb:
        print(f"isolation level: {sb.level}; {args.rounds} rounds of {n} programs per language and side, one slot "
              "(per-program means of each round, medians of the rounds); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'lang':5s} {'bare CPU ms':>12s} {'sandbox CPU ms':>15s} {'ratio':>6s} {'bare wall ms':>13s} "
              f"{'sandbox wall ms':>16s}")
        worst = 0.0
        for lang in langs:
            if any(not os.access(t, os.X_OK) for t in PROFILES[lang].tools()):
                print(f"{lang:5s} toolchain missing: skipped")
                continue
            # warm both sides once (page cache, the slot's first fork of a toolchain)
            bare(lang, -1)
            sb.evaluate([Task(program(lang, -1), lang_tests(lang), language=lang)], use_cache=False)
            b_cpu, b_wall, s_cpu, s_wall, s_ticks = [], [], [], [], []
            for r in range(args.rounds):   # interleaved rounds: a change of the machine's load hits both sides
                progs = [program(lang, r * n + k) for k in range(n)]
                cpu = wall = 0.0
                for k in range(n):
                    c, w, ok = bare(lang, r * n + k)
                    assert ok, f"{lang}: the bare run did not pass"
                    cpu += c
                    wall += w
                b_cpu.append(cpu / n)
                b_wall.append(wall / n)
                (c0, k0), t0 = cpu_seconds(sb), time.perf_counter()
                vs = sb.evaluate([Task(code, lang_tests(lang), language=lang, limits=Limits(cpu=10))
                                  for code in progs], use_cache=False)
                s_wall.append((time.perf_counter() - t0) / n)
                c1, k1 = cpu_seconds(sb)
                s_cpu.append((c1 - c0 + sum(v.cpu for v in vs)) / n)
                s_ticks.append((k1 - k0) / n)
                assert all(v.outcome == "pass" for v in vs), (lang, [v.details() for v in vs if v.outcome != "pass"])
            bc, sc = statistics.median(b_cpu), statistics.median(s_cpu)
            ratio = sc / bc
            worst = max(worst, ratio)
            print(f"{lang:5s} {1e3 * bc:12.1f} {1e3 * sc:15.1f} {ratio:5.2f}x {1e3 * statistics.median(b_wall):13.1f} "
                  f"{1e3 * statistics.median(s_wall):16.1f}")
            print(f"      (the sandbox's CPU in clock ticks, a cross-check of what the verdicts report: "
                  f"{1e3 * statistics.mean(s_ticks):.1f} ms per program against {1e3 * statistics.mean(s_cpu):.1f}; "
                  f"{len(s_ticks)} rounds of {n}, a tick is {1e3 / os.sysconf('SC_CLK_TCK'):.0f} ms)")
            if args.json:
                print(json.dumps({"lang": lang, "bare_cpu_ms": 1e3 * bc, "sandbox_cpu_ms": 1e3 * sc, "ratio": ratio,
                                  "bare_wall_ms": 1e3 * statistics.median(b_wall),
                                  "sandbox_wall_ms": 1e3 * statistics.median(s_wall)}))
        print(f"worst CPU ratio sandbox/bare: {worst:.2f}x (acceptance: <= 1.25x) -> "
              f"{'met' if worst <= 1.25 else 'MISSED'}")


if __name__ == "__main__":
    main()
