"""Metrics files, the plot command, the accelerate configs, CLI error paths that need no spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rewardlang.trainers.cli import app
from rewardlang.trainers.metrics import JsonlMetricsCallback, read_metrics, truncate_after
from rewardlang.trainers.plot import plot_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_run(d, n: int = 12) -> None:
    with open(os.path.join(d, "metrics.jsonl"), "w") as fh:
        for s in range(1, n + 1):
            fh.write(json.dumps({"step": s, "reward": s / n, "reward_std": 0.1, "rewards/fmt/mean": s / (2 * n),
                                 "rewards/acc/mean": None, "advantages/mean": 0.0, "masked/rate": 0.0,
                                 "loss": 0.01, "time/reward_share": 0.02, "tokens_per_second": 900.0}) + "\n")
        fh.write(json.dumps({"step": n, "train_runtime": 3.0}) + "\n")


def test_plot_writes_a_png_with_the_logged_panels(tmp_path) -> None:
    _write_run(str(tmp_path))
    out = plot_run(str(tmp_path))
    assert out == str(tmp_path / "curves.png")
    with open(out, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(app, ["plot", str(tmp_path), "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 0, result.output
    assert os.path.getsize(tmp_path / "x.png") > 10_000


def test_plot_errors_are_clean(tmp_path) -> None:
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 1
    assert "no metrics.jsonl" in result.output and "Traceback" not in result.output


def test_truncate_after_keeps_steps_up_to_the_checkpoint(tmp_path) -> None:
    _write_run(str(tmp_path), n=6)
    path = str(tmp_path / "metrics.jsonl")
    truncate_after(path, 4)
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3, 4]


def test_jsonl_callback_writes_step_and_replaces_nan(tmp_path) -> None:
    from transformers import TrainerControl, TrainerState

    cb = JsonlMetricsCallback(str(tmp_path / "m.jsonl"))
    state = TrainerState()
    state.global_step = 3
    cb.on_log(None, state, TrainerControl(), logs={"reward": 0.5, "kl": float("nan")})
    assert read_metrics(str(tmp_path / "m.jsonl")) == [{"step": 3, "reward": 0.5, "kl": None}]


@pytest.mark.parametrize("name,kind", [("ddp", "MULTI_GPU"), ("zero2", "DEEPSPEED"), ("zero3", "DEEPSPEED"),
                                       ("fsdp", "FSDP")])
def test_accelerate_configs_load(name: str, kind: str) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(os.path.join(ROOT, "examples", "accelerate", f"{name}.yaml"))
    assert cfg.distributed_type.value == kind
    assert cfg.mixed_precision == "bf16"
    if name.startswith("zero"):
        assert cfg.deepspeed_config["zero_stage"] == int(name[-1])
    if name == "fsdp":
        assert cfg.fsdp_config["fsdp_version"] == 2


def test_cli_missing_spec_and_bad_set_fail_without_traceback(tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--spec", str(tmp_path / "none.reward")])
    assert result.exit_code == 1 and "not found" in result.output and "Traceback" not in result.output


def test_importing_cli_plot_config_does_not_import_torch() -> None:
    code = ("import sys; import rewardlang.trainers, rewardlang.trainers.cli, rewardlang.trainers.config, "
            "rewardlang.trainers.plot; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
