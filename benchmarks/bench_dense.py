"""Scoring ``specs/dense_ppo.reward`` per token (what a PPO step spends on its reward): ``DenseRewards`` on one batch
of HumanEval completions under the repo's byte-level BPE, the default mapping and ``mapping = "authors"``, each in
a fresh process (the sandbox's start, the reference times and the caches are part of the first batch; a second
batch of other completions of the same tasks shows the steady state).

    python benchmarks/bench_dense.py [--rows 24]                       # this tree
    python benchmarks/bench_dense.py --against 0af01db [--rounds 3]    # this tree beside another, alternating

The batch: for each task, its canonical answer, a wrong answer, a syntax error, an answer cut inside its docstring;
and two endless programs (what a relative time limit is for). ``--against REF`` measures this tree and git REF's
tree in alternating fresh processes and prints the medians and the ratio (REF / this: above 1, this tree is faster).
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

_ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)


def _stub(task: dict) -> str:
    """The task's imports and its function's `def` line (the docstring left out: answers fit in 256 tokens)."""
    lines = task["prompt"].splitlines()
    head = [ln for ln in lines if ln.startswith(("import ", "from "))]
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {task['entry_point']}("))
    sig = [lines[at]]
    while not sig[-1].rstrip().endswith(":"):  # a signature over several lines
        at += 1
        sig.append(lines[at])
    return "\n".join(head + ([""] if head else []) + sig) + "\n"


def _batch(rows: int, offset: int) -> tuple[list[str], dict[str, list]]:
    from rewardlang.datasets.humaneval import load_humaneval

    tasks = load_humaneval()[offset:offset + max(1, rows // 4)]
    texts: list[str] = []
    cols: dict[str, list] = {"tests": [], "entry_point": [], "reference": [], "solution": []}

    def add(text: str, t: dict) -> None:
        texts.append(text)
        for c, v in (("tests", t["tests"]), ("entry_point", t["entry_point"]), ("reference", t["reference"]),
                     ("solution", t["solution"])):
            cols[c].append(v)

    for t in tasks:
        stub = _stub(t)
        add("Here is the function:\n```python\n" + stub + t["reference"] + "```", t)   # the canonical answer
        add("```python\n" + stub + "    return None\n```", t)                          # wrong
        add("```python\n" + stub + "    return = 1\n```", t)                           # a syntax error
        add("```python\n" + stub + '    """Return the', t)                              # cut inside its docstring
    for _ in range(2):  # endless
        add("```python\n" + _stub(tasks[0]) + "    while True:\n        pass\n```", tasks[0])
    return texts, cols


def measure_only(rows: int, mapping: str) -> None:
    """One fresh process: two batches through DenseRewards, as JSON on stdout (the --against mode's unit)."""
    import torch

    import rewardlang
    from rewardlang.trainers.dense import DenseRewards
    from rewardlang.trainers.model import build_tokenizer

    tok = build_tokenizer()
    prog = rewardlang.load(os.path.join(_ROOT, "specs", "dense_ppo.reward"), params={"mapping": mapping})
    inputs = {i.name for i in prog.inputs}
    dense = DenseRewards(prog, tok)
    out = {}
    for name, offset in (("first", 0), ("second", 40)):
        texts, cols = _batch(rows, offset)
        if "solution" not in inputs:
            cols.pop("solution")
        ids = [tok(x)["input_ids"][:256] + [tok.eos_token_id] for x in texts]
        T = max(map(len, ids))
        batch = torch.tensor([r + [tok.pad_token_id] * (T - len(r)) for r in ids])
        mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in ids])
        t0 = time.perf_counter()
        got = dense(batch, mask, cols)
        out[name] = time.perf_counter() - t0
        out[name + "_masked"] = int(got.masked.sum())
    out["rows"] = len(texts)
    print(json.dumps(out))


def _run(root: str, rows: int, mapping: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, REWARDLANG_CACHE=cache, PYTHONPATH=root)
        cmd = [sys.executable, os.path.abspath(__file__), "--measure-only", "--root", root, "--rows", str(rows),
               "--mapping", mapping]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{root}: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def against(ref: str, rounds: int, rows: int) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="rewardlang-bench-")
    old = os.path.join(tmp, "tree")
    subprocess.run(["git", "-C", here, "worktree", "add", "--detach", "-q", old, ref], check=True)
    try:
        sha = subprocess.run(["git", "-C", old, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        roots = {"this tree": here, f"{ref} ({sha})": old}
        for mapping in ("project", "authors"):
            runs: dict[str, list[dict]] = {name: [] for name in roots}
            for r in range(rounds):
                for name in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
                    runs[name].append(_run(roots[name], rows, mapping))
            med = {name: {k: statistics.median(x[k] for x in rs) for k in ("first", "second")}
                   for name, rs in runs.items()}
            n = runs["this tree"][0]["rows"]
            print(f"mapping = {mapping!r}: {n} rows per batch, {rounds} rounds alternating, medians "
                  f"(load {os.getloadavg()[0]:.1f})")
            for name, m in med.items():
                masked = [x["first_masked"] + x["second_masked"] for x in runs[name]]
                print(f"  {name:22s} first batch {m['first']:7.2f} s   second batch {m['second']:7.2f} s   "
                      f"(masked rows: {masked})")
            (_, ma), (b, mb) = med.items()
            print(f"  ratio {b} / this tree: first batch {mb['first'] / ma['first']:.2f}x, second batch "
                  f"{mb['second'] / ma['second']:.2f}x")
    finally:
        subprocess.run(["git", "-C", here, "worktree", "remove", "--force", old], check=False)
        subprocess.run(["rm", "-rf", tmp], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=24, help="about this many completions per batch (4 per task + 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", metavar="REF", help="this tree beside git REF's, alternating")
    ap.add_argument("--mapping", default="project", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_only:
        measure_only(args.rows, args.mapping)
    elif args.against:
        against(args.against, args.rounds, args.rows)
    else:
        for mapping in ("project", "authors"):
            got = _run(_ROOT, args.rows, mapping)
            print(f"mapping = {mapping!r}: {got['rows']} rows, first batch {got['first']:.2f} s, second batch "
                  f"{got['second']:.2f} s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
