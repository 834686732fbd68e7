"""Commands on specs themselves: ``check``, ``compile``, ``fmt``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rewardlang.cli.common import _err, _load, _overrides, _plural, _not_a_source


def check(specs: list[Path] = typer.Argument(..., help="spec files"),
          set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
          examples: bool = typer.Option(True, "--examples/--no-examples", help="run the specs' examples"),
          data: Optional[Path] = typer.Option(None, "--data", help="also check the spec against these JSONL rows "
                                              "before scoring: bad rows, tests that cannot be read or use names "
                                              "nothing defines; no program is run")) -> None:
    """Check specs: every error, located, in one run; then run each spec's examples (and, with --data, read the
    rows' tests as scoring would, running nothing)."""
    from rewardlang.diagnostics import Diagnostic, SpecError, render_all, use_color
    from rewardlang.compiler import load_program

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
        audits = f"{_plural(len(prog.audits), 'audit')}, " if prog.audits else ""
        typer.echo(f"ok  {spec}  ({_plural(len(prog.components), 'component')}, {audits}{_plural(n_ex, 'example')})")
    if failed:
        raise typer.Exit(1)


def _examples_with_overrides(spec: Path, results: list) -> list:
    """With --set, an example that fails only because of the overrides is not a failure: expected values are the
    spec's own (its defaults). Such examples are listed in a note; the others keep their failures."""
    from rewardlang.compiler import load_program

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
        _not_a_source(output, prog)  # nor a file the spec imports
        outputs.write_text(output, prog.python_source)
        _err(f"wrote {output} ({len(prog.python_source.splitlines())} lines)")


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
            raw = spec.read_bytes()
        except OSError as exc:
            _err(f"error: {spec}: {exc.strerror or exc}")
            raise typer.Exit(1)
        try:
            src = raw.decode("utf-8")
        except UnicodeDecodeError as exc:  # located, as `check` says it
            from rewardlang.checker import not_utf8

            d, shown = not_utf8(str(spec), raw, exc)
            _err(d.render({str(spec): shown}, color=use_color()))
            raise typer.Exit(1)
        try:
            out = format_source(src, str(spec))
        except ParseFailure as pf:
            _err("\n\n".join(d.render({str(spec): src}, color=use_color()) for d in pf.diagnostics))
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
