"""OORL (the GEPO/OORL paper): on-policy REINFORCE++ on the spec's rule reward plus GEPO, every optimizer step.

    L_OORL = w_rl · L_REINFORCE++ + w_gepo · L_GEPO          w_rl = 1, w_gepo = 0.01 (paper)

A small subclass of :class:`rewardlang.trainers.ppo.PPOTrainer` with ``advantage_estimator = "reinforce_pp"`` (no
critic; the PPO clipped surrogate with ε = ``cliprange``, 0.2, and the per-token KL against the reference with
β = ``beta``, 0.1, both named choices: the paper gives neither). The paper's optimiser settings (AdamW, lr 5e-7,
cosine schedule, warm-up ratio 0.03) are in ``specs/oorl.reward``'s ``train { }`` section.

Each optimizer step adds w_gepo × the GEPO gradient of a batch of groups to the REINFORCE++ gradient (one batch of
``prompts_per_step`` groups per micro-batch, back-propagated in chunks exactly as
:class:`rewardlang.trainers.gepo.GroupPreferenceTrainer` does, so a large group never holds all its activations at
once). The groups come from ``train.preference_data`` (``rewardlang pairs --groups``), or, online, from the update's
own rollout: its samples are scored with the spec and grouped by its ``preference { winners = ... }`` rule
(winners pass every test). Metrics add ``gepo/loss``, ``pref/accuracy``, ``pref/margin``, ``pref/winner_var`` and
``pref/groups`` to PPO's, and the two parts' shares of the loss, ``oorl/rl_share`` and ``oorl/gepo_share``
(Σ|w_rl·L_rl| and Σ|w_gepo·L_GEPO| over the step's micro-batches, each over their sum).

    >>> from rewardlang.trainers.config import TrainConfig
    >>> cfg = TrainConfig()
    >>> cfg.w_rl, cfg.w_gepo, cfg.gepo_lambda                      # the paper's weights and λ
    (1.0, 0.01, 1.0)
    >>> from rewardlang.trainers.oorl import train                                         # doctest: +SKIP
    >>> train("specs/oorl.reward", sets={"train.max_steps": 2}).global_step                 # doctest: +SKIP
    2
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch

from rewardlang.trainers import report
from rewardlang.trainers.config import ConfigError, TrainConfig
from rewardlang.trainers.data import present, prompt_text
from rewardlang.trainers.gepo import DEFAULT_BETA, gepo_loss, preference_rows, tokenize_members
from rewardlang.trainers.ppo import PPOTrainer, _DataOrder
from rewardlang.trainers.recipe import Layers, RunResult, finish_run, load_layers, open_run, record_config

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["OORLTrainer", "train"]

Group = tuple[Any, list[str], list[bool]]   # (prompt, members, is_winner)


def _mining_settings(program: "Program") -> Any:
    """The spec's ``preference { }`` settings, which online GEPO groups are mined by; a spec without a ``winners``
    rule cannot give any (an error naming the fix)."""
    from rewardlang.runtime.preference import settings_of

    st = settings_of(program.spec)
    if st.winners is None:
        raise ConfigError("OORL without `preference_data` mines GEPO groups from its rollouts and needs a "
                          "`winners` rule in the spec's `preference { }` section (e.g. `winners = rule == 1`)")
    return st


class OORLTrainer(PPOTrainer):
    """REINFORCE++ (PPO without a critic) whose every micro-batch also back-propagates w_gepo × L_GEPO."""

    def __init__(self, cfg: TrainConfig, program: "Program", run_dir: str, **kwargs: Any) -> None:
        if not cfg.preference_data:  # said before any model is loaded, not at the end of the first rollout
            _mining_settings(program)
        super().__init__(cfg, program, run_dir, **kwargs)
        if self.ref_policy is None and not cfg.lora:  # GEPO's r̂ needs π_ref even when the KL weight is 0
            policy = self.accelerator.unwrap_model(self.model).policy
            self.ref_policy = copy.deepcopy(policy).eval().requires_grad_(False)
        self.groups_file = preference_rows(cfg, "groups") if cfg.preference_data else None
        if self.groups_file and (cfg.system_prompt or cfg.prompt_template or cfg.few_shot):
            # the file's prompts as the rollouts show theirs (the chat template is applied in _gepo_backward)
            for r in self.groups_file:
                if isinstance(r["prompt"], str):
                    r["prompt"] = present(r["prompt"], self.chat, cfg.system_prompt, cfg.prompt_template,
                                          cfg.few_shot)
        self.group_order = _DataOrder(len(self.groups_file), cfg.seed) if self.groups_file else None
        self._update_groups: list[Group] = []
        self._micro = 0
        self._gepo_stats: dict[str, list[float]] = {}
        self._parts = [0.0, 0.0]   # the step's Σ|w_rl·L_rl| and Σ|w_gepo·L_GEPO| over its micro-batches

    # ---- which groups this update trains GEPO on
    def _prompts(self) -> tuple[list[Any], dict[str, list[Any]]]:
        prompts, columns = super()._prompts()
        self._rollout_inputs = (prompts, columns)   # online mining re-reads them with the completions
        return prompts, columns

    def _groups_for_update(self, ro: Mapping[str, Any]) -> list[Group]:
        if self.groups_file is not None:
            acc, k = self.accelerator, self.prompts_per_process
            start = self.global_step * k * acc.num_processes + acc.process_index * k
            rows = [self.groups_file[self.group_order.index(start + i)] for i in range(k)]
            return [(r["prompt"], list(r["winners"]) + list(r["losers"]),
                     [True] * len(r["winners"]) + [False] * len(r["losers"])) for r in rows]
        return self._mine_rollout(ro)

    def _mine_rollout(self, ro: Mapping[str, Any]) -> list[Group]:
        from rewardlang.runtime.preference import group_ids, mine_groups, rank_rows

        st = _mining_settings(self.program)
        prompts, columns = self._rollout_inputs
        ids, mask = ro["ids"], ro["mask"]
        completions = [self.tokenizer.decode(ids[i][mask[i].bool()], skip_special_tokens=True)
                       for i in range(ids.shape[0])]
        given: dict[str, list[Any]] = {"completion": completions}
        for inp in self.program.inputs:
            if inp.used and inp.name not in ("completion",):
                if inp.name == "prompt":
                    given["prompt"] = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
                else:
                    given[inp.name] = columns.get(inp.column, columns.get(inp.name))  # type: ignore[assignment]
        res = self.program.score(**given, step=self.global_step)
        masked = np.zeros(len(completions), dtype=bool)
        for m in res.masked.values():
            masked |= m
        ranked = rank_rows(self.program, res.total, res.components, masked, self.global_step)
        gid, _ = group_ids([i // self.cfg.num_generations for i in range(len(completions))])
        g, members, isw = mine_groups(gid, ranked.winners, ranked.losers, min_winners=st.min_winners,
                                      min_losers=st.min_losers, max_group=st.max_group)
        out = []
        for k in np.unique(g):
            sel = g == k
            m = members[sel]
            out.append((prompts[m[0]], [completions[i] for i in m], isw[sel].tolist()))
        return out

    # ---- the update: REINFORCE++ micro-batches, each with a GEPO share
    def update(self, ro: Mapping[str, Any]) -> dict[str, float]:
        groups = self._groups_for_update(ro)
        n_micro = self.cfg.ppo_epochs * self.cfg.num_mini_batches * max(
            1, (ro["seq"].shape[0] // self.cfg.num_mini_batches) // self.micro_batch)
        # one slice of the update's groups per micro-batch (cycled when there are fewer groups than micro-batches)
        self._update_groups = groups
        self._slices = [groups[i::n_micro] or groups[i % len(groups):i % len(groups) + 1] for i in range(n_micro)] \
            if groups else []
        self._micro = 0
        self._gepo_stats = {}
        self._parts = [0.0, 0.0]
        out = super().update(ro)
        for k, v in self._gepo_stats.items():
            out[k] = sum(v) / len(v)
        # the two parts' shares of the step's OORL loss (issue 21): Σ|w_rl·L_rl| and Σ|w_gepo·L_GEPO| over the
        # micro-batches, each over their sum. A share of the loss's value, not of the gradient: REINFORCE++'s
        # surrogate has whitened advantages, so its value is small even when its gradient is not
        rl, pref = self._parts
        if rl + pref > 0:
            out["oorl/rl_share"], out["oorl/gepo_share"] = rl / (rl + pref), pref / (rl + pref)
        out["pref/groups"] = float(len(groups))
        return out

    def _loss(self, ro: Mapping[str, Any], idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss, stats = super()._loss(ro, idx)
        gepo = 0.0
        if self._slices:
            gepo = self._gepo_backward(self._slices[self._micro % len(self._slices)])
            self._micro += 1
        # the two parts' magnitudes in this micro-batch's OORL loss; update() turns the step's sums into shares
        self._parts[0] += abs(self.cfg.w_rl * float(loss.detach()))
        self._parts[1] += abs(self.cfg.w_gepo * gepo)
        return self.cfg.w_rl * loss, stats

    def _member_logps(self, batch: Mapping[str, torch.Tensor], sl: slice, ref: bool) -> torch.Tensor:
        ids, att, cm = batch["input_ids"][sl], batch["attention_mask"][sl], batch["completion_mask"][sl]
        width = int(att.sum(1).max())
        ids, att, cm = ids[:, :width], att[:, :width], cm[:, :width]
        if ref:
            if self.ref_policy is not None:
                logits = self.ref_policy(input_ids=ids, attention_mask=att, use_cache=False).logits
            else:  # LoRA: the base model with the adapter disabled
                policy = self.accelerator.unwrap_model(self.model).policy
                with policy.disable_adapter():
                    logits = policy(input_ids=ids, attention_mask=att, use_cache=False).logits
        else:
            logits, _ = self.model(ids, att, with_values=False)
        lp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(2, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        return (lp * cm[:, 1:].to(lp.dtype)).sum(1)

    def _gepo_backward(self, groups: list[Group]) -> float:
        """Back-propagate w_gepo · L_GEPO of ``groups`` (chunked, exact) into the current accumulation; returns
        L_GEPO (unweighted)."""
        cfg, acc, tok = self.cfg, self.accelerator, self.tokenizer
        texts = [prompt_text(p, tok, self.chat) for p, ms, _ in groups for _ in ms]  # a chat always templated
        members = [m for _, ms, _ in groups for m in ms]
        winner = torch.tensor([w for _, _, ws in groups for w in ws], device=acc.device)
        group = torch.tensor([k for k, (_, ms, _) in enumerate(groups) for _ in ms], device=acc.device)
        batch = tokenize_members(tok, texts, members, acc.device)
        parts = [slice(a, min(a + cfg.gepo_chunk, len(members))) for a in range(0, len(members), cfg.gepo_chunk)]
        beta = self.gepo_beta
        with torch.no_grad():
            logp = torch.cat([self._member_logps(batch, sl, ref=False) for sl in parts])
            ref = torch.cat([self._member_logps(batch, sl, ref=True) for sl in parts])
        r = (beta * (logp - ref)).detach().requires_grad_(True)
        loss, st = gepo_loss(r, winner, group, cfg.gepo_lambda)
        (c,) = torch.autograd.grad(loss, r)
        for sl in parts:
            with acc.no_sync(self.model) if acc.num_processes > 1 else nullcontext():
                lp = self._member_logps(batch, sl, ref=False)
                acc.backward(cfg.w_gepo * (c[sl].to(lp.dtype) * beta * lp).sum())
        for k, v in (("gepo/loss", float(loss.detach())), ("pref/accuracy", float(st["accuracy"].mean())),
                     ("pref/margin", float(st["margin"].mean())), ("pref/winner_var", float(st["winner_var"].mean()))):
            self._gepo_stats.setdefault(k, []).append(v)
        return float(loss.detach())

    @property
    def gepo_beta(self) -> float:
        return self.cfg.beta if self.cfg.beta > 0 else DEFAULT_BETA


def train(spec: str, *, config_file: str | None = None, sets: Mapping[str, Any] | None = None,
          flags: Mapping[str, Any] | None = None, resume: bool = False, progress: bool | None = None,
          callbacks: Sequence[Any] = (), layers: Layers | None = None) -> RunResult:
    """Train with OORL on ``spec`` (its components are the rule reward; its ``preference { }`` section the GEPO
    groups); arguments as :func:`rewardlang.trainers.ppo.train`."""

    # 1-2. The spec, its parameters and the configuration (run.load_layers): REINFORCE++ (no critic); β = 0.1
    # unless a layer sets it (a choice: the paper gives none).
    prog, cfg, sources, params = layers or load_layers(spec, config_file, sets, flags)
    cfg.algorithm = "oorl"
    if sources.get("advantage_estimator") and cfg.advantage_estimator != "reinforce_pp":
        raise ConfigError(f"{sources['advantage_estimator']}: OORL's on-policy part is REINFORCE++ "
                          f"(advantage_estimator = \"reinforce_pp\"), not {cfg.advantage_estimator!r}")
    cfg.advantage_estimator = "reinforce_pp"
    if "beta" not in sources:
        cfg.beta = DEFAULT_BETA
    if cfg.preference_data:  # a bad groups file is named before the run directory is made or a model loads
        preference_rows(cfg, "groups")
    run_dir, checkpoint = open_run(prog, cfg, resume)

    # 3. Data, models, trainer (and train.eval's held-out problems, checked before any model is loaded).
    heldout = report.heldout_rows(cfg)
    trainer = OORLTrainer(cfg, prog, run_dir, progress=progress, callbacks=callbacks)
    record_config(trainer, run_dir, checkpoint, prog, cfg, sources, params, {"gepo_beta": trainer.gepo_beta})

    # 4. Held-out pass@1 before, train, save the final policy, pass@1 after, the run's README.
    return finish_run(trainer, trainer.tokenizer, cfg, run_dir, checkpoint, heldout, program=prog, progress=progress,
                      save=trainer.save_models)
