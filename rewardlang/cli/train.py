"""``train``, ``plot`` and ``eval``: the training stack's commands (:mod:`rewardlang.trainers.cli`), run only once
the stack is known to be installed, so the core CLI imports no torch."""

from __future__ import annotations

from typing import Any

import typer

from rewardlang.cli.common import _need_train_stack


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

    run.__doc__ = _summary(name) + f" (`rewardlang {name} --help`)"
    return run


def _summary(name: str) -> str:
    """The first sentence of the training CLI's own help for ``name``: ``rewardlang --help`` says what
    ``rewardlang NAME --help`` says (that module imports typer only, never torch)."""
    from rewardlang.trainers import cli as trainers_cli

    fn = next(i.callback for i in trainers_cli.app.registered_commands if i.name == name)
    doc = " ".join((getattr(fn, "__doc__", None) or "").split())
    return doc.split("; ")[0].split(". ")[0].rstrip(".")
