"""``train.resample_tied``: a PPO/OORL step whose every prompt group tied is sampled again from the next prompts
(DAPO's dynamic sampling, per batch), and a resumed run reads the data where the uninterrupted one did."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rewardlang.trainers.config import ConfigError, resolve_config

SPEC = """\
spec toy_resample "rows marked vary pay the completion's length, the others 0: their groups always tie"

input mode: text

component r in [0, 1000] = len(completion) if mode == "vary" else 0

preference { winners = r > 15, losers = r <= 15 }

train {
    algorithm = "oorl",
    num_generations = 4,
    prompts_per_step = 2,
    max_completion_length = 12,
    learning_rate = 1e-3,
    resample_tied = 3,
}
"""

#: rows of the toy data set: mostly "tie" (a constant reward), a few "vary"
MODES = ["tie"] * 13 + ["vary"] * 3


def _all_tied(totals: list[float] | None, n: int) -> bool:
    from accelerate import Accelerator

    from rewardlang.trainers.ppo import PPOTrainer

    me = SimpleNamespace(cfg=SimpleNamespace(num_generations=n), accelerator=Accelerator(cpu=True))
    return PPOTrainer._all_tied(me, None if totals is None else np.asarray(totals, dtype=float))  # type: ignore[arg-type]


def test_a_batch_is_tied_only_when_every_group_is() -> None:
    nan = float("nan")
    assert _all_tied([0, 0, 0, 0, 1, 1, 1, 1], 4)           # two groups, each tied (at different values)
    assert not _all_tied([0, 0, 0, 0, 1, 1, 0, 1], 4)       # the second group varies
    assert _all_tied([0, nan, 0, 0, 1, nan, nan, nan], 4)   # masked samples are not values; one left ties
    assert not _all_tied([0, nan, 1, nan], 4)
    assert _all_tied(None, 4) is False                      # no totals (nothing to compare): never resampled


@pytest.mark.parametrize("sets, message", [
    ({"train.resample_tied": -1}, "`resample_tied` must be 0 (never) or positive (got -1)"),
    ({"train.resample_tied": 2, "train.num_generations": 1}, "needs groups: `num_generations` is 1"),
])
def test_bad_resample_tied_values_are_errors(sets: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_config(spec_train={"algorithm": "oorl"}, cli_sets=sets)


def test_resample_tied_is_read_by_ppo_and_oorl_only() -> None:
    with pytest.raises(ConfigError, match="`resample_tied` is read by the ppo and oorl trainers only"):
        resolve_config(spec_train={"algorithm": "grpo"}, cli_sets={"train.resample_tied": 2})


def _files(tmp: Path) -> tuple[Path, Path]:
    spec = tmp / "toy_resample.reward"
    spec.write_text(SPEC, encoding="utf-8")
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}: say it.", "mode": m}) + "\n"
                            for i, m in enumerate(MODES)))
    return spec, data


def expected_rounds(steps: int, seed: int, limit: int) -> list[int]:
    """The rounds each step should put aside, from the data order alone: the batch of a step holds the 2 prompts
    at position (step + batches put aside so far) x 2 (2 prompts a step on one process, or 1 on each of two) and
    ties when neither is a "vary" row (a "vary" row's four samples of random text differ in length)."""
    from rewardlang.trainers.ppo import _DataOrder

    order, taken, out = _DataOrder(len(MODES), seed), 0, []
    for step in range(steps):
        rounds = 0
        while rounds < limit and all(MODES[order.index((step + taken) * 2 + i)] == "tie" for i in range(2)):
            rounds += 1
            taken += 1
        out.append(rounds)
    return out


@pytest.mark.slow
def test_tied_batches_are_sampled_again_and_a_resumed_run_reads_on_from_there(tmp_path: Path) -> None:
    from transformers import TrainerCallback

    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.run import train

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 2:
                control.should_training_stop = True

    spec, data = _files(tmp_path)
    sets = {"train.max_steps": 4, "train.save_steps": 2}
    flags = {"dataset": str(data), "seed": 0}
    full = train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "full")}, progress=False)
    rec = [r for r in read_metrics(full.metrics_path) if "reward" in r]
    expected = expected_rounds(4, 0, 3)
    assert [int(r["resample/rounds"]) for r in rec] == expected
    assert sum(expected) > 0                                   # this data order does put batches aside
    assert [int(r["resample/total"]) for r in rec] == list(np.cumsum(expected))
    # every step trained on a batch with a varying group, unless it ran out of rounds
    for r, rounds in zip(rec, expected):
        assert r["groups/zero_variance"] < 1.0 or rounds == 3
    # stopped at step 2 and resumed: the same batches (the checkpoint keeps how many were put aside)
    train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
          callbacks=[StopAt()])
    state = json.loads((tmp_path / "part" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["resampled"] == sum(expected[:2])
    resumed = train(str(spec), sets=sets, flags={**flags, "output_dir": str(tmp_path / "part")}, progress=False,
                    resume=True)
    again = [r for r in read_metrics(resumed.metrics_path) if "reward" in r]
    key = ("step", "reward", "resample/rounds", "resample/total")
    assert [tuple(r[k] for k in key) for r in again] == [tuple(r[k] for k in key) for r in rec]

    # without the setting nothing is put aside: the same data order, one batch a step
    off = train(str(spec), sets={**sets, "train.resample_tied": 0},
                flags={**flags, "output_dir": str(tmp_path / "off")}, progress=False)
    assert all(r["resample/rounds"] == 0 for r in read_metrics(off.metrics_path) if "reward" in r)
