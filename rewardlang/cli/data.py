"""Commands that write data sets: ``prm-data`` and ``data`` (``ir-groups`` lives with its library in
:mod:`rewardlang.datasets.commands`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rewardlang.cli.common import _err, _given, _load


def prm_data(dataset: str = typer.Option("humaneval", "--dataset", help="humaneval, or a JSONL file with prompt, "
                                                                      "reference, tests[, entry_point, task_id]"),
             output: Path = typer.Option(..., "-o", "--output", help="directory for dpo.jsonl, steps.jsonl, "
                                                                  "report.json (and groups.jsonl)"),
             operators: Optional[str] = typer.Option(None, "--operators", help="comma-separated operator names "
                                                                               "(default: all)"),
             level: Optional[str] = typer.Option(None, "--level", help="segments: line | block (default: block)"),
             seed: Optional[int] = typer.Option(None, "--seed", help="seed of each operator's choice of edit "
                                                                     "(default: 0)"),
             spec: Optional[Path] = typer.Option(None, "--spec", help="take prm_operators, prm_level and prm_seed "
                                                                      "from this spec's params (flags override), "
                                                                      "and with --groups min_winners, min_losers, "
                                                                      "max_group from its preference section"),
             timeout: float = typer.Option(2.0, "--timeout", help="CPU seconds per program"),
             limit: int = typer.Option(0, "--limit", help="use the first N problems (0: all)"),
             plugin: Optional[list[str]] = typer.Option(None, "--plugin", help="import a module that registers "
                                                                                "operators (repeatable)"),
             groups: bool = typer.Option(False, "--groups", help="also write groups.jsonl: GEPO groups (reference + "
                                                                 "passing refactorings vs failing variants)"),
             ) -> None:
    """Build PRLCoder's process-supervision data: mutate/refactor each segment, label by running the tests."""
    import importlib
    import os

    from rewardlang import outputs
    from rewardlang.datasets.prm import label, mutate
    from rewardlang.datasets.sandboxed import NoSandbox

    if limit < 0:
        _err(f"error: --limit must be 0 (every problem) or positive (got {limit})")
        raise typer.Exit(1)
    # before the labelling, which takes minutes: a bad destination must not cost them
    outputs.check_outputs({}, dirs={"-o": output}, dir_files={"-o": label.OUTPUT_FILES},
                          inputs={"dataset": dataset if os.path.isfile(dataset) else None, "spec": spec})

    for mod in plugin or []:
        try:
            importlib.import_module(mod)
        except Exception as exc:
            _err(f"error: --plugin {mod}: {type(exc).__name__}: {exc}")
            raise typer.Exit(1)
    ops = [o.strip() for o in operators.split(",") if o.strip()] if operators else None
    settings: dict[str, Any] = {}
    prog = _load(spec, None) if spec is not None else None
    if prog is not None and groups:
        from rewardlang.runtime.preference import settings_of

        st = settings_of(prog.spec)
        settings = {"min_winners": st.min_winners, "min_losers": st.min_losers, "max_group": st.max_group}
    try:
        chosen = label.settings_from_spec(prog.params, str(spec)) if prog is not None else {}
        ops, level, seed = ops or chosen.get("operators"), level or chosen.get("level", "block"), \
            seed if seed is not None else chosen.get("seed", 0)
        problems, bad = label.load_problems(dataset)
        for b in bad:
            _err(f"warning: {dataset}: {b} (skipped)")
        if limit:
            problems = problems[:limit]
        data = label.build(problems, operators=ops, level=level, seed=seed, timeout=timeout,
                           progress=label._stderr_progress)
        if groups:
            label.groups_of(problems, data, seed=seed, **settings)
    except (label.DataRowError, ValueError, NoSandbox) as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    data.bad_rows[:0] = bad
    paths = label.write(data, str(output))
    removed = paths.pop("removed", None)
    typer.echo(label.summary_table(data))
    _err(f"wrote {', '.join(paths.values())} (operators: {', '.join(ops or mutate.OPERATORS)})")
    if removed:
        _err(f"removed {removed}: an earlier run's groups (this run wrote none; --groups writes them)")


def data_command(ctx: typer.Context,
                 name: str = typer.Argument(..., help="which data set to write: robot, humaneval, translate, cfuncs"),
                 output: Path = typer.Option(..., "-o", "--output", help="the JSONL file to write"),
                 split: str = typer.Option("all", "--split", help="robot, translate: all, train or heldout"),
                 verify: bool = typer.Option(False, "--verify", help="robot: run every canonical program on its "
                                                                    "task's worlds in the sandbox first; write "
                                                                    "nothing if one fails"),
                 lang: str = typer.Option("python", "--lang", help="humaneval: python (default), c, cpp, java, js, "
                                                                   "php, sh, go (or javascript, c++, bash, golang)"),
                 source: str = typer.Option("python", "--source", help="translate: python or cpp"),
                 target: str = typer.Option(None, "--target", help="translate: c, cpp, java, js, php, sh, go"),
                 report: Path = typer.Option(None, "--report", help="humaneval: also write the skipped problems "
                                                                    "and reasons as JSON"),
                 plus: bool = typer.Option(False, "--plus", help="humaneval: also generate hidden tests (a "
                                           "plus_tests column: mutated inputs, the canonical solution run in the "
                                           "sandbox as the oracle)"),
                 per_problem: int = typer.Option(100, "--per-problem", min=1, help="humaneval --plus: new inputs "
                                                 "kept per problem at most"),
                 seed: int = typer.Option(0, "--seed", help="humaneval --plus: the mutation seed"),
                 progress: bool = typer.Option(True, "--progress/--no-progress", help="cfuncs: a progress bar on "
                                                                                      "a terminal")) -> None:
    """Write a task data set as JSONL (robot: task_id, split, instruction, prompt, task, canonical; humaneval:
    HumanEval translated into --lang; translate: --source -> --target translation problems; cfuncs: C functions
    with recorded harnesses, for `rewardlang ir-groups`). An option the data set does not take is refused."""
    from rewardlang.datasets.cli import DataSetError, write_dataset

    flags = {"split": "--split", "verify": "--verify", "lang": "--lang", "source": "--source", "target": "--target",
             "report": "--report", "plus": "--plus", "per_problem": "--per-problem", "seed": "--seed"}
    given = [flag for key, flag in flags.items() if _given(ctx, key)]
    try:
        said = write_dataset(name, output, given=given, split=split, lang=lang, source=source, target=target,
                             report=report, verify=_verify_robot if verify else None, progress=progress, plus=plus,
                             per_problem=per_problem, seed=seed, plus_progress=_err)
    except DataSetError as exc:
        _err("\n".join(f"error: {line}" for line in str(exc).splitlines()))
        raise typer.Exit(1)
    _err(said)


def _verify_robot(data: list[dict[str, Any]]) -> list[str]:
    """``data robot --verify``: each task whose canonical program does not succeed on all of its worlds, run in the
    sandbox scoring uses (none available: refused, never a task taken for verified)."""
    from rewardlang.datasets.cli import DataSetError
    from rewardlang.datasets.commands import verify_robot
    from rewardlang.datasets.sandboxed import NoSandbox

    try:
        return verify_robot(data)
    except NoSandbox as exc:
        raise DataSetError(str(exc)) from None
