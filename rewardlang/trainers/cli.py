"""The ``train`` and ``plot`` commands (a typer app the main ``rewardlang`` CLI mounts lazily).

    rewardlang train --spec specs/codepo_text.reward                       # tiny local model, HumanEval prompts
    rewardlang train --spec my.reward --model ./qwen --dataset data.jsonl --lora --set train.max_steps=500
    rewardlang train --spec my.reward --output runs/x --resume              # continue from the last checkpoint
    accelerate launch --config_file examples/accelerate/ddp.yaml -m rewardlang train --spec my.reward --model ./m
    rewardlang plot runs/x                                                  # → runs/x/curves.png

Bad input (spec, dataset, configuration) prints a located message and exits with status 1, without a traceback.
Importing this module does not import torch; ``train`` does, when it runs.

    >>> from typer.testing import CliRunner
    >>> result = CliRunner().invoke(app, ["train", "--spec", "missing.reward"])
    >>> result.exit_code, "missing.reward" in result.output
    (1, True)
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Optional

import typer

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train a policy on a reward spec, and plot training runs.")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    # SystemExit, not typer.Exit: it keeps status 1 when the main CLI runs this app with standalone_mode=False
    raise SystemExit(1)


@app.command("train")
def train_command(
    spec: str = typer.Option(..., "--spec", help="The .reward spec whose rewards (and advantage) to train on."),
    model: Optional[str] = typer.Option(None, "--model", help="Local model directory or cached hub id "
                                        "(never downloaded). Default: a tiny randomly initialised model."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Prompts as .jsonl/.json. Default: HumanEval."),
    output: Optional[str] = typer.Option(None, "--output", help="Run directory. Default: runs/<spec>-<time>."),
    config: Optional[str] = typer.Option(None, "--config", help="YAML/JSON file of train settings "
                                         "(flat, or with train:/params: sections)."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="KEY=VALUE; train.* keys configure training, "
                                             "others are spec parameters (e.g. acc.weight=2). Repeatable."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output from its last checkpoint."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Optimizer steps (train.max_steps)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed (train.seed)."),
    lora: Optional[bool] = typer.Option(None, "--lora/--no-lora", help="Train a LoRA adapter (train.lora)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Train on the rewards of a spec (GRPO unless `train.algorithm` names another); writes config.json, metrics.jsonl, checkpoints and final/."""
    if not os.path.exists(spec):
        _fail(f"spec file {spec}: not found")
    # Quiet the deprecation chatter of the training stack; real warnings still show.
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" bars at every checkpoint

    from rewardlang.diagnostics import SpecError
    from rewardlang.trainers.config import ConfigError, parse_set
    from rewardlang.trainers.data import DataError

    try:
        sets = parse_set(set_)
        from rewardlang.trainers.run import train

        flags: dict[str, Any] = {"model": model, "dataset": dataset, "output_dir": output, "max_steps": max_steps,
                                 "seed": seed, "lora": lora}
        result = train(spec, config_file=config, sets=sets, flags=flags, resume=resume, progress=progress)
    except SpecError as exc:
        typer.echo(exc.render(color=False), err=True)
        raise SystemExit(1) from None
    except (ConfigError, DataError) as exc:
        _fail(str(exc))
        return
    if result.trainer is not None and not result.trainer.accelerator.is_main_process:
        return
    typer.echo(f"run directory: {result.run_dir} ({result.global_step} steps; final policy in {result.final_dir}; "
               f"metrics in {result.metrics_path})")


@app.command("plot")
def plot_command(
    run_dir: str = typer.Argument(..., help="A run directory written by `rewardlang train`."),
    out: Optional[str] = typer.Option(None, "--out", help="PNG path. Default: RUN_DIR/curves.png."),
) -> None:
    """Render a run's training curves (reward, components, advantages, masked share, KL, timing) to a PNG."""
    from rewardlang.trainers.plot import plot_run

    try:
        path = plot_run(run_dir, out)
    except (FileNotFoundError, ValueError) as exc:
        _fail(str(exc))
        return
    typer.echo(path)


def main(argv: list[str] | None = None) -> None:
    """Run the app (``python -m rewardlang.trainers.cli train ...``)."""
    app(args=argv if argv is not None else sys.argv[1:], prog_name="rewardlang")


if __name__ == "__main__":  # pragma: no cover
    main()
