"""`rewardlang score` end to end, as a user meets it: the whole command (process start, imports, spec compile,
reading and writing JSONL) on the 1,312-row HumanEval CodePO corpus, against a per-sample Python script that
calls the `codebleu` package (the same work as benchmarks/bench_codepo_full.py's baseline, run as its own
process that reads and writes the same JSONL).

    python benchmarks/bench_score_cli.py [--runs 5] [--rows 1312]

Each command runs ``--runs`` times, the sides interleaved so that a busy machine slows all of them alike; the
median of each is reported, with the ratios to the baseline and of the default (``--workers 0``: chosen by the
work) to ``--workers 1``. The values are checked: format, reason and rep equal to 1e-12, accuracy equal except
where the package's ``dataflow or 1`` is wrong (see bench_codepo_full.py).

``--rows`` beyond 1,312 adds the corpus drawn again with the next seeds (``load_corpus(seed)``: each problem's
renamed, deleted, reordered, broken and unrelated candidates are drawn anew), a problem's rows together, so 13,120
rows are 164 problems x 80 completions (one group of 80 per problem), 6,030 of them distinct pairs, as in a GRPO
group where some completions repeat. ``--same-rows`` repeats the seed-0 corpus instead (with distinct group names,
as before 2026-11-28): every repeat is then work that rewardlang's cache of identical rows skips and the
per-sample baseline does not, which flatters the ratio (13,120 rows: 1,312 distinct).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_codepo_full import REASONINGS  # noqa: E402
from benchmarks.corpus import KINDS, as_completion, load_corpus  # noqa: E402
from benchmarks import timing  # noqa: E402

# The per-sample script a user would write: read the JSONL, score each row (codebleu package), write the JSONL.
BASELINE = """
import json, sys
sys.path.insert(0, {root!r})
from benchmarks.bench_codepo_full import baseline
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
out = baseline([r["completion"] for r in rows], [r["reference"] for r in rows])
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i, r in enumerate(rows):
        comps = {{k: float(out[k][i]) for k in ("format", "reason", "rep", "acc")}}
        f.write(json.dumps({{**r, "reward": sum(comps.values()), "components": comps,
                             "dataflow": float(out["dataflow"][i])}}) + "\\n")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1312, help="rows (the corpus repeated with new group names)")
    ap.add_argument("--same-rows", action="store_true",
                    help="repeat the seed-0 corpus instead of drawing the next seeds (identical rows repeat)")
    ap.add_argument("--no-baseline", action="store_true", help="time only the two rewardlang commands")
    args = ap.parse_args()
    # the package's dataflow edges depend on the hash seed; rewardlang reproduces seed 0 (bench_codepo_full.py)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": ROOT}
    corpus = load_corpus()
    seeds = 1 if args.same_rows else -(-args.rows // len(corpus))
    drawn = [load_corpus(seed) for seed in range(seeds)]
    per = len(KINDS)
    # a problem's completions of every draw together: the spec's groups (by prompt) must be contiguous
    corpus = [d[p + k] for p in range(0, len(corpus), per) for d in drawn for k in range(per)]
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "corpus.jsonl")
        with open(data, "w", encoding="utf-8") as f:
            for i in range(args.rows):
                r = corpus[i % len(corpus)]
                f.write(json.dumps({"prompt": f"{r.task_id}#{i // len(corpus)}", "reference": r.reference,
                                    "completion": as_completion(r.candidate, REASONINGS[i % len(REASONINGS)])})
                        + "\n")
        script = os.path.join(d, "per_sample.py")
        with open(script, "w") as f:
            f.write(BASELINE.format(root=ROOT))
        spec = os.path.join(ROOT, "specs", "codepo.reward")
        score = [sys.executable, "-m", "rewardlang", "score", spec, "-i", data, "--no-progress", "--no-summary"]
        cmds = {"baseline": [sys.executable, script, data, os.path.join(d, "base.jsonl")],
                "default": score + ["-o", os.path.join(d, "default.jsonl")],
                "workers1": score + ["-o", os.path.join(d, "workers1.jsonl"), "--workers", "1"],
                # the same command with CodeBLEU's analysis in its pure Python modules (runtime/code/compiled.py)
                "pure": ["env", "REWARDLANG_PURE_PYTHON=1"] + score + ["-o", os.path.join(d, "pure.jsonl")]}
        # byte-compiled as scripts/install.sh leaves an install (PYTHONDONTWRITEBYTECODE would otherwise make every
        # run recompile rewardlang's modules: ~0.2 s); the baseline's codebleu package is byte-compiled by pip
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "rewardlang"),
                        os.path.join(ROOT, "benchmarks")], check=True, capture_output=True)
        # and with CodeBLEU's compiled twins built, as the install builds them (setup.py; nothing is rebuilt when
        # they are current; without Cython or a C compiler the pure modules serve, and the line below says so)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT, check=True,
                       capture_output=True)
        status = subprocess.run([sys.executable, "-c", "from rewardlang.runtime.code import codebleu, compiled, dataflow, strip, tree; "
                                 "[compiled.twin(m) for m in (tree, dataflow, strip, codebleu)]; "
                                 "print('; '.join(f'{k}: {v}' for k, v in compiled.status().items()))"],
                                check=True, capture_output=True, text=True, env=env).stdout.strip()
        print(f"CodeBLEU's analysis modules: {status}")
        subprocess.run(cmds["workers1"], check=True, capture_output=True, env=env)
        if args.no_baseline:
            del cmds["baseline"]
        times, cpu = timing.interleaved(cmds, args.runs, env)  # CPU: the command's and its children's
        outs = {k: [json.loads(x) for x in open(os.path.join(d, f"{'base' if k == 'baseline' else k}.jsonl"))]
                for k in cmds}
    base, ours = outs.get("baseline", outs["workers1"]), outs["default"]
    assert len(base) == len(ours) == len(outs["workers1"]) == len(outs["pure"]) == args.rows
    assert outs["pure"] == ours  # the compiled twins change nothing but the time
    differ = 0
    for b, o, w, p in zip(base, ours, outs["workers1"], outs["pure"]):
        assert o["components"] == w["components"] == p["components"]
        for k in ("format", "reason", "rep"):
            assert abs(b["components"][k] - o["components"][k]) <= 1e-12, k
        if b["components"]["acc"] != o["components"]["acc"] and not args.no_baseline:
            assert b["dataflow"] == 0.0, "accuracy differs where the package is not known to be wrong"
            differ += 1
    print(f"{args.rows} rows ({len({(r['completion'], r['reference']) for r in ours})} distinct); accuracy identical except {differ} rows where the package's dataflow is 0 "
          "(it counts it as 1)")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, label in (("baseline", "per-sample script + codebleu package"), ("default", "rewardlang score"),
                     ("workers1", "rewardlang score --workers 1"),
                     ("pure", "rewardlang score, pure Python analysis")):
        if k not in med:
            continue
        print(f"{label:38s} median {med[k]:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[k])}); "
              f"CPU {statistics.median(cpu[k]):.2f} s")
    if "baseline" in med:
        print(f"ratio (baseline / rewardlang score): {med['baseline'] / med['default']:.1f}x wall, "
              f"{statistics.median(cpu['baseline']) / statistics.median(cpu['default']):.1f}x CPU")
    print(f"default / --workers 1: {med['default'] / med['workers1']:.2f}")
    print(f"pure Python analysis / compiled: {med['pure'] / med['default']:.2f} wall, "
          f"{statistics.median(cpu['pure']) / statistics.median(cpu['default']):.2f} CPU")


if __name__ == "__main__":
    main()
