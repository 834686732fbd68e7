"""Run by test_grpo_distributed.py under `torchrun --nproc_per_node 2`: train a few steps, dump each rank's view.

Usage: torchrun --nproc_per_node 2 ddp_worker.py SPEC DATASET RUN_DIR
"""

from __future__ import annotations

import json
import os
import sys

from rewardlang.trainers.grpo import train

spec, dataset, run_dir = sys.argv[1:4]
# 2 completions per process and 4 per prompt: every prompt group is split across the two processes
result = train(spec, sets={"train.max_steps": 3, "train.batch_size": 2, "train.max_completion_length": 10,
                           "train.save_steps": 3},
               flags={"dataset": dataset, "output_dir": run_dir}, progress=False)
trainer = result.trainer
rank = trainer.accelerator.process_index
view = {k: v.tolist() for k, v in trainer.last_batch.items()}
view.update(rank=rank, world=trainer.accelerator.num_processes, step=result.global_step,
            local_advantages=trainer._buffered_inputs[0]["advantages"].tolist())
with open(os.path.join(run_dir, f"rank{rank}.json"), "w") as fh:
    json.dump(view, fh)
