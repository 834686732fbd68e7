"""Programs in C, C++, Java, JavaScript, PHP, Bash and Go through the sandbox: a correct and a wrong unit per
language (all seven in the fast set), compile errors, the structured-tests contract, and the type-directed
comparison (values.py)."""

from __future__ import annotations

import json
import math
import os

import pytest
from lang_programs import LANGS, lang_tests, require, unit

from rewardlang.sandbox.convert import TestFormatError
from rewardlang.sandbox.languages import (
    LANGUAGES,
    PROFILES,
    canonical_language,
    fence_names,
    language_plan,
    parse_tests,
)
from rewardlang.sandbox.runner import Task
from rewardlang.sandbox.values import (
    TypeExprError,
    compare,
    has_value,
    parse_records,
    parse_type,
)


@pytest.mark.parametrize("lang", LANGS)
def test_correct_and_wrong_program_per_language(sb1, lang: str) -> None:
    require(lang)
    good, bad = sb1.evaluate([Task(unit(lang, True), lang_tests(lang), language=lang),
                              Task(unit(lang, False), json.dumps(lang_tests(lang)), language=lang)])
    assert good.outcome == "pass", good
    assert [t.status for t in good.tests] == ["pass", "pass", "pass"]
    assert bad.outcome == "fail", bad
    assert [t.status for t in bad.tests] == ["fail", "fail", "pass"]
    assert bad.pass_rate == pytest.approx(1 / 3)


@pytest.mark.parametrize("lang,broken", [
    ("c", "int evens(int n, int *len) { return n }\n"),
    ("cpp", "#include <vector>\nstd::vector<int> evens(int n) { return n; }\n"),
    ("java", "class Problem { public static java.util.List<Integer> evens(int n) { return n; } }\n"),
    ("go", "package main\nimport (\"encoding/json\"\n\"fmt\"\n\"os\")\nfunc evens(n int) []int { return n }\n"),
])
def test_compile_error_fails_every_case(sb1, lang: str, broken: str) -> None:
    require(lang)
    v = sb1.run(broken, lang_tests(lang), language=lang)
    assert v.outcome == "compile_error"
    assert [t.status for t in v.tests] == ["compile_error"] * 3
    assert "compilation failed" in v.tests[0].detail


@pytest.mark.parametrize("lang,code", [
    ("js", "function evens(n) { throw new Error('boom'); }\n"),
    ("php", "<?php\nfunction evens($n) { throw new Exception('boom'); }\n"),
    ("sh", "evens() { exit 3; }\n"),
])
def test_interpreted_runtime_error_fails_the_cases_without_a_record(sb1, lang: str, code: str) -> None:
    require(lang)
    v = sb1.run(code, lang_tests(lang), language=lang)
    # Bash: `exit` inside $(...) ends only the subshell; the harness records "" for every case
    expected = ["fail"] * 2 + ["pass"] if lang == "sh" else ["runtime_error"] * 3
    assert [t.status for t in v.tests] == expected, v


def test_no_code_is_a_compile_error_and_bad_tests_are_an_error(sb1) -> None:
    v = sb1.run(None, lang_tests("c"), language="c")
    assert v.outcome == "compile_error" and v.total == 3
    v = sb1.run(unit("c"), "assert evens(5) == [0, 2, 4]", language="c")
    assert v.outcome == "error" and "cannot be judged safely" in (v.error or "")
    v = sb1.run(unit("c"), lang_tests("c"), language="rust")
    assert v.outcome == "error" and "unknown language 'rust'" in (v.error or "")


def test_parse_tests_refuses_what_it_cannot_judge() -> None:
    good = lang_tests("js")
    assert len(parse_tests(json.dumps(good)).cases) == 3
    for bad, why in [
        ("not json at all", "plain-text tests"),
        ('{"format": "x"}', "not 'rewardlang-tests/1'"),
        (dict(good, harness=""), "no harness"),
        (dict(good, cases=[]), "no cases"),
        (dict(good, cases=[{"expected": 1}]), "\"type\""),
        (dict(good, cases=[{"expected": 1, "type": "list[int"}]), "case 0"),
        (dict(good, cases=[{"expected": 1.0, "type": "float", "tolerance": -1}]), "tolerance"),
        (["a list"], "plain-text tests"),
    ]:
        with pytest.raises(TestFormatError, match=why if why[0] != "\"" else None):
            parse_tests(bad)


def test_language_names_and_fences() -> None:
    assert LANGUAGES == ("python", "c", "cpp", "java", "js", "php", "sh", "go")
    assert [canonical_language(x) for x in ("CPP", "c++", "JavaScript", "node", "Bash", "shell", "GoLang", "py")] \
        == ["cpp", "cpp", "js", "js", "sh", "sh", "go", "python"]
    assert canonical_language("rust") is None and canonical_language(3) is None
    assert {"cc", "cxx", "c++", "cpp"} <= fence_names("cpp")
    with pytest.raises(ValueError, match="unknown language"):
        language_plan("rust", lang_tests("c"))


def test_source_is_the_unit_then_the_harness_and_expected_values_stay_outside() -> None:
    plan = language_plan("cpp", lang_tests("cpp"))
    src = plan.source("UNIT")
    assert src.startswith("UNIT\n") and src.endswith(lang_tests("cpp")["harness"])
    from rewardlang.sandbox.config import Limits

    wire = json.dumps(plan.wire(Limits(cpu=2), 2))
    assert '"expected"' not in wire and "[0, 2, 4]" not in wire
    steps = plan.wire(Limits(cpu=2), 2)["steps"]
    assert [s["step"] for s in steps] == ["compile", "run"]
    assert steps[1]["limits"]["cpu"] == 2.0 and steps[0]["limits"]["cpu"] == PROFILES["cpp"].compile_cpu


# ------------------------------------------------------------------------------------------------ values.py

def test_parse_type_golden() -> None:
    assert parse_type("int") == ("int",)
    assert parse_type("tuple[int, list[str], optional[float]]") == \
        ("tuple", (("int",), ("list", ("str",)), ("optional", ("float",))))
    assert parse_type("dict[str, dict[int, bool]]") == ("dict", ("str",), ("dict", ("int",), ("bool",)))
    for bad in ("", "list", "list[]", "dict[int]", "set[int]", "int]", "list[int,str]", "[" * 40):
        with pytest.raises(TypeExprError):
            parse_type(bad)


@pytest.mark.parametrize("expected,actual,typ,tol,ok", [
    (3, 3, "int", None, True),
    (3, 3.0, "int", None, False),            # a float is not an int (unless the target has no int type)
    (3, True, "int", None, False),
    (True, True, "bool", None, True),
    (True, 1, "bool", None, False),
    ("a", "a", "str", None, True),
    ("a", "a ", "str", None, False),
    (None, None, "none", None, True),
    (None, None, "optional[int]", None, True),
    (None, 0, "optional[int]", None, False),
    (1, None, "optional[int]", None, False),
    (0.3, 0.1 + 0.2, "float", None, True),
    (1e9, 1e9 + 1, "float", None, True),      # relative 1e-6
    (1e9, 1e9 + 2000, "float", None, False),
    (0.0, 1e-7, "float", None, True),         # absolute 1e-6 near zero
    (0.0, 1e-5, "float", None, False),
    (1.0, 1.04, "float", 0.05, True),
    (2.0, 2, "float", None, True),            # an integer where a float is expected
    ("nan", "nan", "float", None, True),
    (1.0, "nan", "float", None, False),
    ("inf", "inf", "float", None, True),
    ("inf", "-inf", "float", None, False),
    (1.0, "1.0", "float", None, False),
    ([1, 2], [1, 2], "list[int]", None, True),
    ([1, 2], [2, 1], "list[int]", None, False),
    ([1, 2], [1, 2, 3], "list[int]", None, False),
    ([1, "a"], [1, "a"], "tuple[int, str]", None, True),
    ([1, "a"], [1, "a", 2], "tuple[int, str]", None, False),
    ({"a": 1, "b": 2}, [["b", 2], ["a", 1]], "dict[str, int]", None, True),
    ([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], "dict[str, int]", None, True),
    ({"a": 1}, [["a", 1], ["a", 1]], "dict[str, int]", None, False),   # duplicate key
    ({"a": 1}, [["a", 2]], "dict[str, int]", None, False),
    ({"a": 1}, {"a": 1}, "dict[str, int]", None, False),               # actual must be pairs
    ([[0.5, 1]], [[0.5000000001, 1]], "dict[float, int]", None, True),
    ([[[1, 2], "x"]], [[[1, 2], "x"]], "dict[tuple[int,int], str]", None, True),
])
def test_compare_golden(expected, actual, typ, tol, ok) -> None:
    assert compare(expected, actual, typ, tol) is ok


def test_compare_integral_floats_only_where_asked() -> None:
    assert compare(3, 3.0, "int", integral_floats=True)
    assert not compare(3, 3.5, "int", integral_floats=True)
    assert not compare(3, math.inf, "int", integral_floats=True)
    assert compare({"1": 2}, [[1.0, 2.0]], "dict[int, int]", integral_floats=True) is False  # key "1" is a str
    assert compare([[1, 2]], [[1.0, 2.0]], "dict[int, int]", integral_floats=True)


def test_compare_property_reflexive_on_random_values() -> None:
    import random

    rng = random.Random(7)

    def gen(t: tuple, d: int = 0):
        k = t[0]
        if k == "int":
            return rng.randint(-10**12, 10**12)
        if k == "float":
            return rng.uniform(-1e6, 1e6)
        if k == "str":
            return "".join(rng.choice("ab\"\\\n ü") for _ in range(rng.randint(0, 5)))
        if k == "bool":
            return rng.random() < 0.5
        if k == "list":
            return [gen(t[1], d + 1) for _ in range(rng.randint(0, 4))]
        if k == "tuple":
            return [gen(x, d + 1) for x in t[1]]
        if k == "dict":
            return {str(i): gen(t[2], d + 1) for i in range(rng.randint(0, 3))}
        if k == "optional":
            return None if rng.random() < 0.3 else gen(t[1], d + 1)
        return None

    for typ in ("list[tuple[int, float, str]]", "dict[str, list[optional[bool]]]", "optional[list[float]]"):
        t = parse_type(typ)
        for _ in range(200):
            v = gen(t)
            wire = json.loads(json.dumps([[k, x] for k, x in v.items()] if isinstance(v, dict) else v))
            assert compare(v, wire, typ), (typ, v)


def test_parse_records_duplicates_malformed_and_bounds() -> None:
    vals, probs = parse_records(b'1 "b"\n0 [1]\n', 2)
    assert vals == [[1], "b"] and probs == []
    vals, probs = parse_records(b'0 1\n0 1\n', 1)
    assert not has_value(vals[0]) and probs == ["case 0: more than one record"]
    vals, _ = parse_records(b'0 1\n0 2\n0 1\n', 1)          # a third record does not revive the case
    assert not has_value(vals[0])
    vals, probs = parse_records(b'0 ' + b'9' * 500 + b'\n', 1)   # a number too long to convert cheaply
    assert not has_value(vals[0]) and probs == ["case 0: malformed record"]
    vals, _ = parse_records(b'0 NaN\n', 1)                   # JSON has no NaN: the string "nan" is the form
    assert not has_value(vals[0])
    vals, _ = parse_records(b'0 ' + b'[' * 100_000 + b'\n', 1)
    assert not has_value(vals[0])
    vals, probs = parse_records(b'x 1\n-1 2\n7 3\n0 1 2\n', 2)
    assert not any(has_value(v) for v in vals) and len(probs) == 4


def test_doctor_reports_each_language_and_what_is_missing(sb1, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from rewardlang.sandbox import doctor, languages

    for lang in LANGS:
        require(lang)
    gone = dataclasses.replace(PROFILES["go"], compile=("/nonexistent/go", "build"), run=("./main",))
    monkeypatch.setitem(languages.PROFILES, "go", gone)
    r = doctor.doctor_languages(sb1)
    for lang in ("c", "cpp", "java", "js", "php", "sh"):
        assert r[lang]["sandbox"] == "ok", r[lang]
        assert r[lang]["version"]
    assert r["go"]["missing"] == "/nonexistent/go"
    assert r["go"]["install"] == "apt-get install -y golang-go" and r["go"]["sandbox"] == "not run"


def test_a_missing_toolchain_is_masked_and_counted(sb1, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    from collections import Counter

    from rewardlang.sandbox import languages

    gone = dataclasses.replace(PROFILES["php"], run=("/nonexistent/php", "main.php"))
    monkeypatch.setitem(languages.PROFILES, "php", gone)
    stats: Counter = Counter()
    v = sb1.evaluate([Task(unit("php"), lang_tests("php"), language="php")], stats=stats)[0]
    assert v.outcome == "infra" and "not installed" in (v.infra or "")
    assert stats["sandbox.infra_failures"] == 1 and stats["sandbox.toolchain_missing"] == 1


@pytest.mark.parametrize("level", ["uid", pytest.param("namespaces", marks=pytest.mark.slow),
                                   pytest.param("limits", marks=pytest.mark.slow)])
def test_every_language_at_the_other_levels(level: str) -> None:
    """The toolchains run at every level (at `uid`, Landlock allows only the read paths it lists: node's
    OpenSSL configuration read is why the js profile sets OPENSSL_CONF)."""
    from rewardlang.sandbox.config import SandboxConfig
    from rewardlang.sandbox.runner import Sandbox

    for lang in LANGS:
        require(lang)
    with Sandbox(SandboxConfig(slots=1, level=level)) as sb:
        if sb.level != level:
            pytest.skip(f"level {level} is not available here")
        vs = sb.evaluate([Task(unit(lang), lang_tests(lang), language=lang) for lang in LANGS]
                         + [Task(unit(lang, False), lang_tests(lang), language=lang) for lang in LANGS],
                         use_cache=False)
    assert [v.outcome for v in vs] == ["pass"] * len(LANGS) + ["fail"] * len(LANGS), [v.details() for v in vs]


def test_comparison_cost_is_bounded_whatever_the_program_returns() -> None:
    """A float-keyed dict is compared pairwise only up to a bound (more fails), so the trusted side's work per
    case stays small; exact keys are compared through a hash table."""
    from rewardlang.sandbox import values

    n = values._MAX_PAIRWISE + 1
    e = [[float(i), i] for i in range(n)]
    assert not compare(e, list(reversed(e)), "dict[float, int]")
    ok = e[:values._MAX_PAIRWISE]
    assert compare(ok, list(reversed(ok)), "dict[float, int]")
    big = [[str(i), i] for i in range(50_000)]
    assert compare(big, list(reversed(big)), "dict[str, int]")


@pytest.mark.parametrize("name", ["values", "languages"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    module = importlib.import_module(f"rewardlang.sandbox.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_a_cpp_program_including_bits_stdcpp_passes(sb1) -> None:
    """With the precompiled header (scripts/install.sh builds it) or without it (g++ then reads the header)."""
    require("cpp")
    v = sb1.run("#include <bits/stdc++.h>\n" + unit("cpp"), lang_tests("cpp"), language="cpp")
    assert v.outcome == "pass", v.details()


@pytest.mark.slow
def test_the_precompiled_header_is_built_with_the_profiles_flags(tmp_path) -> None:
    """g++ with the cpp profile's flags and the -I of the built directory uses the .gch (-H marks it with '!')."""
    import subprocess

    from rewardlang.sandbox.languages import PCH_FLAGS, build_pch

    require("cpp")
    gch = build_pch(str(tmp_path / "pch"))
    assert gch.endswith("bits/stdc++.h.gch") and os.path.getsize(gch) > 1 << 20
    src = tmp_path / "main.cpp"
    src.write_text("#include <bits/stdc++.h>\nint main() {}\n")
    r = subprocess.run(["/usr/bin/g++", *PCH_FLAGS, "-pipe", "-w", "-I", str(tmp_path / "pch"), "-H",
                        "-fsyntax-only", str(src)], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and f"! {gch}" in r.stderr, r.stderr[:500]
    assert PROFILES["cpp"].compile[:3] == ("/usr/bin/g++", *PCH_FLAGS)
