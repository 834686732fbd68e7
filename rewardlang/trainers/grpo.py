"""GRPO with a reward spec, on TRL's ``GRPOTrainer``.

The recipe (:func:`train`) reads top to bottom: compile the spec, resolve the configuration, load and check the
data, build the policy, build the trainer, train, save. The spec supplies one reward function per component
(``prog.as_trl_reward_funcs()``) with the spec's weights; TRL calls them where it always does, in
``GRPOTrainer._calculate_rewards``, on each process's own completions, and logs ``rewards/<component>/mean``.
:class:`SpecRewardSet` makes a completion whose spec total is masked unscorable for TRL (None from every function).

When the spec declares its own advantage pipeline (``advantage over group(prompt) = ...``), it replaces TRL's
group normalisation. :class:`SpecGRPOTrainer` does that by overriding one method of the reward path,
``_generate_and_score_completions``, the way TRL's own variants (GMPO) override one method of the base trainer.
In TRL 1.16 the advantage is computed inline near the end of that method (there is no smaller hook), and leaves it
in ``output["advantages"]``, this process's slice of a vector over the whole generation batch. The override calls
TRL's method unchanged, gathers the spec's per-sample rewards of every process in TRL's order, runs the spec's
pipeline over the whole batch (groups = TRL's prompt groups: ``num_generations`` consecutive completions of one
sampled prompt, possibly spread over processes) and puts this process's slice back. TRL's loss (``_compute_loss``)
takes ``(B,)`` advantages and also ``(B, T)`` per-token ones; the override produces those when a component declares
``spans`` (see :func:`token_advantages`). A second, small override (``_get_train_sampler``) only makes the data
order of a resumed run identical across epochs.

    >>> from rewardlang.trainers.grpo import train                                   # doctest: +SKIP
    >>> result = train("specs/codepo_text.reward", sets={"train.max_steps": 5})       # doctest: +SKIP
    >>> result.run_dir, result.global_step                                           # doctest: +SKIP
    ('runs/codepo_text-20260101-120000', 5)
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch
from accelerate.utils import gather
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from rewardlang.trainers.align import TokenAligner
from rewardlang.trainers.audit import TrainingAudits, audit_columns
from rewardlang.trainers.config import TrainConfig
from rewardlang.trainers.data import DataError, build_dataset, check_columns, load_rows, split_heldout
from rewardlang.trainers.grpo_overlap import RewardOverlap
from rewardlang.trainers.health import StepReward
from rewardlang.trainers.metrics import JsonlMetricsCallback, ProgressCallback, RewardClock, StepTimingCallback
from rewardlang.trainers import report
from rewardlang.trainers.model import lora_config
from rewardlang.trainers.prefix import SharedPromptForward
from rewardlang.trainers.recipe import (Layers, RunResult, args_record, finish_run, last_checkpoint, load_layers,
                                        load_run_policy, missing_after_tying, open_run, record_config, trainer_args,
                                        TiedResume)

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["SpecGRPOTrainer", "SpecRewardSet", "missing_after_tying", "SpecReward", "EpochSeeded", "grpo_args", "build_trainer", "train",
           "RunResult", "token_advantages", "token_char_ends", "last_checkpoint"]


class SpecRewardSet:
    """The spec's TRL reward functions (``prog.as_trl_reward_funcs()``) as one set, evaluated together per batch.

    TRL calls the functions one after the other on the same completions; the first call of a batch evaluates them
    all (the program scores the batch once and serves each component from its cache), times them, and works out
    which completions have a masked total. Such a completion is returned as None by every function, so TRL treats it
    as unscorable: excluded from its group's baseline, advantage 0, not counted as a reward of 0. That is the spec's
    semantics (a masked component of the reward masks the total), which TRL's ``nansum`` of the components alone
    would not give. The unmasked values stay in :attr:`raw` for the ``masked/*`` metrics.

    The total is the ``reward`` function when the program supplies one (a reward that is not a weighted sum, or
    scheduled weights), else the weighted sum of the components, masked when any component is. When a component
    declares ``spans``, the local batch is also scored with ``prog.score`` to get the spans (its caches make
    that second pass cheap).
    """

    def __init__(self, program: "Program", clock: RewardClock) -> None:
        self.program = program
        self.clock = clock
        # unmasked values (for the masked/* metrics) and no warning: this set applies the masking itself, and
        # SpecGRPOTrainer the advantage and spans
        funcs, weights = program.as_trl_reward_funcs(mask_total=False, warn=False)
        self.funcs = list(funcs)
        self.names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
        self.weights = [float(w) for w in weights]
        components = {c.name for c in program.components}
        self.total_name = next((n for n in self.names if n not in components), None)
        #: components whose `spans` clause adds to token advantages (the spans that `tokens over(...)`/`split(...)`
        #: make are placements for per-token rewards, not advantage credit)
        self.span_components = [c.name for c in program.components
                                if c.has_spans and (c.tokens or {}).get("mode") not in ("over", "split")]
        self.need_spans = bool(self.span_components)
        self.functions = [SpecReward(self, i) for i in range(len(funcs))]
        self.raw: dict[str, list[float | None]] = {}
        self.total: list[float] = []
        self.result: Any = None  # the local batch's ScoreResult, when spans are needed
        self.kwargs: dict[str, Any] = {}  # what TRL passed for the batch (the audits read its columns)
        self._batch: Any = None
        self._pending: Future | None = None  # a batch being scored ahead, in the scoring thread
        self._pending_kwargs: dict[str, Any] = {}

    def start_batch(self) -> None:
        """Forget the previous batch (called before each generation batch)."""
        self._batch, self.raw, self.total, self.result = None, {}, [], None
        self._pending, self._pending_kwargs = None, {}

    def prefetch(self, kwargs: dict[str, Any]) -> None:
        """Start scoring a batch in the scoring thread, with the arguments TRL will call the functions with.

        The first function TRL calls for that batch waits for it (:meth:`values`); the seconds it did not have to
        wait are counted in ``clock.hidden``. A call whose arguments differ from these is scored anew, so the
        values never depend on whether the batch was scored ahead."""
        self._pending = _SCORER.submit(self._evaluate_timed, kwargs)
        self._pending_kwargs = kwargs

    def _evaluate_timed(self, kwargs: dict[str, Any]) -> float:
        t0 = time.perf_counter()
        self._evaluate(kwargs)
        return time.perf_counter() - t0

    def _collect(self, kwargs: dict[str, Any]) -> None:
        """Wait for the batch scored ahead; keep it when it was scored with these arguments."""
        pending, ahead = self._pending, self._pending_kwargs
        self._pending, self._pending_kwargs = None, {}
        t0 = time.perf_counter()
        seconds = pending.result()  # an error of the scoring is raised here, as without the thread
        waited = time.perf_counter() - t0
        if _same_call(ahead, kwargs):
            self._batch = kwargs["completions"]
            self.clock.hidden += max(seconds - waited, 0.0)
        else:
            self._batch = None

    def _evaluate(self, kwargs: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        self.raw = {name: list(f(**kwargs)) for name, f in zip(self.names, self.funcs, strict=True)}
        n = len(kwargs["completions"])
        if self.total_name is not None:
            self.total = [math.nan if v is None else float(v) for v in self.raw[self.total_name]]
        else:
            cols = [[math.nan if v is None else float(v) for v in self.raw[name]] for name in self.names]
            # the weighted sum is NaN when any component is: the spec masks the total then
            self.total = [sum(w * c[i] for w, c in zip(self.weights, cols, strict=True)) for i in range(n)]
        if self.need_spans:
            self.result = self.program.score(**self._score_columns(kwargs))
        self.clock.seconds += time.perf_counter() - t0
        self._batch = kwargs["completions"]
        self.kwargs = kwargs

    def _score_columns(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        state = kwargs.get("trainer_state")
        given: dict[str, Any] = {"completion": list(kwargs["completions"]),
                                 "step": int(getattr(state, "global_step", 0) or 0)}
        for inp in self.program.inputs:
            if inp.name == "prompt" and kwargs.get("prompts") is not None:
                given["prompt"] = list(kwargs["prompts"])
            elif inp.used and inp.name != "completion":
                for key in (inp.column, inp.name):
                    if key in kwargs:
                        given[inp.name] = list(kwargs[key])
                        break
        return given

    def values(self, index: int, kwargs: dict[str, Any]) -> list[float | None]:
        """Function ``index``'s values for this batch, None where the total is masked."""
        if self._pending is not None:
            self._collect(kwargs)
        if self._batch is not kwargs["completions"]:
            self._evaluate(kwargs)
            self._batch = kwargs["completions"]
        return [None if t != t else v for v, t in zip(self.raw[self.names[index]], self.total, strict=True)]


#: scores a generation batch while the step's forward passes run (one batch at a time: a step waits for its own)
_SCORER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rewardlang-grpo-reward")


def _same_call(ahead: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether TRL calls the reward functions with what the batch was scored ahead with: the same completions
    object (the program's cache is keyed by it) and equal other arguments.

    >>> c = ["a"]
    >>> _same_call({"completions": c, "tests": ["t"]}, {"completions": c, "tests": ["t"]})
    True
    >>> _same_call({"completions": c, "tests": ["t"]}, {"completions": ["a"], "tests": ["t"]})
    False
    """
    if ahead.keys() != kwargs.keys() or ahead.get("completions") is not kwargs.get("completions"):
        return False
    try:
        return all(v is kwargs[k] or bool(v == kwargs[k]) for k, v in ahead.items())
    except (TypeError, ValueError):  # values without a plain equality (arrays): scored anew
        return False


class SpecReward:
    """One function of a :class:`SpecRewardSet`, as TRL calls it (picklable; ``__name__`` names its metrics)."""

    def __init__(self, owner: SpecRewardSet, index: int) -> None:
        self.owner = owner
        self.index = index
        self.__name__ = owner.names[index]

    def __call__(self, **kwargs: Any) -> list[float | None]:
        return self.owner.values(self.index, kwargs)


def token_char_ends(tokenizer: Any, ids: Sequence[int]) -> list[int]:
    """For each completion token, the length of the decoded completion text up to and including it.

    The text is the one TRL decodes and the reward sees (``skip_special_tokens=True``); computed in O(T) by
    :class:`~rewardlang.trainers.align.TokenAligner` (the trainer keeps one aligner and counts its fallbacks).

    >>> from rewardlang.trainers.model import build_tokenizer
    >>> tok = build_tokenizer(300)
    >>> ids = tok("ab cd")["input_ids"]
    >>> token_char_ends(tok, ids)[-1]
    5
    """
    return TokenAligner(tokenizer).char_ends(ids)


def token_advantages(seq_adv: float, spans: Sequence[Any], ends: Sequence[int], length: int) -> list[float]:
    """Per-token advantages of one completion: the sequence advantage plus, on every token that overlaps a span,
    that span's value (spans are ``(start, end, value, label)`` in completion characters; overlapping spans add).

    Tokens past the completion (padding up to ``length``) get 0; the loss masks them anyway.

    >>> token_advantages(0.5, [(2, 4, -1.0, "lint")], ends=[2, 4, 6], length=4)
    [0.5, -0.5, 0.5, 0.0]
    """
    per_token = TokenAligner.spans_to_tokens(spans, ends)
    return [seq_adv + float(v) for v in per_token] + [0.0] * (length - len(ends))


class EpochSeeded(torch.utils.data.Sampler):
    """TRL's ``RepeatSampler`` with an order that depends on ``(seed, epoch)`` only.

    ``RepeatSampler`` draws each epoch's permutation from one generator seeded once, so a resumed run (a new
    sampler) would replay epoch 0's order in a later epoch. transformers calls ``set_epoch`` at the start of every
    epoch, resumed ones included; reseeding there makes the data order of a resumed run the uninterrupted one's.
    """

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def set_epoch(self, epoch: int) -> None:
        if getattr(self.sampler, "shuffle", False) and getattr(self.sampler, "seed", None) is not None:
            self.sampler.generator.manual_seed(self.sampler.seed + epoch)

    def __iter__(self) -> Any:
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


class _MaskedRowNotice(logging.Filter):
    """Drops TRL's "All reward functions returned None for the following kwargs: {prompt, completion...}" warning
    while :class:`SpecGRPOTrainer` scores a batch: the spec masks such completions on purpose, and they are counted
    in the ``masked/count`` and ``masked/rate`` metrics instead of printing a whole completion at every step.
    Other trainers in the process still get TRL's warning."""

    active = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and "All reward functions returned None" in str(record.msg))  # "[RANK 0] All..."


_MASKED_NOTICE = _MaskedRowNotice()
logging.getLogger("trl.trainer.grpo_trainer").addFilter(_MASKED_NOTICE)




class SpecGRPOTrainer(RewardOverlap, SharedPromptForward, TiedResume, GRPOTrainer):
    """``GRPOTrainer`` whose rewards (and, if the spec has one, advantage pipeline) come from a compiled spec.

    Overrides one TRL method for the reward path, ``_generate_and_score_completions`` (see the module docstring),
    and ``_get_train_sampler`` so that a resumed run sees the same data order (see :class:`EpochSeeded`). Extra
    metrics, per logging step: ``masked/<component>`` (share of completions where that component is masked: an
    error without ``on_error``, ``none``, or an infrastructure failure), ``masked/rate`` (share whose total is
    masked: they get no advantage and are not scored as 0), ``masked/count``,
    ``advantages/{mean,std,min,max,abs_mean}``, and with spans ``spans/token_share`` (share of completion tokens
    whose advantage a span changed); with :class:`StepTimingCallback`, ``time/step``, ``time/reward``,
    ``time/reward_wait``, ``time/reward_share``, ``time/reward_hidden``, ``time/reward_hidden_share``,
    ``tokens_per_second``.

    The reward of a generation batch is scored in a thread while the step's forward passes run, the update's own
    included (:class:`rewardlang.trainers.grpo_overlap.RewardOverlap`; ``overlap_reward=False`` scores it where
    TRL calls the functions): the same rewards, advantages and losses either way.

    The tokens a group's rows share (its prompt) are computed once, in generation and in the update's forward pass
    (:class:`rewardlang.trainers.prefix.SharedPromptForward`; ``share_prompt=False`` computes them per row): the
    same losses and gradients to float rounding.

    ``last_batch`` keeps the last generation batch's global ``rewards_per_func`` (unmasked, as the spec's functions
    returned them), ``total``, ``groups`` and ``advantages`` (NumPy), and the names, for inspection.
    """

    def __init__(self, model: Any, program: "Program", args: GRPOConfig, clock: RewardClock | None = None,
                 audits: TrainingAudits | None = None, overlap_reward: bool | None = None,
                 share_prompt: bool | None = None, **kwargs: Any) -> None:
        self.program = program
        if share_prompt is not None:
            self.share_prompt = share_prompt
        self._overlap_init(overlap_reward)
        #: the spec's audits on each step's own samples (trainers/audit.py); never part of the reward
        self.audits = audits if audits is not None else (
            TrainingAudits(program, args.output_dir, args.max_steps) if program.audits else None)
        self.clock = clock or RewardClock()
        self.spec_rewards = SpecRewardSet(program, self.clock)
        #: the step's reward metrics (slowest program, timeouts, component times, zero-variance groups): health.py
        self.step_reward = StepReward(program)
        args.reward_weights = self.spec_rewards.weights
        self.last_batch: dict[str, np.ndarray] = {}
        super().__init__(model=model, reward_funcs=self.spec_rewards.functions, args=args, **kwargs)
        # O(T) token ends of completions, for spans (a multimodal processor carries its tokenizer)
        self._aligner = TokenAligner(getattr(self.processing_class, "tokenizer", self.processing_class))

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        # Not part of the reward path: makes --resume replay the same data order across epochs (see EpochSeeded).
        return EpochSeeded(super()._get_train_sampler(dataset))

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.model.training else "eval"
        rewards = self.spec_rewards
        rewards.start_batch()

        _MASKED_NOTICE.active += 1  # masked completions are counted (masked/count), not printed
        self._ahead_inputs = inputs  # scored in a thread as soon as the completions exist (RewardOverlap)
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            _MASKED_NOTICE.active -= 1
            self._ahead_inputs = self._ahead_ids = None

        # Every process's completions, in the order TRL gathered them for its own normalisation.
        device = self.accelerator.device
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        raw = [[math.nan if v is None else float(v) for v in rewards.raw[n]] for n in rewards.names]
        local = torch.tensor([*raw, rewards.total], dtype=torch.float64).T.contiguous()
        gathered = gather(local.to(device)).cpu().numpy()
        rewards_per_func, total = gathered[:, :-1], gathered[:, -1]
        groups = np.arange(len(total)) // num_generations
        n_local = local.shape[0]
        process_slice = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)

        for i, name in enumerate(rewards.names):
            if name != rewards.total_name:
                self._metrics[mode][f"masked/{name}"].append(float(np.isnan(rewards_per_func[:, i]).mean()))
        self._metrics[mode]["masked/rate"].append(float(np.isnan(total).mean()))
        self._metrics[mode]["masked/count"].append(float(np.isnan(total).sum()))
        if mode == "train":
            self.step_reward.observe({n: rewards_per_func[:, i] for i, n in enumerate(rewards.names)
                                      if n != rewards.total_name}, total, groups)

        if self.program.has_advantage:
            components = {n: rewards_per_func[:, i] for i, n in enumerate(rewards.names) if n != rewards.total_name}
            spec_adv = self.program.advantages(total, groups, components=components, step=self.state.global_step)
            advantages = np.nan_to_num(np.asarray(spec_adv, dtype=np.float64), nan=0.0)  # masked: no advantage
            local_adv = torch.as_tensor(advantages[process_slice], dtype=torch.float32, device=device)
            # TRL logged its own advantages for this batch (completions table): log the ones used instead.
            logged = self._logs["advantages"]
            for _ in range(min(len(logged), len(advantages))):
                logged.pop()
            logged.extend(advantages.tolist())
        else:
            local_adv = output["advantages"]
            advantages = gather(local_adv).double().cpu().numpy()

        if rewards.need_spans:
            local_adv = self._token_advantages(local_adv, output["completion_ids"], output["completion_mask"], mode)
        output["advantages"] = local_adv

        self._metrics[mode]["advantages/mean"].append(float(advantages.mean()))
        self._metrics[mode]["advantages/std"].append(float(advantages.std(ddof=1)) if len(advantages) > 1 else 0.0)
        self._metrics[mode]["advantages/min"].append(float(advantages.min()))
        self._metrics[mode]["advantages/max"].append(float(advantages.max()))
        self._metrics[mode]["advantages/abs_mean"].append(float(np.abs(advantages).mean()))
        self.last_batch = {"rewards_per_func": rewards_per_func, "total": total, "groups": groups,
                           "advantages": advantages, "names": np.array(rewards.names)}
        if self.audits is not None and mode == "train":
            self._audit(rewards, raw, n_local)
        return output

    def _audit(self, rewards: SpecRewardSet, raw: list[list[float]], n: int) -> None:
        """The spec's audits on this generation batch's own completions (logged with the step's record)."""
        from rewardlang.runtime.program import chat_to_text

        kw = rewards.kwargs
        texts = [str(chat_to_text(c, "assistant")) for c in kw["completions"]]
        columns = {k: list(v) for k, v in kw.items()
                   if k not in ("completions", "prompts", "completion_ids") and isinstance(v, list) and len(v) == n}
        components = {name: np.asarray(raw[i], dtype=np.float64) for i, name in enumerate(rewards.names)
                      if name != rewards.total_name}
        device = self.accelerator.device
        self.audits.main = self.accelerator.is_main_process
        self.audits.gather = lambda a: gather(torch.as_tensor(a, dtype=torch.float64, device=device)).cpu().numpy()
        metrics = self.audits.observe(self.state.global_step + 1, texts, columns,
                                      np.asarray(rewards.total, dtype=np.float64), components,
                                      prompts=kw.get("prompts"))
        for k, v in metrics.items():
            self._metrics["train"][k].append(v)

    def _token_advantages(self, seq_adv: torch.Tensor, completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                          mode: str) -> torch.Tensor:
        """(B, T) advantages: each completion's advantage plus the values of the spans over each token."""
        result = self.spec_rewards.result
        span_names = self.spec_rewards.span_components
        rows, covered, counted = [], 0, 0
        for i in range(completion_ids.shape[0]):
            ids = completion_ids[i][completion_mask[i].bool()].tolist()
            if self.spec_rewards.total[i] != self.spec_rewards.total[i]:  # masked total: no signal at all
                rows.append([0.0] * completion_ids.shape[1])
                continue
            spans = [sp for name in span_names for sp in result.spans.get(name, [[]] * (i + 1))[i]]
            ends = self._aligner.char_ends(ids)
            row = token_advantages(float(seq_adv[i]), spans, ends, completion_ids.shape[1])
            covered += sum(1 for t in range(len(ends)) if row[t] != float(seq_adv[i]))
            counted += len(ends)
            rows.append(row)
        self._metrics[mode]["spans/token_share"].append(covered / max(counted, 1))
        self._metrics[mode]["align/fallbacks"].append(float(self._aligner.fallbacks))
        return torch.tensor(rows, dtype=torch.float32, device=seq_adv.device)


def grpo_args(cfg: TrainConfig, run_dir: str) -> GRPOConfig:
    """TRL's ``GRPOConfig`` for a resolved :class:`TrainConfig` (``cfg.trl`` entries are passed through last)."""
    return trainer_args(GRPOConfig, cfg, run_dir, batch_size=cfg.batch_size, what="GRPO",
                        num_generations=cfg.num_generations, beta=cfg.beta, temperature=cfg.temperature,
                        max_completion_length=cfg.max_completion_length, top_p=cfg.top_p, disable_dropout=True,
                        log_completions=False)


def build_trainer(cfg: TrainConfig, prog: "Program", run_dir: str, *, progress: bool | None = None,
                  callbacks: Sequence[Any] = ()) -> SpecGRPOTrainer:
    """Data (checked against the spec), policy and trainer for a resolved configuration."""
    rows, source = load_rows(cfg.dataset)
    rows, _ = split_heldout(rows, cfg.eval)  # train.eval's held-out problems are never trained on (report.py)
    columns = check_columns(prog, rows, source)  # before the model is built: a bad dataset fails in seconds
    more, reference = audit_columns(prog, rows, source, cfg)  # what the spec's audits read (trainers/audit.py)
    columns += [c for c in more if c not in columns]
    model, tokenizer = load_run_policy(cfg, run_dir)
    dataset, summary = build_dataset(rows, columns, tokenizer, cfg.prompt_format, cfg.max_prompt_length,
                                     cfg.system_prompt, cfg.prompt_template, cfg.train_problems, cfg.seed,
                                     cfg.few_shot)
    args = grpo_args(cfg, run_dir)
    per_step = args.generation_batch_size // cfg.num_generations
    if len(dataset) < per_step:  # TRL's sampler drops a partial batch: the run would end at step 0, "successfully"
        dropped = f" ({summary['dropped_long_prompts']} left out by max_prompt_length)" \
            if summary["dropped_long_prompts"] else ""
        raise DataError(f"{source}: {len(dataset)} prompts{dropped}, but each step needs {per_step} "
                        f"(batch_size x processes x gradient_accumulation_steps / num_generations); add prompts or "
                        f"lower `prompts_per_step`/`batch_size`")
    report.save_train_problems(run_dir, summary)
    clock = RewardClock()
    timing = StepTimingCallback(clock)
    extra = [JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), timing, *callbacks]
    if cfg.progress if progress is None else progress:
        extra.append(ProgressCallback())
    audits = TrainingAudits(prog, run_dir, cfg.max_steps, probes=cfg.audit_probes, reference_column=reference) \
        if prog.audits else None
    trainer = SpecGRPOTrainer(model=model, program=prog, args=args, clock=clock, audits=audits,
                              train_dataset=dataset, processing_class=tokenizer, callbacks=extra,
                              peft_config=lora_config(cfg))
    timing.trainer = trainer
    # disable_tqdm makes transformers print every log dict; the JSONL file and our progress bar replace that
    trainer.remove_callback(PrinterCallback)
    return trainer


def train(
    spec: str,
    *,
    config_file: str | None = None,
    sets: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
    resume: bool = False,
    progress: bool | None = None,
    callbacks: Sequence[Any] = (),
    layers: Layers | None = None,
) -> RunResult:
    """Train a policy on the rewards of ``spec`` with GRPO; returns where the run went.

    ``sets`` are ``--set`` items (``train.*`` keys configure training, the others are spec parameters, as in
    ``rewardlang.load(params=...)``); ``flags`` are the CLI shorthands (``model``, ``dataset``, ``output_dir``,
    ``max_steps``, ``seed``, ``lora``). Raises :class:`ConfigError`, ``DataError`` or ``SpecError`` on bad input.
    """

    # 1-2. The spec with its parameters, and the configuration: defaults < spec train section < config file <
    # --set < flags (run.load_layers); the run directory, checked for a resume (run.open_run).
    prog, cfg, sources, params = layers or load_layers(spec, config_file, sets, flags)
    run_dir, checkpoint = open_run(prog, cfg, resume)

    # 3. Data, policy, trainer (and train.eval's held-out problems, checked before any model is loaded).
    heldout = report.heldout_rows(cfg)
    trainer = build_trainer(cfg, prog, run_dir, progress=progress, callbacks=callbacks)
    record_config(trainer, run_dir, checkpoint, prog, cfg, sources, params, {"grpo_args": args_record(trainer.args)})

    # 4. Held-out pass@1 before, train, save the final policy (the adapter only, with LoRA), pass@1 after, README.
    return finish_run(trainer, trainer.processing_class, cfg, run_dir, checkpoint, heldout, program=prog, progress=progress)
