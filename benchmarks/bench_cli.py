"""CLI figures from issue 2: `rewardlang check` of a 200-line spec (process start included) and the peak memory of
`rewardlang score` over 1,000,000 rows (streamed: memory stays flat however many rows).

    python benchmarks/bench_cli.py [--rows 1000000]

The baseline for `check` is a bare `python -c pass` start, printed beside it, so the ratio shows what rewardlang
adds to the interpreter's own start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spec_200_lines() -> str:
    lines = ['spec big "a 200-line spec"', "input completion: text", "input reference: code", ""]
    i = 0
    while i < 31:  # 4 + 31 * 5 + 4 + 6 * 6 = 199 lines
        lines += [f"let t{i} = tag(completion, \"t{i}\") or \"\"",
                  f"let c{i} = count(t{i}, /x{i}\\d+/, \"y{i}\")",
                  f"component k{i} in [0, 1] = step(c{i}, <= 1: 0, <= 3: 0.5, else: 1)",
                  f"k{i}.weight = {1 + i % 3}", ""]
        i += 1
    lines += ["component ref_len = min(len(reference), 100) / 100", ""]
    lines += ["advantage over group(prompt) = (x - mean) / (std(ddof=1) + 1e-4)", ""]
    for j in range(6):
        lines += ["example {", f'    completion: "<t{j}>x{j}1 x{j}2 y{j}</t{j}>",', '    reference: "r",',
                  f"    expect k{j} = 0.5,", "}", ""]
    return "\n".join(lines) + "\n"


def time_cmd(cmd: list[str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "big.reward")
        with open(spec, "w") as f:
            f.write(spec_200_lines())
        exe = [sys.executable, "-m", "rewardlang"]
        subprocess.run(exe + ["check", spec], check=True, capture_output=True)  # warm the grammar cache
        t_check = time_cmd(exe + ["check", spec])
        t_py = time_cmd([sys.executable, "-c", "pass"])
        n_lines = sum(1 for _ in open(spec))
        print(f"rewardlang check of a {n_lines}-line spec: {t_check:.3f} s median (bare python start {t_py:.3f} s; "
              f"ratio {t_check / t_py:.1f}x)  target < 0.5 s: {'ok' if t_check < 0.5 else 'MISSED'}")

        data = os.path.join(d, "rows.jsonl")
        completions = [f"<reasoning>Step {i % 7}: think. Thus done.</reasoning><answer>x = {i % 13}</answer>"
                       + " word" * (i % 17) for i in range(1000)]
        with open(data, "w") as f:
            for i in range(args.rows):
                f.write(json.dumps({"prompt": f"p{i // 8}", "completion": completions[i % 1000]}) + "\n")
        size_mb = os.path.getsize(data) / 1e6
        t = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + exe + [
            "score", os.path.join(ROOT, "specs/codepo_text.reward"), "-i", data, "-o", os.devnull,
            "--group-by", "prompt", "--no-progress", "--no-summary"], capture_output=True, text=True)
        elapsed = time.perf_counter() - t
        if proc.returncode != 0:
            print(proc.stderr[-2000:])
            raise SystemExit(1)
        peak_mb = int(proc.stderr.strip().splitlines()[-1]) / 1024
        print(f"rewardlang score of {args.rows:,} rows ({size_mb:.0f} MB of JSONL): {elapsed:.1f} s, "
              f"{args.rows / elapsed:,.0f} rows/s, peak memory {peak_mb:.0f} MB  target < 500 MB: "
              f"{'ok' if peak_mb < 500 else 'MISSED'}")


if __name__ == "__main__":
    main()
