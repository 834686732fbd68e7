"""Algorithm dispatch: :func:`train` trains a spec with the algorithm its configuration names (GRPO unless one is).

Each algorithm module (``grpo``, ``ppo``, ...) exposes ``train(spec, *, config_file, sets, flags, resume, progress,
callbacks, layers) -> RunResult`` and is listed in :data:`rewardlang.trainers.config.ALGORITHMS`. :func:`train`
resolves which one a run uses (the spec's ``train { algorithm = "..." }``, a config file, ``--set
train.algorithm=...``) and calls it, so ``rewardlang train`` trains any spec with any algorithm. What the recipes
share around their loops lives in :mod:`rewardlang.trainers.recipe`, below them (they import it, not this module,
which loads them by name); its names are re-exported here.

    >>> from rewardlang.trainers.config import TrainConfig
    >>> run_dir_for(TrainConfig(output_dir="runs/x"), "codepo_text", resume=False)
    'runs/x'
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, Sequence

from rewardlang.trainers.config import ALGORITHMS
from rewardlang.trainers.recipe import (RESUME_MAY_CHANGE, RUN_FILES, Layers, RunResult, TiedResume, algorithm_of,
                                        args_record, check_resume, checkpoint_damage, config_name, finish_run,
                                        last_checkpoint, load_layers, load_run_policy, load_spec,
                                        missing_after_tying, model_named, open_run, record_config, resume_command,
                                        run_dir_for, save_initial_policy, trainer_args, where_to_resume)

__all__ = ["RunResult", "run_dir_for", "save_initial_policy", "last_checkpoint", "checkpoint_damage", "check_resume",
           "RESUME_MAY_CHANGE", "train", "algorithm_of", "Layers", "load_layers", "model_named", "open_run",
           "config_name", "trainer_args", "load_run_policy", "record_config", "args_record", "finish_run",
           "missing_after_tying", "TiedResume", "load_spec", "resume_command", "where_to_resume", "RUN_FILES"]


def train(spec: str, *, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
          flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
          callbacks: Sequence[Any] = (), default_model: str | None = None) -> RunResult:
    """Train on ``spec`` with the algorithm its configuration names (GRPO unless one is named). The spec is
    compiled and the configuration read once, here (:func:`load_layers`), and handed to the algorithm;
    ``default_model`` is the model when no layer names one."""
    layers = load_layers(spec, config_file, sets, flags, default_model=default_model, require_resources=True)
    module = importlib.import_module(ALGORITHMS[layers.algorithm])
    return module.train(spec, config_file=config_file, sets=sets, flags=flags, resume=resume, progress=progress,
                        callbacks=callbacks, layers=layers)
