"""GRPO with a reward spec, on TRL's ``GRPOTrainer``.

The recipe (:func:`train`) reads top to bottom: compile the spec, resolve the configuration, load and check the
data, build the policy, build the trainer, train, save. The spec supplies one reward function per component
(``prog.as_trl_reward_funcs()``) with the spec's weights; TRL calls them where it always does, in
``GRPOTrainer._calculate_rewards``, on each process's own completions, and logs ``rewards/<component>/mean``.

When the spec declares its own advantage pipeline (``advantage over group(prompt) = ...``), it replaces TRL's
group normalisation. :class:`SpecGRPOTrainer` does that by overriding one method,
``_generate_and_score_completions``, the way TRL's own variants override one method of the base trainer: in TRL
1.16 the advantage is computed inline near the end of that method (there is no separate advantage hook), and its
result leaves the method in ``output["advantages"]``, the local slice of a global vector. The override calls TRL's
method unchanged, then recomputes that vector from the same gathered per-component rewards TRL normalised (the
reward wrappers keep each process's values; ``gather`` assembles them in TRL's order), runs the spec's pipeline on
the whole generation batch (groups = TRL's prompt groups: ``num_generations`` consecutive completions of one
sampled prompt) and puts this process's slice back. TRL's loss (``_compute_loss``) consumes ``(B,)`` advantages and,
since TRL 1.x, also ``(B, T)`` per-token advantages; the same override produces those when the spec attributes
rewards to spans of the completion (see :func:`token_advantages`).

    >>> from rewardlang.trainers.grpo import train                                   # doctest: +SKIP
    >>> result = train("specs/codepo_text.reward", sets={"train.max_steps": 5})       # doctest: +SKIP
    >>> result.run_dir, result.global_step                                           # doctest: +SKIP
    ('runs/codepo_text-20260101-120000', 5)
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import torch
from accelerate.utils import gather
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from rewardlang.trainers.config import ConfigError, TrainConfig, load_config_file, resolve_config, save_resolved
from rewardlang.trainers.data import build_dataset, check_columns, load_rows
from rewardlang.trainers.metrics import (JsonlMetricsCallback, ProgressCallback, RewardClock,
                                         StepTimingCallback)
from rewardlang.trainers.model import load_policy, lora_config, resolve_dtype

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["SpecGRPOTrainer", "SpecReward", "grpo_args", "build_trainer", "train", "RunResult", "token_advantages",
           "token_char_ends"]


class SpecReward:
    """One spec component as a TRL reward function, timed, its last values kept (a picklable callable).

    TRL names reward functions by ``__name__`` (metrics ``rewards/<name>/mean``): it is the component's name.
    """

    def __init__(self, func: Callable[..., list[float | None]], name: str, clock: RewardClock,
                 record: dict[str, list[float | None]]) -> None:
        self.func = func
        self.__name__ = name
        self.clock = clock
        self.record = record

    def __call__(self, **kwargs: Any) -> list[float | None]:
        t0 = time.perf_counter()
        values = self.func(**kwargs)
        self.clock.seconds += time.perf_counter() - t0
        self.record[self.__name__] = list(values)
        return values


def token_char_ends(tokenizer: Any, ids: Sequence[int]) -> list[int]:
    """For each completion token, the length of the decoded completion text up to and including it.

    Decodes growing prefixes exactly as TRL decodes the completion (``skip_special_tokens=True``), so the offsets
    agree with the text the reward saw, whatever the tokenizer (byte-level BPE pieces that split a character
    contribute nothing until the character is complete).

    >>> from rewardlang.trainers.model import build_tokenizer
    >>> tok = build_tokenizer(300)
    >>> ids = tok("ab cd")["input_ids"]
    >>> token_char_ends(tok, ids)[-1]
    5
    """
    ends, prev = [], 0
    for i in range(len(ids)):
        text = tokenizer.decode(ids[: i + 1], skip_special_tokens=True)
        prev = max(prev, len(text.rstrip("\ufffd")))  # an incomplete multi-byte character is not text yet
        ends.append(prev)
    return ends


def token_advantages(seq_adv: float, spans: Sequence[Any], ends: Sequence[int], length: int) -> list[float]:
    """Per-token advantages of one completion: the sequence advantage plus, on every token that overlaps a span,
    that span's value (spans are ``(start, end, value, label)`` in completion characters; overlapping spans add).

    Tokens past the completion (padding up to ``length``) get 0; the loss masks them anyway.

    >>> token_advantages(0.5, [(2, 4, -1.0, "lint")], ends=[2, 4, 6], length=4)
    [0.5, -0.5, 0.5, 0.0]
    """
    out = [seq_adv] * len(ends) + [0.0] * (length - len(ends))
    starts = [0, *ends[:-1]]
    for sp in spans:
        start, end, value = sp[0], sp[1], sp[2]
        if start < 0:  # the runtime could not place the span in the completion
            continue
        for t, (a, b) in enumerate(zip(starts, ends)):
            if a < end and b > start and b > a:
                out[t] += float(value)
    return out


class SpecGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose rewards (and, if the spec has one, advantage pipeline) come from a compiled spec.

    Overrides one TRL method, ``_generate_and_score_completions`` (see the module docstring). Extra metrics, per
    logging step: ``masked/<component>`` and ``masked/rate`` (share of completions with a masked component: an
    ``on_error = mask`` error or an infrastructure failure; such completions are not scored as 0),
    ``masked/count``, ``advantages/{mean,std,min,max,abs_mean}``; with :class:`StepTimingCallback`, ``time/step``,
    ``time/reward``, ``time/reward_share``, ``tokens_per_second``.

    ``last_batch`` keeps the last generation batch's global ``rewards_per_func``, ``rewards``, ``groups`` and
    ``advantages`` (NumPy) for inspection.
    """

    def __init__(self, model: Any, program: "Program", args: GRPOConfig, clock: RewardClock | None = None,
                 **kwargs: Any) -> None:
        self.program = program
        self.clock = clock or RewardClock()
        self._spec_values: dict[str, list[float | None]] = {}
        funcs, weights = program.as_trl_reward_funcs()
        names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
        self._weight_names = names
        if isinstance(weights, Mapping):
            weights = [float(weights[n]) for n in names]
        args.reward_weights = [float(w) for w in weights]
        wrapped = [SpecReward(f, n, self.clock, self._spec_values) for f, n in zip(funcs, names)]
        self.last_batch: dict[str, np.ndarray] = {}
        super().__init__(model=model, reward_funcs=wrapped, args=args, **kwargs)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.model.training else "eval"
        step = self.state.global_step
        # Weights may follow a schedule in the spec; TRL reads self.reward_weights when it sums the components.
        w = self.program.weights(step)
        self.reward_weights = torch.tensor([float(w[n]) for n in self._weight_names], dtype=torch.float32)
        self._spec_values.clear()

        output = super()._generate_and_score_completions(inputs)

        device = self.accelerator.device
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        local = torch.tensor(
            [[math.nan if v is None else float(v) for v in self._spec_values[n]] for n in self.reward_func_names],
            dtype=torch.float32,
        ).T.contiguous()
        rewards_per_func = gather(local.to(device))  # what TRL normalised: every process's completions, in order
        masked = torch.isnan(rewards_per_func)
        for i, name in enumerate(self.reward_func_names):
            self._metrics[mode][f"masked/{name}"].append(masked[:, i].float().mean().item())
        any_masked = masked.any(dim=1)
        self._metrics[mode]["masked/rate"].append(any_masked.float().mean().item())
        self._metrics[mode]["masked/count"].append(float(any_masked.sum().item()))

        rewards = (rewards_per_func * self.reward_weights.to(device)).nansum(dim=1)
        rewards[masked.all(dim=1)] = torch.nan
        groups = np.arange(rewards.numel()) // num_generations
        n_local = local.shape[0]
        process_slice = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)

        if self.program.has_advantage:
            components = {n: rewards_per_func[:, i].double().cpu().numpy() for i, n in enumerate(self.reward_func_names)}
            adv_np = np.asarray(self.program.advantages(rewards.double().cpu().numpy(), groups, components=components,
                                                        step=step), dtype=np.float64)
            advantages = torch.as_tensor(np.nan_to_num(adv_np, nan=0.0), dtype=torch.float32, device=device)
            output["advantages"] = advantages[process_slice]
            # TRL logged its own advantages for this batch (completions table); log the ones actually used.
            logged = self._logs["advantages"]
            for _ in range(min(len(logged), advantages.numel())):
                logged.pop()
            logged.extend(advantages.tolist())
        else:
            advantages = gather(output["advantages"])

        adv = advantages.float()
        self._metrics[mode]["advantages/mean"].append(adv.mean().item())
        self._metrics[mode]["advantages/std"].append(adv.std().item() if adv.numel() > 1 else 0.0)
        self._metrics[mode]["advantages/min"].append(adv.min().item())
        self._metrics[mode]["advantages/max"].append(adv.max().item())
        self._metrics[mode]["advantages/abs_mean"].append(adv.abs().mean().item())
        self.last_batch = {
            "rewards_per_func": rewards_per_func.cpu().numpy(), "rewards": rewards.cpu().numpy(),
            "groups": groups, "advantages": adv.cpu().numpy(), "names": np.array(self.reward_func_names),
        }
        return output


def grpo_args(cfg: TrainConfig, run_dir: str) -> GRPOConfig:
    """TRL's ``GRPOConfig`` for a resolved :class:`TrainConfig` (``cfg.trl`` entries are passed through last)."""
    dtype = resolve_dtype(cfg.dtype)
    report_to: Any = cfg.report_to
    if report_to == "auto":
        import importlib.util

        report_to = ["tensorboard"] if importlib.util.find_spec("tensorboard") else []
    kwargs: dict[str, Any] = dict(
        output_dir=run_dir, seed=cfg.seed, data_seed=cfg.seed, max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_generations=cfg.num_generations, learning_rate=cfg.learning_rate, beta=cfg.beta,
        temperature=cfg.temperature, max_completion_length=cfg.max_completion_length,
        logging_steps=cfg.logging_steps, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=report_to, disable_tqdm=True,
        bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, use_cpu=not torch.cuda.is_available(),
        # activation checkpointing only pays off on large models; the tiny CPU model is faster without it
        gradient_checkpointing=cfg.model is not None, disable_dropout=True, log_completions=False,
    )
    kwargs.update(cfg.trl)
    try:
        return GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid GRPO settings: {exc}") from None


@dataclass
class RunResult:
    """Where a run wrote its outputs, and how far it got."""

    run_dir: str
    final_dir: str
    metrics_path: str
    global_step: int
    config: TrainConfig
    trainer: Any = field(default=None, repr=False)


def _run_dir(cfg: TrainConfig, spec_name: str, resume: bool) -> str:
    """The run directory; the same on every process of a distributed run (the main process picks the name)."""
    if cfg.output_dir:
        return cfg.output_dir
    if resume:
        raise ConfigError("--resume needs --output RUN_DIR (the run to continue)")
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    name = [os.path.join("runs", f"{spec_name}-{time.strftime('%Y%m%d-%H%M%S')}")]
    state = PartialState()
    if state.num_processes > 1:
        broadcast_object_list(name, from_process=0)
    return name[0]


def build_trainer(cfg: TrainConfig, prog: "Program", run_dir: str, *, progress: bool | None = None,
                  callbacks: Sequence[Any] = ()) -> SpecGRPOTrainer:
    """Data (checked against the spec), policy and trainer for a resolved configuration."""
    rows, source = load_rows(cfg.dataset)
    columns = check_columns(prog, rows, source)  # before the model is built: a bad dataset fails in seconds
    model, tokenizer = load_policy(cfg)
    dataset, _ = build_dataset(rows, columns, tokenizer, cfg.prompt_format, cfg.max_prompt_length)
    clock = RewardClock()
    timing = StepTimingCallback(clock)
    extra = [JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), timing, *callbacks]
    if cfg.progress if progress is None else progress:
        extra.append(ProgressCallback())
    trainer = SpecGRPOTrainer(model=model, program=prog, args=grpo_args(cfg, run_dir), clock=clock,
                              train_dataset=dataset, processing_class=tokenizer, callbacks=extra,
                              peft_config=lora_config(cfg))
    timing.trainer = trainer
    # disable_tqdm makes transformers print every log dict; the JSONL file and our progress bar replace that
    trainer.remove_callback(PrinterCallback)
    return trainer


def _check_resume(run_dir: str, prog: "Program") -> str:
    from transformers.trainer_utils import get_last_checkpoint

    if not os.path.isdir(run_dir):
        raise ConfigError(f"--resume: run directory {run_dir} does not exist")
    ckpt = get_last_checkpoint(run_dir)
    if ckpt is None:
        raise ConfigError(f"--resume: no checkpoint-* directory in {run_dir} (checkpoints are written every "
                          f"`save_steps` steps)")
    saved_path = os.path.join(run_dir, "config.json")
    if os.path.exists(saved_path):
        with open(saved_path, encoding="utf-8") as fh:
            saved = json.load(fh)
        if saved.get("spec", {}).get("source_hash") not in (None, prog.source_hash):
            raise ConfigError(f"--resume: the spec changed since {run_dir} was started (source hash "
                              f"{saved['spec']['source_hash'][:12]} then, {prog.source_hash[:12]} now); start a new run")
    return ckpt


def train(
    spec: str,
    *,
    config_file: str | None = None,
    sets: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
    resume: bool = False,
    progress: bool | None = None,
    callbacks: Sequence[Any] = (),
) -> RunResult:
    """Train a policy on the rewards of ``spec`` with GRPO; returns where the run went.

    ``sets`` are ``--set`` items (``train.*`` keys configure training, the others are spec parameters, as in
    ``rewardlang.load(params=...)``); ``flags`` are the CLI shorthands (``model``, ``dataset``, ``output_dir``,
    ``max_steps``, ``seed``, ``lora``). Raises :class:`ConfigError`, ``DataError`` or ``SpecError`` on bad input.
    """
    import rewardlang

    # 1. The spec and its parameters (a config file's `params:` first, then --set).
    file_train, file_params = load_config_file(config_file) if config_file else ({}, {})
    sets = dict(sets or {})
    params = {**file_params, **sets}
    prog = rewardlang.load(spec, params=params or None)

    # 2. The configuration: defaults < spec train section < config file < --set < flags.
    cfg, sources = resolve_config(prog.train, file_train, {k: v for k, v in sets.items() if k.startswith("train.")},
                                  {**(flags or {}), "spec": spec}, file_name=config_file)
    run_dir = _run_dir(cfg, prog.name, resume)
    cfg.output_dir = run_dir
    checkpoint = _check_resume(run_dir, prog) if resume else None

    # 3. Data, policy, trainer.
    trainer = build_trainer(cfg, prog, run_dir, progress=progress, callbacks=callbacks)
    if trainer.accelerator.is_main_process:
        save_resolved(os.path.join(run_dir, "config.json"), cfg, sources, spec_name=prog.name,
                      spec_hash=prog.source_hash, params=params,
                      extra={"grpo_args": {k: v for k, v in trainer.args.to_dict().items()
                                           if isinstance(v, (int, float, str, bool, list, type(None)))},
                             "resumed_from": checkpoint})

    # 4. Train, then save the final policy (the adapter only, with LoRA) and its tokenizer.
    trainer.train(resume_from_checkpoint=checkpoint)
    final_dir = os.path.join(run_dir, "final")
    trainer.save_model(final_dir)
    return RunResult(run_dir=run_dir, final_dir=final_dir, metrics_path=os.path.join(run_dir, "metrics.jsonl"),
                     global_step=trainer.state.global_step, config=cfg, trainer=trainer)
