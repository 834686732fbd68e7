"""``train``, ``plot`` and ``eval``: the training stack's commands (:mod:`rewardlang.trainers.cli`, which imports no
torch) as commands of the main application (:class:`Commands` builds them when one runs). Each checks that the stack
is installed before it runs; their usage lines say ``rewardlang <command>`` however the program was started, as they
always have."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

from rewardlang.cli.common import _need_train_stack

#: the training commands, in ``--help``'s order, with the line ``rewardlang --help`` shows for each: the first
#: sentence of the command's own help (tests/test_cli_new_user.py holds them equal; written out here so that
#: ``rewardlang --help`` does not import the training CLI)
COMMANDS = {"train": "Train on the rewards of a spec (GRPO unless `train.algorithm` names another); "
                     "`rewardlang train --help`.",
            "plot": "Render a run's training curves (reward, components, advantages, masked share, KL, timing) to "
                    "a PNG; `rewardlang plot --help`.",
            "eval": "pass@1 and pass@k (unbiased estimator) of a model, or of given completions, on HumanEval (in "
                    "any --lang) or the robot tasks, every program judged in the sandbox; `rewardlang eval --help`."}


class _Context(typer.Context):
    @property
    def command_path(self) -> str:  # "rewardlang train", not "python -m rewardlang train"
        return f"rewardlang {self.info_name}"


class StackCommand(TyperCommand):
    """A training command: its usage and hints name it ``rewardlang <command>``; ``rewardlang --help`` lists it
    by :attr:`listing` (its own help is the training CLI's docstring)."""

    context_class = _Context
    listing = ""

    def get_short_help_str(self, limit: int = 45) -> str:
        own, self.help = self.help, self.listing  # shortened to the listing's width as click shortens a help
        try:
            return super().get_short_help_str(limit)
        finally:
            self.help = own


def command_class(name: str) -> type[StackCommand]:
    """The command class of the training command ``name``."""
    return type(f"{name.capitalize()}Command", (StackCommand,), {"listing": COMMANDS[name]})


def _needs_stack(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _need_train_stack(f"`rewardlang {name}`")  # the same message whichever package of the stack is absent
        return fn(*args, **kwargs)

    return run


def build(name: str) -> TyperCommand:
    """The training command ``name`` as a command of the main application: the training CLI's own function (its
    guard included: `train` says its last checkpoint and the --resume command when interrupted), run once the
    stack is known to be there."""
    from rewardlang.trainers import cli as trainers_cli  # its options are built only when one of its commands runs

    callback = next(i.callback for i in trainers_cli.app.registered_commands if i.name == name)
    info = CommandInfo(name=name, cls=command_class(name), callback=_needs_stack(name, callback))
    return get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)


def listed(name: str) -> TyperCommand:
    """What ``rewardlang --help`` lists for ``name`` (its line, without building the command's options)."""
    return command_class(name)(name)


class Commands(TyperGroup):
    """The application's commands, the training ones built only when one of them runs or shows its help: the
    other commands (and ``rewardlang --help``) do not pay for their options."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            if self._listing:
                return listed(cmd_name)
            self.commands[cmd_name] = build(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False
