"""One progress bar for every command that works for long: on standard error, only when it is a terminal.

A pipe or a file never gets the bar's redraws (a log would fill with carriage returns). ``score``, ``data cfuncs``
and ``ir-groups`` use it; ``eval`` and ``train`` draw tqdm's bar, which behaves the same way.

    >>> with progress_bar(3, "counting", enabled=False) as advance:
    ...     for _ in range(3):
    ...         advance(1)
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

__all__ = ["progress_bar", "on_terminal"]


def on_terminal() -> bool:
    """Whether standard error is a terminal (a bar is drawn only then)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def progress_bar(total: int, description: str, *, enabled: bool = True,
                 unit: str = "") -> Iterator[Callable[[int], None]]:
    """A transient bar of ``total`` steps on standard error, drawn only on a terminal (and when ``enabled``); yields
    ``advance(n)``. The bar is removed when the block ends, however it ends (an interrupt included)."""
    if not enabled or total <= 0 or not on_terminal():
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    if unit:
        columns.append(TextColumn(unit))
    columns.append(TimeElapsedColumn())
    bar = Progress(*columns, transient=True, console=Console(stderr=True))
    task = bar.add_task(description, total=total)
    bar.start()
    try:
        yield lambda n=1: bar.advance(task, n)
    finally:
        bar.stop()
