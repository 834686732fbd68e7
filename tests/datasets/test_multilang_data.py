"""The translated HumanEval's data: types, cases read from the Python tests, literal renderers per language
(escaping, negatives, empty containers), the rows' contract, the python rows, the translation rows and the CLI.

Programs that must compile run with the real toolchains (tests/datasets/langtools.py); the full sweep over every
row of every language is marked slow."""

from __future__ import annotations

import ast
import gzip
import json
import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langtools import compare, judge, need, parse_records, run_programs

from rewardlang.datasets.multilang import (
    LANGUAGES,
    TESTS_FORMAT,
    build,
    load_humaneval,
    render_tests,
)
from rewardlang.datasets.problems import Case, Problem, problem
from rewardlang.datasets.targets import TARGETS, Unsupported
from rewardlang.datasets.translate import split_of, translation_rows
from rewardlang.datasets.types import (
    Untypable,
    from_annotation,
    to_json,
    type_of,
    unify,
)

LANGS = tuple(TARGETS)


# ----------------------------------------------------------------------------------------------- types

def test_docstring_examples() -> None:
    import doctest

    import rewardlang.datasets as package
    from rewardlang.datasets import cli, multilang, problems, targets, translate, types

    for mod in (package, cli, multilang, problems, targets, translate, types):
        assert doctest.testmod(mod).failed == 0, mod.__name__


def test_types_from_values_and_annotations() -> None:
    assert unify(type_of([]), type_of([[1], []])) == ("list", ("list", "int"))
    assert unify(type_of((1, "a")), type_of((2, "b"))) == ("tuple", "int", "str")
    assert unify(type_of({"a": 1}), type_of({})) == ("dict", "str", "int")
    assert unify(unify("none", "int"), "float") == ("optional", "float")
    with pytest.raises(Untypable):
        unify("bool", "int")  # True is not 1 in a typed target
    with pytest.raises(Untypable):
        unify(type_of((1,)), type_of((1, 2)))
    ann = ast.parse("def f(a: List[Tuple[int, str]], b: Optional[Dict[str, float]]) -> Tuple[int, ...]: pass")
    fn = ann.body[0]
    assert from_annotation(fn.args.args[0].annotation) == ("list", ("tuple", "int", "str"))
    assert from_annotation(fn.args.args[1].annotation) == ("optional", ("dict", "str", "float"))
    assert from_annotation(fn.returns) == ("list", "int")
    with pytest.raises(Untypable):
        from_annotation(ast.parse("Union[int, str]", mode="eval").body)
    assert to_json((1, float("inf"), None), ("tuple", "int", "float", ("optional", "str"))) == [1, "inf", None]


# ----------------------------------------------------------------------------------------------- cases

def test_cases_are_values_not_syntax() -> None:
    p = problem(16)  # candidate('abcde' + 'cade' + 'CADE') == 5: folded, the case MultiPL-E loses
    assert (("abcdecadeCADE",), 5) in [(c.args, c.expected) for c in p.cases]
    p = problem(4)  # abs(candidate(...) - 2.0/3.0) < 1e-6: a tolerance case
    assert p.cases[0].args == ([1.0, 2.0, 3.0],) and p.cases[0].tolerance == 1e-6
    assert abs(p.cases[0].expected - 2 / 3) < 1e-15
    p = problem(44)  # `for x in range(2, 8): assert candidate(x, x + 1) == str(x)` is unrolled
    assert [(c.args, c.expected) for c in p.cases][-6:] == [((x, x + 1), str(x)) for x in range(2, 8)]
    p = problem(53)  # 5 fixed cases and 100 seeded random ones, the same every build
    assert len(p.cases) == 105 and p.cases == problem(53).cases
    assert all(c.expected == c.args[0] + c.args[1] for c in p.cases)
    p = problem(56)  # assert candidate(...) / assert not candidate(...) on a bool result
    assert [c.expected for c in p.cases][:5] == [True, True, True, True, False]
    p = problem(72)  # `is True` / `is False`
    assert [c.expected for c in p.cases] == [True, False, True, False, False, True]
    assert problem(12).result == ("optional", "str") and problem(12).cases[0].expected is None


def test_untypable_problems_say_why() -> None:
    assert "int versus float" in problem(92).error  # any_int(3.0, 4, 7) is False, any_int(3, 4, 7) True
    assert "helper functions" in problem(38).error
    assert "Any" in problem(22).error
    assert "union" in problem(137).error  # compare_one returns int, float, str or None


# ----------------------------------------------------------------------------------------------- literals

HOSTILE = ["", "a\"b", "back\\slash", "line\nbreak\r\t", "é ü 中文", "emoji 😀", "$x ${y} `z` ?? ??= '", "*/ //",
           "%d %s %n", "\x01\x1f\x7f", "trailing\\"]


def test_literal_golden_cases() -> None:
    c, cpp, java, js, php, sh, go = (TARGETS[k] for k in LANGS)
    assert c.literal(-5, "int") == "-5L" and c.literal(-(2 ** 63), "int") == "(-9223372036854775807L - 1)"
    assert c.literal([], ("list", "int")) == "NULL, 0"
    assert c.literal([1.5, -2.0], ("list", "float")) == "(double const[]){1.5, -2.0}, 2"
    assert c.literal("??=", "str") == '"\\?\\?="'  # no trigraph in C
    assert cpp.literal([], ("list", "str")) == "std::vector<std::string>{}"
    assert cpp.literal(None, ("optional", "int")) == "std::nullopt"
    assert cpp.literal((1, "a"), ("tuple", "int", "str")) == 'std::tuple<long, std::string>{1L, std::string("a", 1)}'
    assert cpp.literal("\n1", "str") == 'std::string("\\0121", 2)'  # octal escapes never run into a digit
    assert java.literal([], ("list", "float")) == "new ArrayList<Double>()"
    assert java.literal(1, "float") == "1.0"
    assert java.literal("\n", "str") == '"\\012"'  # never \\u000a: javac would end the line
    assert java.literal("😀", "str") == '"\\ud83d\\ude00"'
    assert js.literal({"a": [1, -2]}, ("dict", "str", ("list", "int"))) == '{"a": [1, -2]}'
    assert js.literal(float("nan"), "float") == "NaN"
    assert php.literal({1: "x"}, ("dict", "int", "str")) == '[1 => "x"]'
    assert php.literal("$a", "str") == '"\\$a"'
    with pytest.raises(Unsupported):
        php.literal({"1": 1}, ("dict", "str", "int"))  # PHP would make the key an integer
    assert sh.literal("it's", "str") == "'it'\\''s'"
    assert sh.literal([1, -2], ("list", "int")) == "'1 -2'"
    assert sh.expected(True, "bool") == "true" and sh.expected([1, 2], ("list", "int")) == "1 2"
    assert go.literal([[1], []], ("list", ("list", "int"))) == "[][]int{[]int{1}, []int{}}"
    assert go.literal(float("-inf"), "float") == "math.Inf(-1)"
    with pytest.raises(Unsupported):
        go.type_name(("optional", "int"))
    with pytest.raises(Unsupported):
        js.literal(2 ** 53 + 1, "int")  # not exact in a JavaScript number


def _c_bytes(body: str) -> bytes:
    """The bytes of a C string literal's body, by C's rules for the escapes the renderer writes."""
    out, i = bytearray(), 0
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] in "01234567":
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            assert body[i + 1] in '\\"?', body
            out += body[i + 1].encode()
            i += 2
            continue
        assert 0x20 <= ord(body[i]) < 0x7F
        out += body[i].encode()
        i += 1
    return bytes(out)


def _decode_c(lit: str) -> str:
    return _c_bytes(lit[1:-1]).decode("utf-8")


def _decode_php(lit: str) -> str:
    body = lit[1:-1].encode("utf-8")
    out, i = bytearray(), 0
    while i < len(body):
        if body[i:i + 1] == b"\\":
            nxt = body[i + 1:i + 2]
            if nxt == b"x":
                out.append(int(body[i + 2:i + 4], 16))
                i += 4
                continue
            out += nxt
            i += 2
            continue
        out.append(body[i])
        i += 1
    return out.decode("utf-8")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_string_literals_decode_to_the_value(s: str) -> None:
    """Each language's string literal, read back by that language's escape rules, is the value."""
    def utf16(x: str) -> str:  # surrogate pairs, as JavaScript and Java write them, made one character
        return x.encode("utf-16", "surrogatepass").decode("utf-16")

    assert utf16(ast.literal_eval(TARGETS["js"].literal(s, "str"))) == s
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in s):
        for lang in ("c", "cpp", "java", "php", "go"):
            with pytest.raises(Unsupported):
                TARGETS[lang].literal(s, "str")
        return
    if "\0" not in s:
        assert _decode_c(TARGETS["c"].literal(s, "str")) == s
    jl = TARGETS["java"].literal(s, "str")
    assert "\\u000a" not in jl.lower() and "\\u000d" not in jl.lower()
    assert utf16(ast.literal_eval(jl)) == s
    assert _decode_php(TARGETS["php"].literal(s, "str")) == s
    assert ast.literal_eval(TARGETS["go"].literal(s, "str")) == s
    cpp = TARGETS["cpp"].literal(s, "str")
    lit, n = re.fullmatch(r'std::string\((".*")\, (\d+)\)', cpp, re.DOTALL).groups()
    assert _c_bytes(lit[1:-1]) == s.encode("utf-8") \
        and int(n) == len(s.encode("utf-8"))


# ----------------------------------------------------------------------------------------------- end to end

IDENTITY = {
    "c": ("    char *o = malloc(strlen(s) + 1);\n    strcpy(o, s);\n    return o;\n}\n", "long x = 0;"),
    "cpp": ("    return s;\n}\n", None),
    "java": ("        return s;\n    }\n}\n", None),
    "js": ("    return s;\n}\n", None),
    "php": ("    return $s;\n}\n", None),
    "sh": ("    printf '%s' \"$1\"\n}\n", None),
    "go": ("\treturn s\n}\n", None),
}
FLOAT_IDENTITY = {"c": "    return s;\n}\n", "cpp": "    return s;\n}\n", "java": "        return s;\n    }\n}\n",
                  "js": "    return s;\n}\n", "php": "    return $s;\n}\n", "go": "\treturn s\n}\n"}


def _synthetic(name: str, t, values, result=None) -> Problem:
    p = Problem("Synthetic/0", 0, name, "", "", "", "Return the argument unchanged.\nA hostile \\ docstring */ ?>")
    p.params, p.result = [("s", t)], result or t
    p.cases = [Case((v,), v) for v in values]
    return p


@pytest.mark.parametrize("lang", LANGS)
def test_hostile_values_round_trip_through_each_toolchain(lang: str) -> None:
    """Identity functions on hostile strings (and floats/ints at their limits) compile, run, and record values
    the comparator finds equal: the literal renderer and the harness's JSON writer agree, in the real language."""
    need(lang)
    t = TARGETS[lang]
    strings = [s for s in HOSTILE if lang != "sh" or not s.endswith("\n")]
    progs, tests_list = [], []
    p = _synthetic("ident", "str", strings)
    tests, dropped = render_tests(p, t)
    assert not dropped
    progs.append(t.prompt(p.entry_point, p.docstring, p.params, p.result) + IDENTITY[lang][0] + "\n"
                 + tests["harness"])
    tests_list.append(tests)
    if lang != "sh":
        extremes = {"js": [0.0, -0.0, 1e300, -2.5, 0.1, 5e-324, 2.0 ** 53]}
        floats = extremes.get(lang, [0.0, -0.0, 1e300, -2.5, 0.1, 5e-324, float("inf"), float("-inf")])
        p = _synthetic("fident", "float", floats)
        tests, _ = render_tests(p, t)
        progs.append(t.prompt(p.entry_point, p.docstring, p.params, p.result) + FLOAT_IDENTITY[lang] + "\n"
                     + tests["harness"])
        tests_list.append(tests)
        ints = [0, -1, 2 ** 53, -(2 ** 53)] if lang == "js" else [0, -1, 2 ** 63 - 1, -(2 ** 63)]
        p = _synthetic("iident", "int", ints)
        tests, _ = render_tests(p, t)
        progs.append(t.prompt(p.entry_point, p.docstring, p.params, p.result) + FLOAT_IDENTITY[lang] + "\n"
                     + tests["harness"])
        tests_list.append(tests)
    for tests, (ok, obs, diag) in zip(tests_list, run_programs(lang, progs)):
        assert ok, diag
        records = parse_records(obs, len(tests["cases"]))
        assert len(records) == len(tests["cases"]), diag
        bad = [(c["expected"], r) for c, r, v in zip(tests["cases"], records, judge(tests, records, lang)) if not v]
        assert not bad, bad


def test_comparator_rules() -> None:
    assert compare(1, 1, "int", None) and not compare(1, 1.0, "int", None) and not compare(1, True, "int", None)
    assert compare(0.1, 0.1 + 1e-9, "float", None) and not compare(0.1, 0.2, "float", None)
    assert compare(1.0, 1.04, "float", 0.05) and not compare(1.0, 1.06, "float", 0.05)
    assert compare("nan", "nan", "float", None) and not compare("inf", 1e308, "float", None)
    assert compare([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], "dict[str,int]", None)
    assert not compare([["a", 1]], [["a", 1], ["a", 1]], "dict[str,int]", None)
    assert compare(None, None, "optional[int]", None) and not compare(None, 0, "optional[int]", None)
    assert compare([1, "x"], [1, "x"], "tuple[int,str]", None) and not compare([1, "x"], [1], "tuple[int,str]",
                                                                                 None)


# ----------------------------------------------------------------------------------------------- rows

@pytest.mark.parametrize("lang", LANGS)
def test_rows_follow_the_contract(lang: str) -> None:
    b = build(lang)
    assert len(b.rows) + len(b.skipped) == 164 and len(b.rows) >= (90 if lang == "c" else 130)
    for r in b.rows:
        tests = json.loads(r["tests"])
        assert tests["format"] == TESTS_FORMAT and tests["cases"] and r["language"] == lang
        assert r["prompt"].rstrip(" ").endswith("{\n") and r["declaration"] in r["prompt"]
        assert r["n_cases"] == len(tests["cases"])
        json.dumps(tests, allow_nan=False)  # no bare NaN/Infinity anywhere
    row = {r["task_id"]: r for r in b.rows}["HumanEval/11"]
    harness = json.loads(row["tests"])["harness"]
    assert "010010" not in harness and "0101" in harness  # arguments yes, expected values never
    first = b.rows[0]["prompt"]
    assert {"java": first.startswith("import java.util.*;") and "\nclass Problem {\n" in first,
            "php": first.startswith("<?php\n"), "go": first.startswith("package main\n"),
            "cpp": "#include <vector>" in first and "bits/stdc++" not in first}.get(lang, True)


def test_renames_avoid_standard_library_names() -> None:
    assert {r["task_id"]: r["entry_point"] for r in load_humaneval("cpp")}["HumanEval/23"] == "string_length"
    assert {r["task_id"]: r["entry_point"] for r in load_humaneval("php")}["HumanEval/23"] == "string_length"
    go160 = {r["task_id"]: r for r in load_humaneval("go")}["HumanEval/28"]
    assert "strings_ []string" in go160["declaration"]  # `strings` is an import there
    assert "std::vector<std::string> operator_" in {r["task_id"]: r for r in load_humaneval("cpp")}[
        "HumanEval/160"]["declaration"]


def test_python_rows_are_the_original_problems() -> None:
    from rewardlang.datasets.humaneval import humaneval_path

    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        originals = [json.loads(line) for line in fh if line.strip()]
    rows = load_humaneval("python")
    assert len(rows) == 164 == len(originals)
    for r, o in zip(rows, originals):
        assert (r["task_id"], r["prompt"], r["entry_point"], r["canonical_solution"]) == \
               (o["task_id"], o["prompt"], o["entry_point"], o["canonical_solution"])
        assert r["tests"].endswith(o["test"]) and r["language"] == "python"


def test_unknown_language_is_refused() -> None:
    with pytest.raises(ValueError, match="choose one of python, c, cpp"):
        load_humaneval("rust")
    assert LANGUAGES == ("python", "c", "cpp", "java", "js", "php", "sh", "go")


# ----------------------------------------------------------------------------------------------- translation

def test_translation_rows() -> None:
    rows = translation_rows("python", "java")
    target = {r["task_id"]: r for r in load_humaneval("java")}
    assert len(rows) == len(target)
    for r in rows:
        assert r["tests"] == target[r["task_id"]]["tests"] and r["entry_point"] == target[r["task_id"]]["entry_point"]
        assert r["prompt"].endswith("### Java translation\n") and target[r["task_id"]]["prompt"].rstrip() in r["prompt"]
        assert r["source_language"] == "python" and r["language"] == "java" and r["split"] == split_of(r["task_id"])
    held = {r["task_id"] for r in rows if r["split"] == "heldout"}
    assert 0.1 < len(held) / len(rows) < 0.3
    go = translation_rows("python", "go")
    both = {r["task_id"] for r in go} & {r["task_id"] for r in rows}
    assert held & both == {r["task_id"] for r in go if r["split"] == "heldout"} & both  # one split for all targets
    assert not held & {r["task_id"] for r in translation_rows("python", "java", split="train")}
    cpp_rows = translation_rows("cpp", "js")
    from pathlib import Path

    refs = {"HumanEval/" + p.stem.split("_")[1] for p in (Path(__file__).parent / "references" / "cpp").glob("*.cpp")}
    assert {r["task_id"] for r in cpp_rows} == refs & {r["task_id"] for r in load_humaneval("js")}
    assert len(cpp_rows) >= 20 and all("```cpp\n#include" in r["prompt"] for r in cpp_rows)
    with pytest.raises(ValueError):
        translation_rows("python", "python")


# ----------------------------------------------------------------------------------------------- CLI

def _cli(*args: str, cwd, monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess:
    """The command in this process, in ``cwd`` (a process of its own for each would add only its start-up): its exit
    status, stdout and stderr; an exception other than the command's own exit fails here, as the traceback the
    installed command would print would."""
    from typer.testing import CliRunner

    from rewardlang.cli.app import app

    monkeypatch.chdir(cwd)
    r = CliRunner().invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
    return subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, r.stderr)


def test_cli_data_humaneval_and_translate(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "go.jsonl"
    rep = tmp_path / "skipped.json"
    p = _cli("data", "humaneval", "--lang", "go", "-o", str(out), "--report", str(rep), cwd=tmp_path,
             monkeypatch=monkeypatch)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == load_humaneval("go")
    report = json.loads(rep.read_text())
    assert report["rows"] == len(rows) and len(report["skipped"]) == 164 - len(rows)
    assert "skipped" in p.stderr and "Traceback" not in p.stderr
    p = _cli("data", "translate", "--source", "python", "--target", "cpp", "--split", "heldout", "-o",
             str(tmp_path / "t.jsonl"), cwd=tmp_path, monkeypatch=monkeypatch)
    assert p.returncode == 0, p.stderr
    assert all(json.loads(line)["split"] == "heldout" for line in (tmp_path / "t.jsonl").read_text().splitlines())
    for bad in (["data", "humaneval", "--lang", "rust", "-o", str(tmp_path / "x.jsonl")],
                ["data", "humaneval", "--split", "heldout", "-o", str(tmp_path / "x.jsonl")],
                ["data", "translate", "--target", "cobol", "-o", str(tmp_path / "x.jsonl")]):
        p = _cli(*bad, cwd=tmp_path, monkeypatch=monkeypatch)
        assert p.returncode == 1 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
        assert not (tmp_path / "x.jsonl").exists()


# ----------------------------------------------------------------------------------------------- every row

def _stub(lang: str, row: dict) -> str:
    if lang == "java":
        ret = row["declaration"].split()[2]
        val = {"long": "0L", "double": "0.0", "boolean": "false"}.get(ret, "null")
        return f"        return {val};\n    }}\n}}\n"
    if lang == "go":
        ret = row["declaration"].rsplit(")", 1)[1].strip()
        return f"\tvar rlZero {ret}\n\treturn rlZero\n}}\n"
    return {"c": "    return 0;\n}\n", "cpp": "    return {};\n}\n", "js": "    return null;\n}\n",
            "php": "    return null;\n}\n", "sh": "    echo x\n}\n"}[lang]


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_every_row_compiles_and_records_every_case(lang: str) -> None:
    """A stub body (a zero value) after each row's prompt, with its harness: every program compiles and every
    case is recorded (the harness and the literals are valid in the language for all rows)."""
    need(lang)
    rows = load_humaneval(lang)
    res = run_programs(lang, [r["prompt"] + _stub(lang, r) + "\n" + json.loads(r["tests"])["harness"]
                              for r in rows])
    bad = [(r["task_id"], diag[:300]) for r, (ok, obs, diag) in zip(rows, res)
           if not ok or len(parse_records(obs, r["n_cases"])) != r["n_cases"]]
    assert not bad, bad[:3]
