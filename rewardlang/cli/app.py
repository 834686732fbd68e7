"""The ``rewardlang`` application: its commands in the order ``--help`` lists them, the ``--debug`` switch, and
:func:`main`, which turns interrupts, a closed pipe and internal errors into one line and an exit status."""

from __future__ import annotations

import sys

import typer

from rewardlang.cli import audit, data, explain, score, spec, tools, train
from rewardlang.cli.common import _err
from rewardlang.datasets.commands import ir_groups as _ir_groups  # light: typer only

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=train.Commands,
                  help="rewardlang: reward specs for RL on code LLMs. See docs/language.md.")

_DEBUG = False


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="show Python tracebacks of internal errors")) -> None:
    global _DEBUG
    _DEBUG = debug


app.command()(spec.check)
app.command("compile")(spec.compile_)
app.command()(score.score)
app.command()(score.serve)
app.command()(score.pairs)
app.command()(explain.explain)
app.command()(spec.fmt)
app.command()(explain.report)
app.command()(audit.audit)
app.command()(tools.lsp)
app.command()(tools.functions)
app.command()(tools.doctor)
app.command("prm-data")(data.prm_data)
app.command("data")(data.data_command)
app.command("ir-groups")(_ir_groups)
# train, plot, eval: built by train.Commands when one of them runs (listed last, in --help's order)


def _guard_commands(typer_app: typer.Typer) -> None:
    """Every command ends an output error, a full disk or an interrupt with one plain line (see
    :func:`rewardlang.outputs.guard_command`)."""
    from rewardlang.outputs import guard_command

    for info in typer_app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__wrapped__", None):
            info.callback = guard_command(info.callback)


_guard_commands(app)


def main(process_exit: bool = False) -> None:
    """Run the command ``sys.argv`` names. ``process_exit`` (the ``rewardlang`` script and ``python -m
    rewardlang``: this call is the whole process): a command that finished cleanly ends the process at once,
    without the interpreter's teardown (:func:`rewardlang.outputs.exit_fast`)."""
    from rewardlang.outputs import (InterruptExit, exit_fast, exit_interrupted, install_signal_handlers,
                                    interrupt_line, set_whole_process)

    if process_exit:
        set_whole_process()
    install_signal_handlers()  # SIGTERM unwinds like Ctrl-C: temporaries removed, the sandbox closed, one line
    try:
        app()
    except InterruptExit as exc:  # the command said its line: leave with 128 + the signal, not death by SIGINT
        exit_interrupted(int(exc.code))
    except SystemExit as exc:  # how click ends every command
        if process_exit and exc.code in (0, None):
            exit_fast(0)
        raise
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


def entry() -> None:
    """The ``rewardlang`` script: :func:`main` as the whole process."""
    main(process_exit=True)


if __name__ == "__main__":
    main()
