"""GEPO: group preference optimisation (the GEPO/OORL paper, docs/specs/gepo_oorl.md), on ``transformers.Trainer``.

Per group g of completions of one prompt, with winners W and losers L (the spec's ``preference { winners = ... }``):

    r̂ᵢ = β · (Σₜ log π_θ(yᵢ,ₜ | x, yᵢ,<ₜ) − Σₜ log π_ref(yᵢ,ₜ | x, yᵢ,<ₜ))       summed token log-probs, β = 0.1
    L_g = −log σ(mean_W r̂ − mean_L r̂) + λ · Var_W(r̂)                           population variance, λ = 1
    L   = mean over the batch's groups of L_g

With one winner, one loser and λ = 0 this is DPO's sigmoid loss (tests/trainers/test_gepo.py checks it against TRL's
own DPOTrainer loss). A group's loss is not a sum of pairwise terms, so TRL's pair-shaped DPOTrainer cannot hold
it (design §D); this trainer keeps transformers' Trainer (checkpoints, exact resume, LoRA, bf16, accelerate) and
overrides ``training_step`` only:

1. r̂ of every member without gradients (chunks of ``gepo_chunk`` sequences), and the reference log-probs;
2. L and cᵢ = ∂L/∂r̂ᵢ on the small vector r̂ (autograd on a leaf);
3. for each chunk, back-propagate Σᵢ cᵢ · r̂ᵢ. L depends on θ only through r̂, so the accumulated gradient is
   exactly ∇θ L (chain rule), while at most ``gepo_chunk`` sequences hold activations at once.

Data: a groups file from ``rewardlang pairs --groups`` (``train.preference_data``), or online: each step samples
``num_generations`` completions per prompt from the current policy, scores them with the spec and mines groups (or
DPO pairs, for the ``dpo`` algorithm without a pairs file) with the spec's ``preference { }`` section.

    >>> import torch
    >>> r = torch.tensor([1.0, 3.0, 0.0]); w = torch.tensor([True, True, False]); g = torch.tensor([0, 0, 0])
    >>> loss, stats = gepo_loss(r, w, g, lam=1.0)
    >>> round(float(loss), 6)                         # −log σ(2 − 0) + Var(1, 3) = 0.126928 + 1
    1.126928
"""

from __future__ import annotations

import copy
import os
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PrinterCallback, Trainer, TrainingArguments

from rewardlang.trainers.audit import TrainingAudits, audit_columns
from rewardlang.trainers.config import ConfigError, TrainConfig
from rewardlang.trainers.data import DataError
from rewardlang.trainers.health import StepReward
from rewardlang.trainers.metrics import JsonlMetricsCallback, ProgressCallback, RewardClock, StepTimingCallback
from rewardlang.trainers.model import lora_config
from rewardlang.trainers.recipe import (Layers, RunResult, finish_run, load_layers, load_run_policy, open_run,
                                        record_config, trainer_args, TiedResume)

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["gepo_loss", "sequence_logps", "tokenize_members", "GroupPreferenceTrainer", "preference_args",
           "load_groups", "train", "DEFAULT_BETA"]

#: β when no layer sets `beta` (TrainConfig's default 0.0 is GRPO's KL weight; a preference loss needs β > 0)
DEFAULT_BETA = 0.1


# ---------------------------------------------------------------------- the loss
def gepo_loss(r: torch.Tensor, winner: torch.Tensor, group: torch.Tensor, lam: float = 1.0
              ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean over groups of −log σ(mean_W r − mean_L r) + λ·Var_W(r) (population variance).

    ``r``: implicit rewards (N,); ``winner``: bool (N,); ``group``: group index (N,) in ``0..G-1``, every group with
    at least one winner and one loser. Returns the loss and per-group statistics (``margin``, ``winner_var``,
    ``accuracy``: margin > 0).
    """
    n_groups = int(group.max()) + 1
    w = winner.to(r.dtype)
    lo = 1.0 - w
    zeros = torch.zeros(n_groups, dtype=r.dtype, device=r.device)
    nw = zeros.index_add(0, group, w)
    nl = zeros.index_add(0, group, lo)
    mean_w = zeros.index_add(0, group, r * w) / nw
    mean_l = zeros.index_add(0, group, r * lo) / nl
    var_w = zeros.index_add(0, group, (r - mean_w[group]) ** 2 * w) / nw
    margin = mean_w - mean_l
    per_group = -F.logsigmoid(margin) + lam * var_w
    stats = {"margin": margin.detach(), "winner_var": var_w.detach(), "accuracy": (margin > 0).to(r.dtype).detach(),
             "mean_winner": mean_w.detach(), "mean_loser": mean_l.detach()}
    return per_group.mean(), stats


def sequence_logps(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_mask: torch.Tensor
                   ) -> torch.Tensor:
    """Σ over completion tokens of log π(token | prefix), per row (float32 whatever the model's dtype)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1].float()
    targets = input_ids[:, 1:]
    lp = torch.gather(F.log_softmax(logits, dim=-1), 2, targets.unsqueeze(-1)).squeeze(-1)
    return (lp * completion_mask[:, 1:].to(lp.dtype)).sum(dim=1)


def tokenize_members(tokenizer: Any, prompts: Sequence[str], completions: Sequence[str], device: Any = "cpu",
                     max_length: int | None = None) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``completion_mask`` for prompt + completion + EOS, as TRL's
    DPOTrainer builds text pairs (prompt tokens, then completion tokens with EOS appended)."""
    rows, masks = [], []
    eos = tokenizer.eos_token_id
    for p, c in zip(prompts, completions, strict=True):
        pi = tokenizer(p, add_special_tokens=False)["input_ids"]
        ci = tokenizer(c, add_special_tokens=False)["input_ids"] + [eos]
        if max_length is not None:
            ci = ci[: max(1, max_length - len(pi))]
        rows.append(pi + ci)
        masks.append([0] * len(pi) + [1] * len(ci))
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    cm = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
        cm[i, : len(m)] = torch.tensor(m)
    return {"input_ids": ids.to(device), "attention_mask": att.to(device), "completion_mask": cm.to(device)}


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(a, min(a + size, n)) for a in range(0, n, size)]


# ---------------------------------------------------------------------- the trainer
#: the column holding the prompt as the model sees it in online training (build_trainer)
PROMPT_TEXT = "_prompt_text"


class GroupPreferenceTrainer(TiedResume, Trainer):
    """``transformers.Trainer`` whose step is the chunked GEPO loss over whole groups (see the module docstring).

    Each dataset row is a group (offline: ``{"prompt", "winners", "losers"}``) or a prompt row (online: sampled,
    scored with ``program`` and mined each step). ``lam = 0`` with groups of one winner and one loser is DPO.
    Metrics per logging step: ``pref/accuracy`` (share of groups with mean_W r̂ > mean_L r̂), ``pref/margin``
    (mean_W − mean_L of r̂), ``pref/winner_var``, ``logps/winners``, ``logps/losers`` (summed log-probs),
    ``pref/groups`` per step, and online also ``reward`` (the spec's mean total of the samples) and
    ``pref/no_group_share`` (prompts that yielded no group: all tied, all failing).
    """

    def __init__(self, model: Any, args: TrainingArguments, *, ref_model: Any, tokenizer: Any, beta: float,
                 lam: float, chunk: int, program: "Program | None" = None, online: bool = False,
                 num_generations: int = 4, max_completion_length: int = 48, temperature: float = 1.0,
                 mode: str = "groups", clock: RewardClock | None = None, **kwargs: Any) -> None:
        super().__init__(model=model, args=args, processing_class=tokenizer, data_collator=lambda rows: rows,
                         **kwargs)
        self.ref_model = ref_model
        self.tok = tokenizer
        self.beta, self.lam, self.chunk = beta, lam, max(1, chunk)
        self.program, self.online, self.mode = program, online, mode
        self.num_generations, self.max_completion_length, self.temperature = (num_generations,
                                                                              max_completion_length, temperature)
        self.clock = clock or RewardClock()
        #: the step's reward metrics (slowest program, timeouts, component times, zero-variance groups): health.py
        self.step_reward = StepReward(program) if program is not None and online else None
        #: the spec's audits of the sampled completions (online only; trainers/audit.py): set by build_trainer
        self.audits: Any = None
        self._metrics: dict[str, dict[str, list[float]]] = {"train": defaultdict(list)}
        self.last_batch: dict[str, Any] = {}
        self.tokens_seen = 0
        if self.ref_model is not None:
            self.ref_model.to(self.args.device).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)

    # ---- data for one step: a list of (prompt, members, is_winner)
    def _groups(self, rows: list[dict[str, Any]]) -> list[tuple[str, list[str], list[bool]]]:
        if not self.online:
            return [(r.get(PROMPT_TEXT, r["prompt"]), list(r["winners"]) + list(r["losers"]),
                     [True] * len(r["winners"]) + [False] * len(r["losers"])) for r in rows]
        return self._sample_and_mine(rows)

    @torch.no_grad()
    def _sample_and_mine(self, rows: list[dict[str, Any]]) -> list[tuple[str, list[str], list[bool]]]:
        import time

        from rewardlang.runtime.preference import group_ids, mine_groups, mine_pairs, rank_rows, settings_of

        model = self.accelerator.unwrap_model(self.model)
        prompts = [r.get(PROMPT_TEXT, r["prompt"]) for r in rows for _ in range(self.num_generations)]
        self.tok.padding_side = "left"
        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.args.device)
        was_training = model.training
        model.eval()
        out = model.generate(**enc, do_sample=True, temperature=self.temperature,
                             max_new_tokens=self.max_completion_length, pad_token_id=self.tok.pad_token_id)
        model.train(was_training)
        self.tok.padding_side = "right"
        completions = self.tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        t0 = time.perf_counter()
        prog = self.program
        cols: dict[str, list[Any]] = {"completion": completions}
        for inp in prog.inputs:
            if inp.used and inp.name != "completion":
                cols[inp.name] = [r.get(inp.column, r.get(inp.name)) for r in rows for _ in range(self.num_generations)]
        res = prog.score(**cols, step=self.state.global_step)
        masked = np.zeros(len(completions), dtype=bool)
        for m in res.masked.values():
            masked |= m
        ranked = rank_rows(prog, res.total, res.components, masked, self.state.global_step)
        self.clock.seconds += time.perf_counter() - t0
        if self.step_reward is not None:
            self.step_reward.observe(res.components, res.total,
                                     np.arange(len(completions)) // self.num_generations)
        st = settings_of(prog.spec)
        gid, _ = group_ids([i // self.num_generations for i in range(len(completions))])
        groups: list[tuple[str, list[str], list[bool]]] = []
        if self.mode == "pairs":
            tie = np.array([len(c) for c in completions]) if st.ties == "shortest" else None
            c, r = mine_pairs(gid, ranked.rank, ranked.valid, strategy=st.pairs, margin=st.margin,
                              chosen_min=st.chosen_min, rejected_max=st.rejected_max, max_pairs=st.max_pairs, tie=tie)
            groups = [(prompts[i], [completions[i], completions[j]], [True, False]) for i, j in zip(c, r)]
            n_with = len(set(gid[c].tolist()))
        else:
            if st.winners is None:
                raise ConfigError("online GEPO needs a `winners` rule in the spec's `preference { }` section "
                                  "(e.g. `winners = rule == 1`)")
            g, members, isw = mine_groups(gid, ranked.winners, ranked.losers, min_winners=st.min_winners,
                                          min_losers=st.min_losers, max_group=st.max_group)
            for k in np.unique(g):
                sel = g == k
                m = members[sel]
                groups.append((prompts[m[0]], [completions[i] for i in m], isw[sel].tolist()))
            n_with = len(groups)
        metrics = self._metrics["train"]
        if self.audits is not None:  # the spec's audits of these samples, logged with the step's record
            columns = {c: [r.get(c) for r in rows for _ in range(self.num_generations)]
                       for c in rows[0] if c not in ("prompt", PROMPT_TEXT)} if rows else {}
            for k, v in self.audits.observe(self.state.global_step + 1, completions, columns, res.total,
                                            res.components, prompts=prompts).items():
                metrics[k].append(v)
        metrics["reward"].append(float(np.nanmean(res.total)) if np.isfinite(res.total).any() else float("nan"))
        # the share of samples whose total is masked: the run's MaskedRunGuard stops a run where it stays at 1
        metrics["masked/rate"].append(float(np.isnan(res.total).mean()))
        metrics["masked/count"].append(float(np.isnan(res.total).sum()))
        metrics["pref/no_group_share"].append(1.0 - n_with / max(len(rows), 1))
        return groups

    # ---- one micro-step
    def training_step(self, model: Any, inputs: list[dict[str, Any]], num_items_in_batch: Any = None
                      ) -> torch.Tensor:
        model.train()
        groups = self._groups(inputs)
        metrics = self._metrics["train"]
        metrics["pref/groups"].append(float(len(groups)))
        if not groups:  # nothing to prefer in this batch (online: every prompt tied or failing)
            return torch.tensor(0.0, device=self.args.device)
        prompts = [p for p, members, _ in groups for _ in members]
        members = [m for _, ms, _ in groups for m in ms]
        winner = torch.tensor([w for _, _, ws in groups for w in ws], device=self.args.device)
        group = torch.tensor([k for k, (_, ms, _) in enumerate(groups) for _ in ms], device=self.args.device)
        batch = tokenize_members(self.tok, prompts, members, self.args.device)
        self.tokens_seen += int(batch["attention_mask"].sum())  # for tokens_per_second (StepTimingCallback)
        n = len(members)
        parts = _chunks(n, self.chunk)

        def part(sl: slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            ids, att, cm = batch["input_ids"][sl], batch["attention_mask"][sl], batch["completion_mask"][sl]
            width = int(att.sum(1).max())  # right padding: drop the columns every row of the chunk pads
            return ids[:, :width], att[:, :width], cm[:, :width]

        # 1. r̂ without gradients (policy and reference)
        with torch.no_grad():
            logp = torch.cat([sequence_logps(model, *part(sl)) for sl in parts])
            ref = torch.cat([sequence_logps(self._reference(model), *part(sl)) for sl in parts]) \
                if self.ref_model is not None or self._is_peft(model) else torch.zeros_like(logp)
        # 2. the loss and c = ∂L/∂r̂ on the leaf vector r̂
        r = (self.beta * (logp - ref)).detach().requires_grad_(True)
        loss, stats = gepo_loss(r, winner, group, self.lam)
        (c,) = torch.autograd.grad(loss, r)
        # 3. back-propagate Σ cᵢ r̂ᵢ = Σ cᵢ β (log π_θ − log π_ref) chunk by chunk (π_ref is a constant)
        scale = 1.0 / self.current_gradient_accumulation_steps
        for sl in parts:
            lp = sequence_logps(model, *part(sl))
            self.accelerator.backward((c[sl].to(lp.dtype) * self.beta * lp).sum() * scale)
        metrics["pref/accuracy"].append(float(stats["accuracy"].mean()))
        metrics["pref/margin"].append(float(stats["margin"].mean()))
        metrics["pref/winner_var"].append(float(stats["winner_var"].mean()))
        metrics["logps/winners"].append(float(logp[winner].mean()))
        metrics["logps/losers"].append(float(logp[~winner].mean()))
        self.last_batch = {"r": r.detach(), "winner": winner, "group": group, "loss": float(loss.detach())}
        return loss.detach() * scale

    def _is_peft(self, model: Any) -> bool:
        return hasattr(self.accelerator.unwrap_model(model), "disable_adapter")

    def _reference(self, model: Any) -> Any:
        if self.ref_model is not None:
            return self.ref_model
        return _AdapterOff(self.accelerator.unwrap_model(model))  # LoRA: the base model is the reference

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        metrics = self._metrics["train"]
        for k, v in metrics.items():
            vals = [x for x in v if x == x]
            logs[k] = sum(vals) / len(vals) if vals else float("nan")
        metrics.clear()
        super().log(logs, start_time)


class _AdapterOff:
    """Call a PEFT model with its adapter disabled (the reference policy of a LoRA run)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, **kwargs: Any) -> Any:
        with self.model.disable_adapter():
            return self.model(**kwargs)


# ---------------------------------------------------------------------- the recipe
def preference_args(cfg: TrainConfig, run_dir: str) -> TrainingArguments:
    """transformers' ``TrainingArguments`` for a resolved configuration (``cfg.trl`` entries passed through)."""
    return trainer_args(TrainingArguments, cfg, run_dir, batch_size=cfg.prompts_per_step, what="training",
                        remove_unused_columns=False)


def load_groups(path: str, mode: str) -> list[dict[str, Any]]:
    """Rows of a groups file (``prompt``, ``winners``, ``losers``) or, for ``mode="pairs"``, a pairs file
    (``prompt``, ``chosen``, ``rejected``) as groups of one winner and one loser."""
    from rewardlang.jsonl import read_jsonl
    from rewardlang.trainers.data import _kind, prompt_problem

    if not os.path.exists(path):
        raise DataError(f"preference data {path}: file not found")
    rows = []
    need = ("prompt", "chosen", "rejected") if mode == "pairs" else ("prompt", "winners", "losers")
    for lineno, row in read_jsonl(path, DataError, "preference data "):
        missing = [k for k in need if k not in row]
        if missing:
            raise DataError(f"preference data {path}:{lineno}: no `{missing[0]}` (a {mode} row needs "
                            f"{', '.join(need)}; write it with `rewardlang pairs{' --groups' if mode == 'groups' else ''}`)")
        where = f"preference data {path}:{lineno}"
        problem = prompt_problem(row["prompt"])
        if problem is not None:
            raise DataError(f"{where}: `prompt`: {problem}")
        if mode == "pairs":
            for key in ("chosen", "rejected"):
                if not isinstance(row[key], str):
                    raise DataError(f"{where}: `{key}` must be text (a completion), got {_kind(row[key])}")
            row = {"prompt": row["prompt"], "winners": [row["chosen"]], "losers": [row["rejected"]]}
        else:
            for key in ("winners", "losers"):
                value = row[key]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    bad = value if not isinstance(value, list) else next(v for v in value if not isinstance(v, str))
                    raise DataError(f"{where}: `{key}` must be a list of texts (completions), got "
                                    f"{_kind(value) if bad is value else 'an item ' + _kind(bad)}")
            if not row["winners"] or not row["losers"]:
                raise DataError(f"{where}: a group needs a winner and a loser")
        rows.append({"prompt": row["prompt"], "winners": row["winners"], "losers": row["losers"]})
    if not rows:
        raise DataError(f"preference data {path}: no rows")
    return rows


def preference_rows(cfg: TrainConfig, mode: str) -> list[dict[str, Any]]:
    """``train.preference_data``'s rows (:func:`load_groups`) without the problems ``train.eval`` holds out
    (:func:`rewardlang.trainers.report.drop_leaked`: a file mined from the whole dataset would train on them)."""
    from rewardlang.trainers import report

    path = cfg.preference_data
    assert path is not None
    rows = load_groups(path, mode)
    if cfg.prompt_format == "text" and any(isinstance(r["prompt"], list) for r in rows):
        raise DataError(f"preference data {path}: chat prompts need the chat template, but prompt_format=text was "
                        "chosen (set prompt_format to auto or chat)")
    return report.drop_leaked(rows, report.heldout_rows(cfg), f"preference data {path}")


def present_rows(rows: list[dict[str, Any]], tokenizer: Any, cfg: TrainConfig, *, offline: bool) -> None:
    """Give each text prompt :data:`PROMPT_TEXT`, the prompt as the model is shown it
    (:func:`rewardlang.trainers.data.render_prompt`: ``system_prompt``, ``prompt_template``, the chat template), as
    ``train.eval`` shows it. Online prompts always; a preference file's only when the spec or config sets a
    presentation (``system_prompt``, ``prompt_template`` or ``prompt_format = "chat"``): without one its prompts are
    taken as written (they may be rendered already)."""
    from rewardlang.trainers.data import present, prompt_text

    chat = cfg.prompt_format == "chat" or (cfg.prompt_format == "auto" and
                                           bool(getattr(tokenizer, "chat_template", None)))
    as_written = offline and not (cfg.system_prompt or cfg.prompt_template or cfg.few_shot
                                  or cfg.prompt_format == "chat")
    for r in rows:
        if isinstance(r["prompt"], str) and as_written:
            continue
        # a chat prompt is shown through the chat template whatever the settings: a model reads text only
        shown = present(r["prompt"], chat or isinstance(r["prompt"], list), cfg.system_prompt, cfg.prompt_template,
                        cfg.few_shot)
        r[PROMPT_TEXT] = prompt_text(shown, tokenizer, False)


def build_trainer(cfg: TrainConfig, sources: Mapping[str, str], prog: "Program", run_dir: str, *, mode: str,
                  progress: bool | None = None, callbacks: Sequence[Any] = ()) -> GroupPreferenceTrainer:
    """Data, policy, reference and trainer (``mode``: "groups" for GEPO, "pairs" for online DPO)."""
    from datasets import Dataset

    from rewardlang.trainers.data import check_columns, load_rows, split_heldout

    online = cfg.preference_data is None
    if online:
        rows, source = load_rows(cfg.dataset)
        rows, _ = split_heldout(rows, cfg.eval)  # train.eval's held-out problems are never trained on
        columns = check_columns(prog, rows, source)
        more, reference = audit_columns(prog, rows, source, cfg)  # what the spec's audits read (audit.py)
        columns += [c for c in more if c not in columns]
        rows = [{c: r.get(c) for c in columns} for r in rows]
    else:
        rows = preference_rows(cfg, mode)
        reference = None
    if len(rows) < cfg.prompts_per_step:
        raise DataError(f"{len(rows)} rows, but each step needs prompts_per_step={cfg.prompts_per_step}")
    model, tokenizer = load_run_policy(cfg, run_dir)
    present_rows(rows, tokenizer, cfg, offline=not online)  # the model sees the prompt as presented; the reward the row
    lora = lora_config(cfg)
    ref_model = None
    if lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, lora)  # the reference is the base model: adapter disabled
    else:
        ref_model = copy.deepcopy(model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = preference_args(cfg, run_dir)
    clock = RewardClock()
    timing = StepTimingCallback(clock)
    extra = [JsonlMetricsCallback(os.path.join(run_dir, "metrics.jsonl")), timing, *callbacks]
    if cfg.progress if progress is None else progress:
        extra.append(ProgressCallback())
    beta = cfg.beta if "beta" in sources else DEFAULT_BETA
    lam = cfg.gepo_lambda if mode == "groups" else 0.0
    trainer = GroupPreferenceTrainer(
        model, args, ref_model=ref_model, tokenizer=tokenizer, beta=beta, lam=lam, chunk=cfg.gepo_chunk,
        program=prog, online=online, num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length, temperature=cfg.temperature, mode=mode, clock=clock,
        train_dataset=Dataset.from_list(rows), callbacks=extra)
    if online and prog.audits:  # the spec's audits on each step's own samples (offline data has no samples)
        trainer.audits = TrainingAudits(prog, run_dir, args.max_steps, probes=cfg.audit_probes,
                                        reference_column=reference, main=trainer.accelerator.is_main_process)
    timing.trainer = trainer
    trainer.remove_callback(PrinterCallback)
    return trainer


def run(spec: str, *, mode: str, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
        flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
        callbacks: Sequence[Any] = (), layers: Layers | None = None) -> RunResult:
    """The shared recipe of GEPO and online DPO: spec, configuration, run directory, trainer, train, save."""

    from rewardlang.trainers import report

    prog, cfg, sources, params = layers or load_layers(spec, config_file, sets, flags)
    if "beta" not in sources:  # the β in force, so that config.json records it (not GRPO's default 0.0)
        cfg.beta = DEFAULT_BETA
    if cfg.preference_data:  # a bad preference file is named before the run directory is made or a model loads
        preference_rows(cfg, mode)
    run_dir, checkpoint = open_run(prog, cfg, resume)
    heldout = report.heldout_rows(cfg)  # train.eval's problems: out of the prompts (online) or the file (offline)
    trainer = build_trainer(cfg, sources, prog, run_dir, mode=mode, progress=progress, callbacks=callbacks)
    record_config(trainer, run_dir, checkpoint, prog, cfg, sources, params,
                  {"beta": trainer.beta, "lambda": trainer.lam, "mode": mode, "online": trainer.online})
    return finish_run(trainer, trainer.tok, cfg, run_dir, checkpoint, heldout, program=prog, progress=progress)


def train(spec: str, *, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
          flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
          callbacks: Sequence[Any] = (), layers: Layers | None = None) -> RunResult:
    """Train with GEPO on ``spec``: groups from ``train.preference_data`` (``rewardlang pairs --groups``), or mined
    online from the policy's own samples with the spec's ``preference { }`` section."""
    return run(spec, mode="groups", config_file=config_file, sets=sets, flags=flags, resume=resume,
               progress=progress, callbacks=callbacks, layers=layers)

