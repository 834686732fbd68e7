"""Can the default model earn a spec's reward as the spec presents the problems? A probe, no training.

Samples ``--n`` completions for each of a few training problems from the default model (SmolLM2-135M-Instruct), with
the spec's own ``train`` presentation and sampling (system prompt, template, ``few_shot``, temperature, token
budget; any of them changed with ``--set train.KEY=JSON``), scores every sample with the spec and prints each
component per sample and the totals per problem (one group per problem, as GRPO sees them). A group whose totals
all agree gives GRPO no signal; a component that is 0 on every sample cannot be learned from these samples.
docs/training.md ("What was tried") reports the probes that chose the shipped specs' presentations.

    python benchmarks/presentation_probe.py --spec specs/codepo_text.reward --problems 2 --n 4
    python benchmarks/presentation_probe.py --spec specs/codepo.reward --set train.temperature=1.0
    python benchmarks/presentation_probe.py --spec specs/oorl.reward --ids HumanEval/53,HumanEval/23 --show 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--problems", type=int, default=2, help="the first N training problems (after the held-out split)")
    ap.add_argument("--ids", default=None, help="comma-separated task ids instead (of the spec's dataset)")
    ap.add_argument("--n", type=int, default=4, help="samples per problem")
    ap.add_argument("--set", action="append", default=[], metavar="train.KEY=JSON", help="change a train setting")
    ap.add_argument("--heldout", type=int, default=40, help="problems held out first, as train.eval does")
    ap.add_argument("--show", type=int, default=2, help="print this many samples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import numpy as np
    import torch

    import rewardlang
    from rewardlang.trainers.data import is_translation, load_rows, split_heldout
    from rewardlang.trainers.evaluate import generate, load_eval_model, score_completions

    torch.set_num_threads(args.threads)
    prog = rewardlang.load(args.spec)
    train = dict(prog.train)
    for item in args.set:
        key, _, value = item.partition("=")
        train[key.removeprefix("train.")] = json.loads(value)
    dataset = train.get("dataset")
    rows, source = load_rows(dataset)
    if not is_translation(dataset):
        rows, _ = split_heldout(rows, args.heldout, args.seed)  # never probe a problem train.eval holds out
    if args.ids:
        by_id = {r["task_id"]: r for r in rows}
        missing = [i for i in args.ids.split(",") if i not in by_id]
        if missing:  # held out (train.eval never trains on them) or not in the dataset
            ap.error(f"--ids {','.join(missing)}: not among the {len(rows)} training problems of {source} "
                     f"(after holding out --heldout {args.heldout})")
        problems = [by_id[i] for i in args.ids.split(",")]
    else:
        problems = rows[:args.problems]
    model, tokenizer, _ = load_eval_model("smollm2")
    chat = bool(getattr(tokenizer, "chat_template", None))
    shown = {k: train.get(k) for k in ("system_prompt", "prompt_template")}
    few_shot = train.get("few_shot") or ()
    t0, c0 = time.perf_counter(), time.process_time()
    completions = generate(model, tokenizer, problems, n=args.n, temperature=float(train.get("temperature", 1.0)),
                           max_new_tokens=int(train.get("max_completion_length", 48)), few_shot=few_shot,
                           seed=args.seed, **shown)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    owner, res = score_completions(prog, problems, completions, chat=chat, few_shot=few_shot, **shown)
    print(f"{args.spec}: {source}; {len(problems)} problems x {args.n} samples, temperature "
          f"{train.get('temperature', 1.0)}, {train.get('max_completion_length', 48)} tokens; generation {wall:.0f} s "
          f"wall, {cpu:.0f} CPU s, load average {os.getloadavg()[0]:.1f}")
    for name, values in res.components.items():
        v = np.asarray(values, dtype=float)
        print(f"  {name}: non-zero on {int((v != 0).sum())} of {len(v)}, mean {np.nanmean(v):.3f}")
    total = np.asarray(res.total, dtype=float)
    groups: list[list[float]] = [[] for _ in problems]
    for j, i in enumerate(owner):
        groups[i].append(round(float(total[j]), 3))
    print("  totals per problem: " + " | ".join(", ".join(map(str, g)) for g in groups))
    print(f"  groups whose totals vary: {sum(len(set(g)) > 1 for g in groups)} of {len(groups)}")
    for c in [c for cs in completions for c in cs][:args.show]:
        print("-" * 40 + "\n" + c)


if __name__ == "__main__":
    main()
