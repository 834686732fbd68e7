"""Train with a reward spec from your own TRL script.

``SpecGRPOTrainer`` is TRL's ``GRPOTrainer`` whose rewards come from the spec, with everything the spec declares:
a masked total is left out (no advantage, not scored 0), the spec's ``advantage`` pipeline replaces TRL's group
normalisation, and ``spans`` become per-token advantages. Use it where you would use ``GRPOTrainer``, with your
own ``GRPOConfig``, model, tokenizer and dataset; the dataset's columns reach the spec's inputs by name.

    python examples/trl_spec_trainer.py                    # 2 steps of the tiny random model on CPU, ~1 min

(Replace the tiny model and tokenizer by ``AutoModelForCausalLM.from_pretrained(...)`` and its tokenizer, or
pass the model id as ``model="..."``, as with ``GRPOTrainer``.)
"""

from __future__ import annotations

import sys
import tempfile

from datasets import Dataset
from trl import GRPOConfig

import rewardlang
from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.grpo import SpecGRPOTrainer
from rewardlang.trainers.model import build_tiny_model, build_tokenizer

SPEC = '''spec short_digits "short completions with digits; long ones are out of range and masked"
component short in [0, 1] = len(completion) / 30
component digits in [0, 1] = count(completion, /[0-9]/) / max(len(completion), 1)
advantage over group(prompt) = (reward - mean) / (std(ddof=1) + 1e-4)
'''


def main(output_dir: str, max_steps: int = 2) -> SpecGRPOTrainer:
    prog = rewardlang.loads(SPEC)
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, TinyModelConfig())
    dataset = Dataset.from_list([{"prompt": f"Write the number {i}:"} for i in range(16)])
    args = GRPOConfig(output_dir=output_dir, max_steps=max_steps, per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=12, learning_rate=1e-4, logging_steps=1,
                      report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True)
    trainer = SpecGRPOTrainer(model=model, program=prog, args=args, processing_class=tokenizer,
                              train_dataset=dataset)
    trainer.train()
    return trainer


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        t = main(d, max_steps=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
        b = t.last_batch
        print(f"last batch: {len(b['total'])} completions, {int((b['total'] != b['total']).sum())} masked "
              f"(advantage 0), advantages {[round(float(a), 3) for a in b['advantages']]}")
