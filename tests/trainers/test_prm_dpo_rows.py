"""The process pairs `rewardlang prm-data` writes load in TRL's DPOTrainer (tiny model, one step)."""

from __future__ import annotations

import math

import pytest


@pytest.mark.slow
def test_process_pairs_train_in_trl_dpo(tmp_path) -> None:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from rewardlang.datasets.prm import label
    from rewardlang.datasets.humaneval import load_humaneval
    from rewardlang.trainers.config import TinyModelConfig
    from rewardlang.trainers.model import build_tiny_model, build_tokenizer

    data = label.build(load_humaneval()[:4], operators=["return_none", "statement_to_pass", "rename_local"],
                       level="line", seed=0)
    rows = data.dpo
    assert len(rows) >= 4 and all(r["prompt"].endswith("\n") for r in rows)
    tok = build_tokenizer(512)
    model = build_tiny_model(tok, TinyModelConfig(), seed=0)
    ds = Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in rows])
    args = DPOConfig(output_dir=str(tmp_path / "dpo"), max_steps=2, per_device_train_batch_size=2, beta=0.1,
                     learning_rate=5e-6, lr_scheduler_type="linear", warmup_steps=1, report_to=[],
                     logging_steps=1, save_strategy="no", max_length=1024, disable_tqdm=True,
                     bf16=False, gradient_checkpointing=False)
    ref = build_tiny_model(tok, TinyModelConfig(), seed=0)  # the same weights: TRL cannot reload an unsaved model
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=ds, processing_class=tok)
    first = trainer.train_dataset[0]
    # TRL tokenised prompt and completion apart: the prompt ids are a prefix of prompt + chosen
    assert first["prompt_ids"] and first["chosen_ids"] and first["rejected_ids"]
    out = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(out.training_loss)
    # the first step's loss is -log sigmoid(0) = log 2: the policy is its own reference
    assert trainer.state.log_history[0]["loss"] == pytest.approx(math.log(2), abs=1e-3)
