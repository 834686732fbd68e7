"""PPO step time on the embedded default (tiny model, HumanEval prompts) with ``specs/dense_ppo.reward``, split into
generation / rollout forward passes / scoring / token alignment / update (forward-backward), and the alignment
against the prefix decoding it replaced, on the same completions.

    python benchmarks/bench_ppo.py [--steps 4] [--completion-length 256]

Two policies: ``taught`` (the tiny model after a few supervised steps on short Python answers, through a callback
at the start of training, as bench_grpo.py does: it writes valid text, like any trained model) and ``random`` (the
untrained tiny model: its byte-level samples are mostly invalid UTF-8, so every completion takes the aligner's
prefix-decoding fallback: the worst case). The spec's own PPO settings are used (8 prompts per step, 1 completion each, 4 PPO epochs, LoRA policy and critic,
k3 KL with beta 0.1, up to 256 tokens, stopping at EOS), on the tiny random model and CPU. The first update is a
warm-up (imports, the sandbox's start) and is left out of the medians. Alignment must stay under 1 % of the step.
Then, on the last update's completions, :class:`~rewardlang.trainers.align.TokenAligner` is timed against
``prefix_char_ends`` (decode every prefix: the O(T²) method GRPO used before), with identical ends checked, and the
ratio printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SPEC = os.path.join(ROOT, "specs", "dense_ppo.reward")


TAUGHT = [
    "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```",
    "```python\ndef is_even(n: int) -> bool:\n    return n % 2 == 0\n```",
    "```python\ndef first(xs: list) -> int:\n    for x in xs:\n        return x\n    return 0\n```",
]


class Teach:
    """At the start of training, a few supervised steps of the policy (its LoRA adapter) on TAUGHT."""

    def on_train_begin(self, args, state, control, trainer=None, **kwargs):  # type: ignore[no-untyped-def]
        from rewardlang.trainers.model import teach

        policy = trainer.accelerator.unwrap_model(trainer.model).policy
        teach(policy, trainer.tokenizer, TAUGHT, steps=80, lr=1e-2)
        if trainer.ref_policy is not None:  # the reference starts from the taught policy too
            trainer.ref_policy.load_state_dict(policy.state_dict())

    def __getattr__(self, name):  # the other callback events: nothing to do
        return lambda *a, **k: None


def run_once(policy: str, steps: int, length: int) -> None:
    from rewardlang.trainers.align import TokenAligner, prefix_char_ends
    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.ppo import train

    with tempfile.TemporaryDirectory() as d:
        run = train(SPEC, sets={"train.max_steps": steps, "train.save_steps": 10_000,
                                "train.max_completion_length": length,
                                # taught: the whole policy learns the answers (an adapter on the random model does
                                # not learn them in a few steps); the reference is then the taught policy
                                # and it would stop after a few tokens: it generates all `length` (stop_at_eos=false)
                                **({"train.lora": False, "train.stop_at_eos": False} if policy == "taught"
                                   else {})},
                    flags={"output_dir": os.path.join(d, "run")}, progress=False,
                    callbacks=[Teach()] if policy == "taught" else [])
        records = [r for r in read_metrics(run.metrics_path) if "reward" in r][1:]  # step 1: warm-up
    med = {k: statistics.median(r[k] for r in records)
           for k in ("time/step", "time/generation", "time/forward", "time/reward", "time/align", "time/update",
                     "tokens_per_second", "completions/mean_length")}
    scoring = med["time/reward"] - med["time/align"]
    step = med["time/step"]
    print(f"\n[{policy} policy] PPO step on the tiny model, dense_ppo spec, {len(records)} updates after a warm-up "
          f"(median; {med['completions/mean_length']:.0f} tokens per completion, "
          f"{med['tokens_per_second']:.0f} tokens/s)")
    for name, value in (("generation", med["time/generation"]), ("rollout forward passes", med["time/forward"]),
                        ("scoring (the spec)", scoring), ("token alignment", med["time/align"]),
                        ("update (forward-backward)", med["time/update"])):
        print(f"  {name:28s} {value:8.3f} s  {100 * value / step:6.2f} %")
    print(f"  {'step':28s} {step:8.3f} s")
    share = med["time/align"] / step
    print(f"alignment share of the step: {100 * share:.3f} % (target < 1 %: {'met' if share < 0.01 else 'MISSED'})")

    # The aligner against prefix decoding on the last update's completions.
    trainer = run.trainer
    ro = trainer.last_rollout
    rows = [ro["ids"][b][ro["mask"][b].bool()].tolist() for b in range(ro["ids"].shape[0])]
    aligner = TokenAligner(trainer.tokenizer)
    t0 = time.perf_counter()
    ours = [aligner.align(r)[1] for r in rows]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = [prefix_char_ends(trainer.tokenizer, r) for r in rows]
    t_base = time.perf_counter() - t0
    assert ours == base, "the aligner and prefix decoding disagree"
    print(f"rewards of the last batch: {[round(float(x), 2) for x in ro['score'].sum(1)]}")
    print(f"alignment of the last batch ({len(rows)} completions, {sum(map(len, rows))} tokens; "
          f"{aligner.fallbacks} fell back to prefix decoding): prefix decoding {1e3 * t_base:.1f} ms, "
          f"TokenAligner {1e3 * t_ours:.1f} ms, ratio {t_base / max(t_ours, 1e-9):.1f}x; ends identical")
    print(f"prefix decoding would be {100 * t_base / step:.2f} % of the step")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--completion-length", type=int, default=256)
    ap.add_argument("--policy", choices=["taught", "random", "both"], default="both")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for policy in (["taught", "random"] if args.policy == "both" else [args.policy]):
        run_once(policy, args.steps, args.completion_length)


if __name__ == "__main__":
    main()
