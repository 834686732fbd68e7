"""Run by test_ppo_distributed.py under `torchrun --nproc_per_node 2`: a few PPO updates, then each rank's view.

Usage: torchrun --nproc_per_node 2 ppo_ddp_worker.py SPEC DATASET RUN_DIR [SETS_JSON]
"""

from __future__ import annotations

import json
import os
import sys

import torch

from rewardlang.trainers.run import train

spec, dataset, run_dir = sys.argv[1:4]
more = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
result = train(spec, sets={"train.max_steps": 3, "train.save_steps": 3, "train.max_completion_length": 8,
                           "train.prompts_per_step": 1, "train.num_generations": 4, "train.whiten_scope": "global",
                           "train.beta": 0.05, **more},
               flags={"dataset": dataset, "output_dir": run_dir}, progress=False)
trainer = result.trainer
ro = trainer.last_rollout
acc = trainer.accelerator
unwrapped = acc.unwrap_model(trainer.model)
view = {
    "rank": acc.process_index, "world": acc.num_processes, "step": result.global_step,
    "advantages": ro["advantages"].tolist(), "train_mask": ro["train_mask"].tolist(),
    "texts": ro["dense"].texts, "resampled": trainer.resampled,
    "checksum": float(sum(p.double().sum() for p in unwrapped.parameters())),
}
with open(os.path.join(run_dir, f"rank{acc.process_index}.json"), "w") as fh:
    json.dump(view, fh)
torch.distributed.barrier() if torch.distributed.is_initialized() else None
