"""PPO with a reward spec's per-token rewards, on accelerate (DDP, DeepSpeed ZeRO-2/3, or one CPU process).

Read top to bottom, like a cleanrl file:

1. **Models.** :class:`PolicyAndValue` holds the policy (a causal LM, LoRA optional) and the critic (a
   token-classification model with one label and no dropout, full or LoRA) in one ``nn.Module``, prepared once by
   accelerate (DeepSpeed refuses two models in one ``prepare``). The reference policy is the policy with its adapter
   disabled under LoRA, else a frozen copy; it is not built at all when ``beta = 0``. With
   ``advantage_estimator = "reinforce_pp"`` there is no critic.
2. **Rollout** (:meth:`PPOTrainer.rollout`): sample ``num_generations`` completions for each of ``prompts_per_step``
   prompts (per process), stopping at EOS (``stop_at_eos``); the old log-probs and values (recomputed by a forward
   pass, or ``old_logprobs = "processed_scores"``: generate's scores after temperature/top-p, the seed's quirk); the
   reference log-probs; the spec's ``(B, T)`` reward from :class:`~rewardlang.trainers.dense.DenseRewards` (a spec
   with no attribution gives its sequence reward at the last token); the optional missing-EOS penalty; the per-token
   KL (k1/k2/k3), subtracted from the reward (``kl_in = "reward"``) or added to the loss; GAE or REINFORCE++
   returns; advantage whitening over this process's batch or every process's. A row whose spec reward is masked (an
   infrastructure failure) is never trained on: it is left out of the loss and the whitening, and counted.
3. **Update** (:meth:`PPOTrainer.update`): ``ppo_epochs`` × ``num_mini_batches`` optimizer steps, each accumulated
   over ``gradient_accumulation_steps`` micro-batches, of the clipped policy loss (ε low/high) plus ``vf_coef`` × the
   clipped value loss, gradients clipped to ``max_grad_norm``; a linear or cosine schedule with warm-up.
4. **Bookkeeping** (:func:`train`): the spec's ``train { }`` settings layered with ``--config``/``--set``, the run
   directory, ``config.json``, ``metrics.jsonl`` and the progress bar (the GRPO trainer's callbacks), checkpoints
   (``accelerator.save_state``: both models, optimizer, scheduler, every process's RNG; plus the data position and
   the policy and critic in Hugging Face format) and exact resume.

The algorithm functions (KL estimators, GAE, whitening, losses) are in :mod:`rewardlang.trainers.algos`.

    >>> from rewardlang.trainers.ppo import train                                          # doctest: +SKIP
    >>> result = train("specs/dense_ppo.reward", sets={"train.max_steps": 2})               # doctest: +SKIP
    >>> result.global_step                                                                  # doctest: +SKIP
    2
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from transformers import GenerationConfig, TrainerControl, TrainerState, get_scheduler

from rewardlang.runtime.audits import zero_variance_share
from rewardlang.trainers import algos, report
from rewardlang.trainers.config import ConfigError, TrainConfig
from rewardlang.trainers.audit import TrainingAudits, audit_columns
from rewardlang.trainers.data import build_dataset, check_columns, load_rows, split_heldout
from rewardlang.trainers.health import StepReward
from rewardlang.trainers.metrics import JsonlMetricsCallback, ProgressCallback
from rewardlang.trainers.model import lora_config, resolve_dtype
from rewardlang.trainers.recipe import Layers, RunResult, finish_run, load_layers, load_run_policy, open_run, record_config

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["PolicyAndValue", "build_critic", "PPOTrainer", "completion_mask", "token_logprobs", "train"]

#: scores a rollout while its forward passes run (one at a time: a rollout waits for its own reward)
_SCORER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rewardlang-reward")


# ----------------------------------------------------------------------------------------------------- 1. models
class PolicyAndValue(nn.Module):
    """The policy and the critic as one module (one ``accelerator.prepare``, one optimizer).

    ``forward`` returns the policy's logits and the critic's values (``None`` without a critic, or when
    ``with_values=False``), both over the whole sequence.
    """

    def __init__(self, policy: nn.Module, critic: nn.Module | None) -> None:
        super().__init__()
        self.policy = policy
        self.critic = critic

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                with_values: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        # positions from the mask, as generate() computes them for left-padded prompts
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        logits = self.policy(**kwargs).logits
        values = self.critic(**kwargs).logits[..., 0] if with_values and self.critic is not None else None
        return logits, values

    # trl's unwrap_model_for_generation switches activation checkpointing off around generation
    @property
    def is_gradient_checkpointing(self) -> bool:
        name = "is_activation_checkpointing" if hasattr(self.policy, "is_activation_checkpointing") \
            else "is_gradient_checkpointing"
        return bool(getattr(self.policy, name, False))

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
        for m in (self.policy, self.critic):
            if m is not None:
                m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self) -> None:
        for m in (self.policy, self.critic):
            if m is not None:
                m.gradient_checkpointing_disable()


def build_critic(policy: nn.Module, cfg: TrainConfig) -> nn.Module:
    """A token-classification model with one label and dropout 0, its backbone a copy of the policy's; the
    value head starts at 0 (every initial value is 0). LoRA (``critic = "lora"``, or ``auto`` with a LoRA policy)
    trains an adapter and the head (PEFT saves ``score`` with a TOKEN_CLS adapter)."""
    from transformers import AutoModelForTokenClassification

    config = copy.deepcopy(policy.config)
    config.num_labels, config.classifier_dropout = 1, 0.0
    config.problem_type = "regression"
    critic = AutoModelForTokenClassification.from_config(config)
    backbone = getattr(policy, policy.base_model_prefix)
    getattr(critic, critic.base_model_prefix).load_state_dict(backbone.state_dict())
    nn.init.zeros_(critic.score.weight)
    if critic.score.bias is not None:
        nn.init.zeros_(critic.score.bias)
    critic.to(next(policy.parameters()).dtype)
    if cfg.critic == "lora" or (cfg.critic == "auto" and cfg.lora):
        from peft import LoraConfig, get_peft_model

        critic = get_peft_model(critic, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                   target_modules=cfg.lora_target_modules, task_type="TOKEN_CLS",
                                                   bias="none", exclude_modules=["score"]))  # score: trained whole
    return critic


# ----------------------------------------------------------------------------------------------- 2. helpers
def token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities of ``ids`` under ``softmax(logits / temperature)``: ``(B, T, V), (B, T) -> (B, T)``.

    >>> token_logprobs(torch.zeros(1, 2, 4), torch.tensor([[0, 3]])).exp().tolist()
    [[0.25, 0.25]]
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def completion_mask(ids: torch.Tensor, eos_token_id: int | None, stop_at_eos: bool = True) -> torch.Tensor:
    """``(B, T)`` 1 for the tokens that belong to each completion: up to and including the first EOS; every token
    when ``stop_at_eos`` is false (generation did not stop, so everything generated is the completion).

    >>> completion_mask(torch.tensor([[5, 2, 2, 2], [5, 6, 7, 8]]), eos_token_id=2).tolist()
    [[1, 1, 0, 0], [1, 1, 1, 1]]
    """
    if not stop_at_eos or eos_token_id is None:
        return torch.ones_like(ids)
    is_eos = ids == eos_token_id
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full_like(ids[:, 0], ids.shape[1]))
    return (torch.arange(ids.shape[1], device=ids.device)[None, :] <= first[:, None]).long()


class _DataOrder:
    """Prompts in an order that depends on ``(seed, epoch)`` only: position ``p`` of the run is prompt
    ``perm(seed + p // n)[p % n]``, so a resumed run continues exactly where the checkpoint was."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed
        self._cache: dict[int, list[int]] = {}

    def index(self, position: int) -> int:
        epoch, offset = divmod(position, self.n)
        if epoch not in self._cache:
            self._cache = {epoch: torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + epoch))
                           .tolist()}
        return self._cache[epoch][offset]


# ------------------------------------------------------------------------------------------------ the trainer
class PPOTrainer:
    """One PPO run: :meth:`train` alternates :meth:`rollout` and :meth:`update` for ``cfg.max_steps`` updates.

    ``last_rollout`` keeps the last update's local rollout (ids, mask, rewards, advantages ...) for inspection.
    """

    def __init__(self, cfg: TrainConfig, program: Program, run_dir: str, *, progress: bool | None = None,
                 callbacks: Sequence[Any] = ()) -> None:
        from rewardlang.trainers.dense import DenseRewards

        self.cfg, self.program, self.run_dir = cfg, program, run_dir
        dtype = resolve_dtype(cfg.dtype)
        self.accelerator = Accelerator(gradient_accumulation_steps=cfg.gradient_accumulation_steps,
                                       cpu=not torch.cuda.is_available(),
                                       mixed_precision="bf16" if dtype == torch.bfloat16 else None)
        acc = self.accelerator
        set_seed(cfg.seed)
        if cfg.batch_size % cfg.num_generations:
            raise ConfigError(f"`batch_size` ({cfg.batch_size}) must be a multiple of `num_generations` "
                              f"({cfg.num_generations}) for PPO: each process samples whole prompt groups")
        self.prompts_per_process = cfg.batch_size // cfg.num_generations
        micro = cfg.batch_size // (cfg.num_mini_batches * cfg.gradient_accumulation_steps)
        if micro < 1 or cfg.batch_size % (cfg.num_mini_batches * cfg.gradient_accumulation_steps):
            raise ConfigError(f"`batch_size` ({cfg.batch_size}) must split into `num_mini_batches` "
                              f"({cfg.num_mini_batches}) x `gradient_accumulation_steps` "
                              f"({cfg.gradient_accumulation_steps}) equal micro-batches")
        self.micro_batch = micro

        # Data (checked against the spec before any model is built: a bad dataset fails in seconds).
        rows, source = load_rows(cfg.dataset)
        rows, _ = split_heldout(rows, cfg.eval)  # train.eval's held-out problems are never trained on
        columns = check_columns(program, rows, source)
        more, reference = audit_columns(program, rows, source, cfg)  # what the spec's audits read (audit.py)
        columns += [c for c in more if c not in columns]
        policy, self.tokenizer = load_run_policy(cfg, run_dir)
        self.dataset, summary = build_dataset(rows, columns, self.tokenizer, cfg.prompt_format, cfg.max_prompt_length,
                                              cfg.system_prompt, cfg.prompt_template, cfg.train_problems, cfg.seed,
                                              cfg.few_shot)
        self.chat = summary["format"] == "chat"
        report.save_train_problems(run_dir, summary)
        self.columns = [c for c in columns if c != "prompt"]
        self.order = _DataOrder(len(self.dataset), cfg.seed)

        # Models: critic from the initial policy, then LoRA on the policy; the reference only when beta > 0.
        critic = build_critic(policy, cfg) if cfg.advantage_estimator == "gae" else None
        self.ref_policy: nn.Module | None = None
        if cfg.lora:
            from peft import get_peft_model

            policy = get_peft_model(policy, lora_config(cfg))
        elif cfg.beta > 0:
            self.ref_policy = copy.deepcopy(policy).eval().requires_grad_(False)
        policy.config.use_cache = False  # training forward passes; generate() turns the cache on itself
        model = PolicyAndValue(policy, critic)
        if cfg.model is not None:  # activation checkpointing pays off on real models only (as in grpo_args)
            model.gradient_checkpointing_enable({"use_reentrant": False})
        model.train()
        for module in model.modules():  # no dropout anywhere: the old and new log-probs must be comparable
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                           lr=cfg.learning_rate, weight_decay=0.0)
        total = cfg.max_steps * cfg.ppo_epochs * cfg.num_mini_batches
        self.scheduler = get_scheduler(cfg.lr_scheduler, self.optimizer,
                                       num_warmup_steps=math.ceil(cfg.warmup_ratio * total), num_training_steps=total)
        if acc.state.deepspeed_plugin is not None:  # no dataloader is prepared: DeepSpeed needs the sizes from us
            ds = acc.state.deepspeed_plugin.deepspeed_config
            ds["train_micro_batch_size_per_gpu"] = micro
            ds["gradient_accumulation_steps"] = cfg.gradient_accumulation_steps
            ds["gradient_clipping"] = cfg.max_grad_norm
        self.model, self.optimizer = acc.prepare(model, self.optimizer)
        acc.register_for_checkpointing(self.scheduler)  # stepped by us once per optimizer step, not prepared
        if self.ref_policy is not None:
            if acc.state.deepspeed_plugin is not None:
                from trl.models.utils import prepare_deepspeed

                self.ref_policy = prepare_deepspeed(self.ref_policy, acc)
            else:
                self.ref_policy = self.ref_policy.to(acc.device)
        set_seed(cfg.seed + acc.process_index)  # each process samples its own completions

        self.rewards = DenseRewards(program, self.tokenizer)
        #: the spec's audits on each update's own samples (trainers/audit.py); never part of the reward
        self.audits = TrainingAudits(program, run_dir, cfg.max_steps, probes=cfg.audit_probes,
                                     reference_column=reference, main=acc.is_main_process,
                                     gather=lambda a: acc.gather(torch.as_tensor(a, dtype=torch.float64,
                                                                                 device=acc.device)).cpu().numpy()
                                     ) if program.audits else None
        self._audit_metrics: dict[str, float] = {}
        #: the step's reward metrics (slowest program, timeouts, component times, zero-variance groups): health.py
        self.step_reward = StepReward(program)
        self.eos = self.tokenizer.eos_token_id
        self.global_step = 0
        #: batches put aside because every group tied (``resample_tied``): the data order reads past them
        self.resampled = 0
        self.last_rollout: dict[str, Any] = {}
        self.state = TrainerState(max_steps=cfg.max_steps, logging_steps=cfg.logging_steps, save_steps=cfg.save_steps)
        self.state.is_world_process_zero = acc.is_main_process
        self.state.is_local_process_zero = acc.is_local_main_process
        self.control = TrainerControl()
        self.args = SimpleNamespace(output_dir=run_dir, max_steps=cfg.max_steps, logging_steps=cfg.logging_steps,
                                    save_steps=cfg.save_steps, seed=cfg.seed)
        self.callbacks = [JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), *callbacks]
        if cfg.progress if progress is None else progress:
            self.callbacks.append(ProgressCallback())

    # ------------------------------------------------------------------------------------------- 2. rollout
    def _prompts(self) -> tuple[list[Any], dict[str, list[Any]]]:
        """This process's prompts of the current update, each repeated ``num_generations`` times, and their
        other columns."""
        acc, k = self.accelerator, self.prompts_per_process
        # each update reads the next prompts; a batch sampled again (``resample_tied``) reads the ones after it
        start = (self.global_step + self.resampled) * k * acc.num_processes + acc.process_index * k
        rows = [self.dataset[self.order.index(start + i)] for i in range(k)]
        rows = [r for r in rows for _ in range(self.cfg.num_generations)]
        return [r["prompt"] for r in rows], {c: [r[c] for r in rows] for c in self.columns}

    def _encode(self, prompts: list[Any]) -> dict[str, torch.Tensor]:
        tok = self.tokenizer
        texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts] \
            if self.chat else list(prompts)
        enc = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        return {k: v.to(self.accelerator.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}

    @contextmanager
    def _generation_policy(self) -> Iterator[nn.Module]:
        """The policy to sample from: unwrapped (ZeRO-3 parameters gathered) and with EOS switched off when
        ``stop_at_eos`` is false (transformers would otherwise fill a None eos_token_id from the model's own)."""
        from trl.models.utils import unwrap_model_for_generation

        with unwrap_model_for_generation(self.model, self.accelerator, gather_deepspeed3_params=True) as unwrapped:
            policy = unwrapped.policy
            gen_config = policy.generation_config
            saved = gen_config.eos_token_id
            if not self.cfg.stop_at_eos:
                gen_config.eos_token_id = None
            try:
                yield policy
            finally:
                gen_config.eos_token_id = saved

    def _forward(self, seq: torch.Tensor, attn: torch.Tensor, prompt_len: int, *, ref: bool = False,
                 with_values: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Log-probs, values and logits of the completion tokens ``seq[:, prompt_len:]`` (the predictions made at
        positions ``prompt_len - 1 .. -2``)."""
        if ref and self.ref_policy is not None:
            position_ids = (attn.long().cumsum(-1) - 1).clamp(min=0)
            logits = self.ref_policy(input_ids=seq, attention_mask=attn, position_ids=position_ids,
                                     use_cache=False).logits
            values = None
        else:
            logits, values = self.model(seq, attn, with_values=with_values)
        logits = logits[:, prompt_len - 1:-1]
        logp = token_logprobs(logits, seq[:, prompt_len:], self.cfg.temperature)
        return logp, (values[:, prompt_len - 1:-1].float() if values is not None else None), logits

    @torch.no_grad()
    def rollout(self) -> dict[str, Any]:
        """Sample, score and compute advantages for one update (this process's batch).

        With ``resample_tied`` N, a batch whose every prompt group tied (over all processes) is put aside and the
        next prompts are sampled instead, up to N more times; the last batch sampled is the update's either way.
        Its time counts in the step's; ``put_aside`` (logged as ``resample/rounds``) says how many batches were.
        """
        cfg, acc = self.cfg, self.accelerator
        self.step_reward.begin()
        times: dict[str, float] = {}
        for rounds in range(cfg.resample_tied + 1):
            sampled = self._sample_scored()
            for key, seconds in sampled["times"].items():
                times[key] = times.get(key, 0.0) + seconds
            if rounds == cfg.resample_tied or not self._all_tied(sampled["dense"].totals):
                break
            self.resampled += 1  # every process takes the same decision: the totals are gathered
        prompts, columns, dense = sampled["prompts"], sampled["columns"], sampled["dense"]
        seq, attn, ids, mask = sampled["seq"], sampled["attn"], sampled["ids"], sampled["mask"]
        old_lp, values, ref_lp = sampled["old_lp"], sampled["values"], sampled["ref_lp"]
        prompt_len = sampled["prompt_len"]
        step = self.global_step
        if dense.totals is not None:
            self.step_reward.observe(dense.scores or {}, dense.totals,
                                     np.arange(len(dense.totals)) // max(1, cfg.num_generations))
            if self.audits is not None:  # the spec's audits of these samples, logged with the update's record
                self._audit_metrics = self.audits.observe(step + 1, dense.texts, columns, dense.totals,
                                                          dense.scores or {}, prompts=prompts)
        device = acc.device
        score = dense.rewards.to(device).float() * mask
        train_mask = mask * (~dense.masked.to(device))[:, None]
        ended = (ids == self.eos).any(1) if self.eos is not None else torch.zeros_like(mask[:, 0]).bool()
        if cfg.missing_eos_penalty is not None:
            last = (mask.sum(1) - 1).clamp(min=0)
            score[torch.arange(len(ids), device=device)[~ended], last[~ended]] -= cfg.missing_eos_penalty

        kl = algos.kl(old_lp, ref_lp, cfg.kl_estimator) * mask
        rewards = score - cfg.beta * kl if cfg.kl_in == "reward" else score
        values = values * train_mask
        if cfg.advantage_estimator == "gae":
            advantages, returns = algos.gae(rewards, values, train_mask, cfg.gamma, cfg.lam)
        else:  # REINFORCE++: returns whitened into advantages, no critic
            returns = algos.reinforce_pp_returns(rewards, train_mask, cfg.gamma)
            advantages = returns
        scope = acc if cfg.whiten_scope == "global" else None
        advantages = algos.masked_whiten(advantages, train_mask, accelerator=scope)
        self.last_rollout = dict(seq=seq, attn=attn, prompt_len=prompt_len, ids=ids, mask=mask,
                                 train_mask=train_mask, old_lp=old_lp, ref_lp=ref_lp, values=values,
                                 score=score, kl=kl, rewards=rewards, advantages=advantages, returns=returns,
                                 dense=dense, ended=ended, times=times, put_aside=rounds)
        return self.last_rollout

    def _all_tied(self, totals: Any) -> bool:
        """Whether every prompt group of the update, over all processes, tied: its unmasked samples all earned
        the same total (a group with fewer than two has nothing to compare). Each process holds whole groups."""
        if totals is None or self.cfg.num_generations < 2:
            return False
        acc = self.accelerator
        t = acc.gather(torch.as_tensor(np.asarray(totals, dtype=np.float64), device=acc.device)).cpu().numpy()
        share = zero_variance_share(t, np.arange(len(t)) // self.cfg.num_generations)  # None: no group to compare
        return share is None or share == 1.0

    def _sample_scored(self) -> dict[str, Any]:
        """One batch of this update: its prompts sampled, the samples scored, and the forward passes (old and
        reference log-probs, values) that do not need the reward, run while it is scored."""
        cfg, acc = self.cfg, self.accelerator
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        prompts, columns = self._prompts()
        enc = self._encode(prompts)
        prompt_len = enc["input_ids"].shape[1]
        gen = GenerationConfig(do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p, top_k=0,
                               max_new_tokens=cfg.max_completion_length, pad_token_id=self.tokenizer.pad_token_id,
                               eos_token_id=self.eos if cfg.stop_at_eos else None,
                               output_scores=cfg.old_logprobs == "processed_scores", return_dict_in_generate=True)
        self.model.eval()
        with self._generation_policy() as policy:
            out = policy.generate(**enc, generation_config=gen)
        self.model.train()
        seq = out.sequences
        ids = seq[:, prompt_len:]
        mask = completion_mask(ids, self.eos, cfg.stop_at_eos)
        ids = torch.where(mask.bool(), ids, torch.full_like(ids, self.tokenizer.pad_token_id))
        seq = torch.cat([enc["input_ids"], ids], dim=1)
        attn = torch.cat([enc["attention_mask"], mask], dim=1)
        times["generation"] = time.perf_counter() - t0

        # The spec's (B, T) reward, scored in a thread while the forward passes below run: neither needs the other,
        # so a slow program (tests in the sandbox) holds the step only for what outlasts the forward passes.
        step = self.global_step
        aligning = getattr(self.rewards, "seconds_aligning", 0.0)

        def score_rollout() -> tuple[Any, float]:
            t = time.perf_counter()
            out = self.rewards(ids.cpu(), mask.cpu(), {"prompt": prompts, **columns}, step=step)
            return out, time.perf_counter() - t

        scoring = _SCORER.submit(score_rollout)

        # Old log-probs and values, reference log-probs: micro-batch forward passes without gradients.
        t0 = time.perf_counter()
        old_lp, values, ref_lp = [], [], []
        for s in range(0, seq.shape[0], self.micro_batch):
            sl = slice(s, s + self.micro_batch)
            lp, v, _ = self._forward(seq[sl], attn[sl], prompt_len)
            old_lp.append(lp)
            values.append(v if v is not None else torch.zeros_like(lp))
            if cfg.beta > 0:
                if self.ref_policy is not None:
                    ref_lp.append(self._forward(seq[sl], attn[sl], prompt_len, ref=True)[0])
                else:  # LoRA: the reference is the policy without its adapter
                    with acc.unwrap_model(self.model).policy.disable_adapter():
                        ref_lp.append(self._forward(seq[sl], attn[sl], prompt_len, with_values=False)[0])
        old_lp, values = torch.cat(old_lp), torch.cat(values)
        if cfg.old_logprobs == "processed_scores":  # the seed's quirk: after temperature/top-p (a biased ratio)
            scores = torch.stack(out.scores, dim=1)[:, : ids.shape[1]]
            old_lp = token_logprobs(scores, ids)
        ref_lp = torch.cat(ref_lp) if ref_lp else old_lp
        times["forward"] = time.perf_counter() - t0

        # The reward: rows whose reward is masked are never trained on. "reward" is the scoring's own wall time,
        # "reward_wait" the part of it the step waited for (after the forward passes).
        t0 = time.perf_counter()
        dense, times["reward"] = scoring.result()
        times["reward_wait"] = time.perf_counter() - t0
        times["align"] = getattr(self.rewards, "seconds_aligning", 0.0) - aligning  # part of "reward"
        return dict(prompts=prompts, columns=columns, seq=seq, attn=attn, ids=ids, mask=mask, prompt_len=prompt_len,
                    old_lp=old_lp, values=values, ref_lp=ref_lp, dense=dense, times=times)

    # -------------------------------------------------------------------------------------------- 3. update
    def update(self, ro: Mapping[str, Any]) -> dict[str, float]:
        """``ppo_epochs`` passes over the rollout in ``num_mini_batches`` optimizer steps of accumulated
        micro-batches; returns the mean losses and statistics."""
        cfg, acc = self.cfg, self.accelerator
        B = ro["seq"].shape[0]
        mini = B // cfg.num_mini_batches
        stats: dict[str, list[float]] = {}
        grad_norms: list[float] = []
        for _ in range(cfg.ppo_epochs):
            perm = torch.randperm(B)
            for m in range(cfg.num_mini_batches):
                for s in range(m * mini, (m + 1) * mini, self.micro_batch):
                    idx = perm[s:s + self.micro_batch].to(acc.device)
                    with acc.accumulate(self.model):
                        loss, st = self._loss(ro, idx)
                        acc.backward(loss)
                        if acc.sync_gradients:
                            norm = acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                            grad_norms.append(float(norm) if norm is not None else float("nan"))
                        self.optimizer.step()
                        if acc.sync_gradients:
                            self.scheduler.step()
                        self.optimizer.zero_grad()
                    for k, v in st.items():
                        stats.setdefault(k, []).append(float(v))
        out = {k: sum(v) / len(v) for k, v in stats.items()}
        out["grad_norm"] = sum(grad_norms) / max(len(grad_norms), 1)
        return out

    def _loss(self, ro: Mapping[str, Any], idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.cfg
        tm = ro["train_mask"][idx]
        with_values = cfg.advantage_estimator == "gae"
        logp, values, logits = self._forward(ro["seq"][idx], ro["attn"][idx], ro["prompt_len"],
                                             with_values=with_values)
        pg, st = algos.policy_loss(logp, ro["old_lp"][idx], ro["advantages"][idx], tm, cfg.cliprange,
                                   cfg.cliprange_high)
        loss = pg
        stats = {"loss/policy": pg.detach(), "clip_ratio/policy": st["clipfrac"], "approx_kl": st["approx_kl"]}
        if values is not None:
            vf, vst = algos.value_loss(values, ro["values"][idx], ro["returns"][idx], tm, cfg.cliprange_value)
            loss = loss + cfg.vf_coef * vf
            stats.update({"loss/value": vf.detach(), "clip_ratio/value": vst["clipfrac"]})
        if cfg.kl_in == "loss" and cfg.beta > 0:
            kl_loss = algos.masked_mean(algos.kl(logp, ro["ref_lp"][idx], cfg.kl_estimator), tm)
            loss = loss + cfg.beta * kl_loss
            stats["loss/kl"] = kl_loss.detach()
        with torch.no_grad():
            stats["entropy"] = algos.masked_mean(algos.entropy_from_logits(logits.float()), tm)
        stats["loss"] = loss.detach()
        return loss, stats

    # ------------------------------------------------------------------------------------------- 4. metrics
    def _metrics(self, ro: Mapping[str, Any], upd: Mapping[str, float], step_time: float) -> dict[str, float]:
        """One record per update, over every process's batch (the main process writes it)."""
        acc = self.accelerator
        mask, tm = ro["mask"].float(), ro["train_mask"].float()
        kept = tm.sum(1) > 0
        dense = ro["dense"]
        names = sorted(dense.components)
        # per-row sums, gathered: reward (the spec's return without KL), KL, length, EOS, masked
        rows = torch.stack([ro["score"].sum(1), ro["kl"].sum(1), mask.sum(1), ro["ended"].float(),
                            dense.masked.to(acc.device).float(), kept.float()], dim=1)
        rows = acc.gather(rows)
        r_kept = rows[:, 5] > 0
        reward = rows[r_kept, 0]
        sums = [(c.to(acc.device).float() * mask).sum() for c in (dense.components[n] for n in names)]
        tok = acc.reduce(torch.stack([*sums, mask.sum(), (ro["advantages"] * tm).sum(), tm.sum(),
                                      (ro["returns"] * tm).sum(), (ro["values"] * tm).sum()]), "sum")
        n_tok = tok[len(names)].clamp(min=1)
        ev = algos.explained_variance(ro["values"], ro["returns"], tm)
        out: dict[str, float] = {
            "reward": float(reward.mean()) if len(reward) else float("nan"),
            "reward_std": float(reward.std()) if len(reward) > 1 else 0.0,
            **{f"rewards/{n}/mean": float(tok[i] / n_tok) for i, n in enumerate(names)},
            "kl": float(rows[:, 1].mean()),
            "advantages/mean": float(tok[len(names) + 1] / tok[len(names) + 2].clamp(min=1)),
            "returns/mean": float(tok[len(names) + 3] / tok[len(names) + 2].clamp(min=1)),
            "values/mean": float(tok[len(names) + 4] / tok[len(names) + 2].clamp(min=1)),
            "completions/mean_length": float(rows[:, 2].mean()),
            "completions/eos_rate": float(rows[:, 3].mean()),
            "masked/count": float(rows[:, 4].sum()),
            "masked/rate": float(rows[:, 4].mean()),
        }
        local = {k: v for k, v in upd.items()}
        if self.cfg.advantage_estimator == "gae":
            local["value/explained_variance"] = float(ev)
        keys = sorted(local)
        vals = acc.reduce(torch.tensor([local[k] for k in keys], device=acc.device, dtype=torch.float32), "mean")
        out.update({k: float(v) for k, v in zip(keys, vals.tolist(), strict=True)})
        times = acc.reduce(torch.tensor([ro["times"][k] for k in ("generation", "forward", "reward", "align")]
                                        + [step_time, ro["times"]["reward_wait"]], device=acc.device,
                                        dtype=torch.float64), "mean").tolist()
        times[3], times[4] = times[4], times[3]  # step time in position 3, alignment 4, the reward's wait 5
        out.update({"time/generation": times[0], "time/forward": times[1], "time/reward": times[2],
                    "time/reward_wait": times[5], "time/align": times[4], "time/step": times[3],
                    "time/update": max(times[3] - times[0] - times[1] - times[5], 0.0),
                    # the share of the step the reward held it: scoring overlaps the rollout's forward passes
                    "time/reward_share": times[5] / times[3] if times[3] > 0 else 0.0,
                    "tokens_per_second": float(rows[:, 2].sum()) / max(times[3], 1e-9),
                    "align/fallbacks": float(self.rewards.fallbacks),
                    # batches sampled and put aside because every group tied (resample_tied), and in all so far
                    "resample/rounds": float(ro["put_aside"]),
                    "resample/total": float(self.resampled),
                    "learning_rate": float(self.scheduler.get_last_lr()[0])})
        out.update(self.step_reward.take())  # this process's: slowest program, timeouts, component times
        out.update(self._audit_metrics)
        self._audit_metrics = {}
        return out

    def _event(self, name: str, **kwargs: Any) -> None:
        for cb in self.callbacks:  # transformers-style callbacks; `trainer` gives them the rollout and models
            getattr(cb, name)(self.args, self.state, self.control, trainer=self, **kwargs)

    # -------------------------------------------------------------------------------------- 5. checkpoints
    def save_checkpoint(self) -> str:
        """``checkpoint-N/``: the policy (and tokenizer) and ``critic/`` in Hugging Face format, ``accelerate/``
        (accelerate's state: both models, optimizer, scheduler, every process's RNG), and ``trainer_state.json`` (written last: it marks the
        checkpoint complete)."""
        acc = self.accelerator
        path = os.path.join(self.run_dir, f"checkpoint-{self.global_step}")
        # accelerate's files in their own folder: its loader would take the policy's model.safetensors for its own
        acc.save_state(os.path.join(path, "accelerate"), safe_serialization=False)
        self.save_models(path)
        if acc.is_main_process:
            position = (self.global_step + self.resampled) * self.prompts_per_process * acc.num_processes
            with open(os.path.join(path, "trainer_state.json"), "w", encoding="utf-8") as fh:
                json.dump({"global_step": self.global_step, "data_position": position,
                           "resampled": self.resampled, "max_steps": self.cfg.max_steps}, fh)
            self._rotate()
        acc.wait_for_everyone()
        return path

    def _rotate(self) -> None:
        limit = self.cfg.save_total_limit
        if not limit:
            return
        ckpts = sorted((int(n.split("-")[1]), n) for n in os.listdir(self.run_dir)
                       if n.startswith("checkpoint-") and n.split("-")[1].isdigit())
        import shutil

        for _, name in ckpts[:-limit]:
            shutil.rmtree(os.path.join(self.run_dir, name), ignore_errors=True)

    def save_models(self, path: str) -> None:
        """The policy (the adapter only, with LoRA) and tokenizer in ``path``, the critic in ``path/critic``."""
        acc = self.accelerator
        state = acc.get_state_dict(self.model)  # gathers ZeRO-3 shards (every process must call it)
        if acc.is_main_process:
            unwrapped = acc.unwrap_model(self.model)
            for name, module, where in (("policy", unwrapped.policy, path),
                                        ("critic", unwrapped.critic, os.path.join(path, "critic"))):
                if module is None:
                    continue
                sub = {k[len(name) + 1:]: v for k, v in state.items() if k.startswith(name + ".")}
                module.save_pretrained(where, state_dict=sub)
            self.tokenizer.save_pretrained(path)
        acc.wait_for_everyone()

    def load_checkpoint(self, path: str) -> None:
        with open(os.path.join(path, "trainer_state.json"), encoding="utf-8") as fh:
            saved = json.load(fh)
        self.accelerator.load_state(os.path.join(path, "accelerate"))
        self.global_step = int(saved["global_step"])
        self.resampled = int(saved.get("resampled", 0))  # checkpoints from before resample_tied have none

    # ----------------------------------------------------------------------------------------------- 6. loop
    def train(self, resume_from_checkpoint: str | None = None) -> None:
        """Run updates until ``max_steps`` (or a callback stops training), logging and checkpointing."""
        if resume_from_checkpoint:
            self.load_checkpoint(resume_from_checkpoint)
        self.state.global_step = self.global_step
        self._event("on_train_begin")
        start = time.perf_counter()
        while self.global_step < self.cfg.max_steps and not self.control.should_training_stop:
            self._event("on_step_begin")
            t0 = time.perf_counter()
            ro = self.rollout()
            upd = self.update(ro)
            self.global_step += 1
            self.state.global_step = self.global_step
            logs = self._metrics(ro, upd, time.perf_counter() - t0)
            if self.global_step % self.cfg.logging_steps == 0 or self.global_step == self.cfg.max_steps:
                self.state.log_history.append({**logs, "step": self.global_step})
                self._event("on_log", logs=logs)
            if self.global_step % self.cfg.save_steps == 0 or self.control.should_save:
                self.save_checkpoint()  # also when a callback asks (an alarm with train.stop_on_alarm)
                self.control.should_save = False
            self._event("on_step_end")
        self._event("on_log", logs={"train_runtime": time.perf_counter() - start})
        self._event("on_train_end")


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
    """Train a policy on the per-token rewards of ``spec`` with PPO; returns where the run went.

    Arguments as :func:`rewardlang.trainers.grpo.train`. ``callbacks`` are ``transformers.TrainerCallback`` objects;
    they receive ``on_train_begin``, ``on_step_begin``, ``on_log``, ``on_step_end`` and ``on_train_end``, and can
    stop the run with ``control.should_training_stop``.
    """

    # 1-2. The spec with its parameters, and the configuration: defaults < spec train section < config file <
    # --set < flags (run.load_layers); the run directory, checked for a resume (run.open_run).
    prog, cfg, sources, params = layers or load_layers(spec, config_file, sets, flags)
    cfg.algorithm = "ppo"
    run_dir, checkpoint = open_run(prog, cfg, resume)

    # 3. Data, models, trainer (and train.eval's held-out problems, checked before any model is loaded).
    heldout = report.heldout_rows(cfg)
    trainer = PPOTrainer(cfg, prog, run_dir, progress=progress, callbacks=callbacks)
    record_config(trainer, run_dir, checkpoint, prog, cfg, sources, params, {})

    # 4. Held-out pass@1 before, train, save the final policy (the adapter only, with LoRA), its tokenizer and the
    # critic, pass@1 after, the run's README.
    return finish_run(trainer, trainer.tokenizer, cfg, run_dir, checkpoint, heldout, program=prog, progress=progress,
                      save=trainer.save_models)
