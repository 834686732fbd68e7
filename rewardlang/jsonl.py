"""Reading JSON Lines files, the one loop behind every reader of rows: `rewardlang score`/`explain`/`pairs`, training
datasets, completions for `eval`, preference and stepwise files, `prm-data`'s problems.

Each non-blank line is one JSON object. A line that is not (bad UTF-8, bad JSON, ``NaN``/``Infinity``, which JSON has
no tokens for, an object naming a key twice, whose value would be whichever came last, or not an object) is reported
with its line number, other JSON values by their JSON names (``null``, ``array``, ``string``, ``number``,
``boolean``); what to do with it (stop, or count it and go on) is the caller's policy. A file ending in ``.gz`` is
read through gzip; a byte-order mark may start the file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n\\n[2]\\n{"a": NaN}\\n{"a": 1, "a": 2}\\nnull\\n')
    >>> for lineno, row, problem in iter_jsonl(path):
    ...     print(lineno, row, problem)
    1 {'a': 1} None
    3 None expected a JSON object, got array
    4 None invalid JSON: `NaN` is not a JSON value
    5 None invalid JSON: duplicate key `a` in an object
    6 None expected a JSON object, got null
    >>> read_jsonl(path, what="dataset ")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: dataset .../rows.jsonl:3: expected a JSON object, got array
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Iterator

__all__ = ["iter_jsonl", "json_type", "parse_line", "read_jsonl"]


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """``(line number, row, None)`` for each good line, ``(line number, None, problem)`` for each bad one; blank
    lines are skipped."""
    opener: Any = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            item = parse_line(raw, lineno)
            if item is not None:
                yield item


def parse_line(raw: bytes, lineno: int) -> tuple[int, dict[str, Any] | None, str | None] | None:
    """One line of a file as :func:`iter_jsonl` yields it (None: a blank line).

        >>> parse_line(b'{"a": 1}\\n', 7), parse_line(b"[]", 8), parse_line(b"  ", 9)
        ((7, {'a': 1}, None), (8, None, 'expected a JSON object, got array'), None)
    """
    if not raw.strip():
        return None
    try:
        # a byte-order mark (Windows tools write one) may start the file, so row 1 may carry it
        text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")  # columns on this line
    except UnicodeDecodeError as exc:
        return lineno, None, f"invalid UTF-8 at byte {exc.start}"
    try:
        row = _decode(text)
    except json.JSONDecodeError as exc:
        return lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    except (ValueError, _DuplicateKey) as exc:  # NaN / Infinity: Python's json reads them, JSON has no such tokens
        return lineno, None, f"invalid JSON: {exc}"
    if not isinstance(row, dict):
        return lineno, None, f"expected a JSON object, got {json_type(row)}"
    return lineno, row, None


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (``null``, ``boolean``, ``number``, ``string``, ``array``,
    ``object``), for messages about data read from JSON.

        >>> [json_type(v) for v in (None, True, 1, 1.5, "a", [], {})]
        ['null', 'boolean', 'number', 'number', 'string', 'array', 'object']
    """
    return _JSON_TYPES.get(type(value), type(value).__name__)


_JSON_TYPES = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string", list: "array",
               dict: "object"}


def read_jsonl(path: str | os.PathLike[str], error: type[Exception] = ValueError,
               what: str = "") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of every row; the first bad line raises ``error("<what><path>:<line>: <problem>")``."""
    rows = []
    for lineno, row, problem in iter_jsonl(path):
        if problem is not None:
            raise error(f"{what}{path}:{lineno}: {problem}")
        rows.append((lineno, row))
    return rows  # type: ignore[return-value]


def _reject_constant(token: str) -> Any:
    raise ValueError(f"`{token}` is not a JSON value")


class _DuplicateKey(Exception):
    """An object names a key twice (Python's json keeps the last value, silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):  # the rare case: which key, for the message
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(f"duplicate key `{k}` in an object")
            seen.add(k)
    return obj


#: one decoder, built once: `json.loads(text, parse_constant=...)` builds one per call, which cost more (measured on
#: 100,000 rows of 0.4 KiB: 0.33 s with it, 0.25 s with this one and its duplicate-key check, 0.19 s with neither)
_decode = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys).decode
