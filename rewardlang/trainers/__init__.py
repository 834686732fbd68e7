"""Trainers that consume compiled reward specs: one module per algorithm, shared parts built once.

- :mod:`rewardlang.trainers.config`  -- the resolved run configuration (defaults < spec ``train`` < file < CLI);
- :mod:`rewardlang.trainers.model`   -- the policy: a tiny local model or a local checkpoint, LoRA optional;
- :mod:`rewardlang.trainers.data`    -- the prompt dataset, checked against the spec's inputs before training;
- :mod:`rewardlang.trainers.metrics` -- JSONL/TensorBoard metrics, progress bar, timing;
- :mod:`rewardlang.trainers.recipe`  -- what the algorithms share: spec and configuration loaded once, run directory,
  resume checks, the end of a run;
- :mod:`rewardlang.trainers.run`     -- algorithm dispatch (``train``), above the algorithm modules;
- :mod:`rewardlang.trainers.grpo`    -- GRPO on TRL's ``GRPOTrainer`` with the spec's rewards and advantages;
- :mod:`rewardlang.trainers.dpo`     -- DPO: offline on TRL's ``DPOTrainer`` from a pairs file, or online;
- :mod:`rewardlang.trainers.gepo`    -- GEPO (group preferences, chunked exact backward) on transformers' Trainer;
- :mod:`rewardlang.trainers.oorl`    -- OORL: REINFORCE++ (the PPO trainer) plus w_gepo x GEPO each step;
- :mod:`rewardlang.trainers.plot`    -- ``rewardlang plot RUN_DIR``;
- :mod:`rewardlang.trainers.cli`     -- the ``train`` and ``plot`` commands.

Importing this package (or :mod:`config`, :mod:`plot`) does not import torch; the training modules do.
"""

from __future__ import annotations

__all__: list[str] = []
