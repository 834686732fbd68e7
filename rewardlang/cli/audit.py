"""``rewardlang audit``: a spec's audits after the fact, on a run directory or on any engine's rollouts; the exit
status is 1 when an alarm fires (a pipeline can gate on it). Thin: the work is :mod:`rewardlang.trainers.audit`'s
(which imports no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rewardlang.cli.common import _err, _load


def audit(target: Path = typer.Argument(..., help="a run directory written by `rewardlang train`, or a spec file "
                                                  "(with -i ROLLOUTS.jsonl)"),
          input: Optional[Path] = typer.Option(None, "--input", "-i", help="rollouts as JSONL: a step column, the "
                                               "completion and the columns the spec reads (verl, OpenRLHF, TRL "
                                               "dumps ...)"),
          step_column: str = typer.Option("step", "--step-column", help="the rollouts' column holding the "
                                                                        "training step"),
          group_by: Optional[str] = typer.Option(None, "--group-by", help="column grouping the rollouts' rows "
                                                 "(for group collapse); default: the spec's advantage groups"),
          all_steps: bool = typer.Option(False, "--all-steps", help="audit every step of the rollouts, not only "
                                                                    "at the audits' periods"),
          probes: bool = typer.Option(True, "--probes/--no-probes", help="score the hack probes and the reference "
                                                                        "answer at the audit period"),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="the table and alarms as JSON"),
          plot: Optional[Path] = typer.Option(None, "--plot", help="a PNG of the reward vs each audit per step "
                                              "(a run directory: RUN_DIR/audits.png by default)"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """The audit table (the reward beside each audit per step, the gaps, the probes) and the alarms of a training
    run or of rollouts; exit status 1 when an alarm fires."""
    from rewardlang.outputs import OutputError, check_outputs
    from rewardlang.trainers.audit import audit_rollouts, audit_run, table_lines
    from rewardlang.trainers.plot import plot_audits

    run_dir = target.is_dir()
    if run_dir and input is not None:
        _err("error: -i ROLLOUTS.jsonl goes with a spec file, not a run directory")
        raise typer.Exit(1)
    if not run_dir and input is None:
        _err(f"error: {target}: give a run directory, or a spec file with -i ROLLOUTS.jsonl")
        raise typer.Exit(1)
    plot_path = plot if plot is not None else (target / "audits.png" if run_dir else None)
    try:  # both before any work, and against each other (-o X --plot X: the plot would replace the table)
        check_outputs({"-o": output, "--plot": plot_path},
                      inputs={"input": input, "spec": None if run_dir else target})
    except OutputError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    if run_dir:
        try:
            records, alarms, watch, meta = audit_run(str(target))
        except ValueError as exc:
            _err(f"error: {exc}")
            raise typer.Exit(1)
        audits, what = meta["audits"], f"run {target}"
    else:
        from rewardlang.jsonl import iter_jsonl
        from rewardlang.runtime.audits import audits_of, reward_range
        from rewardlang.runtime.scoring import ScoringError, check_group_column, check_rows

        prog = _load(target, set_, scoring=True)
        if not prog.audits:
            _err(f"error: {target} declares no audit (docs/language.md, Audits)")
            raise typer.Exit(1)
        if not input.exists():
            _err(f"error: {input}: no such file")
            raise typer.Exit(1)
        rows, lines, bad = [], [], []
        for lineno, row, problem in iter_jsonl(input):
            if problem is not None:
                bad.append(f"{input}:{lineno}: {problem}")
            elif row.get("kind") not in (None, "sample"):
                continue  # a run's audited-samples file: its probe rows are not rollouts
            elif not isinstance(row.get(step_column), int) or isinstance(row.get(step_column), bool):
                bad.append(f"{input}:{lineno}: no whole-number `{step_column}` column (--step-column names it)")
            else:
                rows.append(row)
                lines.append(lineno)
        if bad:
            for b in bad[:10]:
                _err(f"error[D003]: {b}")
            _err(f"error: {len(bad)} bad row(s) in {input}; nothing audited")
            raise typer.Exit(1)
        try:  # bad values by FILE:LINE before any step is audited (a step's piece would name its own row numbers)
            check_rows(prog, list(zip(lines, rows)), str(input))
            if group_by is not None:  # a typo is said, as score and report say it: never one group of every row
                check_group_column(list(zip(lines, rows)), group_by, str(input))
        except ScoringError as exc:
            _err(exc.render(hints=False))
            raise typer.Exit(1)
        try:  # the rows scored by step through the scoring room (score_rows), their lines kept for any error
            records, alarms, watch = audit_rollouts(prog, rows, step_column=step_column, group_by=group_by,
                                                    all_steps=all_steps, probes=probes, lines=lines,
                                                    label=str(input))
        except ScoringError as exc:  # audit has no --on-bad-row: score's hint would name an option it lacks
            _err(exc.render(hints=False))
            raise typer.Exit(1)
        meta = {"audits": audits_of(prog), "reward_range": reward_range(prog, 0)}
        audits, what = meta["audits"], f"{len(rows)} rollouts of {input} ({len(records)} steps)"
    typer.echo(f"audits of {what}")
    for line in table_lines(records, audits):
        typer.echo(line)
    for note in watch.notes():
        typer.echo(f"note: {note}")
    for a in alarms:
        typer.echo(a.line)
    if not alarms:
        typer.echo("no alarm")
    if output is not None:
        from rewardlang.outputs import atomic_write

        with atomic_write(output) as fh:
            json.dump({"audits": audits, "records": records, "alarms": [a.to_json() for a in alarms]}, fh,
                      indent=1, default=str)
            fh.write("\n")
    if plot_path is not None:
        try:
            plot_audits(records, {**meta, "reward_range": meta.get("reward_range")},
                        [a.to_json() for a in alarms], str(plot_path))
            typer.echo(f"plot: {plot_path}")
        except ValueError as exc:
            if plot is not None:
                _err(f"error: --plot: {exc}")
                raise typer.Exit(1)
    if alarms:
        raise typer.Exit(1)
