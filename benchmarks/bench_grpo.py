"""GRPO step time: the compiled CodePO text spec vs the same rewards as plain Python functions on TRL's GRPOTrainer.

    python benchmarks/bench_grpo.py [--steps 12] [--rounds 3]

Both trainers get the same tiny policy (a few supervised steps on CodePO-style answers, so that samples earn
varied rewards), the same HumanEval prompts, seed and settings (the spec's ``train`` section: 4 generations,
beta 0.04 ...). The learning rate is 0, so both generate exactly the same completions at every step and the
comparison isolates what the reward path costs: scoring, gathering, the advantage, the metrics.

- ours: :class:`rewardlang.trainers.grpo.SpecGRPOTrainer` with ``specs/codepo_text.reward`` (its three components
  and its tanh-centred advantage);
- baseline: TRL's ``GRPOTrainer`` with ``format``, ``reason`` and ``rep`` written by hand in Python below (TRL's own
  group normalisation: the spec's advantage is cheap next to a step, so it does not change the step time).

After one discarded warm-up run of each, rounds alternate between the two (the machine is shared and noisy).
Since both sides generate the same completions, step i of one side's run is paired with step i of the other's in
the same round, and the ratio is the median of these paired ratios (the step-to-step spread, from completion
lengths, cancels). Prints the ratio (target <= 1.05), the median step times, each side's reward share of the step
time, and checks that both computed the same rewards.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "specs", "codepo_text.reward")
TAUGHT = [
    "<reasoning>Step 1: read the task. Step 2: write it. Thus done.</reasoning><answer>return x</answer>",
    "<reasoning>1. parse\n2. loop\n3. return</reasoning><answer>x = 1</answer>",
    "<reasoning>short</reasoning><answer>y</answer>",
    "a a a a a a a a",
    "return x",
]

# ---------------------------------------------------------------- the baseline's rewards, by hand (CodePO Eqs. 2-7)

_MARKERS = [re.compile(r"Step\s\d+:"), re.compile(r"^\s*\d{1,2}\.", re.M), re.compile(r"\(\d+\)"),
            re.compile(r"^\s*[a-zA-Z]\)", re.M), re.compile("→"), re.compile("Therefore"), re.compile("Thus")]
_REASONING = re.compile(r"<reasoning>(.*?)</reasoning>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _text(c: Any) -> str:
    return c[-1]["content"] if isinstance(c, list) else c


def format(completions: list[Any], **kwargs: Any) -> list[float]:  # noqa: A001 - TRL names the metric after it
    out = []
    for c in map(_text, completions):
        r, a = _REASONING.search(c), _ANSWER.search(c)
        out.append(1.0 if r and a and len(r.group(1).strip()) > 10 and len(a.group(1).strip()) > 0 else 0.0)
    return out


def reason(completions: list[Any], **kwargs: Any) -> list[float]:
    out = []
    for c in map(_text, completions):
        m = sum(len(p.findall(c)) for p in _MARKERS)
        out.append(0.5 * min(m, 10) / 10 + 0.5 * (m >= 3))
    return out


def _distinct(words: list[str], n: int) -> float:
    total = len(words) - n + 1
    return 1.0 if total <= 0 else len(set(zip(*(words[i:] for i in range(n))))) / total


def rep(completions: list[Any], **kwargs: Any) -> list[float]:
    out = []
    for c in map(_text, completions):
        w = c.split()
        out.append(-1 / 3 * sum((1 - _distinct(w, n)) * wt for n, wt in [(2, 0.4), (3, 0.4), (4, 0.2)]))
    return out


# ---------------------------------------------------------------- setup


def taught_policy(path: str) -> str:
    """The tiny policy after 50 supervised steps on TAUGHT, saved to ``path``."""
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.model import load_policy, teach

    torch.manual_seed(0)
    model, tok = load_policy(TrainConfig())
    teach(model, tok, TAUGHT, steps=50)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


class Timed:
    """A plain reward function, timed like the spec's (same clock, same place in TRL)."""

    def __init__(self, fn: Any, clock: Any) -> None:
        self.fn, self.clock, self.__name__ = fn, clock, fn.__name__

    def __call__(self, **kwargs: Any) -> list[float]:
        t0 = time.perf_counter()
        out = self.fn(**kwargs)
        self.clock.seconds += time.perf_counter() - t0
        return out


def run(kind: str, model_path: str, steps: int, out_dir: str) -> dict[str, Any]:
    """``steps`` GRPO steps with ``kind`` in {"spec", "python"}; returns per-step times and the last rewards."""
    from trl import GRPOTrainer

    import rewardlang
    from rewardlang.trainers.config import resolve_config
    from rewardlang.trainers.data import build_dataset, check_columns, load_rows
    from rewardlang.trainers.grpo import SpecGRPOTrainer, grpo_args
    from rewardlang.trainers.metrics import RewardClock, StepTimingCallback
    from rewardlang.trainers.model import load_policy

    prog = rewardlang.load(SPEC)
    cfg, _ = resolve_config(prog.train, cli_flags={"model": model_path, "max_steps": steps, "learning_rate": 0.0,
                                                   "save_steps": 10**6, "progress": False, "report_to": []})
    torch.set_num_threads(1)  # as the trainer does for tiny models on CPU
    rows, source = load_rows(None)
    model, tok = load_policy(cfg)
    dataset, _ = build_dataset(rows, check_columns(prog, rows, source), tok)
    args = grpo_args(cfg, out_dir)
    args.gradient_checkpointing = False
    clock = RewardClock()
    timing = StepTimingCallback(clock)
    if kind == "spec":
        trainer: Any = SpecGRPOTrainer(model=model, program=prog, args=args, clock=clock, train_dataset=dataset,
                                       processing_class=tok, callbacks=[timing])
    else:
        args.reward_weights = [1.0, 1.0, 1.0]
        trainer = GRPOTrainer(model=model, reward_funcs=[Timed(f, clock) for f in (format, reason, rep)], args=args,
                              train_dataset=dataset, processing_class=tok, callbacks=[timing])
    timing.trainer = trainer
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    hist = [h for h in trainer.state.log_history if "time/step" in h]
    return {"step": [h["time/step"] for h in hist], "reward": [h["time/reward"] for h in hist],
            "mean_reward": [h["reward"] for h in hist],
            "components": {n: [h[f"rewards/{n}/mean"] for h in hist] for n in ("format", "reason", "rep")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12, help="GRPO steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (each runs both trainers)")
    parser.add_argument("--warmup", type=int, default=2, help="first steps of each run left out of the timing")
    parser.add_argument("--json", help="also write the results here")
    a = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import warnings

    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    with tempfile.TemporaryDirectory() as tmp:
        model_path = taught_policy(os.path.join(tmp, "policy"))
        for kind in ("spec", "python"):  # warm-up: first-run costs (allocator, lazy imports) are not the trainer's
            run(kind, model_path, 3, os.path.join(tmp, f"warmup-{kind}"))
        results: dict[str, list[dict[str, Any]]] = {"spec": [], "python": []}
        for r in range(a.rounds):
            order = ("spec", "python") if r % 2 == 0 else ("python", "spec")
            for kind in order:
                results[kind].append(run(kind, model_path, a.steps, os.path.join(tmp, f"{kind}{r}")))

    # the two sides did the same work: identical completions (lr 0) and identical rewards at every step
    for s, p in zip(results["spec"], results["python"], strict=True):
        for n in ("format", "reason", "rep"):
            np.testing.assert_allclose(s["components"][n], p["components"][n], atol=1e-6)
    summary: dict[str, Any] = {}
    for kind, runs in results.items():
        steps = [t for run_ in runs for t in run_["step"][a.warmup:]]
        share = [rw / st for run_ in runs for rw, st in zip(run_["reward"][a.warmup:], run_["step"][a.warmup:])]
        summary[kind] = {"median_step_s": statistics.median(steps), "mean_step_s": statistics.fmean(steps),
                         "reward_share": statistics.fmean(share), "n_steps": len(steps)}
    paired = [s / p for rs, rp in zip(results["spec"], results["python"], strict=True)
              for s, p in zip(rs["step"][a.warmup:], rp["step"][a.warmup:], strict=True)]
    ratio = statistics.median(paired)
    summary["ratio"] = ratio
    summary["ratio_of_medians"] = summary["spec"]["median_step_s"] / summary["python"]["median_step_s"]
    varied = sum(1 for run_ in results["spec"] for m in run_["mean_reward"] if m)
    print(f"CodePO text rewards, tiny policy, {a.rounds} rounds x {a.steps} steps "
          f"(first {a.warmup} of each run left out); {varied} steps with a non-zero mean reward")
    for kind, label in (("python", "TRL GRPOTrainer + plain Python rewards"), ("spec", "rewardlang compiled spec")):
        s = summary[kind]
        print(f"  {label:42s} median step {1000 * s['median_step_s']:8.1f} ms   "
              f"reward share {100 * s['reward_share']:5.2f}%")
    q1, _, q3 = statistics.quantiles(paired, n=4)
    print(f"  ratio (spec / python), median of {len(paired)} paired steps: {ratio:.3f}x "
          f"(quartiles {q1:.3f}-{q3:.3f}; ratio of medians {summary['ratio_of_medians']:.3f}x)   target <= 1.05x")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(summary, fh, indent=2)


if __name__ == "__main__":
    sys.exit(main())
