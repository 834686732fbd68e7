"""Text-only CodePO: the compiled spec vs a straightforward per-sample Python implementation.

Both score the same 100,000 unique completions of about 2 KB (groups of 8 per prompt) in one run; the script
checks every component, total and advantage agree to 1e-12 and prints both throughputs and their ratio.

    python benchmarks/bench_codepo_text.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = ("the value list index loop sum result we return function check each element add count first next then "
         "compute array string number call data output input case test item key map set").split()
MARKERS_TXT = ["Step 1:", "Step 2:", "(1)", "(2)", "→", "Therefore", "Thus", "\n1. ", "\n a) ", "\n2. "]


def make_completion(rng: random.Random, i: int) -> str:
    parts = [f"<reasoning>Problem {i}. "]
    while sum(len(p) for p in parts) < 1000:
        if rng.random() < 0.15:
            parts.append(rng.choice(MARKERS_TXT) + " ")
        phrase = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(3, 9)))
        parts.append(phrase + (". " if rng.random() < 0.3 else " "))
        if rng.random() < 0.1:  # repetition, the thing R_rep penalizes
            parts.append(phrase + " ")
    parts.append("</reasoning>")
    if rng.random() < 0.9:
        parts.append("<answer>```python\ndef f(xs):\n")
        while sum(len(p) for p in parts) < 1950:
            parts.append(f"    {rng.choice(VOCAB)}_{rng.randint(0, 99)} = {rng.choice(VOCAB)}(xs)\n")
        parts.append("    return xs\n```</answer>")
    return "".join(parts)


# ---- the baseline: CodePO's formulas written the obvious way, one sample at a time
REASON_RE = re.compile(r"<reasoning>(.*?)</reasoning>", re.DOTALL)
ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
MARKER_RES = [re.compile(p, f) for p, f in [(r"Step\s\d+:", 0), (r"^\s*\d{1,2}\.", re.M), (r"\(\d+\)", 0),
                                           (r"^\s*[a-zA-Z]\)", re.M), (re.escape("→"), 0),
                                           (re.escape("Therefore"), 0), (re.escape("Thus"), 0)]]


def baseline_row(text: str) -> tuple[float, float, float]:
    r, a = REASON_RE.search(text), ANSWER_RE.search(text)
    fmt = 1.0 if r and a and len(r.group(1).strip()) > 10 and len(a.group(1).strip()) > 0 else 0.0
    m = sum(len(p.findall(text)) for p in MARKER_RES)
    reason = 0.5 * min(m, 10) / 10 + 0.5 * (1.0 if m >= 3 else 0.0)
    words = text.split()
    pen = 0.0
    for n, w in ((2, 0.4), (3, 0.4), (4, 0.2)):
        grams = list(zip(*(words[i:] for i in range(n))))
        d = len(set(grams)) / len(grams) if grams else 1.0
        pen += (1 - d) * w
    return fmt, reason, -1 / 3 * pen


def baseline(completions: list[str], prompts: list[str]) -> dict[str, np.ndarray]:
    rows = [baseline_row(t) for t in completions]
    fmt, reason, rep = (np.array(c) for c in zip(*rows))
    total = [f + r + p for f, r, p in rows]
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(p, []).append(i)
    adv = [0.0] * len(total)
    for idx in groups.values():
        rs = [total[i] for i in idx]
        mu = sum(rs) / len(rs)
        sd = math.sqrt(sum((x - mu) ** 2 for x in rs) / len(rs))
        h = [math.tanh((x - mu) / (sd + 1e-8)) for x in rs]
        hm = sum(h) / len(h)
        for i, v in zip(idx, h):
            adv[i] = v - hm
    return {"format": fmt, "reason": reason, "rep": rep, "total": np.array(total), "advantage": np.array(adv)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    import rewardlang

    rng = random.Random(0)
    completions = [make_completion(rng, i) for i in range(args.rows)]
    prompts = [f"prompt {i // 8}" for i in range(args.rows)]
    assert len(set(completions)) == len(completions), "completions must be unique (no help from deduplication)"
    print(f"{args.rows} completions, mean {sum(map(len, completions)) / len(completions):.0f} chars, "
          f"{os.cpu_count()} cores")

    prog = rewardlang.load(os.path.join(ROOT, "specs/codepo_text.reward"))
    prog.workers = os.cpu_count() or 1  # both cores
    prog.score(completion=completions[:300], prompt=prompts[:300])  # compile Numba kernels (cached on disk)
    if args.rows >= 20_000:  # start the worker processes outside the timed region, as a trainer would
        prog.score(completion=completions[:20_000], prompt=prompts[:20_000])

    t0 = time.perf_counter()
    ref = baseline(completions, prompts)
    t_base = time.perf_counter() - t0

    t0 = time.perf_counter()
    out = prog.score(completion=completions, prompt=prompts)
    t_ours = time.perf_counter() - t0
    prog.close()

    worst = 0.0
    for k in ("format", "reason", "rep"):
        worst = max(worst, float(np.max(np.abs(out.components[k] - ref[k]))))
    worst = max(worst, float(np.max(np.abs(out.total - ref["total"]))),
                float(np.max(np.abs(out.advantages - ref["advantage"]))))
    print(f"max |difference| over components, totals and advantages: {worst:.3g}")
    assert worst <= 1e-12, "values differ"
    print(f"baseline (per-sample Python): {t_base:.2f} s  {args.rows / t_base:,.0f} completions/s")
    print(f"rewardlang (compiled spec):   {t_ours:.2f} s  {args.rows / t_ours:,.0f} completions/s")
    print(f"ratio: {t_base / t_ours:.2f}x")


if __name__ == "__main__":
    main()
