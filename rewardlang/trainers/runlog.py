"""A training run's ``metrics.jsonl`` read back: what ``rewardlang plot``, ``rewardlang audit RUN_DIR`` and the run's
report read. Light on purpose (no transformers, no torch): the trainers' callbacks that write the file live in
:mod:`rewardlang.trainers.metrics`, which re-exports these names.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rewardlang.jsonl import iter_jsonl

__all__ = ["MetricsError", "read_metrics"]


class MetricsError(ValueError):
    """A ``metrics.jsonl`` line that is not a record, named by ``file:line`` (not the torn last one: see
    :func:`read_metrics`)."""


def read_metrics(path: str, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (training-step records and the final summary record).

    A run killed while it appended a record can leave the last line cut short. That line is dropped and named
    (``warn``, default a ``warning:`` line on standard error): the records before it are whole, and a resumed run
    writes the steps after its checkpoint again. Any other line that is not a JSON object is a
    :class:`MetricsError` naming ``file:line``: the log was damaged, not cut.

        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "metrics.jsonl")
        >>> _ = open(path, "w").write('{"step": 1}\\n{"step": 2, "rew')
        >>> [r["step"] for r in read_metrics(path, warn=lambda m: print(os.path.basename(m)))]
        metrics.jsonl:2: the last record was cut short (the run was stopped while writing it); dropped
        [1]
    """
    with open(path, "rb") as fh:  # the last line is torn when it fails to parse (a whole record ends in "\n")
        lines = fh.read().split(b"\n")
    last = max((i + 1 for i, raw in enumerate(lines) if raw.strip()), default=0)
    records = []
    for lineno, row, problem in iter_jsonl(path):
        if problem is None:
            records.append(row)
        elif lineno == last:
            (warn or _warn)(f"{path}:{lineno}: the last record was cut short (the run was stopped while writing "
                            "it); dropped")
        else:
            raise MetricsError(f"{path}:{lineno}: not a metrics record ({problem}); the file is damaged")
    return records


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
