"""Training metrics: a JSONL log per run, step timing (reward share of the step, tokens/s), a live progress bar.

Every logging step appends one JSON object to ``RUN_DIR/metrics.jsonl``: TRL's own metrics (``reward``,
``reward_std``, ``rewards/<component>/mean``, ``rewards/<component>/std``, ``frac_reward_zero_std`` — the share of
completions whose prompt group has zero reward variance —, ``kl``, ``loss``, ``entropy``, ``completions/mean_length``,
``clip_ratio/*``, ``learning_rate``, ``grad_norm``) and rewardlang's (``advantages/*``, ``masked/*``, ``time/*``,
``tokens_per_second``; see :class:`rewardlang.trainers.grpo.SpecGRPOTrainer`). TensorBoard receives the same values
when it is installed (``report_to=auto``).

    >>> import json, tempfile, os
    >>> d = tempfile.mkdtemp(); path = os.path.join(d, "metrics.jsonl")
    >>> _ = open(path, "w").write("".join(json.dumps({"step": s, "reward": s / 10}) + "\\n" for s in (1, 2, 3)))
    >>> truncate_after(path, 2)
    >>> [r["step"] for r in read_metrics(path)]
    [1, 2]
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from rewardlang.trainers.audit import AuditGuard
from rewardlang.trainers.runlog import MetricsError, read_metrics

if TYPE_CHECKING:  # pragma: no cover
    from transformers import TrainerControl, TrainerState, TrainingArguments

__all__ = ["MetricsError", "JsonlMetricsCallback", "StepTimingCallback", "ProgressCallback", "RewardClock", "read_metrics",
           "truncate_after"]


def truncate_after(path: str, step: int) -> None:
    """Drop records after ``step`` (a resumed run rewrites the steps that followed its checkpoint), and a torn last
    record (:func:`read_metrics` names it)."""
    if not os.path.exists(path):
        return
    from rewardlang.outputs import atomic_write

    kept = [r for r in read_metrics(path) if r.get("step", 0) <= step and "train_runtime" not in r]
    with atomic_write(path) as fh:  # a kill while rewriting keeps the old log, never a cut one
        for r in kept:
            fh.write(json.dumps(r) + "\n")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN
    return value


class RewardClock:
    """Seconds spent in reward functions, accumulated by the reward wrappers and read once per optimizer step.

    ``hidden`` is the part of ``seconds`` the step did not wait for: scored in a thread while the step's forward
    passes ran (GRPO's :class:`rewardlang.trainers.grpo_overlap.RewardOverlap`); 0 where the reward is scored
    inline.

        >>> c = RewardClock(); c.seconds, c.hidden = 2.0, 1.5
        >>> c.take_hidden(), c.take(), c.seconds
        (1.5, 2.0, 0.0)
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.hidden = 0.0

    def take(self) -> float:
        out, self.seconds = self.seconds, 0.0
        return out

    def take_hidden(self) -> float:
        out, self.hidden = self.hidden, 0.0
        return out


class MaskedRunError(RuntimeError):
    """A run stopped because every sample of several consecutive steps was masked (no reward to train on)."""


class MaskedRunGuard:
    """Stops a run in which every sample of ``steps`` consecutive optimizer steps is masked.

    Such a run has no reward at all (a tool that is broken, a model checkpoint or an input column missing): it
    would go on "training" with loss 0 and exit 0. The guard reads ``masked/rate`` from each log record (every
    generating trainer logs it) and raises :class:`MaskedRunError` naming the most common reason (the program's
    count of why totals were masked, else the component masked most often). ``steps = 0`` never stops.
    :func:`rewardlang.trainers.run.open_run` registers one per run, keyed by the run's metrics file, and the run's
    :class:`JsonlMetricsCallback` picks it up, so every trainer gets it.

        >>> g = MaskedRunGuard(None, steps=2)
        >>> g.observe(1, {"masked/rate": 1.0, "masked/acc": 1.0})
        >>> g.observe(2, {"masked/rate": 1.0, "masked/acc": 1.0})
        Traceback (most recent call last):
        ...
        rewardlang.trainers.metrics.MaskedRunError: every sample of the last 2 steps (1-2) was masked: no reward to train on. Most common cause: component `acc` (masked in 100% of samples). Fix it, or set train.stop_after_masked_steps=0 to go on anyway
    """

    _REGISTRY: dict[str, "MaskedRunGuard"] = {}

    def __init__(self, program: Any, steps: int = 3) -> None:
        self.program = program
        self.steps = int(steps)
        self.run = 0  # consecutive fully masked steps so far
        self.first = 0
        self.last_step = 0

    @classmethod
    def register(cls, metrics_path: str, program: Any, steps: int) -> "MaskedRunGuard":
        guard = cls._REGISTRY[os.path.abspath(metrics_path)] = cls(program, steps)
        return guard

    @classmethod
    def for_path(cls, metrics_path: str) -> "MaskedRunGuard | None":
        return cls._REGISTRY.get(os.path.abspath(metrics_path))

    def observe(self, step: int, logs: dict[str, Any]) -> None:
        """One log record at optimizer step ``step``; raises :class:`MaskedRunError` when the run must stop."""
        rate = logs.get("masked/rate")
        if self.steps <= 0 or rate is None:
            return
        covered = max(1, step - self.last_step)  # a record covers the steps since the previous one
        self.last_step = step
        if float(rate) < 1.0:
            self.run = 0
            if self.program is not None:
                self.program.mask_reasons.clear()
            return
        if self.run == 0:
            self.first = step - covered + 1
        self.run += covered
        if self.run >= self.steps:
            raise MaskedRunError(
                f"every sample of the last {self.run} steps ({self.first}-{step}) was masked: no reward to train "
                f"on. Most common cause: {self._cause(logs)}. Fix it, or set train.stop_after_masked_steps=0 to "
                "go on anyway")

    def _cause(self, logs: dict[str, Any]) -> str:
        reasons = getattr(self.program, "mask_reasons", None)
        if reasons:
            (why, n), = reasons.most_common(1)
            return f"{why} ({n} of {sum(reasons.values())} masked samples)"
        shares = {k.removeprefix("masked/"): float(v) for k, v in logs.items()
                  if k.startswith("masked/") and k not in ("masked/rate", "masked/count") and v is not None}
        if shares:
            name = max(shares, key=lambda k: shares[k])
            return f"component `{name}` (masked in {100 * shares[name]:.0f}% of samples)"
        return "unknown (see the run's masked/* metrics)"


class JsonlMetricsCallback(TrainerCallback):
    """Append each log record (with its ``step``) to ``path``; a resumed run first drops the records after its
    checkpoint. The run's :class:`MaskedRunGuard` (if :func:`~rewardlang.trainers.run.open_run` registered one for
    ``path``) sees every record and stops a run whose samples are all masked."""

    def __init__(self, path: str) -> None:
        from rewardlang.trainers.health import LearningGuard

        self.path = path
        self.guard = MaskedRunGuard.for_path(path)
        # the spec's audits: each record's statistics and gaps added, its alarms said (trainers/audit.py)
        self.audit = AuditGuard.for_path(path)
        # says (once each) when the run cannot learn: zero-variance groups, nothing mined, a constant component
        self.learning = LearningGuard()
        # the whole run's loss so far (each record's mean loss times the steps it covers), for the summary of a
        # resumed run: transformers' `train_loss` averages only the steps of the current `train()` call
        self._loss_sum = 0.0
        self._loss_step = 0  # the step of the last record counted in _loss_sum
        self._resumed_at = 0  # the checkpoint step this call started from (0: a fresh run)
        self._this_call = 0.0  # the loss summed over this call's records

    def on_train_begin(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                       **kwargs: Any) -> None:
        if state.is_world_process_zero:
            truncate_after(self.path, state.global_step)
            self._resumed_at = state.global_step
            if state.global_step and os.path.exists(self.path):
                for r in read_metrics(self.path):
                    self._count_loss(r)
                if self.audit is not None:
                    self.audit.restore(read_metrics(self.path), state.global_step)
            self._this_call = 0.0

    def _count_loss(self, record: dict[str, Any]) -> None:
        loss, step = record.get("loss"), int(record.get("step") or 0)
        if isinstance(loss, (int, float)) and "train_loss" not in record and step > self._loss_step:
            part = loss * (step - self._loss_step)
            self._loss_sum += part
            self._this_call += part
            self._loss_step = step

    def _whole_run_loss(self, logs: dict[str, Any], step: int) -> None:
        """A resumed run's summary ``train_loss`` over every step of the run, as an uninterrupted run reports it
        (bit for bit with ``logging_steps = 1``: the same losses summed in the same order)."""
        new_steps = step - self._resumed_at
        if not self._resumed_at or not isinstance(logs.get("train_loss"), (int, float)) or new_steps <= 0:
            return
        # the part of this call's loss no record carried (steps after the last logging step), as transformers
        # added it to its own total
        tail = logs["train_loss"] * new_steps - self._this_call if self._loss_step < step else 0.0
        logs["train_loss"] = (self._loss_sum + tail) / step

    def on_log(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        if "train_loss" in logs:
            self._whole_run_loss(logs, state.global_step)
        else:
            self._count_loss({**logs, "step": state.global_step})
        if self.audit is not None:
            self.audit.annotate(state.global_step, logs)
        record = {"step": state.global_step, **{k: _clean(v) for k, v in logs.items()}}
        from rewardlang.outputs import append_record

        append_record(self.path, json.dumps(record) + "\n")  # whole or cut back: never half a record
        if "train_runtime" not in logs:
            self.learning.observe(state.global_step, logs)
        if self.audit is not None:  # an alarm: said, recorded; with stop_on_alarm, a checkpoint and the end
            self.audit.observe(state.global_step, logs, control)
        if self.guard is not None:  # after writing: the record that stops the run is in the metrics
            self.guard.observe(state.global_step, logs)


class StepTimingCallback(TrainerCallback):
    """Wall time of each optimizer step, the reward functions' share of it, and tokens/s; with a trainer that has a
    ``step_reward`` (:class:`rewardlang.trainers.health.StepReward`), that step's reward metrics too (slowest program,
    timeouts, time per component, zero-variance groups, component ranges).

    The values are appended to the trainer's metric buffer at ``on_step_end``, which transformers calls just before
    it logs, so they travel with TRL's own metrics (JSONL, TensorBoard, progress bar).
    """

    def __init__(self, clock: RewardClock) -> None:
        self.clock = clock
        self.trainer: Any = None  # set by the trainer that owns this callback
        self._t0 = 0.0
        self._tokens0 = 0

    def on_step_begin(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                      **kwargs: Any) -> None:
        self._t0 = time.perf_counter()
        self._tokens0 = state.num_input_tokens_seen
        self.clock.take()
        self.clock.take_hidden()
        step_reward = getattr(self.trainer, "step_reward", None)
        if step_reward is not None:
            step_reward.begin()

    def on_step_end(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                    **kwargs: Any) -> None:
        seconds = time.perf_counter() - self._t0
        reward = self.clock.take()
        hidden = min(self.clock.take_hidden(), reward)
        metrics = self.trainer._metrics["train"]
        metrics["time/step"].append(seconds)
        metrics["time/reward"].append(reward)
        # the share of the step the reward held it: what was scored while forward passes ran is not counted
        metrics["time/reward_share"].append((reward - hidden) / seconds if seconds > 0 else 0.0)
        if isinstance(getattr(self.trainer, "overlap_reward", None), bool):  # GRPO: scored beside the passes
            metrics["time/reward_wait"].append(reward - hidden)
            metrics["time/reward_hidden"].append(hidden)
            metrics["time/reward_hidden_share"].append(hidden / reward if reward > 0 else 0.0)
        step_reward = getattr(self.trainer, "step_reward", None)
        if step_reward is not None:
            for k, v in step_reward.take().items():
                metrics[k].append(v)
        # tokens the trainer counted this step: transformers' count, or the trainer's own (`tokens_seen`, the GEPO
        # step's); a trainer that counts none logs no tokens_per_second rather than a 0 a plot would draw
        tokens = state.num_input_tokens_seen - self._tokens0
        own = getattr(self.trainer, "tokens_seen", None)
        if not tokens and own is not None:
            tokens, self.trainer.tokens_seen = own, 0
        if tokens:
            metrics["tokens_per_second"].append(tokens / max(seconds, 1e-9))


class ProgressCallback(TrainerCallback):
    """A progress bar over optimizer steps that shows the live mean reward (replaces transformers' own bar)."""

    def __init__(self) -> None:
        self.bar: Any = None

    def on_train_begin(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                       **kwargs: Any) -> None:
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="train", dynamic_ncols=True)

    def on_log(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.bar is None or not logs or "reward" not in logs:
            return
        shown = {"reward": logs.get("reward")}
        if logs.get("time/reward_share") is not None:
            shown["reward_time"] = f"{100 * logs['time/reward_share']:.0f}%"
        if logs.get("masked/rate"):
            shown["masked"] = f"{100 * logs['masked/rate']:.0f}%"
        self.bar.set_postfix({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in shown.items()},
                             refresh=False)

    def on_step_end(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                    **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_train_end(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                     **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
