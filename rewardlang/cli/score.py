"""Commands that score rows: ``score`` (a JSONL file, here or on Ray), ``serve`` (HTTP) and ``pairs``
(preference mining from scored rows)."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from rewardlang.cli.common import _err, _load, _sources
from rewardlang.jsonl import iter_jsonl


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


class _Summary:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.n = {k: 0 for k in names}
        self.sum = {k: 0.0 for k in names}
        self.sq = {k: 0.0 for k in names}
        self.min = {k: math.inf for k in names}
        self.max = {k: -math.inf for k in names}
        self.masked = {k: 0 for k in names}
        self.errors = {k: 0 for k in names}
        self.time = {k: 0.0 for k in names}
        self.rows = 0
        self.bad_rows: list[tuple[int, str]] = []
        for d, v in ((self.n, 0), (self.sum, 0.0), (self.sq, 0.0), (self.min, math.inf), (self.max, -math.inf),
                     (self.masked, 0), (self.errors, 0)):
            d["total"] = v  # an empty input still has a total row (of no values)
        self.nonfinite: dict[str, int] = {}  # infinite values per column, written as null

    def add(self, out: Any) -> None:
        import numpy as np

        self.rows += len(out)
        for k in self.names + ["total"]:
            if k not in self.n:
                for d, v in ((self.n, 0), (self.sum, 0.0), (self.sq, 0.0), (self.min, math.inf),
                             (self.max, -math.inf), (self.masked, 0), (self.errors, 0)):
                    d[k] = v
            v = out.total if k == "total" else out.components[k]
            inf = np.isinf(v)
            if inf.any():
                self.nonfinite[k] = self.nonfinite.get(k, 0) + int(inf.sum())
            ok = np.isfinite(v)
            x = v[ok]
            self.n[k] += int(ok.sum())
            self.sum[k] += float(x.sum())
            self.sq[k] += float((x * x).sum())
            if len(x):
                self.min[k] = min(self.min[k], float(x.min()))
                self.max[k] = max(self.max[k], float(x.max()))
            self.masked[k] += int((~ok).sum() - inf.sum())
            if k != "total":
                self.errors[k] += sum(1 for e in out.errors[k] if e is not None)

    def render(self, elapsed: float, times: dict[str, float], stats: Any = None) -> None:
        from rich.console import Console
        from rich.table import Table

        total_time = sum(times.values()) or 1.0
        t = Table(title=f"{self.rows} rows scored in {elapsed:.2f} s"
                        + (f"; {len(self.bad_rows)} bad rows skipped" if self.bad_rows else "")
                        + ("" if self.rows else " (no rows to score)"))
        for col in ("component", "mean", "std", "min", "max", "none", "errors", "time share"):
            t.add_column(col, justify="left" if col == "component" else "right")
        for k in self.names + ["total"]:
            n = self.n[k]
            mean = self.sum[k] / n if n else float("nan")
            std = math.sqrt(max(self.sq[k] / n - mean * mean, 0.0)) if n else float("nan")
            share = f"{100 * times.get(k, 0.0) / total_time:.0f}%" if k != "total" else ""
            t.add_row(k, f"{mean:.4f}" if n else "-", f"{std:.4f}" if n else "-", f"{self.min[k]:.4f}" if n else "-",
                      f"{self.max[k]:.4f}" if n else "-", str(self.masked[k]),
                      str(self.errors.get(k, "")) if k != "total" else "", share)
        console = Console(stderr=True)
        console.print(t)
        for k, n in self.nonfinite.items():
            console.print(f"warning: {k}: {n} infinite value(s) written as null (JSON has no infinity)")
        sandbox = _sandbox_line(stats or {})
        if sandbox:
            console.print(sandbox)
        from rewardlang.runtime.components.execution import undefined_names_lines

        for line in undefined_names_lines(stats or {}):  # tests that fail for every program: said, never a silent 0
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if self.bad_rows:
            shown = ", ".join(f"line {ln}" for ln, _ in self.bad_rows[:20])
            console.print(f"skipped bad rows: {shown}" + (" …" if len(self.bad_rows) > 20 else ""))


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


#: keys `score` adds to each row; an input column of the same name is replaced (and a warning says so)
_OUTPUT_KEYS = ("reward", "components", "advantage", "errors", "masked", "spans")
#: seconds a worker pool costs before it scores anything (spawn, imports, compiled kernels), on a loaded 2-core VM
_POOL_START_S = 1.5


def _group_json(g: Any) -> Any:
    return json.dumps(g, sort_keys=True) if isinstance(g, (list, dict)) else g


def _group_keys(prog: Any, group_by: str | None) -> list[tuple[str, str, bool]]:
    """(input name, column, main) of each key the advantage groups rows by; --group-by replaces the main one."""
    adv = prog.spec["advantage"]
    if adv is None:
        return [("group", group_by, True)] if group_by else []
    main = adv["scope"][1] if adv["scope"][0] == "group" else None
    out = []
    for key in adv["group_keys"]:
        if key == main and group_by:
            out.append((key, group_by, True))
        else:
            inp = next((i for i in prog.inputs if i.name == key), None)
            out.append((key, inp.column if inp is not None else key, key == main))
    if group_by and main is None:
        out.append(("group", group_by, True))
    return out


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
            outputs.check_output(output, inputs=_sources(prog))
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
            if ray is not None:
                from rewardlang.integrations.ray_score import RayScoreError, score_on_ray

                try:
                    score_on_ray(spec, set_, prog, input, label, out_f, address=ray, group_by=group_by,
                                 on_bad_row=on_bad_row, step=step, batch_size=batch_size, workers=workers,
                                 summary=summary)
                except RayScoreError:
                    raise typer.Exit(1)
            else:
                _score_file(prog, input, label, out_f, group_by=group_by, on_bad_row=on_bad_row, step=step,
                            batch_size=batch_size, workers=workers, progress=progress, summary=summary)
    finally:
        if spooled:
            os.unlink(spooled)


def _score_file(prog: Any, input: Path, label: str, out_f: Any, *, group_by: str | None, on_bad_row: str,
                step: int, batch_size: int, workers: int, progress: bool, summary: bool) -> None:
    import os

    from rewardlang.runtime.program import DataError

    cores = os.cpu_count() or 1
    auto = workers == 0
    # chosen by the work (`auto`): one process until the first batch shows the rest would repay a pool's start.
    # Timed, not guessed from the functions' cost tags: repeated rows are scored once (within a batch, and across
    # batches through the caches), so a file of 16,000 heavy rows may hold 1,312 distinct ones, which a pool with
    # cold caches scores several times slower than this process (measured: 18.7 s against 5.6 s)
    prog.workers = 1 if auto else workers
    decided = not auto or cores < 2 or not prog.in_workers
    names = [c.name for c in prog.components]
    summ = _Summary(names)
    total_lines = _count_lines(input)
    if not auto and workers > 1 and total_lines >= prog.pool_min_rows:
        prog.start_pool()  # the workers import and load while this process reads the first batch
    prog.run_rows = total_lines  # the whole run's size: one-off loads (Numba kernels) only where they repay
    keys = _group_keys(prog, group_by)
    # a group key that --group-by replaces is not read when the per-sample phase does not need it
    skip = [k for k, _, main in keys if main and group_by and k not in prog.row_inputs]
    seen: list[set[Any]] = [set() for _ in keys]
    warned_cols: set[str] = set()
    t0 = time.perf_counter()

    def fail_missing(exc: Any, whole: list[tuple[str, str]]) -> None:
        hint = "hint: fix the data"
        for c, m in whole:
            inp = next((i for i in prog.inputs if c in (i.name, i.column)), None)
            if inp is None or inp.name == "completion":
                continue
            is_main_key = any(k == inp.name and main for k, _, main in keys)
            if is_main_key and inp.name in prog.row_inputs:
                hint += (f"; the spec reads `{inp.name}` beyond grouping (--group-by replaces only the group key), "
                         f"so add the column, or read it from another one: `input {inp.name}: {inp.type} from "
                         f'"<column>"`')
            elif is_main_key:
                hint += (f", or group by another column: --group-by <column>, or `input {inp.name}: {inp.type} "
                         f'from "<column>"` in the spec')
            else:
                hint += f', or read `{inp.name}` from another column: `input {inp.name}: {inp.type} from "<column>"`'
        _err(hint)

    def prepare(batch: list[tuple[int, dict]]) -> Any:
        """Check the batch's rows and begin scoring it (on the workers, when it goes to them)."""
        if not batch:
            return None
        rows = [r for _, r in batch]
        given = {k: [r.get(k) for r in rows] for k in _columns_needed(prog, rows)}
        n = len(rows)
        try:
            cols = prog._columns(n, given, by="column", skip=skip)
        except DataError as exc:
            whole = [(c, m) for _, c, m in exc.problems if m.startswith("missing") or m.startswith("no completions")]
            if whole or on_bad_row == "fail":
                for r, c, m in exc.problems[:20]:
                    where = label if (c, m) in whole else f"{label}:{batch[r][0]}: row {batch[r][0] - 1}"
                    _err(f"error[D001]: {where}: column `{c}` {m}")
                if whole:
                    fail_missing(exc, whole)
                else:
                    _err("hint: fix the data, or pass --on-bad-row skip to skip (and count) bad rows")
                raise typer.Exit(1)
            bad = {r for r, _, _ in exc.problems}
            for r, c, m in exc.problems:
                summ.bad_rows.append((batch[r][0], f"column `{c}` {m}"))
            batch = [b for i, b in enumerate(batch) if i not in bad]
            if not batch:
                return None
            rows = [r for _, r in batch]
            given = {k: [r.get(k) for r in rows] for k in _columns_needed(prog, rows)}
            n = len(rows)
            cols = prog._columns(n, given, by="column", skip=skip)  # only good rows are left
        group = None
        for j, (key, col, main) in enumerate(keys):
            if group_by and main and col not in rows[0]:
                _err(f"error[D001]: --group-by {group_by}: no such column in {label}")
                raise typer.Exit(1)
            if col not in rows[0] and key not in rows[0]:
                continue  # the program reports a group key it needs and lacks
            values = [_group_json(r.get(col, r.get(key))) for r in rows]
            if main and group_by:
                group = values
            here = set(values)
            again = here & seen[j]
            if again:
                g = next(v for v in values if v in again)
                _err(f"error[D002]: rows of group {g!r} are not contiguous in {label}; sort it by `{col}`")
                raise typer.Exit(1)
            seen[j] |= here
        clash = [k for k in _OUTPUT_KEYS if k in rows[0] and k not in warned_cols]
        if clash:
            warned_cols.update(clash)
            _err(f"warning: input column(s) {', '.join(f'`{k}`' for k in clash)} are replaced in the output by "
                 "the scores of the same name; rename them to keep them")
        return batch, prog._score_begin(cols, n, step=step, group=group, raw=given)

    def emit(prepared: Any, helper: Any = None) -> Any:
        """Finish scoring a prepared batch (while waiting for the workers, this process scores chunks of
        ``helper``, the batch prepared after it) and write its rows."""
        batch, pending = prepared
        res = prog._score_finish(pending, None if helper is None else helper[1])
        summ.add(res)
        for i, (lineno, row) in enumerate(batch):
            rec = dict(row)
            rec.update({"reward": _clean(res.total[i])})
            rec["components"] = {k: _clean(res.components[k][i]) for k in names}
            if res.advantages is not None:
                rec["advantage"] = _clean(res.advantages[i])
            errs = {k: res.errors[k][i] for k in names if res.errors[k][i] is not None}
            if errs:
                rec["errors"] = errs
            masked = [k for k in names if res.masked[k][i]]
            if masked:
                rec["masked"] = masked
            sp = {k: [list(s) for s in v[i]] for k, v in res.spans.items() if v[i]}
            if sp:
                rec["spans"] = sp
            tok = {k: v[i].as_json() for k, v in res.attribution.items() if v[i] is not None}
            if tok:  # `tokens` clauses: where each value reaches the completion's characters
                rec["tokens"] = tok
            out_f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return res

    def choose_workers(per_row: float, rows_left: int) -> bool:
        """Start workers (in the background) only if the rows left repay their start-up twice over."""
        if per_row * rows_left * (1 - 1 / cores) > 2 * _POOL_START_S:
            prog.workers = cores
            prog.start_pool()  # the workers start while the input is read and parsed
            return True
        return False

    in_flight: Any = None  # a batch on the workers, written once the next one has been read and handed out

    def flush(batch: list[tuple[int, dict]]) -> Any:
        """Score and write the batches up to this one; the result of the batch written last, if any.

        With workers, a batch is written only after the next one has been read and handed out: the workers score
        while this process parses and writes JSON, instead of waiting for it between batches."""
        nonlocal in_flight
        prepared = prepare(batch)
        res = None
        if in_flight is not None:
            done, in_flight = in_flight, None
            res = emit(done, prepared)
        if prepared is not None:
            if prepared[1].batch is None:  # scored here: nothing to overlap
                res = emit(prepared)
            else:
                in_flight = prepared
        return res

    bar = None
    if progress and total_lines > 2000:
        from rich.progress import Progress

        bar = Progress(transient=True, console=__import__("rich.console").console.Console(stderr=True))
        bar.start()
        task = bar.add_task("scoring", total=total_lines)
    try:
        batch: list[tuple[int, dict]] = []
        last: Any = None
        for lineno, row, problem in iter_jsonl(input):
            if problem is not None:
                if on_bad_row == "fail":
                    _err(f"error[D003]: {label}:{lineno}: {problem}")
                    _err("hint: fix the line, or pass --on-bad-row skip to skip (and count) bad rows")
                    raise typer.Exit(1)
                summ.bad_rows.append((lineno, problem))
                continue
            g = tuple(_group_json(row.get(col, row.get(key))) for key, col, _ in keys)
            # a batch ends only where every group key changes: a group is never split across batches
            if len(batch) >= batch_size and (last is None or all(a != b for a, b in zip(g, last))):
                res = flush(batch)
                if not decided and res is not None:
                    decided = True
                    choose_workers(res.stats.get("time_rows", 0.0) / max(len(res), 1), total_lines - lineno)
                if bar is not None:
                    bar.update(task, completed=lineno)
                batch = []
            batch.append((lineno, row))
            last = g
        flush(batch)
        flush([])
    except typer.Exit:
        if in_flight is not None:  # the rows before the bad one are written, as a run without workers writes them
            done, in_flight = in_flight, None
            emit(done)
        raise
    finally:
        if bar is not None:
            bar.stop()
        if prog._pool is not None:
            from rewardlang.runtime.parallel import stop_tracker

            prog.close()
            stop_tracker()  # the command ends here: its pool's resource tracker goes with it
        prog.close()
    elapsed = time.perf_counter() - t0
    if summary:
        times: dict[str, float] = {}
        for k, v in prog.stats.items():
            if k.startswith("time:"):
                comps = k[5:].split(",")
                for c in comps:
                    times[c] = times.get(c, 0.0) + v / len(comps)
        summ.render(elapsed, times, prog.stats)


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
          max_held_mb: float = typer.Option(64.0, "--max-held-mb", help="request bytes held at once; beyond, 503"),
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
    from rewardlang.runtime.program import DataError

    from rewardlang import outputs

    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    outputs.check_output(output, inputs={"input file": input, "spec": spec})
    prog = _load(spec, set_)
    outputs.check_output(output, inputs=_sources(prog))
    try:
        s = mine_file(prog, str(input), str(output), groups=groups, group_by=group_by, step=step)
    except MiningError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    except DataError as exc:
        for r, c, m in exc.problems[:20]:
            _err(f"error[D001]: {input}: row {r}: column `{c}` {m}")
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


def _columns_needed(prog: Any, rows: list[dict]) -> list[str]:
    """The columns to read: each used input's column (or its name), as present in the batch."""
    present: set[str] = set().union(*(r.keys() for r in rows)) if rows else set()
    out = []
    for i in prog.inputs:
        if i.used and (i.column in present or i.name in present):
            out.append(i.column if i.column in present else i.name)
    return sorted(set(out))


def _clean(x: float) -> float | None:
    """A score as JSON: none (nan) and a non-finite value (an overflow such as `exp(len(completion))`) are
    written as null, so every output line is valid JSON; the summary counts the non-finite ones."""
    x = float(x)
    return x if math.isfinite(x) else None
