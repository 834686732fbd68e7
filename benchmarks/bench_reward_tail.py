"""The reward's tail: what one endless program among a step's samples costs, before and after issue 27.

A batch of the main job's size (examples/smollm2_cpu.yaml: 1 prompt x 4 completions) with 0, 1 and 2 endless
programs among its samples, scored with the main job's spec (specs/quality_grpo.reward):

1. through ``score`` (``Program.score``): the batch's wall time; the correct samples are the task's canonical
   solution, the endless ones ``while True: pass`` in the entry point; every program text is new in each run (no
   verdict cache), and the reference-time cache starts empty (its one measurement per task is included);
2. through one GRPO training step each on the default model (SmolLM2-135M-Instruct, 128 tokens, CPU, LoRA, the main
   job's settings): the policy's completions are scored as written, except that the first k samples' texts are
   replaced, inside the reward, by an endless program (the step's generation and update are the real ones):
   ``time/reward`` and ``time/reward_share`` of each step, as the run logs them.

"Before" is the code at ``--against`` (default f3cca23, main's HEAD when issue 27 was taken: a fixed ``timeout 10``),
extracted with ``git archive`` into a temporary directory and run as its own process, alternating with this tree.

    python benchmarks/bench_reward_tail.py [--against f3cca23] [--no-train] [--task HumanEval/49]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KS = (0, 1, 2)


def endless(entry: str) -> str:
    return (f"```python\ndef {entry}(*args, **kwargs):  # {uuid.uuid4().hex}\n    while True:\n        pass\n```\n")


def measure_score(task_id: str) -> dict[str, float]:
    """Score wall time of a 4-sample batch with k endless programs, for k in KS (this process's tree)."""
    import rewardlang
    from rewardlang.datasets.humaneval import load_humaneval

    row = next(r for r in load_humaneval() if r["task_id"] == task_id)
    prog = rewardlang.load(os.path.join(os.getcwd(), "specs", "quality_grpo.reward"))
    full = {**row, "solution": row["prompt"] + row["reference"]}
    cols = {i.name: [full[i.column]] * 4 for i in prog.inputs if i.name != "completion" and i.column in full}
    # warm: the sandbox's slots and the analyzers start once, outside the timings
    prog.score(completion=["```python\n" + row["prompt"] + row["reference"] + "\n# warm\n```\n"] * 4, **cols)
    out = {}
    for k in KS:
        good = ["```python\n" + row["prompt"] + row["reference"] + f"\n# {uuid.uuid4().hex}\n```\n"
                for _ in range(4 - k)]
        comps = [endless(row["entry_point"]) for _ in range(k)] + good
        t = time.perf_counter()
        r = prog.score(completion=comps, **cols)
        out[f"score_s_{k}"] = time.perf_counter() - t
        out[f"correct_{k}"] = float(sum(r.components["correct"]))
    return out


def measure_train(run_dir: str) -> dict[str, float]:
    """One GRPO step per k on the default model: the first k samples' texts replaced by endless programs."""
    from rewardlang.trainers import grpo
    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.run import train

    original = grpo.SpecRewardSet._evaluate
    calls = {"n": 0}

    def evaluate(self, kwargs):  # type: ignore[no-untyped-def]
        k = KS[min(calls["n"], len(KS) - 1)]
        calls["n"] += 1
        comps = list(kwargs["completions"])
        entries = kwargs.get("entry_point") or ["f"] * len(comps)
        for i in range(min(k, len(comps))):
            comps[i] = endless(entries[i])
        return original(self, {**kwargs, "completions": comps})

    grpo.SpecRewardSet._evaluate = evaluate
    # TRL compares the completions object to find a new batch: keep the replaced list per batch (a tree from issue
    # 38 on keys the batch on TRL's list in values() itself, and may have scored it ahead in a thread)
    original_values = grpo.SpecRewardSet.values

    def values(self, index, kwargs):  # type: ignore[no-untyped-def]
        if self._batch is not kwargs["completions"]:
            self._evaluate(kwargs)
            self._batch = kwargs["completions"]
        return [None if math.isnan(t) else v for v, t in zip(self.raw[self.names[index]], self.total, strict=True)]

    if not hasattr(grpo.SpecRewardSet, "prefetch"):
        grpo.SpecRewardSet.values = values
    try:
        train(os.path.join(os.getcwd(), "specs", "quality_grpo.reward"),
              config_file=os.path.join(os.getcwd(), "examples", "smollm2_cpu.yaml"),
              sets={"train.max_steps": len(KS), "train.eval": 0}, flags={"output_dir": run_dir}, progress=False)
    finally:
        grpo.SpecRewardSet._evaluate, grpo.SpecRewardSet.values = original, original_values
    recs = [r for r in read_metrics(os.path.join(run_dir, "metrics.jsonl")) if "time/reward" in r]
    out = {}
    for k, r in zip(KS, recs, strict=False):
        out[f"step_s_{k}"] = r["time/step"]
        out[f"reward_s_{k}"] = r["time/reward"]
        out[f"share_{k}"] = r["time/reward_share"]
    return out


def measure_only(task: str, do_train: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="rewardlang-tail-") as tmp:
        os.environ["REWARDLANG_CACHE"] = os.path.join(tmp, "cache")  # an empty reference-time cache
        out = measure_score(task)
        if do_train:
            out.update(measure_train(os.path.join(tmp, "run")))
    print(json.dumps(out))


def run_tree(root: str, task: str, do_train: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": root}
    cmd = [sys.executable, os.path.join(HERE, "benchmarks", "bench_reward_tail.py"), "--measure-only",
           "--task", task] + ([] if do_train else ["--no-train"])
    p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"measuring {root} failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="f3cca23", help="the baseline commit (default: f3cca23)")
    ap.add_argument("--task", default="HumanEval/49", help="the HumanEval task of the score batch")
    ap.add_argument("--no-train", action="store_true", help="only the score batch (no model)")
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_only:
        measure_only(args.task, not args.no_train)
        return
    with tempfile.TemporaryDirectory(prefix="rewardlang-tail-base-") as old:
        arch = subprocess.run(["git", "-C", HERE, "archive", args.against], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=arch, check=True)
        sha = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", args.against], capture_output=True,
                             text=True, check=True).stdout.strip()
        t0 = time.perf_counter()
        res = {f"before ({sha})": run_tree(old, args.task, not args.no_train)}
        res["after (this tree)"] = run_tree(HERE, args.task, not args.no_train)
        wall = time.perf_counter() - t0
    load = os.getloadavg()[0]
    print(f"reward tail: {args.task}, 4 samples, k endless programs; load average {load:.1f} on {os.cpu_count()} "
          f"cores; {wall:.0f} s in all")
    for name, r in res.items():
        print(f"  {name}")
        print("    score batch:  " + "   ".join(f"k={k}: {r[f'score_s_{k}']:.2f} s" for k in KS)
              + "   (correct samples passing: " + ", ".join(str(int(r[f'correct_{k}'])) for k in KS) + ")")
        if f"step_s_{KS[0]}" in r:
            print("    train step:   " + "   ".join(
                f"k={k}: reward {r[f'reward_s_{k}']:.2f} s of {r[f'step_s_{k}']:.1f} s = {100 * r[f'share_{k}']:.1f} %"
                for k in KS if f"step_s_{k}" in r))
    (_, ra), (_, rb) = res.items()
    print("  ratio before/after, score batch: " + "   ".join(
        f"k={k}: {ra[f'score_s_{k}'] / rb[f'score_s_{k}']:.1f}x" for k in KS))
    if all(f"reward_s_{k}" in ra and f"reward_s_{k}" in rb for k in KS):
        print("  ratio before/after, reward time in the step: " + "   ".join(
            f"k={k}: {ra[f'reward_s_{k}'] / max(rb[f'reward_s_{k}'], 1e-9):.1f}x" for k in KS))


if __name__ == "__main__":
    main()
