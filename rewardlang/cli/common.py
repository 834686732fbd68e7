"""What every command family shares: the error line, ``--set`` overrides, loading a spec with its diagnostics
printed, and the check for the training stack. Thin on purpose: the work is the library's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer


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
    from rewardlang.compiler import load_program

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


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was written on the command line (or set in the environment), not left at its
    default: an option that does not apply is refused only when given."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _not_a_source(output: Path, prog: Any) -> None:
    """Refuse ``output`` when it is a file the loaded spec was read from (itself or one it imports): each is an
    input the command must not overwrite."""
    import os

    from rewardlang import outputs

    for f in getattr(prog, "sources", {}):
        if os.path.isfile(f):
            outputs.check_output(output, inputs={"spec file": f})


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
