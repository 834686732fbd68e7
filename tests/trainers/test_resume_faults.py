"""Issue 26 class 6 and issue 25 major 12: a resumed run's summary equals the uninterrupted run's, a damaged
checkpoint is a plain error naming the file and the way on, and a metrics.jsonl whose last record was cut short is
named and handled by --resume and plot."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.trainers.cli import app
from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.metrics import MetricsError, read_metrics, truncate_after
from rewardlang.trainers.run import checkpoint_damage


def _metrics(d, torn: str = '{"step": 4, "reward": 0.') -> str:
    path = os.path.join(d, "metrics.jsonl")
    with open(path, "w") as fh:
        fh.writelines(json.dumps({"step": s, "reward": s / 10, "loss": 0.5, "tokens_per_second": 9.0}) + "\n"
                      for s in (1, 2, 3))
        fh.write(torn)
    return path


# ------------------------------------------------------------------ a torn last record (issue 25 major 12)
def test_a_torn_last_record_is_named_and_dropped(tmp_path) -> None:
    path = _metrics(tmp_path)
    said: list[str] = []
    assert [r["step"] for r in read_metrics(path, warn=said.append)] == [1, 2, 3]
    assert said == [f"{path}:4: the last record was cut short (the run was stopped while writing it); dropped"]
    truncate_after(path, 2)  # what --resume does: the torn line goes with the steps after the checkpoint
    assert Path(path).read_text().splitlines() == [json.dumps({"step": s, "reward": s / 10, "loss": 0.5,
                                                          "tokens_per_second": 9.0}) for s in (1, 2)]


def test_a_bad_line_before_the_last_is_an_error_naming_it(tmp_path) -> None:
    path = _metrics(tmp_path, torn='{"step": 4}\n')
    lines = Path(path).read_text().splitlines()
    lines[1] = lines[1][:20]
    Path(path).write_text("\n".join(lines) + "\n")
    with pytest.raises(MetricsError, match=rf"{path}:2: not a metrics record \(invalid JSON"):
        read_metrics(path)


def test_plot_draws_a_run_whose_last_record_was_cut_and_names_the_line(tmp_path) -> None:
    path = _metrics(tmp_path)
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"{path}:4: the last record was cut short" in result.output
    assert os.path.getsize(tmp_path / "curves.png") > 1000
    lines = Path(path).read_text().splitlines()
    Path(path).write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 1 and f"{path}:2: not a metrics record" in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ damaged checkpoints (issue 26 class 6)
def _safetensors(path: str) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.arange(64, dtype=torch.float32)}, path)


def _torch_file(path: str) -> None:
    import torch

    torch.save({"state": torch.arange(1000, dtype=torch.float32)}, path)


FILES = ("model.safetensors", "optimizer.pt", "rng_state.pth", "scheduler.pt",
         # PPO/OORL checkpoints: accelerate's state in its own folder, the critic beside the policy
         "accelerate/optimizer.bin", "accelerate/random_states_0.pkl", "critic/model.safetensors")


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("how", ["truncated", "half", "empty", "flipped"])
def test_checkpoint_damage_names_the_file(tmp_path, name: str, how: str) -> None:
    ck = tmp_path / "checkpoint-2"
    (ck / "accelerate").mkdir(parents=True)
    (ck / "critic").mkdir()
    (ck / "trainer_state.json").write_text('{"global_step": 2}')
    for other in FILES:
        (_safetensors if other.endswith(".safetensors") else _torch_file)(str(ck / other))
    assert checkpoint_damage(str(ck)) is None
    data = (ck / name).read_bytes()
    if how == "flipped":
        if name.endswith(".safetensors"):
            pytest.skip("safetensors has no checksum: a flipped tensor byte is not detectable")
        i = data.index(b"\x00\x00\x80\x3f")  # a float 1.0 in the stored tensor
        data = data[:i] + b"\x01" + data[i + 1:]
    else:
        data = {"truncated": data[:-7], "half": data[: len(data) // 2], "empty": b""}[how]
    (ck / name).write_bytes(data)
    problem = checkpoint_damage(str(ck))
    assert problem is not None and problem.startswith(name), problem


# ------------------------------------------------------------------ training runs
def _summary(run_dir: str) -> dict:
    (rec,) = [r for r in read_metrics(os.path.join(run_dir, "metrics.jsonl")) if "train_runtime" in r]
    return rec


def test_a_resumed_runs_summary_equals_the_uninterrupted_one(grpo_resume_runs) -> None:
    """The session's shared run (tests/trainers/conftest.py): 6 steps in one go, and stopped after step 3 while
    writing step 4's record (half a line) then resumed."""
    runs = {k: grpo_resume_runs[k].run_dir for k in ("full", "resumed")}
    full, resumed = _summary(runs["full"]), _summary(runs["resumed"])
    assert resumed["train_loss"] == full["train_loss"]
    losses = [r["loss"] for r in read_metrics(os.path.join(runs["full"], "metrics.jsonl")) if "loss" in r]
    assert len(losses) == 6 and full["train_loss"] == pytest.approx(sum(losses) / 6, rel=1e-12)
    assert resumed["total_flos"] == full["total_flos"] and resumed["epoch"] == full["epoch"]
    steps = [r["step"] for r in read_metrics(os.path.join(runs["resumed"], "metrics.jsonl"))]
    assert steps == [1, 2, 3, 4, 5, 6, 6]  # the torn step-4 line was dropped, steps 4-6 written again, the summary


def _damaged_copy(grpo_resume_runs: dict, tmp_path: Path, name: str) -> tuple[Path, str]:
    """A copy of the shared full run cut off before its final model, ``name`` in its last checkpoint cut in half;
    resuming it is refused with a message naming the file and the way on (returned)."""
    from rewardlang.trainers.grpo import train

    run = tmp_path / "run"
    shutil.copytree(grpo_resume_runs["full"].run_dir, run)
    shutil.rmtree(run / "final")
    victim = run / "checkpoint-6" / name
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.raises(ConfigError) as err:
        train(grpo_resume_runs["spec"], sets=grpo_resume_runs["sets"],
              flags={**grpo_resume_runs["flags"], "output_dir": str(run)}, progress=False, resume=True)
    return run, str(err.value)


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"])
def test_resume_from_a_damaged_checkpoint_names_the_file_and_the_way_on(grpo_resume_runs, name: str,
                                                                        tmp_path) -> None:
    run, msg = _damaged_copy(grpo_resume_runs, tmp_path, name)
    assert f"checkpoint {run}/checkpoint-6 is damaged: {name} is cut short" in msg
    assert f"the newest whole checkpoint is {run}/checkpoint-3" in msg and "mv " in msg


def test_the_way_on_from_a_damaged_checkpoint_works(grpo_resume_runs, tmp_path) -> None:
    """What the message above says to do (whichever file was damaged: the checkpoint is moved aside whole): the run
    continues from the newest whole checkpoint; with no whole checkpoint at all, a fresh start is the way on, said
    by the CLI without a traceback."""
    from rewardlang.trainers.grpo import train

    run, msg = _damaged_copy(grpo_resume_runs, tmp_path, "optimizer.pt")
    assert f"(mv {run}/checkpoint-6 {run}/checkpoint-6.damaged)" in msg, msg
    os.rename(run / "checkpoint-6", run / "checkpoint-6.damaged")
    sets = grpo_resume_runs["sets"]
    done = train(grpo_resume_runs["spec"], sets=sets, flags={**grpo_resume_runs["flags"], "output_dir": str(run)},
                 progress=False, resume=True)
    assert done.global_step == 6
    assert [r["step"] for r in read_metrics(os.path.join(run, "metrics.jsonl")) if "reward" in r] == [1, 2, 3, 4, 5,
                                                                                                      6]
    for ck in ("checkpoint-3", "checkpoint-6"):
        f = run / ck / "optimizer.pt"
        f.write_bytes(f.read_bytes()[:100])
    result = CliRunner().invoke(app, ["train", "--spec", grpo_resume_runs["spec"], "--dataset",
                                      grpo_resume_runs["flags"]["dataset"], "--seed", "3", "--output", str(run),
                                      "--resume", "--no-progress", *[f"--set={k}={v}" for k, v in sets.items()]])
    assert result.exit_code == 1, result.output
    assert "start a fresh run" in result.output and "Traceback" not in result.output
