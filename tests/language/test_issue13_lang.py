"""Language items of issue 13: non-finite constants (E217) and always-valid JSON output, import cycles (E105),
a UTF-8 byte-order mark, nesting depth of flat chains, catastrophic regexes, and the messages Python habits get."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardlang.checker import check_source
from rewardlang.cli import app
from rewardlang.diagnostics import Diagnostic
from rewardlang.runtime import registry

SIGS = registry.signatures()
runner = CliRunner()


def diags_of(src: str, file: str = "t.reward") -> list[Diagnostic]:
    return check_source(src, file, SIGS)[1]


def codes(src: str, file: str = "t.reward") -> list[str]:
    return [d.code for d in diags_of(src, file)]


# ---------------------------------------------------------------- 6: non-finite constants, valid JSON output
@pytest.mark.parametrize("expr", [
    "1e400", "-1e400", "1e308 * 10", "1e308 + 1e308", "sum(1e308, 1e308)", "max(1, 2e308)", "0 - 1e999",
    "1e200 * 1e200 / 1e10", "mean(1e308, 1e308)", "[1e400][0]",
])
def test_a_constant_that_is_or_folds_to_a_non_finite_number_is_E217(expr: str) -> None:
    ds = diags_of(f"component a = {expr}\nreward = a\n")
    assert [d.code for d in ds if d.is_error] == ["E217"], [(d.code, d.message) for d in ds]
    assert "not a finite number" in ds[0].message
    assert ds[0].loc is not None and ds[0].loc.line == 1


def test_large_finite_constants_stay_valid() -> None:
    assert codes("component a = 1e308\ncomponent b = -1.7e308\nreward = a + b\n") == []


def test_a_non_finite_let_or_param_default_is_E217_too() -> None:
    assert "E217" in codes("let big = 1e400\ncomponent a = big\nreward = a\n")
    assert "E217" in codes("param p = 1e309\ncomponent a = p\nreward = a\n")


def test_score_output_is_always_valid_json(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    # exp of a long completion overflows at run time; the output must still be strict JSON
    spec.write_text("component a = exp(len(completion))\nreward = a\n", encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"completion": "x" * n}) + "\n" for n in (1, 800, 2)), encoding="utf-8")
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--no-summary"])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == 3

    def strict(tok: str) -> Any:
        raise AssertionError(f"non-JSON token {tok}")

    recs = [json.loads(ln, parse_constant=strict) for ln in lines]
    assert recs[0]["reward"] == pytest.approx(2.718281828459045)
    assert recs[1]["reward"] is None
    assert recs[2]["reward"] == pytest.approx(7.38905609893065)


def test_clean_writes_every_non_finite_score_as_null() -> None:
    from rewardlang.runtime.scoring import clean

    assert clean(float("inf")) is None and clean(float("-inf")) is None and clean(float("nan")) is None
    assert clean(1.5) == 1.5


def test_score_rejects_nan_and_infinity_tokens_in_input_rows(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text("component a = len(completion)\nreward = a\n", encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text('{"completion": "ab"}\n{"completion": "a", "x": Infinity}\n', encoding="utf-8")
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--no-summary"])
    assert r.exit_code == 1
    assert "d.jsonl:2" in r.output and "Infinity" in r.output
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--no-summary", "--on-bad-row", "skip"])
    assert r.exit_code == 0
    assert [json.loads(x)["reward"] for x in r.stdout.splitlines() if x.strip()] == [2.0]


# ---------------------------------------------------------------- 9: import cycles
def _files(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _check_file(path: Path) -> list[Diagnostic]:
    return check_source(path.read_text(encoding="utf-8"), str(path), SIGS)[1]


@pytest.mark.parametrize("files", [
    # a <-> b
    {"a.reward": 'import "b.reward"\ncomponent a = 1\nreward = a\n', "b.reward": 'import "a.reward"\nlet y = 1\n'},
    # a file importing itself, spelt two ways
    {"a.reward": 'import "a.reward"\ncomponent a = 1\nreward = a\n'},
    {"a.reward": 'from "./a.reward" import x\nlet x = 1\ncomponent a = x\nreward = a\n'},
    # a longer cycle below the main spec, through a sub-directory
    {"a.reward": 'import "lib/c.reward"\ncomponent a = 1\nreward = a\n', "lib/c.reward": 'import "d.reward"\n',
     "lib/d.reward": 'import "../lib/e.reward"\n', "lib/e.reward": 'from "c.reward" import q\nlet q = 1\n'},
])
def test_circular_imports_are_E105(tmp_path: Path, files: dict[str, str]) -> None:
    _files(tmp_path, files)
    ds = _check_file(tmp_path / "a.reward")
    e105 = [d for d in ds if d.code == "E105"]
    assert len(e105) == 1, [(d.code, d.message) for d in ds]
    assert "circular import" in e105[0].message and "import cycle" in (e105[0].hint or "")
    r = runner.invoke(app, ["check", str(tmp_path / "a.reward")])
    assert r.exit_code == 1 and "E105" in r.output


def test_a_diamond_of_imports_is_not_a_cycle(tmp_path: Path) -> None:
    _files(tmp_path, {"a.reward": 'import "b.reward"\nimport "c.reward"\ncomponent a = lx + ly\nreward = a\n',
                      "b.reward": 'import "d.reward"\nlet lx = z\n', "c.reward": 'import "d.reward"\nlet ly = z\n',
                      "d.reward": "let z = 1\n"})
    assert [d.code for d in _check_file(tmp_path / "a.reward")] == []


# ---------------------------------------------------------------- 13: byte-order mark
def test_a_bom_at_the_start_of_a_spec_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "s.reward"
    p.write_bytes(b"\xef\xbb\xbfcomponent a = len(completion)\nlet w = zz\nreward = a\n")
    r = runner.invoke(app, ["check", str(p)])
    assert "E002" not in r.output
    # a later error is still located as the user sees the file
    assert "s.reward:2:9" in r.output and "E101" in r.output
    p.write_bytes(b"\xef\xbb\xbfcomponent a = len(completion)\nreward = a\n")
    assert runner.invoke(app, ["check", str(p)]).exit_code == 0


def test_a_bom_in_an_imported_spec_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "lib.reward").write_bytes(b"\xef\xbb\xbflet w = 2\n")
    _files(tmp_path, {"a.reward": 'import "lib.reward"\ncomponent a = w\nreward = a\n'})
    assert [d.code for d in _check_file(tmp_path / "a.reward")] == []


def test_a_bom_on_the_first_jsonl_row_is_accepted(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text("component a = len(completion)\nreward = a\n", encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_bytes(b'\xef\xbb\xbf{"completion": "abc"}\n{"completion": "ab"}\n')
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--no-summary"])
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["reward"] for x in r.stdout.splitlines() if x.strip()] == [3.0, 2.0]
    # a BOM anywhere else is not a BOM but a stray character
    data.write_bytes(b'{"completion": "abc"}\n\xef\xbb\xbf{"completion": "ab"}\n')
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--no-summary"])
    assert r.exit_code == 1 and "d.jsonl:2" in r.output


# ---------------------------------------------------------------- 12: nesting depth, long lines
def _sum(n: int) -> str:
    return " + ".join("len(completion)" if i % 2 else str(i) for i in range(n))


@pytest.mark.parametrize("n", [199, 200, 201, 1000, 5000])
def test_a_flat_sum_is_not_nesting(n: int) -> None:
    from rewardlang.compiler import load_program

    prog = load_program("s.reward", source=f"component a = {_sum(n)}\nreward = a\n")
    evens = sum(i for i in range(n) if i % 2 == 0)
    assert prog.score(completion=["abc"]).total.tolist() == [float(evens + 3 * (n // 2))]


@pytest.mark.parametrize("op", ["and", "or"])
def test_a_flat_boolean_chain_is_not_nesting(op: str) -> None:
    chain = f" {op} ".join(f"len(completion) > {i}" for i in range(600))
    assert codes(f"component a = number({chain})\nreward = a\n") == []


@pytest.mark.parametrize("forward", [True, False])
def test_a_chain_of_lets_is_not_nesting(forward: bool) -> None:
    from rewardlang.compiler import load_program

    lets = ["let v0 = len(completion)"] + [f"let v{i} = v{i - 1} + 1" for i in range(1, 400)]
    if not forward:
        lets.reverse()
    prog = load_program("s.reward", source="\n".join(lets) + "\ncomponent a = v399\nreward = a\n")
    assert prog.score(completion=["ab"]).total.tolist() == [401.0]


def test_real_nesting_is_still_limited_and_located() -> None:
    src = "\ncomponent c = " + "(1 + " * 250 + "1" + ")" * 250 + "\nreward = c\n"
    ds = diags_of(src)
    assert [d.code for d in ds] == ["E001"] and ds[0].message == "expression nested too deeply"
    assert ds[0].loc is not None and ds[0].loc.line == 2 and ds[0].loc.column > 1
    # nesting through calls and operands counts too
    deep = "len(completion)"
    for _ in range(210):
        deep = f"abs({deep})"
    assert codes(f"component c = {deep}\nreward = c\n") == ["E001"]


def test_an_over_long_chain_is_E001_with_the_line_cut_around_the_caret(tmp_path: Path) -> None:
    p = tmp_path / "s.reward"
    p.write_text(f"component a = {_sum(12_000)}\nreward = a\n", encoding="utf-8")
    r = runner.invoke(app, ["check", str(p)])
    assert r.exit_code == 1 and "E001" in r.output and "too long" in r.output
    assert max(len(line) for line in r.output.splitlines()) < 200


def test_a_diagnostic_on_a_long_line_shows_a_window_with_the_caret_under_the_culprit() -> None:
    src = "component a = " + " + ".join(["1"] * 3000) + " + zz + " + " + ".join(["1"] * 3000) + "\nreward = a\n"
    prog, ds, sources = check_source(src, "t.reward", SIGS)
    assert [d.code for d in ds] == ["E101"]
    text = ds[0].render(sources)
    lines = text.splitlines()
    assert max(len(line) for line in lines) < 200
    shown, caret = lines[3], lines[4]
    assert shown.startswith("1 | …") and shown.endswith("…")
    at = caret.index("^")
    assert shown[at:at + 2] == "zz" and caret.count("^") == 2
    # short lines are shown whole
    short = check_source("component a = zz\nreward = a\n", "t.reward", SIGS)
    assert "1 | component a = zz\n" in short[1][0].render(short[2])


# ---------------------------------------------------------------- 17: Python habits, no cascades
@pytest.mark.parametrize("py, ours", [("None", "none"), ("True", "true"), ("False", "false"), ("null", "none")])
def test_python_literals_suggest_ours(py: str, ours: str) -> None:
    for src in (f"component a = 1 if {py} else 2\nreward = a\n", f"component a = number({py})\nreward = a\n",
                f"component a = 1\nreward = a if {py} else 0\n"):
        ds = diags_of(src)
        assert [d.code for d in ds] == ["E101"], src
        assert f"`{ours}`" in (ds[0].hint or "")


@pytest.mark.parametrize("expr", ['"x" in completion', 'not "x" in completion', '"```" in completion and true'])
def test_python_in_operator_hints_at_the_text_functions(expr: str) -> None:
    ds = diags_of(f"component a = number({expr})\nreward = a\n")
    assert [d.code for d in ds] == ["E001"]
    assert "contains(completion" in (ds[0].hint or "")


@pytest.mark.parametrize("src, keyword", [
    ("componet a = 1\nreward = a\n", "component"),
    ("component a = 1\nrewrd = a\n", "reward"),
    ("component a = 1\nreward = a\nexmaple { completion: \"x\", expect a = 1 }\n", "example"),
    ("lett n = 1\ncomponent a = n\nreward = a\n", "let"),
    ("compnent a = 1\nreward = a\n", "component"),
    ("component a = 1\nreward = a\nadvantge over group(prompt) = center\n", "advantage"),
])
def test_a_misspelt_keyword_is_suggested(src: str, keyword: str) -> None:
    ds = diags_of(src)
    assert [d.code for d in ds] == ["E001"]
    assert f"did you mean `{keyword}`" in (ds[0].hint or "")


def test_an_unknown_statement_word_lists_the_keywords() -> None:
    ds = diags_of("component a = 1\nfoo = a\n")
    assert [d.code for d in ds] == ["E001"] and "`component`" in (ds[0].hint or "")


@pytest.mark.parametrize("src, name", [
    ("component a = 1\nreward = a + completion\n", "completion"),
    ("component a = 1\nreward = a + len(prompt)\n", "prompt"),
    ("input tests: text\ncomponent a = 1\nreward = a * len(tests)\n", "tests"),
    ("let n = len(completion)\ncomponent a = 1\nreward = a + n\n", "n"),
])
def test_the_reward_says_what_it_may_use(src: str, name: str) -> None:
    ds = diags_of(src)
    assert [d.code for d in ds] == ["E101"], [(d.code, d.message) for d in ds]  # no W001/W002 on top
    assert f"`{name}` varies per sample" in ds[0].message
    assert "component" in (ds[0].hint or "")


@pytest.mark.parametrize("src", [
    # a reserved component name: its weight, its use in the reward and its example expectation add nothing
    'let n = len(completion)\ncomponent x = n\nx.weight = 2\nreward = x\nexample { completion: "a", expect x = 1 }\n',
    'input tests: text\ncomponent prompt = len(tests)\nreward = prompt\n',
    # a reserved let name: its uses mean the let (not the built-in input), and what it uses is used
    'let prompt = len(completion)\ncomponent a = prompt\nreward = a\n',
    'let n = len(completion)\nlet step = n\ncomponent a = 1\nreward = a\n',
])
def test_one_E107_produces_no_follow_on_diagnostics(src: str) -> None:
    ds = diags_of(src)
    assert [d.code for d in ds] == ["E107"], [(d.code, d.message) for d in ds]
    assert "rename" in (ds[0].hint or "")


def test_a_rejected_definition_still_reports_its_own_errors() -> None:
    assert codes("component x = len(zz)\nreward = 1\n") == ["E107", "E101"]


# ---------------------------------------------------------------- 15: catastrophic regexes
CATASTROPHIC = ["(a+)+$", "(a*)*b", "(a|a)*b", r"(\w+\s?)+$", "(.*a){20}", "((ab)*)+c", r"(x+x+)+y", "(?:a+)+",
                r"(\d|\d\d)+x", "(?:x|y|xy)+z", r"^(([a-z])+.)+[A-Z]([a-z])+$"]
SAFE = ["a+b", r"(\w+\s)+", r"(?:Step \d+:.*\n)+", r"Step\s\d+:", r"<think>.*?<\/think>", "(a|b)*c",
        r"\b(TODO|FIXME)\b", "(?:ab)+", r"(\d+,)*\d+", r"^```(\w+)?$", r"(?m)^\s*#.*$", r"(\w|\d)+x", "(ab|ac|a)*d"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_regex_is_warned_about_where_it_is_written(pattern: str) -> None:
    ds = diags_of(f"component a = count(completion, /{pattern}/)\nreward = a\n")
    assert [d.code for d in ds] == ["W006"], pattern
    assert ds[0].loc is not None and (ds[0].loc.line, ds[0].loc.column) == (1, 33)
    assert "exponential" in ds[0].message


@pytest.mark.parametrize("pattern", SAFE)
def test_an_unambiguous_regex_is_not_warned_about(pattern: str) -> None:
    assert codes(f"component a = count(completion, /{pattern}/)\nreward = a\n") == []


def test_no_shipped_spec_uses_a_catastrophic_regex() -> None:
    from rewardlang.regexrisk import catastrophic

    root = Path(__file__).resolve().parents[2]
    for path in list((root / "specs").rglob("*.reward")) + list((root / "examples").rglob("*.reward")):
        prog, ds, _ = check_source(path.read_text(encoding="utf-8"), str(path), SIGS)
        assert "W006" not in [d.code for d in ds], path
    assert catastrophic("(a+)+", "") and not catastrophic("a+", "i")


@pytest.mark.parametrize("call, ok_value", [
    ("count(completion, /(a+)+$/)", 1.0),
    ("count(completion, \"a\", /(a+)+$/)", 4.0),
    ("number(search(completion, /(a+)+$/))", 1.0),
    ("number(fullmatch(completion, /(a|a)*/))", 1.0),
    ("len(findall(completion, /(\\w+\\s?)+$/))", 1.0),
    ("len(extract(completion, /(a+)+$/) or \"\")", 3.0),
    ("len(matches(completion, /(a+)+$/))", 1.0),
])
def test_catastrophic_regex_work_is_bounded_per_sample(call: str, ok_value: float) -> None:
    from rewardlang.compiler import load_program

    # exponential in the length for `re`: 5,000 characters would run for longer than the universe has existed
    prog = load_program("r.reward", source=f"component a = {call}\n    timeout 0.2\nreward = a\n")
    out = prog.score(completion=["aaa", "a" * 5000 + "!"])
    assert out.components["a"][0] == ok_value
    assert out.errors["a"][0] is None
    assert "gave up after 0.2 s" in (out.errors["a"][1] or "")
    assert out.components["a"][1] != out.components["a"][1]  # nan: masked by the error


def test_without_a_component_timeout_the_regex_deadline_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlang.runtime import kernels
    from rewardlang.compiler import load_program

    monkeypatch.setattr(kernels, "REGEX_TIMEOUT", 0.1)
    prog = load_program("r.reward", source="component a = count(completion, /(a+)+$/)\nreward = a\n")
    out = prog.score(completion=["a" * 5000 + "!"])
    assert "gave up after 0.1 s" in (out.errors["a"][0] or "")


@pytest.mark.parametrize("key, value", [("p", "1e400"), ("p", "inf"), ("p", "-inf"), ("p", "nan"),
                                        ("a.weight", "inf"), ("a.weight", "1e999")])
def test_a_non_finite_override_is_E602(key: str, value: str) -> None:
    src = "param p = 1\ncomponent a = p * len(completion)\nreward = a\n"
    prog, ds, _ = check_source(src, "t.reward", SIGS, {key: value})
    assert prog is None and [d.code for d in ds] == ["E602"], [(d.code, d.message) for d in ds]
    assert "finite" in ds[0].message
    prog, ds, _ = check_source(src, "t.reward", SIGS, {"p": float("inf")})  # from Python too
    assert [d.code for d in ds] == ["E602"]


@pytest.mark.parametrize("expr, code, words", [
    ("count(completion, 'x')", "E002", "double quotes"),
    ("number(completion is none)", "E001", "== none"),
    ("number(len(completion) > 1 && true)", "E002", "`and`"),
    ("number(true || false)", "E002", "`or`"),
    ("number(!true)", "E002", "`not`"),
])
def test_other_language_operators_get_a_hint(expr: str, code: str, words: str) -> None:
    ds = diags_of(f"component a = {expr}\nreward = a\n")
    assert [d.code for d in ds] == [code]
    assert words in (ds[0].hint or "")
