"""OORL's translation reward throughput (issue 21): samples per second of ``specs/oorl.reward`` on a batch of 64
translation answers per target language (C++, Java, PHP, Bash, JavaScript), through the sandbox, beside the bare
toolchain compiling and running the same 64 programs one after another, in one run, with the ratio.

    python3 benchmarks/bench_translation.py                      # 64 answers per language, the five targets
    python3 benchmarks/bench_translation.py --batch 16 --langs sh,js

The answers are the reference translations of tests/datasets/references (the target's declaration, then the
reference body, in one fenced block: exactly what a correct policy answers to a ``rewardlang data translate`` row),
cycled to fill the batch; each carries a comment with its number, so every program is distinct and nothing is
served from a cache. *Ours*: ``Program.score`` of the spec on the batch (format, the block's extraction, the
sandbox pool's compile + run, the judging in the trusted process), the sandbox started beforehand (as in training).
*Bare*: each program's compile and run argv of its language profile (the same flags and environment, on a tmpfs),
spawned directly, one after another, judged by the same comparison. Both must pass every answer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "datasets"))  # the reference translations of the tests

from test_multilang_references import _refs  # noqa: E402

import rewardlang  # noqa: E402
import bare_toolchain  # noqa: E402 (benchmarks/, the baseline both benchmarks share)
from rewardlang.datasets import load_humaneval, translation_rows  # noqa: E402
from rewardlang.sandbox.languages import PROFILES  # noqa: E402

SPEC = os.path.join(ROOT, "specs", "oorl.reward")
TARGETS = ("cpp", "java", "php", "sh", "js")
FENCE = {"cpp": "cpp", "java": "java", "php": "php", "sh": "bash", "js": "javascript"}
COMMENT = {"sh": "# answer {k}"}


def batch(lang: str, size: int, offset: int = 0) -> list[dict[str, str]]:
    """``size`` distinct answers (with their row's tests) to translation rows of ``lang``."""
    rows = {r["task_id"]: r for r in translation_rows("python", lang, "all")}
    decls = {r["task_id"]: r["prompt"] for r in load_humaneval(lang)}
    refs = [(f"HumanEval/{name.split('_')[1]}", code) for name, (code, _) in _refs(lang).items()]
    refs = [(t, c) for t, c in refs if t in rows]
    out = []
    for k in range(size):
        tid, code = refs[k % len(refs)]
        unit = f"{decls[tid]}{code}\n{COMMENT.get(lang, '// answer {k}').format(k=offset + k)}\n"
        row = rows[tid]
        out.append({"completion": f"```{FENCE[lang]}\n{unit}```\n", "unit": unit, "tests": row["tests"],
                    "entry_point": row["entry_point"], "task_id": tid})
    return out


def bare(lang: str, unit: str, tests: str) -> bool:
    """Compile and run one unit with its language profile's argv directly; True when every case passes."""
    return bare_toolchain.run(lang, unit, tests)[2]


def ours(prog: rewardlang.Program, answers: list[dict[str, str]], lang: str) -> list[float]:
    n = len(answers)
    res = prog.score(completion=[a["completion"] for a in answers], prompt=[""] * n,
                     tests=[a["tests"] for a in answers], entry_point=[a["entry_point"] for a in answers],
                     language=[lang] * n)
    return [float(t) for t in res.total]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64, help="answers per language")
    ap.add_argument("--langs", default=",".join(TARGETS))
    ap.add_argument("--json", action="store_true", help="print one JSON line per language as well")
    args = ap.parse_args()
    prog = rewardlang.load(SPEC)
    from rewardlang.sandbox import get_sandbox

    sb = get_sandbox()
    print(f"isolation level: {sb.level}; {len(sb.pool.slots)} sandbox slots; a batch of {args.batch} answers per "
          f"language; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'lang':5s} {'bare s':>8s} {'bare samples/s':>15s} {'ours s':>8s} {'ours samples/s':>15s} {'ratio':>6s}")
    for lang in [x for x in args.langs.split(",") if x]:
        if any(not os.access(t, os.X_OK) for t in PROFILES[lang].tools()):
            print(f"{lang:5s} toolchain missing: skipped")
            continue
        warm = batch(lang, 2, offset=-10)  # the page cache, the slots' first fork of the toolchain
        assert all(bare(lang, a["unit"], a["tests"]) for a in warm) and ours(prog, warm, lang) == [1.0, 1.0]
        answers = batch(lang, args.batch)
        t0 = time.perf_counter()
        ok = [bare(lang, a["unit"], a["tests"]) for a in answers]
        b = time.perf_counter() - t0
        assert all(ok), f"{lang}: {ok.count(False)} bare runs did not pass"
        answers = batch(lang, args.batch, offset=args.batch)  # new comments: no cache can answer
        t0 = time.perf_counter()
        totals = ours(prog, answers, lang)
        o = time.perf_counter() - t0
        assert totals == [1.0] * len(answers), f"{lang}: {len(answers) - int(sum(totals))} answers scored 0"
        n = len(answers)
        print(f"{lang:5s} {b:8.2f} {n / b:15.1f} {o:8.2f} {n / o:15.1f} {b / o:5.2f}x")
        if args.json:
            print(json.dumps({"lang": lang, "batch": n, "bare_s": b, "ours_s": o, "bare_samples_per_s": n / b,
                              "ours_samples_per_s": n / o, "ratio": b / o}))


if __name__ == "__main__":
    main()
