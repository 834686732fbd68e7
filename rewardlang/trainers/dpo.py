"""DPO from a spec: offline on TRL's ``DPOTrainer`` from a pairs file, or online from the policy's own samples.

Offline (``train.preference_data = "pairs.jsonl"``, written by ``rewardlang pairs``): the file is TRL's own DPO
format (``prompt``, ``chosen``, ``rejected``; the extra ``score_*``/``margin`` columns are ignored), so TRL's
``DPOTrainer`` (trl==1.16.0) trains on it unchanged with its sigmoid loss, β = ``beta`` (0.1 unless a layer sets it),
and logs ``rewards/accuracies`` (preference accuracy), ``rewards/margins``, ``rewards/chosen``,
``rewards/rejected``, ``logps/chosen`` and ``logps/rejected``. The run shares everything else with GRPO: run
directory, configuration layers, checkpoints and exact resume, ``metrics.jsonl``, progress bar, plot, LoRA, bf16,
accelerate.

Online (no ``preference_data``): each step samples ``num_generations`` completions for each of ``prompts_per_step``
prompts from the current policy, scores them with the spec, mines pairs with its ``preference { }`` section
(max-min by default) and takes a DPO step on them. TRL's DPOTrainer cannot sample, so this runs on
:class:`rewardlang.trainers.gepo.GroupPreferenceTrainer` with groups of one winner and one loser and λ = 0, which is
exactly DPO's sigmoid loss (tests/trainers/test_gepo.py checks it against TRL's loss to 1e-6).

    >>> from rewardlang.trainers.config import TrainConfig
    >>> args = dpo_args(TrainConfig(), sources={}, run_dir="runs/x")     # no layer set beta: DPO's 0.1
    >>> args.beta, args.loss_type, args.per_device_train_batch_size
    (0.1, ['sigmoid'], 2)
    >>> from rewardlang.trainers.dpo import train                                              # doctest: +SKIP
    >>> train("specs/dpo_tests.reward", sets={"train.preference_data": "pairs.jsonl"})        # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from transformers import PrinterCallback
from trl import DPOConfig, DPOTrainer

from rewardlang.trainers import report
from rewardlang.trainers.config import TrainConfig
from rewardlang.trainers.data import DataError
from rewardlang.trainers.gepo import DEFAULT_BETA, PROMPT_TEXT, preference_rows, present_rows
from rewardlang.trainers.gepo import run as run_online
from rewardlang.trainers.metrics import JsonlMetricsCallback, ProgressCallback, RewardClock, StepTimingCallback
from rewardlang.trainers.model import lora_config
from rewardlang.trainers.recipe import (Layers, RunResult, args_record, finish_run, load_layers, load_run_policy, open_run,
                                        record_config, trainer_args, TiedResume)

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["dpo_args", "load_pairs", "present_pairs", "build_trainer", "train"]


class SpecDPOTrainer(TiedResume, DPOTrainer):
    """TRL's DPOTrainer, resuming a tied-embedding model without a spurious missing-key warning
    (:class:`rewardlang.trainers.run.TiedResume`)."""


class _DPOProgress(ProgressCallback):
    """The progress bar, showing DPO's preference accuracy and margin."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.bar is None or not logs or "rewards/accuracies" not in logs:
            return
        self.bar.set_postfix({"acc": f"{logs['rewards/accuracies']:.2f}",
                              "margin": f"{logs.get('rewards/margins', 0.0):.3f}"}, refresh=False)


def dpo_args(cfg: TrainConfig, sources: Mapping[str, str], run_dir: str) -> DPOConfig:
    """TRL's ``DPOConfig`` for a resolved configuration (``cfg.trl`` entries passed through last)."""
    # with `num_train_epochs` and no step count, the epochs set the run's length (PRLCoder: 3)
    epochs = {"max_steps": -1} if "num_train_epochs" in cfg.trl and "max_steps" not in sources else {}
    return trainer_args(DPOConfig, cfg, run_dir, batch_size=cfg.prompts_per_step, what="DPO",
                        beta=cfg.beta if "beta" in sources else DEFAULT_BETA, max_length=None, **epochs)


def load_pairs(cfg: TrainConfig) -> list[dict[str, Any]]:
    """``train.preference_data``'s pairs as TRL reads them (``prompt``, ``chosen``, ``rejected``), without the problems
    ``train.eval`` holds out (:func:`rewardlang.trainers.gepo.preference_rows`); DataError on a bad row."""
    return [{"prompt": g["prompt"], "chosen": g["winners"][0], "rejected": g["losers"][0]}
            for g in preference_rows(cfg, "pairs")]


def present_pairs(rows: list[dict[str, Any]], tokenizer: Any, cfg: TrainConfig) -> list[dict[str, Any]]:
    """The pairs with their prompts as the model is shown them when the spec or config sets a presentation
    (:func:`rewardlang.trainers.gepo.present_rows`): TRL then trains on the text that online DPO and ``train.eval``
    show the model."""
    present_rows(rows, tokenizer, cfg, offline=True)
    return [{**{k: v for k, v in r.items() if k != PROMPT_TEXT}, "prompt": r.get(PROMPT_TEXT, r["prompt"])}
            for r in rows]


def build_trainer(cfg: TrainConfig, sources: Mapping[str, str], prog: "Program", run_dir: str, *,
                  progress: bool | None = None, callbacks: Sequence[Any] = ()) -> DPOTrainer:
    """Pairs, policy and TRL's DPOTrainer (the reference is a frozen copy of the initial policy, or with LoRA the
    base model with the adapter disabled, as TRL does)."""
    from datasets import Dataset

    rows = load_pairs(cfg)
    args = dpo_args(cfg, sources, run_dir)
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
    if len(rows) < per_step:
        raise DataError(f"preference data {cfg.preference_data}: {len(rows)} pairs, but each step needs {per_step}")
    model, tokenizer = load_run_policy(cfg, run_dir)
    rows = present_pairs(rows, tokenizer, cfg)
    clock = RewardClock()
    timing = StepTimingCallback(clock)
    extra = [JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), timing, *callbacks]
    if cfg.progress if progress is None else progress:
        extra.append(_DPOProgress())
    trainer = SpecDPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                         callbacks=extra, peft_config=lora_config(cfg))
    timing.trainer = trainer
    trainer.remove_callback(PrinterCallback)
    return trainer


def train(spec: str, *, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
          flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
          callbacks: Sequence[Any] = (), layers: Layers | None = None) -> RunResult:
    """Train with DPO on ``spec``'s preferences: offline from ``train.preference_data`` on TRL's DPOTrainer, or
    online (mined from the policy's samples each step) when no pairs file is given."""

    # 1-2. The spec, its parameters and the configuration (run.load_layers); without a pairs file the run is online.
    layers = layers or load_layers(spec, config_file, sets, flags)
    prog, cfg, sources, params = layers
    if cfg.preference_data is None:
        return run_online(spec, mode="pairs", config_file=config_file, sets=sets, flags=flags, resume=resume,
                          progress=progress, callbacks=callbacks, layers=layers)
    if "beta" not in sources:  # the β in force, so that config.json records it (not GRPO's default 0.0)
        cfg.beta = DEFAULT_BETA
    load_pairs(cfg)  # a bad pairs file is named before the run directory is made or a model loads
    run_dir, checkpoint = open_run(prog, cfg, resume)

    # 3. Pairs, policy, trainer (and train.eval's held-out problems, left out of the pairs).
    heldout = report.heldout_rows(cfg)
    trainer = build_trainer(cfg, sources, prog, run_dir, progress=progress, callbacks=callbacks)
    record_config(trainer, run_dir, checkpoint, prog, cfg, sources, params, {"dpo_args": args_record(trainer.args)})

    # 4. Held-out pass@1 before, train, save the final policy, pass@1 after, the run's README.
    return finish_run(trainer, trainer.processing_class, cfg, run_dir, checkpoint, heldout, program=prog, progress=progress)
