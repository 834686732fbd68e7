"""GRPO's reward computed while the step's forward passes run (issue 38), as PPO and OORL do.

TRL 1.16's ``GRPOTrainer._generate_and_score_completions`` generates, then runs the forward passes that need no
reward (the old policy's log-probabilities when they are needed, the reference's with ``beta > 0``), then calls the
reward functions, and the update's own forward pass comes after all of it. :class:`RewardOverlap` (a mixin of
:class:`rewardlang.trainers.grpo.SpecGRPOTrainer`) changes only *when* things run, never what they compute:

1. as soon as ``_generate`` returns, the batch is handed to the scoring thread with exactly the arguments TRL will
   pass to the reward functions (:meth:`SpecRewardSet.prefetch`); TRL's old/reference forward passes then run
   beside it;
2. when TRL is about to call the reward functions (``_calculate_rewards``), the update's forward pass for the micro-batch the next ``training_step`` trains on is run first, with gradients, on
   exactly the tensors TRL will build for it (same padding, same shuffle: the permutation is drawn from a copy of
   the generator TRL's ``shuffle_sequence_dict`` will draw from); ``_get_per_token_logps_and_entropies`` hands that
   result to ``_compute_loss`` when its inputs are equal to those tensors, element for element, and computes it
   as usual otherwise.

So the rewards, the advantages, the losses and the gradients are those of the step without the overlap, bit for
bit (``tests/trainers/test_grpo_overlap.py``): the scoring thread reads only the arguments, a forward pass is a
function of its input tensors and the unchanged weights, and the forward pass run ahead draws no random numbers (it
is checked: a model whose forward pass draws from the generator, dropout, gets the generator put back and is never
run ahead again). The forward pass is run ahead only in one process (a second forward pass of a DDP model that a
mismatch would cause on one rank only would desynchronise the ranks) and for text-only batches without tools or a
``rollout_func``.

The clock (:class:`rewardlang.trainers.metrics.RewardClock`) counts the scoring's wall time in ``seconds`` and the
part of it the step did not wait for in ``hidden``; ``time/reward_share`` is what the step waited for over the step
(docs/training.md).
"""

from __future__ import annotations

from typing import Any

import torch
from trl.trainer.utils import pad


class RewardOverlap:
    """Mixin for a TRL ``GRPOTrainer`` subclass whose ``spec_rewards`` has ``prefetch`` (see the module docstring).

    ``overlap_reward`` (the constructor's argument, default the class's True) turns the whole overlap off; ``forward_ahead`` counts the update forward
    passes run ahead that ``_compute_loss`` used (``used``) and those it did not (``missed``: recomputed).
    """

    overlap_reward: bool = True

    def _overlap_init(self, overlap_reward: bool | None) -> None:
        if overlap_reward is not None:
            self.overlap_reward = overlap_reward
        self.forward_ahead = {"used": 0, "missed": 0}
        self._ahead_inputs: list[dict[str, Any]] | None = None  # the generation batch being scored
        self._ahead_ids: tuple[list[Any], list[Any], Any, Any] | None = None  # what _generate returned
        self._ahead_stash: tuple[Any, ...] | None = None  # (model, input_ids, attention_mask, keep, result)
        self._ahead_model: Any = None  # the model training_step trains (wrapped as the loss sees it)
        self._ahead_off = False  # the model's forward pass draws random numbers: never run it ahead

    # ---------------------------------------------------------------------------------------- TRL's hooks
    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        self._ahead_model = model
        return super().training_step(model, inputs, num_items_in_batch)  # type: ignore[misc]

    def _generate(self, prompts: list) -> Any:
        out = super()._generate(prompts)  # type: ignore[misc]
        inputs = self._ahead_inputs
        if not self.overlap_reward or inputs is None:
            return out
        prompt_ids_list, completion_ids_list, tool_mask_list, completions, _, extra_fields, images, _ = out
        if extra_fields:  # a rollout_func's fields join the inputs after the forward passes: score as TRL does
            return out
        self.spec_rewards.prefetch(self._reward_kwargs(inputs, prompts, completions, completion_ids_list))
        self._ahead_ids = (prompt_ids_list, completion_ids_list, tool_mask_list, images)
        return out

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        ids, self._ahead_ids = self._ahead_ids, None
        if ids is not None and self._can_run_ahead(*ids):
            self._run_ahead(ids[0], ids[1])
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)  # type: ignore[misc]

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **kwargs: Any) -> Any:
        stash = self._ahead_stash
        if stash is not None and torch.is_grad_enabled() and compute_entropy:  # _compute_loss's call
            self._ahead_stash = None
            s_model, s_ids, s_mask, s_keep, s_aux, result = stash
            if (model is s_model and batch_size is None and logits_to_keep == s_keep and compute_aux_loss == s_aux
                    and all(v is None for v in kwargs.values()) and input_ids.shape == s_ids.shape
                    and attention_mask.shape == s_mask.shape and torch.equal(input_ids, s_ids)
                    and torch.equal(attention_mask, s_mask)):
                self.forward_ahead["used"] += 1
                return result
            self.forward_ahead["missed"] += 1
        return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss, **kwargs)

    # ------------------------------------------------------------------------------------------- helpers
    def _reward_kwargs(self, inputs: list[dict[str, Any]], prompts: Any, completions: Any,
                       completion_ids_list: Any) -> dict[str, Any]:
        """The arguments TRL 1.16's ``_calculate_rewards`` calls each reward function with."""
        keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
        kwargs: dict[str, Any] = {key: [example[key] for example in inputs] for key in keys}
        kwargs["trainer_state"] = self.state
        kwargs["log_extra"] = self._log_completion_extra
        kwargs["log_metric"] = self._log_metric
        if self.environments is not None:
            kwargs["environments"] = self.environments
        return {"prompts": prompts, "completions": completions, "completion_ids": completion_ids_list, **kwargs}

    def _can_run_ahead(self, prompt_ids_list: Any, completion_ids_list: Any, tool_mask_list: Any,
                       images: Any) -> bool:
        return (not self._ahead_off and self.model.training and self._ahead_model is not None
                and self.accelerator.num_processes == 1 and not self.tools and self.rollout_func is None
                and self.environment_factories is None and tool_mask_list is None and images is None)

    def _run_ahead(self, prompt_ids_list: list[list[int]], completion_ids_list: list[list[int]]) -> None:
        """The update's forward pass for the micro-batch the next ``training_step`` trains on (module docstring)."""
        device = self.accelerator.device
        pad_id = self._tokenizer.pad_token_id
        # TRL's own padding of the generation batch (_generate_and_score_completions)
        prompt_ids = pad([torch.tensor(ids) for ids in prompt_ids_list], padding_value=pad_id, padding_side="left",
                         pad_to_multiple_of=self.pad_to_multiple_of).to(device=device)
        prompt_mask = pad([torch.ones(len(ids), dtype=torch.long) for ids in prompt_ids_list], padding_value=0,
                          padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of).to(device=device)
        completion_ids = pad([torch.tensor(ids) for ids in completion_ids_list], padding_value=pad_id,
                             padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of).to(device=device)
        completion_mask = pad([torch.ones(len(ids), dtype=torch.long) for ids in completion_ids_list],
                              padding_value=0, padding_side="right",
                              pad_to_multiple_of=self.pad_to_multiple_of).to(device=device)
        if self.mask_truncated_completions:
            eos_and_pad = [*self.eos_token_ids, pad_id]
            is_truncated = torch.tensor([ids[-1] not in eos_and_pad for ids in completion_ids_list], device=device)
            completion_mask = completion_mask * (~is_truncated).unsqueeze(1).int()
        # the permutation shuffle_sequence_dict will draw next (torch.randperm on the default generator), drawn
        # from a copy of the generator's state; then the split into steps_per_generation micro-batches
        state = torch.get_rng_state()
        generator = torch.Generator()
        generator.set_state(state)
        n = len(completion_ids_list)
        perm = torch.randperm(n, generator=generator)
        chunk = n // self.args.steps_per_generation
        k = self._step % self.args.steps_per_generation
        rows = perm[k * chunk:(k + 1) * chunk]
        input_ids = torch.cat([prompt_ids[rows], completion_ids[rows]], dim=1)
        attention_mask = torch.cat([prompt_mask[rows], completion_mask[rows]], dim=1)
        keep = completion_ids.size(1)
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        model = self._ahead_model
        with torch.enable_grad(), self.compute_loss_context_manager():
            result = super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, keep, compute_entropy=True,
                compute_aux_loss=self.aux_loss_enabled)
        drew = not torch.equal(torch.get_rng_state(), state) or (
            cuda is not None and any(not torch.equal(a, b) for a, b in zip(cuda, torch.cuda.get_rng_state_all())))
        if drew:  # dropout or the like: put the generator back, and compute the loss's pass where TRL does
            torch.set_rng_state(state)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
            self._ahead_off = True
            return
        self._ahead_stash = (model, input_ids, attention_mask, keep, self.aux_loss_enabled, result)
