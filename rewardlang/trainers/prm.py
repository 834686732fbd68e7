"""A process reward model (PRM): token classification trained with BCE at step-end tokens (PRLCoder).

It reads TRL's last stepwise format, the rows ``rewardlang prm-data`` writes (``steps.jsonl``)::

    {"prompt": "def f(x):\\n", "completions": ["    y = x + 1\\n", "    return y\\n"], "labels": [true, true]}

Each row becomes ``prompt ids + step 1 ids + step 2 ids + ...`` (each part tokenised on its own, as TRL did;
our steps end on their own line break, so no separator is appended); the label of a step sits on its last
token, every other position is -100 (trl@f2cd577 trl/experimental/prm/prm_trainer.py:274-362). Rows longer than
``MAX_TOKENS`` keep their last tokens. The model is ``AutoModelForTokenClassification`` with one logit per
token (the tiny Llama of :mod:`~rewardlang.trainers.model` when no ``--model`` is given); the loss is
``BCEWithLogits`` over the labelled positions.

Problems are split by ``task_id`` (a hash, ``HELD_OUT`` of them held out): the metrics report
``eval_step_accuracy`` on held-out problems next to ``eval_majority_baseline`` (the training set's majority
label, predicted everywhere). The run directory, checkpoints, ``--resume``, ``config.json`` and
``metrics.jsonl`` are the shared machinery's (:mod:`~rewardlang.trainers.run`, ``metrics``).

    >>> from rewardlang.trainers.prm import train                                    # doctest: +SKIP
    >>> r = train("specs/prm.reward", flags={"dataset": "data/steps.jsonl", "max_steps": 200})  # doctest: +SKIP

The recipe (:func:`train`): resolve the configuration, read and split the rows, tokenise, build the model,
train with evaluation, save.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import PrinterCallback, Trainer, TrainingArguments

from rewardlang.jsonl import read_jsonl
from rewardlang.trainers.config import ConfigError, TrainConfig, save_resolved
from rewardlang.trainers.data import DataError
from rewardlang.trainers.metrics import JsonlMetricsCallback, ProgressCallback
from rewardlang.trainers.model import build_tokenizer, resolve_dtype
from rewardlang.trainers.recipe import Layers, RunResult, TiedResume, config_name, load_layers, open_run

__all__ = [
    "HELD_OUT",
    "MAX_TOKENS",
    "PRMTrainer",
    "build_model",
    "read_steps",
    "split_by_problem",
    "step_metrics",
    "tokenize_row",
    "train",
]

#: share of problems (by task_id hash) held out for the step-accuracy metric (a choice)
HELD_OUT = 0.2
#: longest tokenised row; longer rows keep their last tokens (where the labelled step ends are)
MAX_TOKENS = 512


def read_steps(path: str | None) -> list[dict[str, Any]]:
    """The stepwise rows of a JSONL file; a bad row is a :class:`DataError` naming its line."""
    if not path:
        raise DataError("the PRM trainer needs --dataset STEPS.jsonl (written by `rewardlang prm-data`)")
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    rows = []
    for lineno, r in read_jsonl(path, DataError):
        ok = (isinstance(r.get("prompt"), str) and isinstance(r.get("completions"), list)
              and isinstance(r.get("labels"), list) and len(r["completions"]) == len(r["labels"]) > 0
              and all(isinstance(s, str) for s in r["completions"])
              and all(isinstance(b, bool) for b in r["labels"]))
        if not ok:
            raise DataError(f"{path}:{lineno}: a stepwise row needs prompt (text), completions (list of text) "
                            f"and labels (list of booleans, one per completion)")
        r.setdefault("task_id", f"row/{lineno}")
        rows.append(r)
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def split_by_problem(rows: Sequence[dict[str, Any]], held_out: float = HELD_OUT) -> tuple[list, list]:
    """(train, held-out) rows: a problem is held out when the hash of its ``task_id`` falls under ``held_out``.

        >>> tr, ev = split_by_problem([{"task_id": f"t{i}"} for i in range(100)])
        >>> len(tr), len(ev)
        (77, 23)
    """
    train_rows, eval_rows = [], []
    for r in rows:
        h = int.from_bytes(hashlib.sha256(str(r["task_id"]).encode()).digest()[:8], "big") / 2 ** 64
        (eval_rows if h < held_out else train_rows).append(r)
    return train_rows, eval_rows


def tokenize_row(row: Mapping[str, Any], tokenizer: Any, max_tokens: int = MAX_TOKENS) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` (1/0 on each step's last token, -100 elsewhere) of one stepwise row."""
    ids = list(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"])
    labels = [-100] * len(ids)
    for step, lab in zip(row["completions"], row["labels"]):
        s = tokenizer(step, add_special_tokens=False)["input_ids"]
        if not s:
            continue
        ids += s
        labels += [-100] * (len(s) - 1) + [int(bool(lab))]
    return {"input_ids": ids[-max_tokens:], "labels": labels[-max_tokens:]}


def build_model(cfg: TrainConfig) -> tuple[Any, Any]:
    """A one-logit token classifier and its tokenizer: the tiny Llama (seeded) or ``cfg.model`` from disk."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer, LlamaConfig, LlamaForTokenClassification

    dtype = resolve_dtype(cfg.dtype)
    if cfg.model is None:
        tok = build_tokenizer(cfg.tiny_model.vocab_size)
        t = cfg.tiny_model
        conf = LlamaConfig(vocab_size=len(tok), hidden_size=t.hidden_size, intermediate_size=t.intermediate_size,
                           num_hidden_layers=t.num_hidden_layers, num_attention_heads=t.num_attention_heads,
                           num_key_value_heads=t.num_key_value_heads, max_position_embeddings=t.max_position_embeddings,
                           pad_token_id=tok.pad_token_id, num_labels=1, attention_dropout=0.0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            model = LlamaForTokenClassification(conf)
        return model.to(dtype), tok
    try:
        tok = AutoTokenizer.from_pretrained(cfg.model, local_files_only=True)
        model = AutoModelForTokenClassification.from_pretrained(cfg.model, local_files_only=True, num_labels=1,
                                                                dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--model {cfg.model}: cannot load it as a token classifier from a local directory or "
                          f"the local Hugging Face cache: {exc}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.config.pad_token_id = tok.pad_token_id
    return model, tok


class _Collate:
    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, feats: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        n = max(len(f["input_ids"]) for f in feats)
        ids = torch.full((len(feats), n), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(feats), n), dtype=torch.long)
        lab = torch.full((len(feats), n), -100, dtype=torch.long)
        for i, f in enumerate(feats):  # right padding: a causal model's scores do not depend on what follows
            k = len(f["input_ids"])
            ids[i, :k] = torch.tensor(f["input_ids"])
            att[i, :k] = 1
            lab[i, :k] = torch.tensor(f["labels"])
        return {"input_ids": ids, "attention_mask": att, "labels": lab}


class PRMTrainer(TiedResume, Trainer):
    """``Trainer`` with BCE-with-logits on the labelled (step-end) positions only."""

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        labels = inputs.pop("labels")
        out = model(**inputs)
        logits = out.logits[..., 0].float()
        mask = labels != -100
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits[mask], labels[mask].float())
        return (loss, out) if return_outputs else loss

    def prediction_step(self, model: Any, inputs: dict[str, Any], prediction_loss_only: bool,
                        ignore_keys: Any = None) -> tuple[Any, Any, Any]:
        inputs = self._prepare_inputs(inputs)
        labels = inputs["labels"]
        with torch.no_grad():
            loss, out = self.compute_loss(model, dict(inputs), return_outputs=True)
        return loss.detach(), out.logits[..., 0].detach(), labels


def step_metrics(logits: np.ndarray, labels: np.ndarray, majority: bool) -> dict[str, float]:
    """Step-label accuracy (logit > 0 means "correct step") and the majority-label baseline on the same steps.

        >>> step_metrics(np.array([[2.0, -1.0, 0.5]]), np.array([[1, 0, -100]]), majority=True)
        {'step_accuracy': 1.0, 'majority_baseline': 0.5, 'steps': 2.0}
    """
    mask = labels != -100
    y = labels[mask] == 1
    pred = logits[mask] > 0
    n = int(mask.sum())
    return {"step_accuracy": float((pred == y).mean()) if n else 0.0,
            "majority_baseline": float((y == majority).mean()) if n else 0.0, "steps": float(n)}


def train(spec: str, *, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
          flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
          callbacks: Sequence[Any] = (), layers: Layers | None = None) -> RunResult:
    """Train a PRM on the stepwise rows named by ``dataset``; the spec supplies the run's name and settings
    (``train { algorithm = "prm" ... }``). ``trl.*`` settings that are ``TrainingArguments`` fields pass
    through (e.g. ``trl.warmup_ratio``, ``trl.eval_steps``)."""

    # 1. The spec (for its name and train section) and the configuration.
    prog, cfg, sources, params = layers or load_layers(spec, config_file, sets, flags)
    if cfg.eval:
        raise ConfigError(f"{sources.get('eval', 'train.eval')}: train.eval measures a generating policy's pass@1; "
                          f"the PRM is a step classifier, evaluated on its own held-out problems "
                          f"(eval_step_accuracy): leave train.eval at 0")
    run_dir, checkpoint = open_run(prog, cfg, resume)
    if cfg.torch_threads or cfg.model is None:
        torch.set_num_threads(cfg.torch_threads or 1)

    # 2. Rows, split by problem, tokenised.
    rows = read_steps(cfg.dataset)
    train_rows, eval_rows = split_by_problem(rows)
    if not train_rows or not eval_rows:
        raise DataError(f"{cfg.dataset}: {len(rows)} rows from too few problems to hold {HELD_OUT:.0%} out "
                        f"(train {len(train_rows)}, held out {len(eval_rows)})")
    model, tok = build_model(cfg)
    limit = min(MAX_TOKENS, getattr(model.config, "max_position_embeddings", MAX_TOKENS) or MAX_TOKENS)
    train_ds = [tokenize_row(r, tok, limit) for r in train_rows]
    eval_ds = [tokenize_row(r, tok, limit) for r in eval_rows]
    n_true = sum(sum(r["labels"]) for r in train_rows)
    majority = n_true * 2 >= sum(len(r["labels"]) for r in train_rows)

    # 3. The trainer: TrainingArguments from the shared config, evaluation at every save.
    # every pass-through key is a TrainingArguments field (config.resolve_config checked it against that class for
    # algorithm = "prm"), and the shared optimiser settings are honoured as the other trainers honour them
    extra = dict(cfg.trl)
    try:
        args = TrainingArguments(**{
            "output_dir": run_dir, "max_steps": cfg.max_steps, "per_device_train_batch_size": cfg.batch_size,
            "per_device_eval_batch_size": cfg.batch_size, "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
            "learning_rate": cfg.learning_rate, "seed": cfg.seed, "save_steps": cfg.save_steps,
            "save_total_limit": cfg.save_total_limit, "logging_steps": cfg.logging_steps,
            "lr_scheduler_type": cfg.lr_scheduler, "warmup_steps": cfg.warmup_ratio, "max_grad_norm": cfg.max_grad_norm,
            "eval_strategy": "steps", "eval_steps": extra.pop("eval_steps", cfg.save_steps),
            "report_to": [] if cfg.report_to == "auto" else cfg.report_to, "remove_unused_columns": False,
            "bf16": resolve_dtype(cfg.dtype) == torch.bfloat16, "disable_tqdm": True, **extra})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid PRM settings: {exc}") from None

    def compute_metrics(p: Any) -> dict[str, float]:
        return step_metrics(np.asarray(p.predictions), np.asarray(p.label_ids), majority)

    trainer = PRMTrainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                         data_collator=_Collate(tok.pad_token_id), compute_metrics=compute_metrics,
                         callbacks=[JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), *callbacks])
    trainer.remove_callback(PrinterCallback)
    if progress if progress is not None else cfg.progress:
        trainer.add_callback(ProgressCallback())
    if trainer.is_world_process_zero():
        name = config_name(checkpoint)
        save_resolved(os.path.join(run_dir, name), cfg, sources, spec_name=prog.name, spec_hash=prog.source_hash,
                      params=params, extra={"prm": {"held_out": HELD_OUT, "max_tokens": limit,
                                                    "train_rows": len(train_rows), "eval_rows": len(eval_rows),
                                                    "majority_label": majority}, "resumed_from": checkpoint})

    # 4. Train, evaluate on the held-out problems, save the classifier and its tokenizer.
    trainer.train(resume_from_checkpoint=checkpoint)
    # the held-out step accuracy of the final model, unless the last step's evaluation already gave it (it would be
    # recorded twice)
    if not any("eval_loss" in r and r.get("step") == trainer.state.global_step for r in trainer.state.log_history):
        trainer.evaluate()
    final_dir = os.path.join(run_dir, "final")
    trainer.save_model(final_dir)
    if trainer.is_world_process_zero():  # one writer: processes saving the same files at once can interleave them
        tok.save_pretrained(final_dir)
    trainer.accelerator.wait_for_everyone()  # every process leaves together (grpo.train says why)
    return RunResult(run_dir=run_dir, final_dir=final_dir, metrics_path=os.path.join(run_dir, "metrics.jsonl"),
                     global_step=trainer.state.global_step, config=cfg, trainer=trainer)
