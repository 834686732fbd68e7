"""The `rewardlang` command line: check, score, explain, compile and fmt; located errors and exit code 1, never a
traceback."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rewardlang
from rewardlang.cli import app
from rewardlang.runtime.program import Program

from jsonl_files import write_lines

ROOT = Path(__file__).resolve().parents[1]
CODEPO = str(ROOT / "specs" / "codepo_text.reward")
GOOD = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>"

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------- check


def test_check_ok() -> None:
    r = invoke("check", CODEPO)
    assert r.exit_code == 0, r.output
    assert r.stdout == f"ok  {CODEPO}  (3 components, 6 examples)\n"


def test_check_reports_every_error_located_and_exits_1(tmp_path: Path) -> None:
    spec = tmp_path / "bad.reward"
    spec.write_text("let a = 1\ncomponent c = lenn(completion)\ncomponent d = len(completon)\n")
    r = invoke("check", spec)
    assert r.exit_code == 1
    assert r.stdout == ""
    err = r.stderr
    assert "Traceback" not in err
    assert f"error[E102]: unknown function `lenn`\n --> {spec}:2:15\n" in err
    assert "2 | component c = lenn(completion)\n  |               ^^^^\n  = hint: did you mean `len`?" in err
    assert f"error[E101]: unknown name `completon`\n --> {spec}:3:19" in err
    assert f"{spec}: 2 error(s)" in err


def test_check_syntax_error(tmp_path: Path) -> None:
    spec = tmp_path / "syntax.reward"
    spec.write_text("component c = 1 +\n")
    r = invoke("check", spec)
    assert r.exit_code == 1
    assert f"error[E003]: unexpected end of file\n --> {spec}:1:18" in r.stderr
    assert "Traceback" not in r.stderr
    spec.write_text("component c = (1 +\n")  # an unclosed bracket: said at the bracket (issue 37)
    r = invoke("check", spec)
    assert r.exit_code == 1 and f"error[E006]: unclosed `(`\n --> {spec}:1:15" in r.stderr, r.stderr


def test_check_runs_examples_and_reports_failures_as_E403(tmp_path: Path) -> None:
    spec = tmp_path / "ex.reward"
    spec.write_text('component n = len(completion)\n\nexample "short" {\n    completion: "abc",\n'
                    "    expect n = 4,\n}\n")
    r = invoke("check", spec)
    assert r.exit_code == 1
    assert "error[E403]: short: `n`: expected 4, got 3" in r.stderr and f" --> {spec}:3:1\n" in r.stderr
    assert f"{spec}: 1 example failure(s)" in r.stderr
    # --no-examples skips them
    r = invoke("check", spec, "--no-examples")
    assert r.exit_code == 0 and r.stdout.startswith(f"ok  {spec}  (1 component") and "0 examples" in r.stdout


def test_check_several_specs_and_warnings(tmp_path: Path) -> None:
    ok = tmp_path / "ok.reward"
    ok.write_text("input unused: text\ncomponent n = len(completion)\n")
    bad = tmp_path / "bad.reward"
    bad.write_text("component n = len(1)\n")
    r = invoke("check", ok, bad)
    assert r.exit_code == 1
    assert r.stdout.startswith(f"ok  {ok}  (1 component") and r.stdout.count("\n") == 1
    assert f"warning[W001]: input `unused` is never used\n --> {ok}:1:1" in r.stderr
    assert "error[E203]" in r.stderr and f"{bad}: 1 error(s)" in r.stderr


def test_check_with_set(tmp_path: Path) -> None:
    spec = tmp_path / "p.reward"
    spec.write_text('param t: number = 3\ncomponent long = number(len(completion) > t)\n'
                    'example { completion: "ab", expect long = 1 }\n')
    assert invoke("check", spec).exit_code == 1          # 2 > 3 is false: the example fails
    assert invoke("check", spec, "--set", "t=1").exit_code == 0
    r = invoke("check", spec, "--set", "t=abc")
    assert r.exit_code == 1 and "error[E602]: --set t='abc'" in r.stderr
    r = invoke("check", spec, "--set", "nonsense")
    assert r.exit_code == 1 and "error[E602]: --set 'nonsense': write NAME=VALUE" in r.stderr


# ---------------------------------------------------------------- score


def test_score_writes_rows_with_totals_components_and_advantages(tmp_path: Path) -> None:
    rows = [{"completion": GOOD, "prompt": "p", "id": 1}, {"completion": "a a a a a", "prompt": "p", "id": 2},
            {"completion": "hello", "prompt": "p", "id": 3}, {"completion": "ok", "prompt": "q", "id": 4}]
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    r = invoke("score", CODEPO, "-i", data, "-o", out, "--group-by", "prompt", "--no-summary")
    assert r.exit_code == 0, r.output
    got = read_jsonl(out.read_text(encoding="utf-8"))
    assert [g["id"] for g in got] == [1, 2, 3, 4]                 # input columns are kept
    assert [g["components"]["format"] for g in got] == [1.0, 0.0, 0.0, 0.0]
    assert got[0]["components"]["reason"] == pytest.approx(0.65)
    assert got[1]["components"]["rep"] == pytest.approx(-2 / 9)
    ref = rewardlang.load(CODEPO).score(completion=[x["completion"] for x in rows],
                                        prompt=[x["prompt"] for x in rows])
    assert [g["reward"] for g in got] == pytest.approx(ref.total.tolist())
    assert [g["advantage"] for g in got] == pytest.approx(ref.advantages.tolist())
    assert got[3]["advantage"] == 0.0                              # a group of one
    # to stdout, with a summary table on stderr
    r = invoke("score", CODEPO, "-i", data, "--group-by", "prompt", "--no-progress")
    assert r.exit_code == 0
    assert read_jsonl(r.stdout) == got
    assert "4 rows scored" in r.stderr and "format" in r.stderr


def test_score_without_group_by_uses_the_specs_group_column(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"completion": GOOD, "prompt": "p"}, {"completion": "x", "prompt": "p"}])
    r = invoke("score", CODEPO, "-i", data, "--no-summary")
    got = read_jsonl(r.stdout)
    assert got[0]["advantage"] > 0 > got[1]["advantage"]


def test_score_reports_errors_and_masked_components(tmp_path: Path) -> None:
    spec = tmp_path / "d.reward"
    spec.write_text("component d = 1 / (len(completion) - 2)\ncomponent n = len(completion)\n")
    data = write_jsonl(tmp_path / "in.jsonl", [{"completion": "abc"}, {"completion": "ab"}])
    r = invoke("score", spec, "-i", data, "--no-summary")
    assert r.exit_code == 0
    a, b = read_jsonl(r.stdout)
    assert a["reward"] == 4.0 and a["components"] == {"d": 1.0, "n": 3.0} and "errors" not in a
    assert b["reward"] is None and b["components"] == {"d": None, "n": 2.0}
    assert b["errors"] == {"d": "division by zero"} and b["masked"] == ["d"]


BAD_ROWS = [
    {"completion": GOOD, "prompt": "p"},
    "this is not json",
    {"completion": "x", "prompt": "p"},
    b"\xff\xfe",
    {"prompt": "q"},
    {"completion": 5, "prompt": "q"},
    {"completion": "fine", "prompt": "q"},
    "[1, 2]",
]


def _bad_file(tmp_path: Path) -> Path:
    return write_lines(tmp_path / "bad.jsonl", BAD_ROWS)


@pytest.mark.parametrize("line,expected", [
    (2, "error[D003]: {f}:2: invalid JSON: Expecting value (column 1)"),
    (4, "error[D003]: {f}:4: invalid UTF-8 at byte 0"),
    (8, "error[D003]: {f}:8: expected a JSON object, got array"),
])
def test_score_fails_on_an_unreadable_line_naming_it(tmp_path: Path, line: int, expected: str) -> None:
    path = tmp_path / "one.jsonl"
    with open(path, "wb") as f:
        for r in [BAD_ROWS[0]] * (line - 1) + [BAD_ROWS[line - 1]]:
            f.write(r + b"\n" if isinstance(r, bytes) else ((r if isinstance(r, str) else json.dumps(r)) + "\n").encode())
    r = invoke("score", CODEPO, "-i", path, "--no-summary")
    assert r.exit_code == 1
    assert expected.format(f=path) in r.stderr
    assert "hint: fix the line, or pass --on-bad-row skip" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("rows,expected", [
    ([{"completion": "a", "prompt": "p"}, {"prompt": "q"}],
     "error[D001]: {f}:2: column `completion` missing: the spec's input `completion` reads column `completion`"),
    ([{"completion": "a", "prompt": "p"}, {"completion": None, "prompt": "q"}],
     "error[D001]: {f}:2: column `completion` is null, but `completion` is `text`"),
    ([{"completion": "a", "prompt": "p"}, {"completion": 5, "prompt": "q"}],
     "error[D001]: {f}:2: column `completion` expected text, got int"),
    ([{"completion": "a", "prompt": "p"}, {"completion": "\ud800", "prompt": "q"}],
     "error[D001]: {f}:2: column `completion` is not valid UTF-8 text"),
    ([{"completion": "a"}, {"completion": "b"}],
     "error[D001]: {f}:1: column `prompt` missing: the spec's input `prompt` reads column `prompt`"),
], ids=["missing", "null", "wrong-type", "surrogate", "missing-column"])
def test_score_fails_on_bad_values_naming_line_and_column(tmp_path: Path, rows: list, expected: str) -> None:
    path = write_jsonl(tmp_path / "v.jsonl", rows)
    r = invoke("score", CODEPO, "-i", path, "--no-summary")
    assert r.exit_code == 1
    assert expected.format(f=path) in r.stderr
    # skipping rows cannot help when the column is absent from the whole file, so that hint says only "fix";
    # a column only some rows lack is theirs to skip
    whole = "`prompt` missing:" in expected
    hint = "hint: fix the data, or group by" if whole else "hint: fix the data, or pass --on-bad-row skip"
    assert hint in r.stderr
    assert r.stdout == ""


def test_score_skips_and_counts_bad_rows(tmp_path: Path) -> None:
    path = _bad_file(tmp_path)
    r = invoke("score", CODEPO, "-i", path, "--on-bad-row", "skip", "--no-progress")
    assert r.exit_code == 0, r.output
    got = read_jsonl(r.stdout)
    assert [g["completion"] for g in got] == [GOOD, "x", "fine"]
    assert "3 rows scored" in r.stderr and "5 bad rows skipped" in r.stderr
    assert f"skipped bad rows: {path}:2, {path}:4, {path}:5, {path}:6, {path}:8" in " ".join(r.stderr.split())


def test_score_rejects_groups_that_are_not_contiguous(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", [{"completion": "a", "prompt": "p"}, {"completion": "b", "prompt": "q"},
                                              {"completion": "c", "prompt": "p"}])
    r = invoke("score", CODEPO, "-i", path, "--group-by", "prompt", "--batch-size", "1", "--no-summary")
    assert r.exit_code == 1
    assert f"error[D002]: rows of group 'p' are not contiguous in {path}; sort it by `prompt`" in r.stderr


def test_score_group_by_unknown_column(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", [{"completion": "a", "prompt": "p"}])
    r = invoke("score", CODEPO, "-i", path, "--group-by", "task", "--no-summary")
    assert r.exit_code == 1 and f"error[D001]: {path}:1: --group-by task: no such column (no row has it)" in r.stderr


def test_score_skip_with_a_column_missing_from_every_row(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "np.jsonl", [{"completion": f"x{i}"} for i in range(1500)])
    r = invoke("score", CODEPO, "-i", path, "--on-bad-row", "skip", "--no-progress")
    # either every row is skipped and counted, or one clean D001 error: no internal error
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)


def test_score_a_spec_that_does_not_read_the_completion(tmp_path: Path) -> None:
    spec = tmp_path / "t.reward"
    spec.write_text('input tests: text\ncomponent n_tests = count(tests, "assert")\n')
    data = write_jsonl(tmp_path / "d.jsonl", [{"completion": "x = 1", "tests": "assert a; assert b"}])
    r = invoke("score", spec, "-i", data, "--no-summary")
    assert r.exit_code == 0, r.stderr
    assert read_jsonl(r.stdout)[0]["reward"] == 2.0


# ---------------------------------------------------------------- explain


def test_explain_one_row(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "e.jsonl", [{"completion": "x", "prompt": "p"}, {"completion": GOOD, "prompt": "p"}])
    r = invoke("explain", CODEPO, "-i", path, "--row", "1")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "total reward 1.65" in out
    for line in ("format", "reason", "rep"):
        assert line in out
    assert "/Step\\s\\d+:/: 2 match(es)" in out and "'Thus': 1 match(es)" in out
    assert "markers" in out and "→ 3" in out


def test_explain_bad_row_number_or_line(tmp_path: Path) -> None:
    path = _bad_file(tmp_path)
    r = invoke("explain", CODEPO, "-i", path, "--row", "1")
    assert r.exit_code == 1 and f"error[D003]: {path}:2: invalid JSON" in r.stderr
    r = invoke("explain", CODEPO, "-i", path, "--row", "99")
    assert r.exit_code == 1 and f"error: {path} has no row 99" in r.stderr
    r = invoke("explain", CODEPO, "-i", path, "--row", "4")
    assert r.exit_code == 1 and "error[D001]" in r.stderr and "column `completion`" in r.stderr


# ---------------------------------------------------------------- compile


def test_compiled_module_runs_on_its_own(tmp_path: Path) -> None:
    out = tmp_path / "codepo_compiled.py"
    r = invoke("compile", CODEPO, "-o", out, "--set", "answer_dotall=false")
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stderr
    spec = importlib.util.spec_from_file_location("codepo_compiled", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prog = Program.from_module(module)
    assert prog.name == "codepo_text" and prog.params == {"answer_dotall": False, "markers_in_reasoning": False}
    ref = rewardlang.load(CODEPO, params={"answer_dotall": False})
    comps = [GOOD, "a a a a a", "<reasoning>0123456789ab</reasoning><answer>a\nb</answer>", "hello", ""]
    prompts = ["p", "p", "p", "q", "q"]
    a, b = prog.score(completion=comps, prompt=prompts), ref.score(completion=comps, prompt=prompts)
    assert a.total.tolist() == b.total.tolist()
    assert a.advantages.tolist() == b.advantages.tolist()
    for k in b.components:
        assert a.components[k].tolist() == b.components[k].tolist()
    assert a.components["format"].tolist()[2] == 0.0  # the override is compiled in
    # the module names the functions it needs, and no .reward file
    text = out.read_text()
    assert "codepo_terms" not in text.split('"""', 2)[2].split("SPEC =")[0]
    # to stdout
    r = invoke("compile", CODEPO)
    assert r.exit_code == 0 and r.stdout.startswith('"""Reward program `codepo_text`')


# ---------------------------------------------------------------- fmt


def test_fmt_check_and_rewrite(tmp_path: Path) -> None:
    ugly = tmp_path / "ugly.reward"
    ugly.write_text("let  x=count( completion,\"a\" )# n\ncomponent c in [0,1]=min(x,1)")
    pretty = 'let x = count(completion, "a")  # n\ncomponent c in [0, 1] = min(x, 1)\n'
    r = invoke("fmt", "--check", ugly)
    assert r.exit_code == 1 and f"would reformat {ugly}" in r.stderr
    assert ugly.read_text() != pretty                      # --check changes nothing
    r = invoke("fmt", "--stdout", ugly)
    assert r.exit_code == 0 and r.stdout == pretty
    r = invoke("fmt", ugly)
    assert r.exit_code == 0 and f"reformatted {ugly}" in r.stderr
    assert ugly.read_text() == pretty
    r = invoke("fmt", "--check", ugly)
    assert r.exit_code == 0 and r.stderr == ""


def test_fmt_check_passes_on_the_shipped_codepo_spec() -> None:
    r = invoke("fmt", "--check", CODEPO, str(ROOT / "specs" / "lib" / "codepo_terms.reward"))
    assert r.exit_code == 0, r.stderr


def test_fmt_of_a_bad_spec_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.reward"
    bad.write_text("let x = 1 +* 2\n")
    r = invoke("fmt", bad)
    assert r.exit_code == 1
    assert f"error[E001]: unexpected '*'\n --> {bad}:1:12" in r.stderr
    assert bad.read_text() == "let x = 1 +* 2\n"


# ---------------------------------------------------------------- the real entry point


def test_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.reward"
    bad.write_text("component c = len(completion) +\n")
    data = write_jsonl(tmp_path / "d.jsonl", [{"completion": 5, "prompt": "p"}])
    cmd = [sys.executable, "-m", "rewardlang"]
    p = subprocess.run(cmd + ["check", str(bad)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "error[E003]" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run(cmd + ["score", CODEPO, "-i", str(data), "--no-summary"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "error[D001]" in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------- score: groups, files, empty input (issue 13)

LENADV = "component n in [0, 100] = len(completion)\nadvantage over group(prompt) = center\n"


def _lenadv(tmp_path: Path) -> Path:
    spec = tmp_path / "lenadv.reward"
    spec.write_text(LENADV)
    return spec


@pytest.mark.parametrize("group_by", [None, "prompt"])
def test_score_never_splits_a_group_across_batches_for_any_batch_size(tmp_path: Path, group_by) -> None:
    from hypothesis import given, settings, strategies as st

    spec = _lenadv(tmp_path)
    extra = ["--group-by", group_by] if group_by else []

    @settings(max_examples=12, deadline=None)
    @given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5), batch=st.integers(1, 12))
    def prop(sizes: list[int], batch: int) -> None:
        rows = [{"prompt": f"p{g}", "completion": "x" * (k + 1)} for g, size in enumerate(sizes) for k in range(size)]
        data = write_jsonl(tmp_path / "g.jsonl", rows)
        r = invoke("score", spec, "-i", data, "--batch-size", batch, "--no-summary", "--no-progress", *extra)
        assert r.exit_code == 0, r.output
        got = [g["advantage"] for g in read_jsonl(r.stdout)]
        want = [float(k + 1) - (size + 1) / 2 for size in sizes for k in range(size)]  # 1..size, centered
        assert got == pytest.approx(want)

    prop()


def test_score_issue_example_of_a_group_crossing_the_batch_boundary(tmp_path: Path) -> None:
    rows = [{"prompt": f"p{i // 3}", "completion": "x" * (i % 3 + 1)} for i in range(4)]
    data = write_jsonl(tmp_path / "g.jsonl", rows)
    r = invoke("score", _lenadv(tmp_path), "-i", data, "--batch-size", 2, "--no-summary")
    assert [g["advantage"] for g in read_jsonl(r.stdout)] == [-1.0, 0.0, 1.0, 0.0]


def test_score_non_contiguous_group_across_batches_is_D002_without_group_by(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "g.jsonl", [{"completion": "a", "prompt": "p"}, {"completion": "b", "prompt": "q"},
                                              {"completion": "c", "prompt": "p"}])
    out = tmp_path / "out.jsonl"
    r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--batch-size", 1, "--no-summary")
    assert r.exit_code == 1
    assert f"error[D002]: rows of group 'p' are not contiguous in {data}; sort it by `prompt`" in r.stderr
    assert not out.exists() and list(tmp_path.glob(".out.jsonl*")) == []   # no partial output, no temp file


def test_score_refuses_to_write_over_its_input(tmp_path: Path) -> None:
    rows = [{"prompt": "p", "completion": "x"}]
    data = write_jsonl(tmp_path / "same.jsonl", rows)
    before = data.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(data)
    for out in (data, tmp_path / "." / "same.jsonl", link):
        r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--no-summary")
        assert r.exit_code == 1
        assert f"error: -o {out} is the input file" in r.stderr
        assert data.read_bytes() == before


@pytest.mark.parametrize("how", ["fatal-bad-row", "exception", "interrupt"])
def test_score_failed_run_leaves_the_previous_output_untouched(tmp_path: Path, monkeypatch, how: str) -> None:
    rows = [{"prompt": f"p{i}", "completion": "x"} for i in range(5)] + ["not json"]
    data = write_jsonl(tmp_path / "in.jsonl", rows if how == "fatal-bad-row" else rows[:-1])
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    if how != "fatal-bad-row":
        from rewardlang.runtime.program import Program as P

        exc = KeyboardInterrupt() if how == "interrupt" else RuntimeError("boom")
        calls = []

        def fail(self, *a, **k):
            calls.append(1)
            if len(calls) == 2:
                raise exc
            return real(self, *a, **k)

        real = P.finish  # where every batch is scored (score_columns and the CLI's pipelined batches)
        monkeypatch.setattr(P, "finish", fail)
    r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--batch-size", 2, "--no-summary")
    assert r.exit_code != 0
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "lenadv.reward", "out.jsonl"]  # no temp file


def test_score_output_replaces_the_file_only_when_complete(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "completion": "xy"}])
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--no-summary")
    assert r.exit_code == 0, r.output
    assert read_jsonl(out.read_text())[0]["reward"] == 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "lenadv.reward", "out.jsonl"]


def test_score_into_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "completion": "x"}])
    out = tmp_path / "nodir" / "out.jsonl"
    r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--no-summary")
    assert r.exit_code == 1
    assert f"error: -o {out}: directory {out.parent} does not exist (create it first)" in r.stderr
    assert "internal error" not in r.stderr


def test_score_warns_when_input_columns_are_replaced(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "completion": "x", "reward": 7, "advantage": 1}] * 2)
    r = invoke("score", _lenadv(tmp_path), "-i", data, "--no-summary")
    assert r.exit_code == 0
    assert r.stderr.count("warning: input column(s) `reward`, `advantage` are replaced in the output") == 1
    assert read_jsonl(r.stdout)[0]["reward"] == 1.0


@pytest.mark.parametrize("content,skip,skipped", [
    ("", False, 0), ("\n  \n\n", False, 0), ("not json\n[1]\n", True, 2),
])
def test_score_empty_input_is_a_clean_result(tmp_path: Path, content: str, skip: bool, skipped: int) -> None:
    data = tmp_path / "e.jsonl"
    data.write_text(content)
    out = tmp_path / "out.jsonl"
    r = invoke("score", _lenadv(tmp_path), "-i", data, "-o", out, "--no-progress",
               *(["--on-bad-row", "skip"] if skip else []))
    assert r.exit_code == 0, r.output
    assert out.read_text() == ""
    assert "0 rows scored" in r.stderr and "(no rows to score)" in r.stderr
    assert (f"{skipped} bad rows skipped" in r.stderr) == bool(skipped)


@pytest.mark.slow
def test_score_reads_standard_input(tmp_path: Path) -> None:
    spec = _lenadv(tmp_path)
    rows = "".join(json.dumps({"prompt": "p", "completion": c}) + "\n" for c in ("x", "xxx"))
    for text, n, path in ((rows, 2, "-"), ("", 0, "-"), (rows, 2, "/dev/stdin"), ("", 0, "/dev/stdin")):
        p = subprocess.run([sys.executable, "-m", "rewardlang", "score", str(spec), "-i", path, "--no-progress"],
                           input=text, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert p.returncode == 0, p.stderr
        assert [g["advantage"] for g in read_jsonl(p.stdout)] == ([-1.0, 1.0] if n else [])
        assert f"{n} rows scored" in p.stderr


def test_score_group_by_replaces_the_specs_group_key(tmp_path: Path) -> None:
    rows = [{"prompt_id": i // 3, "completion": "x" * (i % 3 + 1)} for i in range(4)]
    data = write_jsonl(tmp_path / "pid.jsonl", rows)
    r = invoke("score", _lenadv(tmp_path), "-i", data, "--group-by", "prompt_id", "--batch-size", 2, "--no-summary")
    assert r.exit_code == 0, r.output
    assert [g["advantage"] for g in read_jsonl(r.stdout)] == [-1.0, 0.0, 1.0, 0.0]
    # without --group-by, the hint names it and the input's `from`
    r = invoke("score", _lenadv(tmp_path), "-i", data, "--no-summary")
    assert r.exit_code == 1
    assert ('hint: fix the data, or group by another column: --group-by <column>, or `input prompt: text from '
            '"<column>"` in the spec') in r.stderr
    # a spec that also reads the prompt still needs it, and says why
    both = tmp_path / "both.reward"
    both.write_text("component n = len(completion) + len(prompt)\nadvantage over group(prompt) = center\n")
    r = invoke("score", both, "-i", data, "--group-by", "prompt_id", "--no-summary")
    assert r.exit_code == 1
    assert "the spec reads `prompt` beyond grouping (--group-by replaces only the group key)" in r.stderr
    assert '`input prompt: text from "<column>"`' in r.stderr


def test_score_optional_input_absent_from_the_data_is_none(tmp_path: Path) -> None:
    spec = tmp_path / "opt.reward"
    spec.write_text('input hint: text?\ncomponent n = len(completion) + len(hint or "")\n')
    data = write_jsonl(tmp_path / "d.jsonl", [{"completion": "ab"}, {"completion": "abc"}])
    r = invoke("score", spec, "-i", data, "--no-summary")
    assert r.exit_code == 0, r.output
    assert [g["reward"] for g in read_jsonl(r.stdout)] == [2.0, 3.0]
    # the same rule in the Python API (and, as documented, in `train`)
    assert rewardlang.load(str(spec)).score(completion=["abcd"]).total.tolist() == [4.0]


def test_score_default_workers_start_a_pool_only_when_the_rest_repays_it(tmp_path: Path, monkeypatch) -> None:
    from rewardlang.runtime import scoring

    started: list[int] = []
    monkeypatch.setattr(Program, "start_pool", lambda self, workers=None: started.append(workers))
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    spec = _lenadv(tmp_path)
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}", "completion": "x" * i} for i in range(40)])
    r = invoke("score", spec, "-i", data, "--batch-size", 10, "--no-summary")
    assert r.exit_code == 0 and started == []        # a small file: one process, as with --workers 1
    monkeypatch.setattr(scoring, "POOL_START_S", 0.0)     # a pool that costs nothing always repays itself
    monkeypatch.setattr(scoring, "MIN_CORE_SHARE", 0.0)   # ... whatever share of a core this (busy) machine gave
    r = invoke("score", spec, "-i", data, "--batch-size", 10, "--no-summary")
    assert r.exit_code == 0 and started == [4]       # started once, after the first (timed) batch
    started.clear()
    monkeypatch.setattr(scoring, "MIN_CORE_SHARE", 2.0)   # no process gets two cores' worth: no core was free
    r = invoke("score", spec, "-i", data, "--batch-size", 10, "--no-summary")
    assert r.exit_code == 0 and started == []
    started.clear()
    r = invoke("score", spec, "-i", data, "--batch-size", 10, "--workers", 1, "--no-summary")
    assert r.exit_code == 0 and started == []        # an explicit --workers is obeyed


def test_a_run_too_small_to_repay_the_numba_load_uses_the_python_path(monkeypatch) -> None:
    from rewardlang.runtime import ngrams
    from rewardlang.runtime.components import text

    def kernel(self, n):
        raise AssertionError("the Numba kernel was used")

    monkeypatch.setattr(ngrams.Tokens, "distinct", kernel)
    monkeypatch.setattr(text, "_ngrams_ready", lambda: False)
    prog = rewardlang.loads("component d = distinct(words(completion), 2)")
    texts = [f"a b a b c{i}" for i in range(300)]                 # over _NUMBA_MIN_ROWS in one batch
    prog.run_rows = 300                                           # ... but the whole run is 300 rows
    assert prog.score(completion=texts).total.tolist() == [0.75] * 300  # ab ba ab bc: 3 distinct of 4
    prog.run_rows = None                                          # a run of unknown length (training) loads it
    # (a function that raises is retried on halves of the batch, not failed for every row: the kernel raised on
    # the whole batch, and the halves, below the kernel's batch size, took the Python path)
    out = prog.score(completion=texts)
    assert out.stats["isolate:distinct"] >= 1


def test_check_with_set_judges_examples_by_the_specs_own_values() -> None:
    # docs/specs/codepo.md: "a different weighting is a command-line override: --set rep.weight=0.5"
    r = invoke("check", CODEPO, "--set", "rep.weight=0.5")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"ok  {CODEPO}  (3 components, 6 examples)\n"
    assert ("note: " + CODEPO + ": with --set, 1 example (group advantage (Eqs. 9-11)) gives other values than "
            "expected; examples are judged by the spec's own parameter values, with which they pass") in r.stderr
