"""Writing JSONL test inputs, good and bad lines alike: shared by the CLI tests that feed rows to commands."""

from __future__ import annotations

import json
from pathlib import Path


def write_lines(path: Path, lines: list) -> Path:
    """Write ``lines`` to ``path``, one a line: a row (a dict or any other JSON value) JSON-encoded, a ``str`` as
    written (bad JSON included), ``bytes`` as they are (bad UTF-8 included)."""
    with open(path, "wb") as f:
        for x in lines:
            if isinstance(x, bytes):
                f.write(x + b"\n")
            else:
                f.write(((x if isinstance(x, str) else json.dumps(x)) + "\n").encode())
    return path
