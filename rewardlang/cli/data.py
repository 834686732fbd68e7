"""Commands that write data sets: ``prm-data`` and ``data`` (``ir-groups`` lives with its library in
:mod:`rewardlang.datasets.commands`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from rewardlang.cli.common import _err, _load


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
    outputs.check_output_dir(output, inputs={"dataset": dataset if os.path.isfile(dataset) else None,
                                             "spec": spec}, files=label.OUTPUT_FILES)

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


def data_command(name: str = typer.Argument(..., help="which data set to write: robot, humaneval, translate, cfuncs"),
                 output: Path = typer.Option(..., "-o", "--output", help="the JSONL file to write"),
                 split: str = typer.Option("all", "--split", help="all, train or heldout"),
                 verify: bool = typer.Option(False, "--verify", help="run every canonical program on its task's "
                                                                    "worlds in the sandbox first; write nothing "
                                                                    "if one fails"),
                 lang: str = typer.Option(None, "--lang", help="humaneval: python, c, cpp, java, js, php, sh, go"),
                 source: str = typer.Option("python", "--source", help="translate: python or cpp"),
                 target: str = typer.Option(None, "--target", help="translate: c, cpp, java, js, php, sh, go"),
                 report: Path = typer.Option(None, "--report", help="humaneval: also write the skipped problems "
                                                                    "and reasons as JSON"),
                 plus: bool = typer.Option(False, "--plus", help="humaneval: also generate hidden tests (a "
                                           "plus_tests column: mutated inputs, the canonical solution run in the "
                                           "sandbox as the oracle)"),
                 per_problem: int = typer.Option(100, "--per-problem", min=1, help="humaneval --plus: new inputs "
                                                 "kept per problem at most"),
                 seed: int = typer.Option(0, "--seed", help="humaneval --plus: the mutation seed")) -> None:
    """Write a task data set as JSONL (robot: task_id, split, instruction, prompt, task, canonical; humaneval:
    HumanEval translated into --lang; translate: --source -> --target translation problems)."""
    if name == "cfuncs":  # C functions with test harnesses, for `rewardlang ir-groups`: id, source, harness
        from rewardlang.datasets.commands import write_cfuncs
        from rewardlang.outputs import check_output

        check_output(output)
        _err(f"wrote {write_cfuncs(output)} C functions with harnesses to {output}")
        return
    if name in ("humaneval", "translate"):
        from rewardlang.datasets.cli import write_humaneval, write_translate

        try:
            if name == "humaneval":
                if not lang:
                    _err("error: data humaneval needs --lang (python, c, cpp, java, js, php, sh, go)")
                    raise typer.Exit(1)
                _err(write_humaneval(lang, output, str(report) if report else None, plus=plus,
                                     per_problem=per_problem, seed=seed, progress=_err if plus else None))
            else:
                if not target:
                    _err("error: data translate needs --target (c, cpp, java, js, php, sh, go)")
                    raise typer.Exit(1)
                _err(write_translate(source, target, output, split))
        except ValueError as exc:
            _err(f"error: {exc}")
            raise typer.Exit(1)
        return
    if name != "robot":
        _err(f"error: unknown data set {name!r} (known: robot, humaneval, translate, cfuncs)")
        raise typer.Exit(1)
    from rewardlang.domains.robot.data import rows

    try:
        data = rows(split)
    except ValueError as exc:
        _err(f"error: --split: {exc}")
        raise typer.Exit(1)
    if verify:
        from rewardlang.datasets.commands import verify_robot
        from rewardlang.datasets.sandboxed import NoSandbox

        try:
            bad = verify_robot(data)
        except NoSandbox as exc:
            _err(f"error: {exc}")
            raise typer.Exit(1)
        if bad:
            for line in bad:
                _err(f"error: {line}")
            raise typer.Exit(1)
    if output.exists() and output.is_dir():
        _err(f"error: {output} is a directory")
        raise typer.Exit(1)
    tmp = output.with_name(output.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for r in data:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        tmp.replace(output)
    except OSError as exc:
        _err(f"error: cannot write {output}: {exc}")
        raise typer.Exit(1)
    n_held = sum(r["split"] == "heldout" for r in data)
    _err(f"wrote {len(data)} rows ({len(data) - n_held} train, {n_held} held out) to {output}")

