"""GEPO step time against DPO step time on the same tokens.

DPO: TRL's ``DPOTrainer.training_step`` (reference forward, policy forward and backward). GEPO: our
``GroupPreferenceTrainer.training_step`` on the same pairs as groups of one winner and one loser (policy forward
without gradients, reference forward, then the chunked forward and backward of Σ c·r̂): one extra policy forward
is the price of bounded memory for large groups. Also GEPO on groups of 4 winners and 4 losers made of the same
sequences. Median of paired steps (same batch on both sides), after warm-up.

    PYTHONPATH=. python3 benchmarks/bench_gepo.py [--pairs 8] [--steps 7] [--hidden 256]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time

import torch


def main() -> None:
    from datasets import Dataset
    from transformers import TrainingArguments
    from trl import DPOConfig, DPOTrainer

    from rewardlang.trainers.config import TinyModelConfig
    from rewardlang.trainers.gepo import GroupPreferenceTrainer
    from rewardlang.trainers.model import build_tiny_model, build_tokenizer

    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(0)
    if not torch.cuda.is_available():
        torch.set_num_threads(1)
    tok = build_tokenizer(512)
    mc = TinyModelConfig(hidden_size=a.hidden, intermediate_size=4 * a.hidden, num_hidden_layers=a.layers)
    model = build_tiny_model(tok, mc, seed=0)
    ref = copy.deepcopy(model)
    body = "def solve(xs):\n    total = 0\n    for x in xs:\n        total += x * x\n    return total\n"
    pairs = [{"prompt": f"Task {i}: sum of squares\n", "chosen": body + f"# {i}", "rejected": body.replace("*", "+")
              + f"# {i}"} for i in range(a.pairs)]
    out = tempfile.mkdtemp()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dpo = DPOTrainer(model=copy.deepcopy(model), ref_model=copy.deepcopy(ref), processing_class=tok,
                     train_dataset=Dataset.from_list(pairs),
                     args=DPOConfig(output_dir=out, per_device_train_batch_size=a.pairs, report_to=[],
                                    use_cpu=dev == "cpu", max_steps=1, beta=0.1))
    dpo_batch = next(iter(dpo.get_train_dataloader()))
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=a.pairs, report_to=[], use_cpu=dev == "cpu",
                             remove_unused_columns=False, max_steps=1)
    as_pairs = [{"prompt": p["prompt"], "winners": [p["chosen"]], "losers": [p["rejected"]]} for p in pairs]
    gepo = GroupPreferenceTrainer(copy.deepcopy(model), args, ref_model=copy.deepcopy(ref), tokenizer=tok, beta=0.1,
                                  lam=1.0, chunk=a.chunk, train_dataset=Dataset.from_list(as_pairs))
    k = 4
    groups = [{"prompt": pairs[i]["prompt"], "winners": [p["chosen"] for p in pairs[i:i + k]],
               "losers": [p["rejected"] for p in pairs[i:i + k]]} for i in range(0, a.pairs, k)]

    def timed(fn) -> float:  # noqa: ANN001
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if dev == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    dpo.current_gradient_accumulation_steps = gepo.current_gradient_accumulation_steps = 1  # set by train()
    dpo.model.train()
    gepo.model.train()
    tokens = int(dpo_batch["attention_mask"].sum())
    rows = []
    for step in range(a.steps + 2):
        t_dpo = timed(lambda: dpo.training_step(dpo.model, dpo_batch))
        t_gepo = timed(lambda: gepo.training_step(gepo.model, as_pairs))
        t_group = timed(lambda: gepo.training_step(gepo.model, groups))
        dpo.model.zero_grad()
        gepo.model.zero_grad()
        if step >= 2:  # warm-up
            rows.append((t_dpo, t_gepo, t_group))
    d = statistics.median(r[0] for r in rows)
    g = statistics.median(r[1] for r in rows)
    gg = statistics.median(r[2] for r in rows)
    ratios = statistics.median(r[1] / r[0] for r in rows)
    print(f"{a.pairs} pairs, {tokens} tokens per step, hidden {a.hidden}, {a.layers} layers, on {dev}")
    print(f"  DPO  (TRL DPOTrainer.training_step)         {1000 * d:8.1f} ms")
    print(f"  GEPO (pairs as groups, chunk {a.chunk})           {1000 * g:8.1f} ms   ratio GEPO/DPO {ratios:.2f}x")
    print(f"  GEPO (groups of {k}+{k}, same sequences)        {1000 * gg:8.1f} ms   ratio GEPO/DPO {gg / d:.2f}x")


if __name__ == "__main__":
    main()
