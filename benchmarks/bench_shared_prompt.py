"""The shared prompt computed once (rewardlang/trainers/prefix.py), beside the per-row computation, in one run.

Two measurements on the default model (SmolLM2-135M-Instruct), the README main job's spec and presentation
(`specs/codepo_text.reward`: system prompt and one worked example before every problem):

1. **A GRPO step** (one prompt x 4 samples, LoRA, `examples/codepo_text_cpu.yaml`'s settings, a shorter answer budget
   by default): `SpecGRPOTrainer.share_prompt` off and on, alternating, `--rounds` of each; the step times
   (`time/step`) and their ratio, and a check that both sides sampled the same completions and rewards.
2. **Held-out generation** (the main job's 40 held-out problems as one greedy batch, LoRA merged): every row's
   whole prompt computed per row (left-padded), the shared prefix computed once with the rows padded to the longest
   (the layout of `continue_prefix`), and the shared prefix with the rows' own tokens computed 8 at a time
   (`prefill_rows`, what `generate` does); the answers must be identical.

    python benchmarks/bench_shared_prompt.py                       # both, 64-token answers, 2 rounds
    python benchmarks/bench_shared_prompt.py --only eval --tokens 32
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)


def grpo_step(share: bool, tokens: int, workdir: str, tag: str) -> dict:
    from rewardlang.trainers import grpo

    grpo.SpecGRPOTrainer.share_prompt = share
    result = grpo.train(os.path.join(HERE, "specs", "codepo_text.reward"),
                        config_file=os.path.join(HERE, "examples", "codepo_text_cpu.yaml"),
                        sets={"train.max_steps": 1, "train.eval": 0, "train.max_completion_length": tokens},
                        flags={"output_dir": os.path.join(workdir, tag)}, progress=False)
    with open(result.metrics_path, encoding="utf-8") as fh:
        first = json.loads(fh.readline())
    return {"step": first["time/step"], "total": result.trainer.last_batch["total"].tolist(),
            "shared": dict(result.trainer.__dict__.get("prompt_shared") or {})}


def bench_grpo(args: argparse.Namespace) -> None:
    times: dict[bool, list[float]] = {False: [], True: []}
    totals: dict[bool, list] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            for share in (False, True):
                out = grpo_step(share, args.tokens, work, f"{r}-{int(share)}")
                times[share].append(out["step"])
                totals[share].append(out["total"])
                print(f"round {r + 1}: share_prompt={share}: step {out['step']:.1f} s, shared {out['shared']}, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    same = all(a == b for a, b in zip(totals[False], totals[True]))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"GRPO step ({args.tokens}-token answers): per row {off:.1f} s, shared prompt {on:.1f} s: "
          f"**{off / on:.2f}x**; rewards identical: {same}")


def bench_eval(args: argparse.Namespace) -> None:
    import torch
    from peft import get_peft_model

    import rewardlang
    from rewardlang.datasets.humaneval import load_humaneval
    from rewardlang.trainers import prefix
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.data import split_heldout
    from rewardlang.trainers.evaluate import generate
    from rewardlang.trainers.model import load_smollm2, lora_config

    torch.set_num_threads(os.cpu_count() or 1)
    train = rewardlang.load(os.path.join(HERE, "specs", "codepo_text.reward")).train  # the spec's presentation
    few, system, template = train["few_shot"], train["system_prompt"], train["prompt_template"]
    _, heldout = split_heldout(load_humaneval(), 40, seed=0)
    model, tok = load_smollm2()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    policy = get_peft_model(model, lora_config(TrainConfig(lora=True)))
    policy.merge_adapter()
    kw = dict(max_new_tokens=args.tokens, system_prompt=system, prompt_template=template, few_shot=few, batch_size=40)
    sides = {"per row": (10**9, prefix.PREFILL_GROUP), "prefix once, one padded batch": (prefix.MIN_SHARED_PREFIX, 10**6),
             "prefix once, rows prefilled 8 at a time": (prefix.MIN_SHARED_PREFIX, prefix.PREFILL_GROUP)}
    times: dict[str, list[float]] = {k: [] for k in sides}
    answers: dict[str, list] = {}
    saved = prefix.MIN_SHARED_PREFIX, prefix.PREFILL_GROUP
    try:
        for r in range(args.rounds):
            for name, (minimum, group) in sides.items():
                prefix.MIN_SHARED_PREFIX, prefix.PREFILL_GROUP = minimum, group
                t = time.perf_counter()
                answers[name] = generate(policy, tok, heldout, **kw)  # type: ignore[arg-type]
                times[name].append(time.perf_counter() - t)
                print(f"round {r + 1}: {name}: {times[name][-1]:.1f} s, load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        prefix.MIN_SHARED_PREFIX, prefix.PREFILL_GROUP = saved
    base = statistics.median(times["per row"])
    same = len({json.dumps(a) for a in answers.values()}) == 1
    for name in sides:
        m = statistics.median(times[name])
        print(f"held-out generation, 40 problems, {args.tokens} tokens, {name}: {m:.1f} s ({base / m:.2f}x)")
    print(f"answers identical on all sides: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("grpo", "eval"), default=None)
    ap.add_argument("--tokens", type=int, default=64, help="answer budget (training samples and held-out answers)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores", flush=True)
    if args.only in (None, "grpo"):
        bench_grpo(args)
    if args.only in (None, "eval"):
        bench_eval(args)


if __name__ == "__main__":
    main()
