"""GRPO's reward beside the step's forward passes (issue 38): the main job's steps with the overlap off and on.

    python benchmarks/bench_grpo_overlap.py [--steps 3] [--rounds 2] [--config examples/smollm2_cpu.yaml]

quality_grpo's CPU job, the README's main job until 2026-11-29 (``specs/quality_grpo.reward`` with ``examples/smollm2_cpu.yaml``: SmolLM2-135M-Instruct,
LoRA, 1 prompt x 4 completions of up to 128 tokens, beta 0, one torch thread), ``--steps`` optimizer steps per run,
held-out evaluation off. "Before" is ``SpecGRPOTrainer.overlap_reward = False``: the reward scored where TRL calls
the reward functions, after the forward passes that need none (the code path before issue 38); "after" is the
default: the batch scored in a thread from the moment its completions exist, while the update's forward pass (and,
with beta > 0 or off-policy steps, the reference's and the old policy's) runs. Each run is its own process; the
sides alternate, ``--rounds`` times, so the machine's load falls on both. Both sides start from the same seed, so
they generate the same completions and, the overlap changing nothing they compute, log the same rewards and losses:
checked step by step. Per side, medians over every step of every round: ``time/step``, ``time/reward`` (the
scoring's wall time), ``time/reward_share`` (what the step waited for the reward, over the step) and
``time/reward_hidden_share`` (the part of the reward's time that ran beside forward passes).
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
KEYS = ("time/step", "time/reward", "time/reward_wait", "time/reward_share", "time/reward_hidden",
        "time/reward_hidden_share")
SAME = ("reward", "reward_std", "loss", "grad_norm", "advantages/mean", "masked/rate")


def measure(overlap: bool, steps: int, config: str, out_dir: str) -> None:
    """One run (this process): print one JSON line per logged step."""
    from rewardlang.trainers import grpo
    from rewardlang.trainers.metrics import read_metrics

    grpo.SpecGRPOTrainer.overlap_reward = overlap
    res = grpo.train(os.path.join(ROOT, "specs", "quality_grpo.reward"), config_file=config,
                     sets={"train.max_steps": steps, "train.eval": 0}, flags={"output_dir": out_dir}, progress=False)
    for r in read_metrics(res.metrics_path):
        if "time/step" in r:
            print(json.dumps({k: r.get(k) for k in ("step", *KEYS, *SAME)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--config", default=os.path.join(ROOT, "examples", "smollm2_cpu.yaml"))
    ap.add_argument("--measure", choices=("off", "on"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.measure == "on", args.steps, args.config, args.out)
        return
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    steps: dict[str, list[dict]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="rewardlang-overlap-") as tmp:
        for rnd in range(args.rounds):
            for side in ("off", "on") if rnd % 2 == 0 else ("on", "off"):
                p = subprocess.run([sys.executable, __file__, "--measure", side, "--steps", str(args.steps),
                                    "--config", args.config, "--out", os.path.join(tmp, f"{side}{rnd}")],
                                   capture_output=True, text=True, env=env, cwd=ROOT, check=False)
                if p.returncode != 0:
                    raise SystemExit(f"the {side} run failed:\n{p.stderr[-4000:]}")
                recs = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
                steps[side].append(recs)
                load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                print(f"round {rnd + 1}, overlap {side}: " + "; ".join(
                    f"step {r['step']} {r['time/step']:.1f} s, reward {r['time/reward']:.2f} s, share "
                    f"{100 * r['time/reward_share']:.1f} %, hidden {100 * (r.get('time/reward_hidden_share') or 0):.0f} %"
                    for r in recs) + f"  [load {load} on {os.cpu_count()} cores]", flush=True)
    same = all(a.get(k) == b.get(k) for ra, rb in zip(steps["off"], steps["on"]) for a, b in zip(ra, rb)
               for k in SAME)
    print(f"\nmain job ({os.path.relpath(args.config, ROOT)}), {args.steps} steps x {args.rounds} rounds per side; "
          f"rewards, losses, grad norms equal step by step across sides: {same}")
    for side, label in (("off", "before (overlap off)"), ("on", "after (overlap on)")):
        flat = [r for run in steps[side] for r in run]
        med = {k: statistics.median(float(r.get(k) or 0.0) for r in flat) for k in KEYS}
        print(f"  {label:22s} step {med['time/step']:.2f} s, reward {med['time/reward']:.2f} s, waited "
              f"{med['time/reward_wait']:.2f} s; time/reward_share {100 * med['time/reward_share']:.2f} %, "
              f"hidden {100 * med['time/reward_hidden_share']:.0f} % of the reward's time (medians)")
    off = statistics.median(float(r["time/step"]) for run in steps["off"] for r in run)
    on = statistics.median(float(r["time/step"]) for run in steps["on"] for r in run)
    print(f"  step time after / before: {on / off:.3f}")


if __name__ == "__main__":
    main()
