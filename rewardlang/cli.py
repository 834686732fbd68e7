"""The ``rewardlang`` command line: check | compile | score | serve | pairs | explain | report | fmt | lsp | functions | doctor
| prm-data | data | train | plot | eval.

Bad specs and bad data end in located messages and exit code 1, never a Python traceback (``--debug``
shows one). Training commands load torch only when they run.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from rewardlang.jsonl import iter_jsonl

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="rewardlang: reward specs for RL on code LLMs. See docs/language.md.")

_DEBUG = False


def _err(msg: str) -> None:
    sys.stderr.write(msg.rstrip("\n") + "\n")


def _overrides(values: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values or []:
        if "=" not in v:
            _err(f"error[E602]: --set {v!r}: write NAME=VALUE (e.g. --set acc.weight=2)")
            raise typer.Exit(1)
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


def _load(spec: Path, sets: list[str] | None, scoring: bool = False) -> Any:
    from rewardlang.diagnostics import SpecError, render_all, use_color
    from rewardlang.runtime.program import load_program

    try:
        prog = load_program(str(spec), params=_overrides(sets))
        if scoring:  # a spec that needs a missing model is refused here (E603), not masked on every row
            prog.require_resources()
    except SpecError as exc:
        _err(exc.render(color=use_color()))
        n = sum(1 for d in exc.diagnostics if d.is_error)
        _err(f"\n{spec}: {n} error(s)")
        raise typer.Exit(1)
    if prog.warnings:
        _err(render_all(prog.warnings, prog.sources, color=use_color()))
    return prog


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="show Python tracebacks of internal errors")) -> None:
    global _DEBUG
    _DEBUG = debug


@app.command()
def check(specs: list[Path] = typer.Argument(..., help="spec files"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
          examples: bool = typer.Option(True, "--examples/--no-examples", help="run the specs' examples"),
          data: Optional[Path] = typer.Option(None, "--data", help="also check the spec against these JSONL rows "
                                              "before scoring: bad rows, tests that cannot be read or use names "
                                              "nothing defines; no program is run")) -> None:
    """Check specs: every error, located, in one run; then run each spec's examples (and, with --data, read the
    rows' tests as scoring would, running nothing)."""
    from rewardlang.diagnostics import Diagnostic, SpecError, render_all, use_color
    from rewardlang.runtime.program import load_program

    failed = 0
    for spec in specs:
        try:
            prog = load_program(str(spec), params=_overrides(set_))
        except SpecError as exc:
            _err(exc.render(color=use_color()))
            _err(f"{spec}: {sum(1 for d in exc.diagnostics if d.is_error)} error(s)\n")
            failed += 1
            continue
        if prog.warnings:
            _err(render_all(prog.warnings, prog.sources, color=use_color()))
        n_ex = 0
        bad: list[Diagnostic] = []
        if examples:
            from rewardlang.syntax import Loc

            results = prog.run_examples()
            if set_ and any(f for *_, f in results):
                results = _examples_with_overrides(spec, results)
            for name, file, line, failures in results:
                n_ex += 1
                for f in failures:
                    src = prog.sources.get(file, "")
                    width = len(src.splitlines()[line - 1]) if 0 < line <= len(src.splitlines()) else 1
                    bad.append(Diagnostic("E403", f"{name}: {f}", Loc(file, line, 1, line, width + 1)))
        if bad:
            _err(render_all(bad, prog.sources, color=use_color()))
            _err(f"{spec}: {len(bad)} example failure(s)\n")
            failed += 1
            continue
        if data is not None:
            from rewardlang.datacheck import check_data

            if not data.is_file():
                _err(f"error: --data {data}: no such file")
                raise typer.Exit(1)
            found = check_data(prog, str(data))
            for stream, line in found.lines():
                (_err if stream == "err" else typer.echo)(line)
            if found.failed:
                failed += 1
                continue
        typer.echo(f"ok  {spec}  ({_plural(len(prog.components), 'component')}, {_plural(n_ex, 'example')})")
    if failed:
        raise typer.Exit(1)


def _examples_with_overrides(spec: Path, results: list) -> list:
    """With --set, an example that fails only because of the overrides is not a failure: expected values are the
    spec's own (its defaults). Such examples are listed in a note; the others keep their failures."""
    from rewardlang.runtime.program import load_program

    try:
        as_written = {(n, f, ln): fl for n, f, ln, fl in load_program(str(spec)).run_examples()}
    except Exception:  # the spec needs its overrides to compile at all: judge the examples with them
        return results
    out, differ = [], []
    for name, file, line, failures in results:
        if failures and not as_written.get((name, file, line), failures):
            differ.append(name)
            failures = []
        out.append((name, file, line, failures))
    if differ:
        _err(f"note: {spec}: with --set, {_plural(len(differ), 'example')} ({', '.join(differ)}) "
             f"{'gives' if len(differ) == 1 else 'give'} other values "
             "than expected; examples are judged by the spec's own parameter values, with which they pass")
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@app.command("compile")
def compile_(spec: Path = typer.Argument(..., help="spec file"),
             output: Optional[Path] = typer.Option(None, "-o", "--output", help="write the module here"),
             set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """Compile a spec to a readable Python module that needs no .reward file at run time."""
    from rewardlang import outputs

    if output is not None:
        outputs.check_output(output, inputs={"spec": spec})
    prog = _load(spec, set_)
    if output is None:
        typer.echo(prog.python_source)
    else:
        outputs.check_output(output, inputs=_sources(prog))  # nor a file the spec imports
        outputs.write_text(output, prog.python_source)
        _err(f"wrote {output} ({len(prog.python_source.splitlines())} lines)")


def _sources(prog: Any) -> dict[str, str]:
    """The files a loaded spec was read from (itself and what it imports), as inputs an output must not be."""
    import os

    return {"spec file": f for f in getattr(prog, "sources", {}) if os.path.isfile(f)}


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


@app.command()
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


@app.command()
def serve(spec: Path = typer.Argument(..., help="spec file"),
          host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
          port: int = typer.Option(8000, "--port", help="port (0: any free one, printed)"),
          window_ms: float = typer.Option(20.0, "--window-ms", help="requests arriving within this window are "
                                                                   "scored as one batch"),
          max_batch: int = typer.Option(512, "--max-batch", help="most rows in one batch"),
          max_pending: int = typer.Option(8192, "--max-pending", help="rows that may wait; beyond, requests are "
                                                                     "answered 503 overloaded"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """Serve the spec over HTTP: OpenRLHF's remote reward protocol and JSON rows, batched (docs/scale.md)."""
    if window_ms < 0 or max_batch < 1 or max_pending < 1:
        _err("error: --window-ms must be >= 0, --max-batch and --max-pending >= 1")
        raise typer.Exit(1)
    prog = _load(spec, set_, scoring=True)
    from rewardlang.integrations.server import serve as run_server

    code = run_server(str(spec), host=host, port=port, program=prog, window_s=window_ms / 1000,
                      max_batch=max_batch, max_pending=max_pending)
    if code:
        raise typer.Exit(code)


@app.command()
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


@app.command()
def explain(spec: Path = typer.Argument(..., help="spec file"),
            input: Path = typer.Option(..., "--input", "-i", help="JSONL file"),
            row: int = typer.Option(0, "--row", help="row to explain (0-based; line = row + 1)"),
            group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                                             "advantages (as for `score`)"),
            set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
            step: int = typer.Option(0, "--step", help="training step"),
            tokens: bool = typer.Option(False, "--tokens", help="print each token with every component's per-token "
                                                                "value (the spec's `tokens` clauses)"),
            tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="with --tokens: a tokenizer.json or a "
                                                    "local model directory (default: the tiny model's)")) -> None:
    """Explain one row: each component's value, how it was derived, and its spans in the completion.

    The row's advantage is computed with the rows of its group (read from the input, as `score` groups them)."""
    from rewardlang.explain import explain_row

    prog = _load(spec, set_, scoring=True)
    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    found = None
    rows: list[dict] = []  # every readable row: the target's group is among them
    for i, (lineno, r, problem) in enumerate(iter_jsonl(input)):
        if i == row:
            if problem is not None:
                _err(f"error[D003]: {input}:{lineno}: {problem}")
                raise typer.Exit(1)
            found = r
            index = len(rows)
        if r is not None:
            rows.append(r)
    if found is None:
        _err(f"error: {input} has no row {row}")
        raise typer.Exit(1)
    group_rows, at, group = _group_of(prog, rows, index, group_by, input)
    from rewardlang.runtime.program import DataError

    try:
        if tokens:
            _explain_tokens(prog, found, step, tokenizer)
        else:
            explain_row(prog, found, step=step, group_rows=group_rows, index=at, group=group)
    except DataError as exc:
        for _, c, m in exc.problems:
            _err(f"error[D001]: {input}: row {row} (or a row of its group): column `{c}` {m}")
        raise typer.Exit(1)


def _explain_tokens(prog: Any, row: dict, step: int, tokenizer_path: str | None) -> None:
    """`explain --tokens`: one line per token, its text and each component's value on it, then the total."""
    _need_train_stack("`explain --tokens` (a tokenizer)")
    from rewardlang.trainers.dense import load_tokenizer, token_table

    try:
        tok = load_tokenizer(tokenizer_path)
    except (OSError, ValueError) as exc:
        _err(f"error: cannot load the tokenizer {tokenizer_path}: {exc}")
        raise typer.Exit(1)
    pieces, names, values, total = token_table(prog, row, tok, step)
    _say_if_masked(prog, row, step)
    width = max([len(n) for n in names] + [6])
    typer.echo(f"{'#':>4}  {'token':<16}" + "".join(f"{n:>{width + 2}}" for n in names) + f"{'reward':>{width + 2}}")
    for t, piece in enumerate(pieces):
        cells = "".join(f"{values[n][t]:>{width + 2}.4g}" for n in names)
        typer.echo(f"{t:>4}  {repr(piece)[1:-1][:16]:<16}{cells}{total[t]:>{width + 2}.4g}")
    typer.echo(f"sum of per-token rewards: {sum(total):.6g}")


def _say_if_masked(prog: Any, row: dict, step: int) -> None:
    """`explain --tokens` of a masked row: its table is all zeros because a trainer leaves the row out, not because
    it earned 0; say so, and why (each masked component with its error)."""
    from rewardlang.runtime.program import chat_to_text

    text = chat_to_text(row.get("completion", ""), "assistant")
    res = prog.score([text], step=step, **{k: [v] for k, v in row.items() if k not in ("completion", "completions")})
    if not math.isnan(float(res.total[0])):
        return
    why = []
    for name in res.masked:
        if res.masked[name][0]:
            infra = name in res.infra and bool(res.infra[name][0])
            error = (res.errors.get(name) or [None])[0]
            why.append(f"`{name}` ({'infrastructure failure: ' if infra else ''}{error or 'no value'})")
    typer.echo(f"this row is masked: {', '.join(why) or 'its total is not a number'}; a trainer leaves it out (it "
               "earns no reward, not 0), so every token below shows 0")


def _group_of(prog: Any, rows: list[dict], index: int, group_by: str | None, input: Path
              ) -> tuple[list[dict], int, list[Any] | None]:
    """The rows of the advantage group of ``rows[index]`` (every row with its group value, the batch for
    `advantage over batch`), the row's position among them, and their group ids when ``--group-by`` gave them."""
    adv = prog.spec.get("advantage")
    if adv is None:
        return [rows[index]], 0, None
    if group_by is not None:
        if group_by not in rows[index]:
            _err(f"error[D001]: --group-by {group_by}: no such column in {input}")
            raise typer.Exit(1)
        key = lambda r: json.dumps(r.get(group_by), sort_keys=True)  # noqa: E731
        want = key(rows[index])
        members = [i for i, r in enumerate(rows) if key(r) == want]
        return [rows[i] for i in members], members.index(index), [want] * len(members)
    columns = [i.column for i in prog.inputs if i.name in adv.get("group_keys", [])]
    if not columns:  # over the whole batch: every row of the input
        return rows, index, None
    key = lambda r: json.dumps([r.get(c) for c in columns], sort_keys=True)  # noqa: E731
    want = key(rows[index])
    members = [i for i, r in enumerate(rows) if key(r) == want]
    return [rows[i] for i in members], members.index(index), None


@app.command()
def fmt(specs: list[Path] = typer.Argument(..., help="spec files"),
        check_only: bool = typer.Option(False, "--check", help="exit 1 if a file is not formatted; change nothing"),
        stdout: bool = typer.Option(False, "--stdout", help="print the formatted spec instead of rewriting")) -> None:
    """Format specs canonically (idempotent; comments kept)."""
    from rewardlang.diagnostics import use_color
    from rewardlang.fmt import format_source
    from rewardlang.parser import ParseFailure

    changed = 0
    for spec in specs:
        try:
            src = spec.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            _err(f"error: {spec}: {exc}")
            raise typer.Exit(1)
        try:
            out = format_source(src, str(spec))
        except ParseFailure as pf:
            _err(pf.diagnostic.render({str(spec): src}, color=use_color()))
            raise typer.Exit(1)
        if stdout:
            if sys.stdout.isatty() and use_color(sys.stdout):  # colours for a reader, never in a pipe or a file
                from rewardlang.highlight import highlight_source

                typer.echo(highlight_source(out))
            else:
                typer.echo(out, nl=False)
        elif out != src:
            changed += 1
            if check_only:
                _err(f"would reformat {spec}")
            else:
                from rewardlang import outputs

                outputs.write_text(spec, out)  # whole or not at all: a full disk must not cut the spec short
                _err(f"reformatted {spec}")
    if check_only and changed:
        raise typer.Exit(1)


@app.command()
def report(spec: Path = typer.Argument(..., help="spec file"),
           input: Path = typer.Option(..., "--input", "-i", help="JSONL file of rows (as for `score`)"),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="write the report here (default: "
                                                                             "standard output)"),
           format: str = typer.Option("html", "--format", help="html (one self-contained page) or json"),
           group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                                            "advantages (as for `score`)"),
           step: int = typer.Option(0, "--step", help="training step"),
           probe_threshold: Optional[float] = typer.Option(None, "--probe-threshold", help="flag a reward-hack "
                                                           "probe earning more than this (default: the median "
                                                           "total of the rows)"),
           set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """A pre-flight report of a spec on real rows: distributions, none/masked shares and reasons, correlations,
    zero-variance groups, extremes with their breakdown, and reward-hack probes."""
    from rewardlang.report import build_report, render_html
    from rewardlang.runtime.program import DataError

    if format not in ("html", "json"):
        _err(f"error: --format {format}: use html or json")
        raise typer.Exit(1)
    from rewardlang import outputs

    if output is not None:  # checked before any work; never the input or the spec itself
        outputs.check_output(output, inputs={"input file": input, "spec": spec})
    prog = _load(spec, set_)
    if output is not None:
        outputs.check_output(output, inputs=_sources(prog))  # nor a file the spec imports
    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    rows, bad = [], 0
    for lineno, r, problem in iter_jsonl(input):
        if problem is not None:
            bad += 1
            _err(f"warning[D003]: {input}:{lineno}: {problem} (skipped)")
        else:
            rows.append(r)
    if not rows:
        _err(f"error: {input} has no rows")
        raise typer.Exit(1)
    try:
        rep = build_report(prog, rows, bad_rows=bad, group_by=group_by, step=step, probe_threshold=probe_threshold,
                           source=str(input))
    except DataError as exc:
        for r, c, m in exc.problems:
            _err(f"error[D001]: {input}: row {r}: column `{c}` {m}")
        raise typer.Exit(1)
    text = json.dumps(rep, indent=1) + "\n" if format == "json" else render_html(rep)
    from rewardlang.runtime.components.execution import undefined_names_lines

    for line in undefined_names_lines(found=[(x["task"], x["names"]) for x in rep["undefined_names"]]):
        _err(line)
    if output is None:
        typer.echo(text, nl=False)
    else:
        outputs.write_text(output, text)  # whole or absent
        flagged = [p["probe"] for p in rep["probes"]["results"] if p.get("flagged")]
        _err(f"wrote {output} ({len(rows)} rows" + (f"; flagged probes: {', '.join(flagged)}" if flagged else "")
             + ")")


@app.command()
def lsp() -> None:
    """Run the language server (Language Server Protocol on stdin/stdout) for editors; see docs/editors.md."""
    try:
        from rewardlang.lsp.server import serve
    except ImportError as exc:  # pygls is a dependency; a broken install says what is missing
        _err(f"error: the language server needs pygls and lsprotocol: {exc}")
        raise typer.Exit(1)
    serve()


@app.command()
def functions() -> None:
    """List every function a spec can call (built in and from installed plug-ins)."""
    from rewardlang.runtime import registry

    for name, impl in sorted(registry.load_all().items()):
        sig = impl.signature
        typer.echo(sig.usage())
        if sig.doc:
            typer.echo("    " + sig.doc.splitlines()[0])
    for name, why in registry.plugin_failures():
        _err(f"plug-in {name} failed to load: {why}")


@app.command()
def doctor() -> None:
    """Report versions, registered functions and the sandbox isolation level."""
    import platform

    import rewardlang
    from rewardlang.runtime import registry

    typer.echo(f"rewardlang {rewardlang.__version__} on Python {platform.python_version()} ({platform.machine()})")
    for pkg in ("numpy", "numba", "lark", "pydantic", "ruff", "tree-sitter", "tree-sitter-python", "trl",
                "transformers", "torch"):
        try:
            from importlib.metadata import version

            typer.echo(f"  {pkg} {version(pkg)}")
        except Exception:
            typer.echo(f"  {pkg}: not installed")
    typer.echo(f"functions: {len(registry.load_all())} registered")
    for name, why in registry.plugin_failures():
        typer.echo(f"  plug-in {name} FAILED: {why}")
    try:
        from rewardlang.sandbox import doctor_report  # type: ignore[attr-defined]
    except ImportError:
        typer.echo("sandbox: not available")
        return
    report = doctor_report()
    typer.echo("sandbox:")
    _print_tree(report, "  ")
    from rewardlang.sandbox.languages import doctor_languages

    typer.echo("languages (toolchain, and a hello-world compiled and run in the sandbox):")
    _print_tree(doctor_languages(), "  ")


def _print_tree(value: Any, indent: str) -> None:
    for k, v in value.items():
        if isinstance(v, dict) and v:
            typer.echo(f"{indent}{k}:")
            _print_tree(v, indent + "  ")
        else:
            typer.echo(f"{indent}{k}: {v}")


#: the packages only ``rewardlang[train]`` installs (the lean core runs without them)
_TRAIN_STACK = ("torch", "transformers", "trl", "accelerate", "peft", "matplotlib", "gguf")


def _need_train_stack(what: str) -> None:
    """Exit 1 with the extra to install when the training stack is missing (``pip install rewardlang`` is the
    core only); checked before importing anything of it, so the message is the same whichever package is absent."""
    import importlib.util

    missing = [p for p in _TRAIN_STACK if importlib.util.find_spec(p) is None]
    if missing:
        _err(f"error: {what} needs the training stack, which is not installed (missing: {', '.join(missing)})\n"
             "hint: pip install \"rewardlang[train]\" (or bash scripts/install.sh)")
        raise typer.Exit(1)


def _delegate(name: str) -> Any:
    def run(ctx: typer.Context) -> None:
        _need_train_stack(f"`rewardlang {name}`")
        from rewardlang.trainers import cli as trainers_cli

        cmd = typer.main.get_command(trainers_cli.app)
        try:
            code = cmd.main(args=[name, *ctx.args], prog_name="rewardlang", standalone_mode=False)
            if isinstance(code, int) and code:  # a typer.Exit(n) inside the sub-command comes back as n
                raise typer.Exit(code)
        except SystemExit as exc:
            raise typer.Exit(exc.code if isinstance(exc.code, int) else 1)
        except Exception as exc:  # click's usage errors
            import click

            if isinstance(exc, click.exceptions.ClickException):
                exc.show()
                raise typer.Exit(exc.exit_code)
            if isinstance(exc, click.exceptions.Exit):
                raise typer.Exit(exc.exit_code)
            raise

    run.__doc__ = {"train": "Train a model with a spec (GRPO on TRL); `rewardlang train --help`.",
                   "plot": "Render a run's metrics to PNG curves; `rewardlang plot --help`.",
                   "eval": "pass@1/pass@k of a model on HumanEval in the sandbox; `rewardlang eval --help`."}[name]
    return run


@app.command("prm-data")
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


@app.command("data")
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
                                                                    "and reasons as JSON")) -> None:
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
                _err(write_humaneval(lang, output, str(report) if report else None))
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


from rewardlang.datasets.commands import ir_groups as _ir_groups  # light: typer only

app.command("ir-groups")(_ir_groups)
app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                       "help_option_names": []})(_delegate("train"))
app.command("plot", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                      "help_option_names": []})(_delegate("plot"))
app.command("eval", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                      "help_option_names": []})(_delegate("eval"))


def _guard_commands(typer_app: typer.Typer) -> None:
    """Every command ends an output error, a full disk or an interrupt with one plain line (see
    :func:`rewardlang.outputs.guard_command`)."""
    from rewardlang.outputs import guard_command

    for info in typer_app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__wrapped__", None):
            info.callback = guard_command(info.callback)


_guard_commands(app)


def main() -> None:
    from rewardlang.outputs import InterruptExit, exit_interrupted, install_signal_handlers, interrupt_line

    install_signal_handlers()  # SIGTERM unwinds like Ctrl-C: temporaries removed, the sandbox closed, one line
    try:
        app()
    except InterruptExit as exc:  # the command said its line: leave with 128 + the signal, not death by SIGINT
        exit_interrupted(int(exc.code))
    except KeyboardInterrupt as exc:  # one that came between commands (while importing, say)
        line, code = interrupt_line(exc)
        _err(line)
        exit_interrupted(code)
    except BrokenPipeError:
        from rewardlang.outputs import quiet_broken_pipe

        quiet_broken_pipe()
    except Exception as exc:  # an internal error: one line, unless --debug
        if _DEBUG or "--debug" in sys.argv:
            raise
        _err(f"internal error: {type(exc).__name__}: {exc}\n(run with --debug for the traceback; please report it)")
        sys.exit(2)


if __name__ == "__main__":
    main()
