"""A run in which every sample of several consecutive steps is masked stops with an error naming the cause
(`train.stop_after_masked_steps`, default 3), for every generating trainer: the guard sits in the metrics callback
that `open_run` registers for each run (rewardlang/trainers/metrics.py, MaskedRunGuard). Before, such a run
"trained" to the end with loss 0 and exited 0. Tiny model, a few 4-token completions: seconds per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlang.trainers.metrics import MaskedRunError, read_metrics
from rewardlang.trainers.run import train

# every completion scores 2, outside the declared range and with no on_error: every total is masked
ALL_MASKED = """
spec all_masked "every sample is masked: the value is outside the declared range"
input completion: text
component broken in [0, 1] = 2 + 0 * len(completion)
train {{
    algorithm = "{algo}",
    max_steps = 8,
    num_generations = 2,
    prompts_per_step = 1,
    max_completion_length = 4,
    learning_rate = 1e-3,
}}
"""

# half the samples masked (odd lengths): never stops
HALF_MASKED = ALL_MASKED.replace("2 + 0 * len(completion)", "len(completion) % 2 * 2")


def _run(tmp_path: Path, spec_text: str, algo: str, sets: dict | None = None):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "s.reward"
    spec.write_text(spec_text.format(algo=algo))
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(4)))
    return train(str(spec), sets=sets or {}, flags={"model": "tiny", "dataset": str(data),
                                                     "output_dir": str(tmp_path / "run")}, progress=False)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_fully_masked_run_stops_naming_the_cause(tmp_path: Path, algo: str) -> None:
    with pytest.raises(MaskedRunError) as ei:
        _run(tmp_path, ALL_MASKED, algo)
    msg = str(ei.value)
    assert "every sample of the last 3 steps (1-3) was masked" in msg
    assert "component `broken`: value 2 outside the declared range [0, 1]" in msg
    # it stopped at step 3 of 8: the metrics hold exactly the three masked steps
    logged = [r for r in read_metrics(str(tmp_path / "run" / "metrics.jsonl")) if "masked/rate" in r]
    assert [r["step"] for r in logged] == [1, 2, 3] and all(r["masked/rate"] == 1.0 for r in logged)


def test_the_number_of_steps_is_a_setting_and_zero_never_stops(tmp_path: Path) -> None:
    with pytest.raises(MaskedRunError, match="last 2 steps"):
        _run(tmp_path / "a", ALL_MASKED, "grpo", {"train.stop_after_masked_steps": 2})
    result = _run(tmp_path / "b", ALL_MASKED, "grpo", {"train.stop_after_masked_steps": 0, "train.max_steps": 4})
    assert result.global_step == 4


def test_a_partly_masked_run_goes_on(tmp_path: Path) -> None:
    result = _run(tmp_path, HALF_MASKED, "grpo", {"train.max_steps": 5})
    assert result.global_step == 5
