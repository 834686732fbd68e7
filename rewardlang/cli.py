"""The ``rewardlang`` command line: check | compile | score | explain | fmt | functions | doctor | train | plot.

Bad specs and bad data end in located messages and exit code 1, never a Python traceback (``--debug``
shows one). Training commands load torch only when they run.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

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


def _load(spec: Path, sets: list[str] | None) -> Any:
    from rewardlang.diagnostics import SpecError, render_all, use_color
    from rewardlang.runtime.program import load_program

    try:
        prog = load_program(str(spec), params=_overrides(sets))
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
          examples: bool = typer.Option(True, "--examples/--no-examples", help="run the specs' examples")) -> None:
    """Check specs: every error, located, in one run; then run each spec's examples."""
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

            for name, file, line, failures in prog.run_examples():
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
        typer.echo(f"ok  {spec}  ({_plural(len(prog.components), 'component')}, {_plural(n_ex, 'example')})")
    if failed:
        raise typer.Exit(1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@app.command("compile")
def compile_(spec: Path = typer.Argument(..., help="spec file"),
             output: Optional[Path] = typer.Option(None, "-o", "--output", help="write the module here"),
             set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """Compile a spec to a readable Python module that needs no .reward file at run time."""
    prog = _load(spec, set_)
    if output is None:
        typer.echo(prog.python_source)
    else:
        output.write_text(prog.python_source, encoding="utf-8")
        _err(f"wrote {output} ({len(prog.python_source.splitlines())} lines)")


def _read_rows(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed row or None, problem) for each non-blank line of a JSONL file."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield lineno, None, f"invalid UTF-8 at byte {exc.start}"
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                yield lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
                continue
            if not isinstance(row, dict):
                yield lineno, None, f"expected a JSON object, got {type(row).__name__}"
                continue
            yield lineno, row, None


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

    def add(self, out: Any) -> None:
        import numpy as np

        self.rows += len(out)
        for k in self.names + ["total"]:
            if k not in self.n:
                for d, v in ((self.n, 0), (self.sum, 0.0), (self.sq, 0.0), (self.min, math.inf),
                             (self.max, -math.inf), (self.masked, 0), (self.errors, 0)):
                    d[k] = v
            v = out.total if k == "total" else out.components[k]
            ok = ~np.isnan(v)
            x = v[ok]
            self.n[k] += int(ok.sum())
            self.sum[k] += float(x.sum())
            self.sq[k] += float((x * x).sum())
            if len(x):
                self.min[k] = min(self.min[k], float(x.min()))
                self.max[k] = max(self.max[k], float(x.max()))
            self.masked[k] += int((~ok).sum())
            if k != "total":
                self.errors[k] += sum(1 for e in out.errors[k] if e is not None)

    def render(self, elapsed: float, times: dict[str, float]) -> None:
        from rich.console import Console
        from rich.table import Table

        total_time = sum(times.values()) or 1.0
        t = Table(title=f"{self.rows} rows scored in {elapsed:.2f} s"
                        + (f"; {len(self.bad_rows)} bad rows skipped" if self.bad_rows else ""))
        for col in ("component", "mean", "std", "min", "max", "none", "errors", "time share"):
            t.add_column(col, justify="left" if col == "component" else "right")
        for k in self.names + ["total"]:
            n = self.n[k]
            mean = self.sum[k] / n if n else float("nan")
            std = math.sqrt(max(self.sq[k] / n - mean * mean, 0.0)) if n else float("nan")
            share = f"{100 * times.get(k, 0.0) / total_time:.0f}%" if k != "total" else ""
            t.add_row(k, f"{mean:.4f}", f"{std:.4f}", f"{self.min[k]:.4f}" if n else "-",
                      f"{self.max[k]:.4f}" if n else "-", str(self.masked[k]),
                      str(self.errors.get(k, "")) if k != "total" else "", share)
        console = Console(stderr=True)
        console.print(t)
        if self.bad_rows:
            shown = ", ".join(f"line {ln}" for ln, _ in self.bad_rows[:20])
            console.print(f"skipped bad rows: {shown}" + (" …" if len(self.bad_rows) > 20 else ""))


@app.command()
def score(spec: Path = typer.Argument(..., help="spec file"),
          input: Path = typer.Option(..., "--input", "-i", help="JSONL file, one row per completion"),
          output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL output (default: stdout)"),
          group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                                           "advantages (rows of a group contiguous)"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
          on_bad_row: str = typer.Option("fail", "--on-bad-row", help="fail | skip"),
          step: int = typer.Option(0, "--step", help="training step (for weight schedules)"),
          batch_size: int = typer.Option(8192, "--batch-size", help="rows scored together"),
          workers: int = typer.Option(0, "--workers", help="processes for large batches (0: every core)"),
          progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar on stderr"),
          summary: bool = typer.Option(True, "--summary/--no-summary", help="summary table on stderr")) -> None:
    """Score a JSONL file; each row gets the total, every component, the advantage when grouped, errors."""

    from rewardlang.runtime.program import DataError

    if on_bad_row not in ("fail", "skip"):
        _err("error: --on-bad-row is `fail` or `skip`")
        raise typer.Exit(1)
    prog = _load(spec, set_)
    import os

    prog.workers = workers or os.cpu_count() or 1
    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    names = [c.name for c in prog.components]
    summ = _Summary(names)
    out_f = open(output, "w", encoding="utf-8") if output else sys.stdout
    total_lines = _count_lines(input) if progress else 0
    seen_groups: set[Any] = set()
    t0 = time.perf_counter()

    def flush(batch: list[tuple[int, dict]]) -> None:
        if not batch:
            return
        rows = [r for _, r in batch]
        given = {k: [r.get(k) for r in rows] for k in _columns_needed(prog, rows)}
        n = len(rows)
        try:
            cols = prog._columns(n, given, by="column")
        except DataError as exc:
            whole = [(c, m) for _, c, m in exc.problems if m.startswith("missing") or m.startswith("no completions")]
            if whole or on_bad_row == "fail":
                for r, c, m in exc.problems[:20]:
                    where = f"{input}" if (c, m) in whole else f"{input}:{batch[r][0]}: row {batch[r][0] - 1}"
                    _err(f"error[D001]: {where}: column `{c}` {m}")
                _err("hint: fix the data" + ("" if whole else ", or pass --on-bad-row skip to skip (and count) "
                                                              "bad rows"))
                raise typer.Exit(1)
            bad = {r for r, _, _ in exc.problems}
            for r, c, m in exc.problems:
                summ.bad_rows.append((batch[r][0], f"column `{c}` {m}"))
            batch = [b for i, b in enumerate(batch) if i not in bad]
            if not batch:
                return
            rows = [r for _, r in batch]
            given = {k: [r.get(k) for r in rows] for k in _columns_needed(prog, rows)}
            n = len(rows)
            cols = prog._columns(n, given, by="column")  # only good rows are left
        group = None
        if group_by:
            if group_by not in rows[0]:
                _err(f"error[D001]: --group-by {group_by}: no such column in {input}")
                raise typer.Exit(1)
            group = [r.get(group_by) for r in rows]
            group = [json.dumps(g, sort_keys=True) if isinstance(g, (list, dict)) else g for g in group]
            first_seen = set()
            for g in group:
                if g in seen_groups and g not in first_seen:
                    _err(f"error[D002]: rows of group {g!r} are not contiguous in {input}; sort it by `{group_by}`")
                    raise typer.Exit(1)
                first_seen.add(g)
            seen_groups.update(first_seen)
        res = prog.score_columns(cols, n, step=step, group=group, raw=given)
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

    bar = None
    if progress and total_lines > 2000:
        from rich.progress import Progress

        bar = Progress(transient=True, console=__import__("rich.console").console.Console(stderr=True))
        bar.start()
        task = bar.add_task("scoring", total=total_lines)
    try:
        batch: list[tuple[int, dict]] = []
        last_group: Any = object()
        for lineno, row, problem in _read_rows(input):
            if problem is not None:
                if on_bad_row == "fail":
                    _err(f"error[D003]: {input}:{lineno}: {problem}")
                    _err("hint: fix the line, or pass --on-bad-row skip to skip (and count) bad rows")
                    raise typer.Exit(1)
                summ.bad_rows.append((lineno, problem))
                continue
            g = row.get(group_by) if group_by else None
            if len(batch) >= batch_size and (not group_by or g != last_group):
                flush(batch)
                if bar is not None:
                    bar.update(task, completed=lineno)
                batch = []
            batch.append((lineno, row))
            last_group = g
        flush(batch)
    finally:
        if bar is not None:
            bar.stop()
        if output:
            out_f.close()
        prog.close()
    elapsed = time.perf_counter() - t0
    if summary:
        times: dict[str, float] = {}
        for k, v in prog.stats.items():
            if k.startswith("time:"):
                comps = k[5:].split(",")
                for c in comps:
                    times[c] = times.get(c, 0.0) + v / len(comps)
        summ.render(elapsed, times)


def _columns_needed(prog: Any, rows: list[dict]) -> list[str]:
    """The columns to read: each used input's column (or its name), as present in the batch."""
    present: set[str] = set().union(*(r.keys() for r in rows)) if rows else set()
    out = []
    for i in prog.inputs:
        if i.used and (i.column in present or i.name in present):
            out.append(i.column if i.column in present else i.name)
    return sorted(set(out))


def _clean(x: float) -> float | None:
    return None if x != x else float(x)


@app.command()
def explain(spec: Path = typer.Argument(..., help="spec file"),
            input: Path = typer.Option(..., "--input", "-i", help="JSONL file"),
            row: int = typer.Option(0, "--row", help="row to explain (0-based; line = row + 1)"),
            set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
            step: int = typer.Option(0, "--step", help="training step"),
            tokens: bool = typer.Option(False, "--tokens", help="print each token with every component's per-token "
                                                                "value (the spec's `tokens` clauses)"),
            tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="with --tokens: a tokenizer.json or a "
                                                    "local model directory (default: the tiny model's)")) -> None:
    """Explain one row: each component's value, how it was derived, and its spans in the completion."""
    from rewardlang.explain import explain_row

    prog = _load(spec, set_)
    found = None
    for i, (lineno, r, problem) in enumerate(_read_rows(input)):
        if i == row:
            if problem is not None:
                _err(f"error[D003]: {input}:{lineno}: {problem}")
                raise typer.Exit(1)
            found = r
            break
    if found is None:
        _err(f"error: {input} has no row {row}")
        raise typer.Exit(1)
    from rewardlang.runtime.program import DataError

    try:
        if tokens:
            _explain_tokens(prog, found, step, tokenizer)
        else:
            explain_row(prog, found, step=step)
    except DataError as exc:
        for _, c, m in exc.problems:
            _err(f"error[D001]: {input}: row {row}: column `{c}` {m}")
        raise typer.Exit(1)


def _explain_tokens(prog: Any, row: dict, step: int, tokenizer_path: str | None) -> None:
    """`explain --tokens`: one line per token, its text and each component's value on it, then the total."""
    from rewardlang.trainers.dense import load_tokenizer, token_table

    try:
        tok = load_tokenizer(tokenizer_path)
    except (OSError, ValueError) as exc:
        _err(f"error: cannot load the tokenizer {tokenizer_path}: {exc}")
        raise typer.Exit(1)
    pieces, names, values, total = token_table(prog, row, tok, step)
    width = max([len(n) for n in names] + [6])
    typer.echo(f"{'#':>4}  {'token':<16}" + "".join(f"{n:>{width + 2}}" for n in names) + f"{'reward':>{width + 2}}")
    for t, piece in enumerate(pieces):
        cells = "".join(f"{values[n][t]:>{width + 2}.4g}" for n in names)
        typer.echo(f"{t:>4}  {repr(piece)[1:-1][:16]:<16}{cells}{total[t]:>{width + 2}.4g}")
    typer.echo(f"sum of per-token rewards: {sum(total):.6g}")


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
            typer.echo(out, nl=False)
        elif out != src:
            changed += 1
            if check_only:
                _err(f"would reformat {spec}")
            else:
                spec.write_text(out, encoding="utf-8")
                _err(f"reformatted {spec}")
    if check_only and changed:
        raise typer.Exit(1)


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
        from rewardlang.runtime.sandbox import doctor_report  # type: ignore[attr-defined]
    except ImportError:
        typer.echo("sandbox: not available")
        return
    report = doctor_report()
    typer.echo("sandbox:")
    _print_tree(report, "  ")


def _print_tree(value: Any, indent: str) -> None:
    for k, v in value.items():
        if isinstance(v, dict) and v:
            typer.echo(f"{indent}{k}:")
            _print_tree(v, indent + "  ")
        else:
            typer.echo(f"{indent}{k}: {v}")


def _delegate(name: str) -> Any:
    def run(ctx: typer.Context) -> None:
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
                   "plot": "Render a run's metrics to PNG curves; `rewardlang plot --help`."}[name]
    return run


@app.command("prm-data")
def prm_data(dataset: str = typer.Option("humaneval", "--dataset", help="humaneval, or a JSONL file with prompt, "
                                                                      "reference, tests[, entry_point, task_id]"),
             output: Path = typer.Option(..., "-o", "--output", help="directory for dpo.jsonl, steps.jsonl, report.json"),
             operators: Optional[str] = typer.Option(None, "--operators", help="comma-separated operator names "
                                                                               "(default: all)"),
             level: Optional[str] = typer.Option(None, "--level", help="segments: line | block (default: block)"),
             seed: Optional[int] = typer.Option(None, "--seed", help="seed of each operator's choice of edit "
                                                                     "(default: 0)"),
             spec: Optional[Path] = typer.Option(None, "--spec", help="take prm_operators, prm_level and prm_seed "
                                                                      "from this spec's params (flags override)"),
             timeout: float = typer.Option(2.0, "--timeout", help="CPU seconds per program"),
             limit: int = typer.Option(0, "--limit", help="use the first N problems (0: all)"),
             plugin: Optional[list[str]] = typer.Option(None, "--plugin", help="import a module that registers "
                                                                                "operators (repeatable)")) -> None:
    """Build PRLCoder's process-supervision data: mutate/refactor each segment, label by running the tests."""
    import importlib

    from rewardlang.runtime.code import label, mutate

    for mod in plugin or []:
        try:
            importlib.import_module(mod)
        except Exception as exc:
            _err(f"error: --plugin {mod}: {type(exc).__name__}: {exc}")
            raise typer.Exit(1)
    ops = [o.strip() for o in operators.split(",") if o.strip()] if operators else None
    try:
        chosen = label.settings_from_spec(_load(spec, None).params, str(spec)) if spec else {}
        ops, level, seed = ops or chosen.get("operators"), level or chosen.get("level", "block"), \
            seed if seed is not None else chosen.get("seed", 0)
        problems, bad = label.load_problems(dataset)
        for b in bad:
            _err(f"warning: {dataset}: {b} (skipped)")
        if limit:
            problems = problems[:limit]
        data = label.build(problems, operators=ops, level=level, seed=seed, timeout=timeout,
                           progress=label._stderr_progress)
    except (label.DataRowError, ValueError) as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    data.bad_rows[:0] = bad
    paths = label.write(data, str(output))
    typer.echo(label.summary_table(data))
    _err(f"wrote {', '.join(paths.values())} (operators: {', '.join(ops or mutate.OPERATORS)})")


app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                       "help_option_names": []})(_delegate("train"))
app.command("plot", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                      "help_option_names": []})(_delegate("plot"))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        _err("interrupted")
        sys.exit(130)
    except Exception as exc:  # an internal error: one line, unless --debug
        if _DEBUG or "--debug" in sys.argv:
            raise
        _err(f"internal error: {type(exc).__name__}: {exc}\n(run with --debug for the traceback; please report it)")
        sys.exit(2)


if __name__ == "__main__":
    main()
