"""The one JSONL reader (rewardlang.jsonl) behind every command and trainer that reads rows."""

from __future__ import annotations

import doctest
import gzip
import json

import pytest

import rewardlang.jsonl as jsonl
from rewardlang.jsonl import iter_jsonl, read_jsonl


def test_doctests() -> None:
    assert doctest.testmod(jsonl).failed == 0


def test_every_kind_of_bad_line_is_named_and_reading_goes_on(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n'  # a byte-order mark on row 1 is allowed
                     b"  \n"                      # blank lines are skipped
                     b'{"a": \n'
                     b'{"a": "\xff"}\n'
                     b'{"a": Infinity}\n'
                     b'"text"\n'
                     b'{"a": 2}\n')
    got = list(iter_jsonl(path))
    assert got == [(1, {"a": 1}, None),
                   (3, None, "invalid JSON: Expecting value (column 7)"),
                   (4, None, "invalid UTF-8 at byte 7"),
                   (5, None, "invalid JSON: `Infinity` is not a JSON value"),
                   (6, None, "expected a JSON object, got string"),
                   (7, {"a": 2}, None)]


def test_gzip_files_and_the_raising_reader(tmp_path) -> None:
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"a": 1}) + "\n" + json.dumps({"a": 2}) + "\n")
    assert read_jsonl(path) == [(1, {"a": 1}), (2, {"a": 2})]

    class Mine(Exception):
        pass

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n[]\n')
    with pytest.raises(Mine, match=r"^pairs .*bad.jsonl:2: expected a JSON object, got array$"):
        read_jsonl(bad, Mine, "pairs ")
