"""Bad rows are named (FILE:LINE) and counted, never dropped silently, whatever the batching; an output file is
complete or absent; the codes are stable (D001 a bad or missing value, D003 a line that is not a JSON object).

A row that lacks a column the spec reads is that row's problem, named by its line, even when every row of a batch
lacks it (a batch of one row: ``--batch-size 1``, or a one-row file); ``--on-bad-row skip`` skips and counts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rewardlang
from rewardlang.cli import app
from rewardlang.jsonl import iter_jsonl, parse_line
from rewardlang.runtime.scoring import ScoringError, check_rows, score_rows

from jsonl_files import write_lines

ROOT = Path(__file__).resolve().parents[1]
CODEPO = str(ROOT / "specs" / "codepo_text.reward")
GOOD = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>"
MISSING = "column `completion` missing: the spec's input `completion` reads column `completion`"

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])




def _mix(tmp_path: Path) -> Path:
    """A good row, two rows of another group without a completion, a good row of a third group (the tester's
    mix2.jsonl with contiguous groups)."""
    return write_lines(tmp_path / "mix.jsonl", [{"prompt": "a", "completion": GOOD}, {"prompt": "p"}, {"prompt": "p"},
                                          {"prompt": "b", "completion": GOOD + " more"}])


# ---------------------------------------------------------------- F2: a column every row of a batch lacks


@pytest.mark.parametrize("batch", [8192, 2, 1])
def test_skip_skips_and_names_rows_without_a_column_whatever_the_batch(tmp_path: Path, batch: int) -> None:
    data, out = _mix(tmp_path), tmp_path / "o.jsonl"
    r = invoke("score", CODEPO, "-i", data, "--group-by", "prompt", "--on-bad-row", "skip", "-o", out,
               "--batch-size", batch, "--no-progress")
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["prompt"] for x in out.read_text().splitlines()] == ["a", "b"]
    assert "2 rows scored" in r.stderr and "2 bad rows skipped" in r.stderr
    assert f"skipped bad rows: {data}:2, {data}:3" in r.stderr
    assert "error[" not in r.stderr


@pytest.mark.parametrize("batch", [8192, 1])
def test_fail_names_the_first_row_without_a_column_and_writes_nothing(tmp_path: Path, batch: int) -> None:
    data, out = _mix(tmp_path), tmp_path / "o.jsonl"
    r = invoke("score", CODEPO, "-i", data, "--group-by", "prompt", "-o", out, "--batch-size", batch)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == f"error[D001]: {data}:2: {MISSING}"
    assert f"error[D001]: {data}:3: {MISSING}" in r.stderr
    assert "hint: fix the data, or pass --on-bad-row skip" in r.stderr
    assert not out.exists()


def test_a_one_row_file_without_the_column_is_0_rows_under_skip(tmp_path: Path) -> None:
    data, out = write_lines(tmp_path / "one.jsonl", [{"prompt": "p"}]), tmp_path / "o.jsonl"
    r = invoke("score", CODEPO, "-i", data, "--on-bad-row", "skip", "-o", out, "--no-progress")
    assert r.exit_code == 0, r.output
    assert out.exists() and out.read_text() == ""
    assert "0 rows scored" in r.stderr and "1 bad rows skipped" in r.stderr
    assert f"skipped bad rows: {data}:1" in r.stderr
    r = invoke("score", CODEPO, "-i", data, "-o", out)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == f"error[D001]: {data}:1: {MISSING}"


@pytest.mark.parametrize("batch", [8192, 1])
def test_a_bad_value_before_an_unreadable_line_is_the_error_named(tmp_path: Path, batch: int) -> None:
    data, out = write_lines(tmp_path / "d.jsonl", [{"prompt": "a", "completion": GOOD}, {"prompt": "a"}, "{oops"]), \
        tmp_path / "o.jsonl"
    r = invoke("score", CODEPO, "-i", data, "-o", out, "--batch-size", batch)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == f"error[D001]: {data}:2: {MISSING}"
    assert not out.exists()
    rows = list(iter_jsonl(data))
    with pytest.raises(ScoringError) as ei:
        score_rows(rewardlang.load(CODEPO), rows, label=str(data))
    assert [(i.code, i.line) for i in ei.value.issues] == [("D001", 2)]


def test_score_rows_pins_a_missing_column_on_each_row() -> None:
    prog = rewardlang.load(CODEPO)
    rows = [{"prompt": "p"}, {"prompt": "p"}]
    scored = score_rows(prog, rows, on_bad_row="skip")
    assert scored.result is None and scored.bad_rows == [(0, MISSING), (1, MISSING)]
    with pytest.raises(ScoringError) as ei:
        score_rows(prog, rows, label="rows")
    assert [(i.code, i.row, i.line) for i in ei.value.issues] == [("D001", 0, None), ("D001", 1, None)]
    assert ei.value.render(limit=1).splitlines()[:2] == [f"error[D001]: rows: row 0: {MISSING}", "... and 1 more"]
    # numbered rows (lines of a file): every row by its line
    scored = score_rows(prog, [(3, {"prompt": "p"}, None), (5, {"prompt": "q", "completion": GOOD}, None)],
                        on_bad_row="skip", label="f.jsonl")
    assert scored.kept == [5] and scored.bad_rows == [(3, MISSING)]


def test_a_row_with_two_bad_values_is_one_bad_row() -> None:
    prog = rewardlang.load(CODEPO)
    scored = score_rows(prog, [{"completion": 5, "prompt": 7}, {"completion": GOOD, "prompt": "p"}],
                        on_bad_row="skip")
    assert scored.kept == [1]
    assert scored.bad_rows == [(0, "column `completion` expected text, got int; column `prompt` expected text, "
                                   "got int")]


def test_explain_names_the_rows_of_the_group_that_lack_the_column(tmp_path: Path) -> None:
    data = write_lines(tmp_path / "e.jsonl", [{"prompt": "p"}, {"prompt": "p"}])
    r = invoke("explain", CODEPO, "-i", data, "--row", 0, "--group-by", "prompt")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"error[D001]: {data}:1: {MISSING}", f"error[D001]: {data}:2: {MISSING}"]


def test_audit_names_each_row_that_lacks_the_column(tmp_path: Path) -> None:
    prog = rewardlang.loads("input tests: text\ncomponent c = len(tests)")
    with pytest.raises(ScoringError) as ei:
        check_rows(prog, [(1, {"completion": "a"}), (4, {"completion": "b"})], "r.jsonl")
    assert [(i.line, i.message) for i in ei.value.issues] == [
        (1, "column `tests` missing: the spec's input `tests` reads column `tests`"),
        (4, "column `tests` missing: the spec's input `tests` reads column `tests`")]
    spec = tmp_path / "s.reward"
    spec.write_text("component size in [0, 100] = len(completion)\naudit digits = count(completion, /[0-9]/)\n")
    data = write_lines(tmp_path / "r.jsonl", [{"step": 1, "prompt": "p", "completion": "a1"}, {"step": 1, "prompt": "p"}])
    r = invoke("audit", spec, "-i", data)
    assert r.exit_code == 1
    assert f"error[D001]: {data}:2: {MISSING}" in r.output


def test_the_adapters_mask_each_row_that_lacks_the_column() -> None:
    from rewardlang.integrations.batching import SpecScorer

    s = SpecScorer(CODEPO)
    out = s.score_rows([{"prompt": "p"}, {"prompt": "p"}])
    assert [o["rl_masked"] for o in out] == [1.0, 1.0]
    assert all("completion" in o.reason for o in out)
    out = s.score_rows([{"prompt": "p", "completion": GOOD}, {"prompt": "p"}])
    assert [o["rl_masked"] for o in out] == [0.0, 1.0]


def test_report_of_rows_that_all_lack_the_column_says_so(tmp_path: Path) -> None:
    data = write_lines(tmp_path / "r.jsonl", [{"prompt": "p"}, {"prompt": "q"}])
    out = tmp_path / "rep.json"
    r = invoke("report", CODEPO, "-i", data, "-o", out, "--format", "json")
    assert r.exit_code == 1 and not out.exists()
    assert (f"error[D001]: {data}: no row could be scored (every row skipped; the first, {data}:1: {MISSING})"
            in r.stderr)


# ---------------------------------------------------------------- F3: every bad row in `skipped_rows`

BAD_LINES: list = [
    {"prompt_id": "t", "prompt": "p", "completion": GOOD},        # 1
    "{not json",                                                  # 2 D003
    "[1, 2, 3]",                                                  # 3 D003
    '"just a string"',                                            # 4 D003
    {"prompt_id": "t", "prompt": "p"},                            # 5 D001 missing
    {"prompt_id": "t", "prompt": "p", "completion": 42},          # 6 D001
    {"prompt_id": "t", "prompt": "p", "completion": None},        # 7 D001
    "",                                                           # 8 blank: not a row
    {"prompt_id": "t", "prompt": "p", "completion": GOOD + "!"},  # 9
    '{"prompt_id": "t", "prompt": "p", "completion": "a", "completion": "b"}',  # 10 D003 duplicate key
    "null",                                                       # 11 D003
    '{"prompt_id": "t", "prompt": "p", "completion": NaN}',       # 12 D003
    b'{"prompt_id": "t", "prompt": "p", "completion": "\xff"}',   # 13 D003 not UTF-8
    {"prompt_id": "t", "prompt": "p", "completion": GOOD + "?"},  # 14
]
D003_LINES = [2, 3, 4, 10, 11, 12, 13]
D001_LINES = [5, 6, 7]


def test_report_names_every_bad_row_in_file_order(tmp_path: Path) -> None:
    data, out = write_lines(tmp_path / "bad.jsonl", BAD_LINES), tmp_path / "rep.json"
    r = invoke("report", CODEPO, "-i", data, "-o", out, "--format", "json", "--group-by", "prompt_id")
    assert r.exit_code == 0, r.output
    rep = json.loads(out.read_text())
    assert rep["rows"] == 3 and rep["bad_rows"] == 10
    assert [s["line"] for s in rep["skipped_rows"]] == sorted(D003_LINES + D001_LINES)
    reasons = {s["line"]: s["reason"] for s in rep["skipped_rows"]}
    assert reasons[5] == MISSING
    assert reasons[10] == "invalid JSON: duplicate key `completion` in an object"
    assert reasons[11] == "expected a JSON object, got null"
    warned = [x for x in r.stderr.splitlines() if x.startswith("warning[")]
    assert [(x[8:12], int(x.split(f"{data}:")[1].split(":")[0])) for x in warned] == [
        ("D003" if n in D003_LINES else "D001", n) for n in sorted(D003_LINES + D001_LINES)]


def test_build_report_takes_the_unreadable_lines(tmp_path: Path) -> None:
    from rewardlang.report import build_report

    prog = rewardlang.load(CODEPO)
    rows = [{"prompt": "p", "completion": GOOD}, {"prompt": "p"}, {"prompt": "q", "completion": GOOD}]
    rep = build_report(prog, rows, bad_rows=[(2, "invalid JSON: x")], source="f.jsonl", lines=[1, 3, 4])
    assert rep["bad_rows"] == 2
    assert rep["skipped_rows"] == [{"line": 2, "reason": "invalid JSON: x"}, {"line": 3, "reason": MISSING}]
    assert build_report(prog, rows, bad_rows=5, source="f.jsonl", lines=[1, 3, 4])["bad_rows"] == 6  # a count


# ---------------------------------------------------------------- F10: messages and codes


def test_check_data_uses_scores_codes_in_file_order(tmp_path: Path) -> None:
    data = write_lines(tmp_path / "bad.jsonl", BAD_LINES)
    r = invoke("check", CODEPO, "--data", data)
    assert r.exit_code == 1
    errors = [x for x in r.stderr.splitlines() if x.startswith("error[")]
    assert [(x[6:10], int(x.split(f"{data}:")[1].split(":")[0])) for x in errors] == [
        ("D003" if n in D003_LINES else "D001", n) for n in sorted(D003_LINES + D001_LINES)]
    assert f"error[D001]: {data}:5: {MISSING}" in errors
    assert f"error[D003]: {data}:11: expected a JSON object, got null" in errors
    assert f"data {data}: 3 row(s), 10 bad;" in r.stdout


def test_check_data_a_column_no_row_has_is_said_once(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text("input tests: text\ncomponent c = len(tests)\n")
    data = write_lines(tmp_path / "d.jsonl", [{"completion": "a"}, {"completion": "b"}])
    r = invoke("check", spec, "--data", data)
    assert r.exit_code == 1
    assert [x for x in r.stderr.splitlines() if x.startswith("error[")] == [
        f"error[D001]: {data}: column `tests` missing: the spec's input `tests` reads column `tests` (no row has it)"]
    # a column only some rows lack: those rows, each by its line, however the rows are batched
    data = write_lines(tmp_path / "e.jsonl", [{"completion": "a", "tests": "t"}, {"completion": "b"}])
    from rewardlang.datacheck import check_data

    for batch in (1, 2048):
        rep = check_data(rewardlang.load(str(spec)), str(data), batch_size=batch)
        assert rep.missing == [] and rep.rows == 1
        assert rep.bad_rows == [(2, "column `tests` missing: the spec's input `tests` reads column `tests`")]


def test_values_are_named_by_their_json_types() -> None:
    got = [parse_line(raw, 1)[2] for raw in (b"null", b"[1]", b'"s"', b"1.5", b"true")]  # type: ignore[index]
    assert got == [f"expected a JSON object, got {t}" for t in ("null", "array", "string", "number", "boolean")]


def test_a_row_without_the_column_is_missing_and_a_null_one_is_null() -> None:
    prog = rewardlang.load(CODEPO)
    scored = score_rows(prog, [{"prompt": "p", "completion": GOOD}, {"prompt": "p"}, {"prompt": "p", "completion": None}],
                        on_bad_row="skip")
    assert scored.bad_rows == [(1, MISSING), (2, "column `completion` is null, but `completion` is `text` (declare "
                                                 "`text?` to allow nulls)")]


# ---------------------------------------------------------------- F11: duplicate keys


def test_a_duplicate_key_is_a_bad_line_everywhere(tmp_path: Path) -> None:
    assert parse_line(b'{"completion": "a", "completion": "b"}', 3) == (
        3, None, "invalid JSON: duplicate key `completion` in an object")
    assert parse_line(b'{"c": [{"role": "x", "role": "y"}]}', 4) == (
        4, None, "invalid JSON: duplicate key `role` in an object")  # in a nested object too
    assert parse_line(b'{"a": {"b": 1}, "b": {"a": 2}}', 5) == (5, {"a": {"b": 1}, "b": {"a": 2}}, None)
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "p", "completion": GOOD},
                                        '{"prompt": "p", "completion": "a", "completion": "b"}'])
    out = tmp_path / "o.jsonl"
    r = invoke("score", CODEPO, "-i", data, "-o", out)
    assert r.exit_code == 1 and not out.exists()
    assert r.stderr.splitlines()[0] == f"error[D003]: {data}:2: invalid JSON: duplicate key `completion` in an object"
    r = invoke("score", CODEPO, "-i", data, "-o", out, "--on-bad-row", "skip", "--no-progress")
    assert r.exit_code == 0 and len(out.read_text().splitlines()) == 1
    assert f"skipped bad rows: {data}:2" in r.stderr
