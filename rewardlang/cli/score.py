"""Commands that score rows: ``score`` (a JSONL file, here or on Ray), ``serve`` (HTTP) and ``pairs``
(preference mining from scored rows). The work is :mod:`rewardlang.runtime.scoring`'s; these parse options, call it,
and print."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from rewardlang.cli.common import _err, _load, _overrides, _not_a_source
from rewardlang.outputs import whole_process

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.scoring import Summary


def score(spec: Path = typer.Argument(..., help="spec file"),
          input: Path = typer.Option(..., "--input", "-i", help="JSONL file, one row per completion (`-`: "
                                                                "standard input)"),
          output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL output (default: stdout); "
                                                "written whole or not at all"),
          group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                 "advantages, in place of the spec's group key (rows of a group "
                                                 "contiguous)"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
          on_bad_row: str = typer.Option("fail", "--on-bad-row", help="fail | skip"),
          step: int = typer.Option(0, "--step", help="training step (for weight schedules)"),
          batch_size: int = typer.Option(8192, "--batch-size", help="rows scored together (a group is never "
                                                                    "split: a batch ends between groups)"),
          workers: int = typer.Option(0, "--workers", help="processes for the per-sample phase (0: chosen by the "
                                                           "work: worker processes only when they repay their "
                                                           "start-up)"),
          progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar on stderr"),
          summary: bool = typer.Option(True, "--summary/--no-summary", help="summary table on stderr"),
          ray: Optional[str] = typer.Option(None, "--ray", help="score on Ray with a pool of actors (one per "
                                            "--workers, default every CPU): `local` starts a cluster here, `auto` "
                                            "joins the running one, or ray://HOST:PORT; output identical to a "
                                            "local run (needs rewardlang[ray])")) -> None:
    """Score a JSONL file; each row gets the total, every component, the advantage when grouped, errors."""
    import contextlib
    import os
    import shutil
    import tempfile

    if on_bad_row not in ("fail", "skip"):
        _err("error: --on-bad-row is `fail` or `skip`")
        raise typer.Exit(1)
    if batch_size < 1:
        _err("error: --batch-size must be at least 1")
        raise typer.Exit(1)
    stdin = str(input) == "-"
    if not stdin and not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    label = "<stdin>" if stdin else str(input)
    # a pipe (-, /dev/stdin, a FIFO) can be read once: it is spooled to a file, read twice (row count, rows)
    piped = stdin or not input.is_file()
    from rewardlang import outputs

    if output is not None:
        outputs.check_output(output, inputs={"input file": None if stdin else input, "spec": spec})
    else:
        outputs.note_stdout("the rows printed on standard output so far are incomplete")
    if ray is not None:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            _err('error: --ray needs Ray, which is not installed\nhint: pip install "rewardlang[ray]"')
            raise typer.Exit(1)
    spooled = ""
    try:
        prog = _load(spec, set_, scoring=True)
        if output is not None:
            _not_a_source(output, prog)
        if piped:
            with tempfile.NamedTemporaryFile(prefix="rewardlang-stdin-", suffix=".jsonl", delete=False) as f:
                spooled = f.name
                if stdin:
                    shutil.copyfileobj(sys.stdin.buffer, f)
                else:
                    with open(input, "rb") as src:
                        shutil.copyfileobj(src, f)
            input = Path(spooled)
        # failed, D00x, interrupted: the temporary goes, and nothing half-written is ever under the output's name
        with (outputs.atomic_write(output) if output is not None else contextlib.nullcontext(sys.stdout)) as out_f:
            from rewardlang.runtime.scoring import ScoringError

            try:
                if ray is not None:
                    from rewardlang.integrations.ray_score import BlockLost, score_on_ray

                    try:
                        run = score_on_ray(spec, _overrides(set_), prog, input, label, out_f, address=ray,
                                           group_by=group_by, on_bad_row=on_bad_row, step=step,
                                           batch_size=batch_size, workers=workers, warn=_err)
                    except BlockLost as exc:  # an infrastructure failure, twice: named, no output file
                        _err(f"error: {exc}\nhint: check the cluster's nodes (`ray status`) and run it again")
                        raise typer.Exit(1)
                    if summary:
                        _err(run.line())
                else:
                    _score_here(prog, input, label, out_f, group_by=group_by, on_bad_row=on_bad_row, step=step,
                                batch_size=batch_size, workers=workers, progress=progress, summary=summary)
            except ScoringError as exc:  # located, as spec errors are
                _err(exc.render(limit=20))
                raise typer.Exit(1)
    finally:
        if spooled:
            os.unlink(spooled)
    outputs.done_cleanly()  # everything is written and closed: the process may end without its teardown


def _score_here(prog: Any, input: Path, label: str, out_f: Any, *, group_by: str | None, on_bad_row: str,
                step: int, batch_size: int, workers: int, progress: bool, summary: bool) -> None:
    """`score` in this process (and its worker processes), with a progress bar for a large file."""
    from rewardlang.runtime.scoring import score_file

    bar: Any = None

    def show(done: int, total: int) -> None:
        nonlocal bar
        if bar is None and done == 0 and total > 2000:
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(transient=True, console=Console(stderr=True))
            bar.start()
            bar.add_task("scoring", total=total)
        elif bar is not None:
            bar.update(bar.task_ids[0], completed=done)

    try:
        summ = score_file(prog, input, out_f, label=label, group_by=group_by, on_bad_row=on_bad_row, step=step,
                          batch_size=batch_size, workers=workers, progress=show if progress else None, warn=_err,
                          ending=whole_process())
    finally:
        if bar is not None:
            bar.stop()
    if summary:
        _render_summary(summ, label)


def _render_summary(summ: Summary, label: str) -> None:
    """The summary table of a run, and what the sandbox did, on standard error."""
    from rich.console import Console
    from rich.table import Table

    times, elapsed = summ.times, summ.elapsed
    total_time = sum(times.values()) or 1.0
    t = Table(title=f"{summ.rows} rows scored in {elapsed:.2f} s"
                    + (f"; {len(summ.bad_rows)} bad rows skipped" if summ.bad_rows else "")
                    + ("" if summ.rows else " (no rows to score)"))
    for col in ("component", "mean", "std", "min", "max", "none", "errors", "time share"):
        t.add_column(col, justify="left" if col == "component" else "right")
    for k in summ.names + ["total"]:
        n = summ.n[k]
        mean = summ.sum[k] / n if n else float("nan")
        std = math.sqrt(max(summ.sq[k] / n - mean * mean, 0.0)) if n else float("nan")
        share = f"{100 * times.get(k, 0.0) / total_time:.0f}%" if k != "total" else ""
        t.add_row(k, f"{mean:.4f}" if n else "-", f"{std:.4f}" if n else "-", f"{summ.min[k]:.4f}" if n else "-",
                  f"{summ.max[k]:.4f}" if n else "-", str(summ.masked[k]),
                  str(summ.errors.get(k, "")) if k != "total" else "", share)
    console = Console(stderr=True)
    console.print(t)
    for k, n in summ.nonfinite.items():
        console.print(f"warning: {k}: {n} infinite value(s) written as null (JSON has no infinity)")
    sandbox = _sandbox_line(summ.stats)
    if sandbox:
        console.print(sandbox)
    from rewardlang.runtime.components.execution import asserts_nothing_lines, undefined_names_lines

    for line in undefined_names_lines(summ.stats):  # tests that fail for every program: said, never a silent 0
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in asserts_nothing_lines(summ.stats):  # tests every program passes: said too
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if summ.bad_rows:
        from rewardlang.runtime.scoring import bad_rows_line

        console.print(bad_rows_line(label, summ.bad_rows), markup=False, highlight=False, soft_wrap=True)


def _sandbox_line(stats: Any) -> str | None:
    """The isolation level in force and what the sandbox did, for the summary (None: nothing was run)."""
    levels = [k[len("sandbox.level."):] for k in stats if k.startswith("sandbox.level.")]
    if not levels and not stats.get("sandbox.unavailable"):
        return None
    parts = [f"sandbox: level {'/'.join(sorted(levels)) or 'none'}"]
    for key, what in (("executions", "executions"), ("cache_hits", "cached"), ("timeouts", "timeouts"),
                      ("limit_relative", "limits relative to the reference"),
                      ("limit_no_reference", "without a reference time (the spec's timeout)"),
                      ("infra_failures", "infrastructure failures (masked)")):
        n = int(stats.get(f"sandbox.{key}", 0))
        if n or key in ("executions", "infra_failures"):
            parts.append(f"{n} {what}")
    if stats.get("sandbox.not_a_security_boundary"):
        parts.append("NOT A SECURITY BOUNDARY")
    return ", ".join(parts)


def serve(spec: Path = typer.Argument(..., help="spec file"),
          host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
          port: int = typer.Option(8000, "--port", help="port (0: any free one, printed)"),
          window_ms: float = typer.Option(20.0, "--window-ms", help="requests arriving within this window are "
                                                                   "scored as one batch"),
          max_batch: int = typer.Option(512, "--max-batch", help="most rows in one batch"),
          max_pending: int = typer.Option(8192, "--max-pending", help="rows that may wait; beyond, requests are "
                                                                     "answered 503 overloaded"),
          max_request_mb: float = typer.Option(16.0, "--max-request-mb", help="a larger request body is answered "
                                                                             "413"),
          max_held_mb: float = typer.Option(64.0, "--max-held-mb", help="request bytes held at once (each body's "
                                                                       "bytes and 16 per JSON value); beyond, 503"),
          max_connections: Optional[int] = typer.Option(None, "--max-connections", help="open connections "
                                                        "(default: 1024, or fewer to stay below the file-descriptor limit)"),
          header_timeout: float = typer.Option(10.0, "--header-timeout", help="seconds for a request's headers"),
          body_timeout: float = typer.Option(30.0, "--body-timeout", help="seconds for a request's body"),
          shutdown_timeout: float = typer.Option(5.0, "--shutdown-timeout", help="seconds that requests being "
                                                 "scored get to be answered after SIGTERM"),
          token_file: Optional[Path] = typer.Option(None, "--token-file", help="file whose first line is the "
                                                    "token every request must carry (or $REWARDLANG_SERVE_TOKEN)"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """Serve the spec over HTTP: OpenRLHF's remote reward protocol and JSON rows, batched (docs/scale.md)."""
    from rewardlang.integrations.server import ServerLimits, read_token

    if window_ms < 0 or max_batch < 1 or max_pending < 1:
        _err("error: --window-ms must be >= 0, --max-batch and --max-pending >= 1")
        raise typer.Exit(1)
    try:
        limits = ServerLimits(max_request_bytes=int(max_request_mb * (1 << 20)),
                              max_held_bytes=int(max_held_mb * (1 << 20)), max_connections=max_connections,
                              header_timeout=header_timeout, body_timeout=body_timeout,
                              shutdown_timeout=shutdown_timeout).check()
        token = read_token(str(token_file) if token_file is not None else None)
    except ValueError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    prog = _load(spec, set_, scoring=True)
    from rewardlang.integrations.server import serve as run_server

    code = run_server(str(spec), host=host, port=port, program=prog, window_s=window_ms / 1000,
                      max_batch=max_batch, max_pending=max_pending, limits=limits, token=token)
    if code:
        raise typer.Exit(code)


def pairs(spec: Path = typer.Argument(..., help="spec file (its `preference { }` section says how to mine)"),
          input: Path = typer.Option(..., "--input", "-i", help="JSONL: `rewardlang score` output, or raw rows"),
          output: Path = typer.Option(..., "--output", "-o", help="JSONL to write (complete or absent)"),
          groups: bool = typer.Option(False, "--groups", help="write GEPO groups (prompt, winners, losers) "
                                                              "instead of DPO pairs"),
          group_by: str = typer.Option("prompt", "--group-by", help="column whose value groups samples"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
          step: int = typer.Option(0, "--step", help="training step (for weight schedules)")) -> None:
    """Mine DPO pairs (TRL's prompt/chosen/rejected format) or GEPO groups from scored samples."""
    from rewardlang.runtime.preference import MiningError, mine_file
    from rewardlang.runtime.scoring import ScoringError

    from rewardlang import outputs

    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    outputs.check_output(output, inputs={"input file": input, "spec": spec})
    prog = _load(spec, set_)
    _not_a_source(output, prog)
    try:
        s = mine_file(prog, str(input), str(output), groups=groups, group_by=group_by, step=step)
    except MiningError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    except ScoringError as exc:
        _err(exc.render(limit=20, hints=False))
        raise typer.Exit(1)
    finally:
        prog.close()
    what = "groups" if groups else "pairs"
    _err(f"{s.samples} samples ({s.masked} masked) in {s.prompts} prompts -> {s.items} "
         f"{'group members' if groups else 'pairs'} from {s.with_output} prompts; wrote {output}")
    for reason, k in s.reasons.items():
        _err(f"  prompts without {what}: {k} ({reason})")
    hist = ", ".join(f"{k}: {v}" for k, v in sorted(s.per_prompt.items()))
    _err(f"  {'members' if groups else 'pairs'} per prompt -> prompts: {hist or 'none'}")
