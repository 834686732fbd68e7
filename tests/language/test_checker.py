"""The checker: one test per diagnostic code it can emit (message, location, hint), every error of a spec
reported in one run, and the rendering of a diagnostic (file:line:col, the source line, a caret under the
offending columns, the hint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rewardlang
from rewardlang.checker import check_source
from rewardlang.diagnostics import CODES, Diagnostic, SpecError
from rewardlang.runtime import registry
from rewardlang.syntax import Loc

SIGS = registry.signatures()


def check(src: str, params: dict[str, Any] | None = None, file: str = "t.reward") -> tuple[Any, list[Diagnostic]]:
    prog, diags, _ = check_source(src, file, SIGS, params)
    return prog, diags


def only(src: str, params: dict[str, Any] | None = None, file: str = "t.reward") -> Diagnostic:
    prog, diags = check(src, params, file)
    assert len(diags) == 1, [(d.code, d.message) for d in diags]
    d = diags[0]
    if d.is_error:
        assert prog is None
    return d


def span(d: Diagnostic) -> tuple[int, int, int, int]:
    assert d.loc is not None
    return (d.loc.line, d.loc.column, d.loc.end_line, d.loc.end_column)


# (code, source, message, (line, col, end_line, end_col), hint)  -- hint None means "no hint"
CASES: list[tuple[str, str, str, tuple[int, int, int, int] | None, str | None]] = [
    # syntax errors come through the checker as diagnostics too
    ("E001", "let a = 1 +* 2\ncomponent c = a", "unexpected '*'", (1, 12, 1, 13),
     "expected `(`, `+` or `-`, `[`, `false`, `none`, `true`, a /regex/, a name, …"),
    ("E002", "component c = 1 $", "unexpected character '$'", (1, 17, 1, 18), None),  # hint checked below
    ("E003", "component c = 1 +", "unexpected end of file", (1, 18, 1, 19), None),
    ("E006", "component c = (1", "unclosed `(`", (1, 15, 1, 16),
     "the file ends before it is closed: close it with `)`"),
    ("E007", 'component c = len("ab)', "unclosed string", (1, 19, 1, 20), None),
    ("E004", "component c = count(completion, /(/)",
     "invalid regular expression: missing ), unterminated subpattern at position 0", (1, 33, 1, 36),
     "rewardlang regexes are Python `re` patterns"),
    ("E005", 'component c = len("\\N{nonsense}")', None, (1, 19, 1, 33), None),
    # names and structure
    ("E101", "component c = len(completon)", "unknown name `completon`", (1, 19, 1, 28),
     "did you mean `completion`?"),
    ("E102", "component c = lenn(completion)", "unknown function `lenn`", (1, 15, 1, 19), "did you mean `len`?"),
    ("E103", "let a = 1\nlet a = 2\ncomponent c = a + len(completion)", "`a` is defined twice", (2, 1, 2, 10),
     "first defined on line 1"),
    ("E104", "let a = b + 1\nlet b = a * 2\ncomponent c = a + len(completion)",
     "definitions form a cycle: a -> b -> a", (2, 9, 2, 10), "a `let` cannot depend on itself"),
    ("E105", 'import "no/such/file.reward"\ncomponent c = 1',
     "cannot read `no/such/file.reward`: No such file or directory", (1, 1, 1, 29),
     "import paths are relative to the importing spec's directory; then the folders of REWARDLANG_IMPORT_PATH and "
     "the shipped library are searched"),
    ("E107", "let prompt = 1\ncomponent c = 1", "`prompt` is a reserved name", (1, 1, 1, 15), "rename the let: `prompt` means the prompt"),
    # types and arguments
    ("E201", 'component c = len(completion) + "x"', "`+` needs numbers, not `text`", (1, 33, 1, 36),
     "use `len(...)` for the length of text"),
    ("E202", "component c = len(completion, completion)", "`len` takes one argument", (1, 15, 1, 42),
     "len(text | list | spans) -> number"),
    ("E203", "component c = count(completion, completion)", "`patterns` of `count` must be `regex`, not `text`",
     (1, 33, 1, 43), "count(text: text, *patterns: regex) -> number"),
    ("E204", 'component c = len(tag(completion, "a", dotal=true))', "`tag` has no option `dotal`", (1, 40, 1, 50),
     "did you mean `dotall`?"),
    ("E205", "component c = distinct(words(completion), len(completion))", "`n` of `distinct` must be a constant",
     (1, 43, 1, 58), None),
    ("E206", "component c = 1 if len(completion) else 0", "the condition must be a bool, not `number`",
     (1, 20, 1, 35), "compare it, e.g. `x > 0`, or test presence with `x != none`"),
    ("E207", "param q: strng = 1\ncomponent c = 1", "unknown type `strng`", (1, 10, 1, 15), None),
    ("E208", "component c in [1, 0] = 1", "empty range [1.0, 0.0]", (1, 17, 1, 18), None),
    ("E209", "component c = strip(completion)", "component `c` is `text`, not a number", (1, 15, 1, 32),
     "turn text into a number with len(...), count(...), or a condition: 1 if ... else 0"),
    ("E210", "component c = 1\n    spans len(completion)", "`spans` needs spans, not `number`", (2, 11, 2, 26),
     "spans come from functions such as matches(completion, /re/), syntax_errors(code)"),
    ("E211", 'component c = 1\nc.weight = "heavy"', "the weight of `c` must be a number, not `text`",
     (2, 12, 2, 19), None),
    ("E212", "component c = 1\nc.weight = linear(2.0 -> 1.0)",
     "`linear` needs `steps=`: the number of training steps it takes", (2, 12, 2, 30),
     "linear(2.0 -> 1.0, steps=5000, start=0)"),
    ("E213", "component c = sum(count(completion, w) for w in words(completion))",
     "a comprehension must run over a constant list", (1, 49, 1, 66),
     "per-sample lists have functions instead: count, findall, len, distinct"),
    ("E214", "component c = step(len(completion), <= 1: 0, <= 2: 1)", "`step` needs an `else:` arm",
     (1, 15, 1, 54), "say what the value is when no threshold holds: `else: 1`"),
    ("E215", 'component c = 1\nreward = "x"', "the reward is `text`, not a number", (2, 10, 2, 13), None),
    ("E216", "component c in [0, 1] = 1\n    on_error 5", "`on_error 5` lies outside the range [0, 1]",
     (2, 14, 2, 15), None),
    ("E217", "component c = completion.length", "`.length` is not supported", (1, 15, 1, 32),
     "only `<component>.weight` exists"),
    # advantages
    ("E301", 'component c = count(completion, "a")\nadvantage over group(nope) = x - mean',
     "`group(nope)`: `nope` is not an input", (2, 16, 2, 27), "declare it: `input nope: group`"),
    ("E302", 'component c = count(completion, "a")\nadvantage over group(prompt) each component = x - mean',
     "`each component` normalizes components separately: add `then sum` to combine them", (2, 1, 2, 55),
     "advantage over group(prompt) each component = (x - mean) / (std + 1e-6) then sum"),
    # audits
    ("E218", "component c = 1\naudit a = len(completion) every 0 steps",
     "`every` is a whole number of steps, at least 1", (2, 33, 2, 34), "e.g. `every 10 steps`"),
    ("E219", "component c = 1\naudit a = len(completion)\nreward = c + a",
     "`a` is an audit: it cannot be used in the reward", (3, 14, 3, 15),
     "audits never enter the reward, the advantage, masks or preference pairs; to train on this expression, "
     "declare it as a component (`component a = ...`)"),
    # examples
    ("E401", 'component c = count(completion, "a")\nexample { answr: "x", expect c = 1 }',
     "`answr` is not an input of this spec", (2, 11, 2, 21), None),
    ("E402", 'component c = count(completion, "a")\nexample { completion: ["a", "b"], expect c = [1, 2, 3] }',
     "3 expected values for 2 rows", (2, 46, 2, 55), None),
    # sections and parameters
    ("E501", 'component c = count(completion, "a")\nrewards { x = 1 }',
     "unknown section `rewards`", (2, 1, 2, 18), "did you mean `reward`? (the sections: train, preference)"),
    ("E503", 'component c = count(completion, "a")\npreference { x = 1 }',
     "unknown preference setting `x`", (2, 14, 2, 19), None),
    ("E504", 'component c = count(completion, "a")\npreference { margin = -0.5 }',
     "preference setting `margin` is `-0.5`; it takes a number >= 0", (2, 23, 2, 27), None),
    ("E505", 'component c = count(completion, "a")\npreference { losers = c }',
     "`losers` is `number`, not a bool", (2, 23, 2, 24), "a rule is a condition, e.g. `rule == 1`"),
    ("E502", "component c = 1\ntrain { note = text(1) }", "train setting `note` must be a constant",
     (2, 16, 2, 23), None),
    ("E601", 'param k: number = "x"\ncomponent c = 1', "`k` is declared `number` but its default is `text`",
     (1, 19, 1, 22), None),
    # warnings (the spec still compiles)
    ("W001", "input foo: text\ncomponent c = len(completion)", "input `foo` is never used", (1, 1, 1, 16), None),
    ("W002", "let unused = 3\ncomponent c = len(completion)", "`unused` is never used", (1, 1, 1, 15), None),
    ("W003", "component c = len(completion)\nc.weight = 2\nreward = c",
     "the weight of `c` is set but the reward does not use it", (2, 1, 2, 13),
     "write `c.weight * c` in the reward, or drop the `reward` line to get the weighted sum of all components"),
    ("W004", 'component c = count(tag(completion, "a"), "x")',
     "component `c` is none for some samples (they will be masked)", (1, 15, 1, 47),
     "give a default with `or`, e.g. `codebleu(...) or 0`"),
    ("W005", "", "the spec has no components", None, "add `component name = expression`"),
    ("W006", "component c = count(completion, /(a+)+$/)",
     "this regex can take exponential time on some texts: nested quantifier: `+` repeats a group holding `+`",
     (1, 33, 1, 41), "make the repetition unambiguous (`(a+)+` -> `a+`, `(\\w+\\s?)+` -> `[\\w\\s]+`, "
     "alternatives that start differently); it runs with a deadline (the component's `timeout`, else 1 s per "
     "call) and a sample that hits it is an error"),
]


@pytest.mark.parametrize("code,src,message,where,hint", CASES, ids=[c[0] for c in CASES])
def test_each_code(code: str, src: str, message: str | None, where: tuple | None, hint: str | None) -> None:
    prog, diags = check(src)
    assert [d.code for d in diags] == [code], [(d.code, d.message) for d in diags]
    d = diags[0]
    if message is not None:
        assert d.message == message
    if where is None:
        assert d.loc is None
    else:
        assert span(d) == where
        assert d.loc.file == "t.reward"
    if code not in ("E002", "E003", "E005", "E006", "E007"):
        assert d.hint == hint
    assert code in CODES
    assert (prog is None) == code.startswith("E")


def test_every_code_the_checker_emits_is_covered() -> None:
    covered = {c[0] for c in CASES} | {"E103", "E106", "E108", "E602", "E403", "E603"}
    # E108 (a statement an imported file cannot have) is tested with files, below.
    # E603 (a model the spec needs is missing) is raised at load (tests/runtime/components/test_self_masking.py).
    # E403 (an example failed) is emitted by `rewardlang check` (tests/test_cli.py).
    assert set(CODES) - covered == set()


def test_E002_hint_lists_what_was_expected() -> None:
    d = only("component c = 1 $ 2")
    assert d.hint is not None and d.hint.startswith("expected ")
    assert "`*`, `/` or `%`" in d.hint and "`+` or `-`" in d.hint


def test_E005_invalid_literal_message() -> None:
    d = only('component c = len("\\N{nonsense}")')
    assert d.code == "E005" and d.message.startswith("invalid string literal:")
    assert "unknown Unicode character name" in d.message


# ---------------------------------------------------------------- names


def test_unknown_name_did_you_mean_uses_lets_inputs_and_params() -> None:
    prog, diags = check("param threshold = 3\nlet markers = count(completion, \"x\")\n"
                        "component c = 1 if markerz > 2 else 0")
    errors = [d for d in diags if d.is_error]
    assert [(d.code, d.message, d.hint) for d in errors] == [
        ("E101", "unknown name `markerz`", "did you mean `markers`?")]
    prog, diags = check("param threshold = 3\ncomponent c = 1 if len(completion) > treshold else 0")
    assert [(x.code, x.hint) for x in diags] == [("E101", "did you mean `threshold`?")]


def test_unknown_name_without_a_close_candidate_has_no_hint() -> None:
    d = only("component c = len(zzzzqqq)")
    assert (d.code, d.message, d.hint) == ("E101", "unknown name `zzzzqqq`", None)


def test_component_used_inside_another_component() -> None:
    d = only("component a = len(completion)\ncomponent b = a + 1")
    assert d.code == "E101" and d.message == "component `a` cannot be used inside another component"
    assert span(d) == (2, 15, 2, 16)


def test_per_sample_value_in_the_reward_or_a_weight() -> None:
    d = only("input n: number\ncomponent c = n\nreward = c * n")
    assert (d.code, d.message, span(d)) == ("E101", "`n` varies per sample and cannot be used in the reward",
                                            (3, 14, 3, 15))
    d = only("input n: number\ncomponent c = n\nc.weight = n")
    assert d.message == "`n` varies per sample and cannot be used in a weight"


def test_step_is_unknown_in_constants() -> None:
    prog, diags = check("param k = step * 2\ncomponent c = 1")
    assert diags[0].code == "E101" and diags[0].message == "`step` (the training step) is not known here"
    assert diags[0].hint == "constants may not depend on the training step"


def test_unknown_function_suggests_registered_functions() -> None:
    d = only('component c = cout(completion, "a")')
    assert (d.code, d.message, d.hint) == ("E102", "unknown function `cout`", "did you mean `count`?")
    d = only("component c = std(len(completion))")
    assert (d.code, d.message) == ("E102", "`std` is an aggregate of the advantage pipeline")


@pytest.mark.parametrize("src,message,where,hint", [
    ("component c = 1\ncomponent c = 2", "component `c` is defined twice", (2, 1, 2, 16),
     "first defined at t.reward:1"),
    ("param k = 1\nparam k = 2\ncomponent c = k", "parameter `k` is defined twice", (2, 1, 2, 12), None),
    ("input g: text\ninput g: number\ncomponent c = len(g)", "input `g` is declared twice, differently",
     (2, 1, 2, 16), "first declared at t.reward:1 as `text`"),
    ("spec a\nspec b\ncomponent c = 1", "`spec` is given twice", (2, 1, 2, 7), "first on line 1"),
    ("component c = 1\nreward = c\nreward = 2 * c", "`reward` is given twice", (3, 1, 3, 15), "first on line 2"),
    ("component c = 1\nc.weight = 1\nc.weight = 2", "the weight of `c` is set twice", (3, 1, 3, 13),
     "first set at t.reward:2"),
    ("component c = 1\ntrain { lr = 1, lr = 2 }", "train setting `lr` is given twice", (2, 17, 2, 23), None),
], ids=["component", "param", "input", "spec", "reward", "weight", "train"])
def test_duplicates(src: str, message: str, where: tuple, hint: str | None) -> None:
    d = only(src)
    assert (d.code, d.message, span(d), d.hint) == ("E103", message, where, hint)


def test_the_same_input_declared_twice_identically_is_fine() -> None:
    prog, diags = check("input g: text\ninput g: text\ncomponent c = len(g)")
    assert diags == [] and prog is not None


def test_three_step_cycle_and_self_reference() -> None:
    prog, diags = check("let a = b\nlet b = c\nlet c = a\ncomponent x1 = len(completion) + a")
    assert [d.code for d in diags] == ["E104"]
    assert diags[0].message == "definitions form a cycle: a -> b -> c -> a"
    prog, diags = check("let a = a + 1\ncomponent x1 = a")
    assert [(d.code, d.message) for d in diags] == [("E104", "definitions form a cycle: a -> a")]


def test_circular_import_and_missing_imported_name(tmp_path: Path) -> None:
    (tmp_path / "a.reward").write_text('import "b.reward"\nlet a = 1\n')
    (tmp_path / "b.reward").write_text('import "a.reward"\nlet b = 2\n')
    (tmp_path / "lib.reward").write_text('let shared = count(completion, "x")\n')
    main = str(tmp_path / "main.reward")
    prog, diags = check('import "a.reward"\ncomponent c = 1', file=main)
    assert [d.code for d in diags] == ["E105"]
    assert diags[0].message == "circular import of `a.reward`"
    assert diags[0].loc.file == str(tmp_path / "b.reward") and span(diags[0]) == (1, 1, 1, 18)
    d = only('from "lib.reward" import shard\ncomponent c = 1', file=main)
    assert (d.code, d.message, span(d), d.hint) == ("E106", "`lib.reward` defines no `shard`", (1, 26, 1, 31),
                                                    "did you mean `shared`?")


def test_reserved_names() -> None:
    for src in ("component prompt = 1\ncomponent c = 1", "param step = 1\ncomponent c = 1",
                "input reward: number\ncomponent c = 1", "let x = 1\ncomponent c = 1"):
        prog, diags = check(src)
        assert [d.code for d in diags] == ["E107"], src
        assert diags[0].message.endswith("is a reserved name")


def test_main_only_statements_in_an_imported_file_are_E108(tmp_path: Path) -> None:
    lib = tmp_path / "lib.reward"
    lib.write_text("component libc = len(completion)\nreward = 0\nadvantage over batch = x\n"
                   "train { lr = 1 }\nexample { completion: \"a\", expect libc = 99 }\n")
    prog, diags = check('import "lib.reward"\ncomponent c = 1', file=str(tmp_path / "main.reward"))
    assert [d.code for d in diags] == ["E108"] * 4
    assert [(d.message, d.loc.file, span(d)) for d in diags] == [
        ("a `reward` statement in an imported file", str(lib), (2, 1, 2, 11)),
        ("an `advantage` statement in an imported file", str(lib), (3, 1, 3, 25)),
        ("a `train` section in an imported file", str(lib), (4, 1, 4, 17)),
        ("an example in an imported file", str(lib), (5, 1, 5, 46)),
    ]
    assert all(d.is_error and d.hint is not None and d.hint.startswith("move it into the importing spec "
                                                                        "(`main.reward`)") for d in diags)
    assert prog is None
    # the same file checked on its own is a spec, not an import: its reward, advantage, train and example apply
    prog, diags = check(lib.read_text(), file=str(lib))
    assert [d.code for d in diags if d.code == "E108"] == []


def test_E108_is_reported_once_per_imported_file_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "deep.reward").write_text("component libc = len(completion)\nreward = libc\n")
    (tmp_path / "mid.reward").write_text('import "deep.reward"\nlet m = 1\n')
    (tmp_path / "other.reward").write_text('import "deep.reward"\nlet o = 2\n')
    prog, diags = check('import "mid.reward"\nimport "other.reward"\ncomponent c = m + o',
                        file=str(tmp_path / "main.reward"))
    assert [(d.code, d.loc.file, d.loc.line) for d in diags] == [("E108", str(tmp_path / "deep.reward"), 2)]
    # a weight and a `spec` line in an imported file are allowed (the weight applies; the spec line names the
    # file only when it is checked on its own)
    (tmp_path / "lib.reward").write_text('spec lib "a library"\ncomponent libc = len(completion)\nlibc.weight = 2\n')
    prog, diags = check('import "lib.reward"\ncomponent c = 1', file=str(tmp_path / "main2.reward"))
    assert diags == [] and prog is not None and prog.name == "main2"


def test_a_weight_in_an_imported_file_behaves_the_same_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "deep.reward").write_text("component libc = len(completion)\nlibc.weight = 5\n")
    (tmp_path / "mid.reward").write_text('import "deep.reward"\n')
    direct = rewardlang.loads('import "deep.reward"\ncomponent c = 1', filename=str(tmp_path / "a.reward"))
    nested = rewardlang.loads('import "mid.reward"\ncomponent c = 1', filename=str(tmp_path / "b.reward"))
    assert direct.weights(0) == nested.weights(0)


# ---------------------------------------------------------------- types and arguments


@pytest.mark.parametrize("src,message", [
    ('component c = -"a"', "`-` needs a number, not `text`"),
    ('component c = 1 if "a" < "b" else 0', "cannot compare `text` < `text`"),
    ('component c = [1, "a"][0]', "list items have different types: `number` and `text`"),
    ('component c = 1 if len(completion) > 0 else "a"', "the branches have different types: `number` and `text`"),
    ('component c = len(tag(completion, "a") or 5)', "`or` default of type `number` does not match `text`"),
    ("component c = (5)[0]", "cannot index `number`"),
    ('input completion: number\ncomponent c = 1', "`completion` is text"),
])
def test_type_mismatches_are_E201(src: str, message: str) -> None:
    d = only(src)
    assert (d.code, d.message) == ("E201", message)


@pytest.mark.parametrize("src,message,hint", [
    ("component c = count(completion)", "`count` needs at least one `patterns`",
     "count(text: text, *patterns: regex) -> number"),
    ("component c = len(tag(completion))", "`tag` is missing `name`",
     "tag(text: text, name: text, dotall=true, greedy=false) -> text?"),
    ("component c = len(strip(completion, completion))", "`strip` takes 1 argument(s), 2 given",
     "strip(text: text) -> text"),
    ('component c = len(tag(completion, "a", name="a"))', "`name` is given twice", None),
    ("component c = clip(len(completion), 0)", "`clip` takes three arguments", "clip(x, lo, hi)"),
    ("component c = min()", "`min` of nothing", None),
], ids=["variadic-empty", "missing", "too-many", "twice", "clip", "min-empty"])
def test_wrong_arity_is_E202(src: str, message: str, hint: str | None) -> None:
    d = only(src)
    assert (d.code, d.message, d.hint) == ("E202", message, hint)


def test_wrong_argument_types_are_E203() -> None:
    d = only("component c = len(strip(5))")
    assert (d.code, d.message, span(d)) == ("E203", "`text` of `strip` must be `text`, not `number`", (1, 25, 1, 26))
    d = only("component c = len(1)")
    assert (d.code, d.message) == ("E203", "`len` needs text, a list or spans, not `number`")
    d = only("component c = len(completion)[\"a\"]")
    assert (d.code, d.message) == ("E203", "an index must be a number, not `text`")
    d = only("component c = len(strip(completion -> completion))")
    assert (d.code, d.message) == ("E203", "`strip` takes plain arguments")


def test_bad_option_values_are_validated_by_pydantic() -> None:
    d = only('component c = len(tag(completion, "a", dotall=3))')
    assert d.code == "E204"
    assert d.message == "`tag` option `dotall`: Input should be a valid boolean, unable to interpret input"
    assert span(d) == (1, 47, 1, 48)  # the value, not the call
    assert d.hint == "tag(text: text, name: text, dotall=true, greedy=false) -> text?"
    d = only('component c = len(code_block(completion, which="middle") or "")')
    assert d.code == "E204" and d.message.startswith("`code_block` option `which`: Input should be 'first' or 'last'")


def test_non_constant_static_arguments_and_options_are_E205() -> None:
    d = only("component c = len(tag(completion, prompt))")
    assert (d.code, d.message, span(d)) == ("E205", "`name` of `tag` must be a constant", (1, 35, 1, 41))
    d = only('component c = len(tag(completion, "a", dotall=len(completion) > 1))')
    assert (d.code, d.message) == ("E205", "option `dotall` must be a constant")
    d = only("component c = [len(completion), 1][0]")
    assert (d.code, d.message) == ("E205", "list literals must hold constants")


def test_params_are_constants_for_static_arguments() -> None:
    prog, diags = check('param t = "answer"\ncomponent c = len(tag(completion, t) or "")')
    assert diags == [] and prog is not None


def test_conditions_must_be_bools() -> None:
    d = only("component c = number(not len(completion))")
    assert (d.code, d.message) == ("E206", "the operand of `not` must be a bool, not `number`")
    d = only("component c = number(len(completion) > 0 and 5)")
    assert (d.code, d.message) == ("E206", "the right side of `and` must be a bool, not `number`")


def test_unknown_and_forbidden_types() -> None:
    d = only("param k: foo = 1\ncomponent c = 1")
    assert (d.code, d.message, span(d)) == ("E207", "unknown type `foo`", (1, 10, 1, 13))
    prog, diags = check("input s: spans\ncomponent c = 1")
    assert [(x.code, x.message) for x in diags if x.is_error] == [("E207", "an input cannot have type `spans`")]
    prog, diags = check("input q: strng\ncomponent c = 1")
    (e,) = [x for x in diags if x.is_error]
    assert (e.code, e.message, span(e)) == ("E207", "unknown type `strng`", (1, 10, 1, 15))
    assert e.hint == ("input types: text, code, number, bool, group, list[text], list[code], list[number] (add "
                      "`?` for a column that may be null)")


def test_unknown_input_type_is_reported_once() -> None:
    prog, diags = check("input q: strng\ncomponent c = len(q)")
    assert [d.code for d in diags] == ["E207"]


def test_a_param_with_a_bad_default_is_reported_once() -> None:
    prog, diags = check('param threshold: number = "3"\ncomponent long = number(len(completion) > threshold)')
    assert [(d.code, d.message, span(d)) for d in diags] == [
        ("E601", "`threshold` is declared `number` but its default is `text`", (1, 27, 1, 30))]
    assert prog is None
    # every kind of use (a component, a weight, the reward, another param, an option), and every kind of bad
    # declaration: only the declaration is reported
    uses = ("\ncomponent c = len(completion) * t\nc.weight = t\nreward = c.weight * c * t + d\nparam u = t + 1\n"
            "component d = len(tag(completion, \"a\") or \"\") + u")
    for decl, code in (("param t: number = \"3\"", "E601"), ("param t = len(completion)", "E101"),
                       ("param t = step", "E101"), ("param t: numbr = 3", "E207"), ("param t = nope + 1", "E101")):
        prog, diags = check(decl + uses)
        assert [d.code for d in diags] == [code], (decl, [(d.code, d.message) for d in diags])
        assert diags[0].loc.line == 1 and prog is None


def test_a_param_default_that_is_not_constant_is_E601_once() -> None:
    prog, diags = check("param t = text(1)\ncomponent c = len(completion + t)\nc.weight = len(t)")
    assert [(d.code, d.message) for d in diags] == [("E601", "the default of `t` must be a constant")]


def test_an_override_does_not_repair_a_bad_param() -> None:
    prog, diags = check('param t: number = "3"\ncomponent c = t', params={"t": "4"})
    assert [d.code for d in diags] == ["E601"] and prog is None


def test_range_bounds_must_be_constant_numbers() -> None:
    d = only("component c in [0, len(completion)] = 1")
    assert d.code == "E101"  # a per-sample value in a constant
    d = only('component c in ["a", 1] = 1')
    assert (d.code, d.message) == ("E208", "range bounds must be constant numbers")
    d = only('component c in [0, "a"] = 1')  # the caret under the bound that is not a number
    assert (d.code, span(d)) == ("E208", (1, 20, 1, 23))
    d = only("component c in [2, 1] = 1")
    assert (d.code, d.message, span(d)) == ("E208", "empty range [2.0, 1.0]", (1, 17, 1, 18))


@pytest.mark.parametrize("name", ["completion", "prompt"])
def test_a_param_default_of_the_implicit_inputs_says_it_varies_per_sample(name: str) -> None:
    d = only(f"param s: number = {name}\ncomponent c = s")
    assert (d.code, d.message) == ("E101", f"`{name}` varies per sample and cannot be used in a constant")


@pytest.mark.parametrize("tol", ["-1", "-0.5"])
def test_a_negative_tolerance_is_refused_where_it_is_written(tol: str) -> None:
    src = f'component c in [0, 1] = 1\nexample "e" {{\n    completion: "a",\n    expect c = 1 +- {tol},\n}}\n'
    d = only(src)
    assert (d.code, d.message) == ("E402", f"a tolerance is a finite number >= 0, not {float(tol):g}")
    assert span(d)[:2] == (4, src.splitlines()[3].index(tol) + 1)


def test_a_bad_override_hint_spells_the_default_as_a_spec_does() -> None:
    _, diags = check("param flag: bool = true\ncomponent c in [0, 1] = 1 if flag else 0", params={"flag": "3"})
    assert [(d.code, d.hint) for d in diags] == [("E602", "the default stays true")]


@pytest.mark.parametrize("command", ["check", "fmt"])
def test_a_spec_that_is_not_utf8_is_located_at_its_first_bad_byte(tmp_path, command: str) -> None:
    import subprocess
    import sys

    spec = tmp_path / "latin1.reward"
    spec.write_bytes(b'let a = 1\nlet s = "caf\xe9"\ncomponent c in [0, 1] = 1\n')
    r = subprocess.run([sys.executable, "-m", "rewardlang", command, str(spec)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"error[E005]: `{spec}` is not valid UTF-8 (byte 22: 0xe9)"
    assert lines[1] == f" --> {spec}:2:13"
    assert lines[4].index("^") == lines[3].index("\ufffd") and "save the file as UTF-8" in r.stderr


def test_a_schedule_without_steps_is_hinted_with_the_writers_own_endpoints() -> None:
    d = only("component c = 1\nc.weight = cosine(1 -> 0)")
    assert (d.code, d.hint) == ("E212", "cosine(1 -> 0, steps=5000, start=0)")


def test_component_always_none() -> None:
    prog, diags = check("component c = none")
    assert [(d.code, d.message) for d in diags if d.is_error] == [("E209", "component `c` is always none")]


def test_bad_weights_are_E211() -> None:
    d = only("component c = 1\nd.weight = 2")
    assert (d.code, d.message, span(d)) == ("E211", "weight for unknown component `d`", (2, 1, 2, 13))
    d = only("component accuracy = 1\naccurasy.weight = 2")
    assert (d.code, d.hint) == ("E211", "did you mean `accuracy`?")


@pytest.mark.parametrize("src,message", [
    ("component c = 1\nc.weight = linear(2.0 -> 1.0)", "`linear` needs `steps=`: the number of training steps it takes"),
    ("component c = 1\nc.weight = cosine(2.0 -> 1.0, start=3)",
     "`cosine` needs `steps=`: the number of training steps it takes"),
    ("component c = 1\nc.weight = linear(1 -> 2, steps=0)", "`steps` must be positive"),
    ("component c = 1\nc.weight = linear(1, 2)", "`linear` is a schedule: `linear(2.0 -> 1.0, steps=5000, start=0)`"),
    ("param p = linear(1 -> 2, steps=3)\ncomponent c = 1", "schedules depend on the training step and cannot be "
                                                       "constants"),
])
def test_schedules_are_E212(src: str, message: str) -> None:
    d = only(src)
    assert (d.code, d.message) == ("E212", message)


def test_comprehensions_over_per_sample_lists_are_E213() -> None:
    d = only("component c = sum(count(completion, w) for w in words(completion))")
    assert d.code == "E213" and d.message == "a comprehension must run over a constant list"
    d = only("component c = sum(n for n, m in [1, 2])")
    assert (d.code, d.message) == ("E213", "cannot unpack 1.0 into 2 names")
    d = only("component c = sum(n for n in [1, 2] if n > len(completion))")
    assert (d.code, d.message) == ("E213", "a comprehension's `if` must be constant")


def test_comprehension_over_a_constant_list_unrolls() -> None:
    prog, diags = check('component c = sum(count(completion, p) * w for p, w in [("a", 1), ("b", 2)] if w > 0)')
    assert diags == [] and prog is not None
    out = rewardlang.loads('component c = sum(count(completion, p) * w for p, w in [("a", 1), ("b", 2)] if w > 1)')
    assert out.score(completion=["aabbb"]).components["c"].tolist() == [6.0]


@pytest.mark.parametrize("src,message", [
    ("component c = step(len(completion), <= 1: 0, <= 2: 1)", "`step` needs an `else:` arm"),
    ("component c = step(len(completion), else: 1, <= 1: 0)", "`else` must be the last arm"),
    ("component c = step(len(completion), <= 1: 0, else: 1, else: 2)", "two `else` arms"),
    ("component c = step(len(completion), <= len(completion): 0, else: 1)", "a threshold must be a constant"),
    ("component c = step(len(completion), 1 -> 2, else: 1)", "`step` arms look like `<= 0.2: 0` or `else: 1`"),
    ("component c = piecewise(len(completion), 1 -> 0, 0 -> 1)", "`piecewise` points must have increasing x"),
    ("component c = piecewise(len(completion), 0 -> 1, 0 -> 2)", "`piecewise` points must have increasing x"),
    ("component c = piecewise(len(completion), 0 -> 1)", "`piecewise` needs at least two points"),
    ("component c = piecewise(len(completion), 0 -> len(completion), 1 -> 2)",
     "`piecewise` points must be constant numbers"),
], ids=["no-else", "else-first", "two-else", "threshold", "arm-shape", "decreasing", "equal-x", "one-point",
        "non-constant"])
def test_step_and_piecewise_are_E214(src: str, message: str) -> None:
    d = only(src)
    assert (d.code, d.message) == ("E214", message)


@pytest.mark.parametrize("src,message", [
    ('component c = 1\n    on_error "x"', "`on_error` is a number, or `none` to mask the sample"),
    ("component c = 1\n    timeout -1", "`timeout` is a positive number of seconds"),
    ("component c in [0, 1] = 1\n    on_error 5", "`on_error 5` lies outside the range [0, 1]"),
])
def test_component_clauses_are_E216(src: str, message: str) -> None:
    d = only(src)
    assert (d.code, d.message) == ("E216", message)


def test_constant_negative_base_to_a_fractional_power_is_E217() -> None:
    prog, diags = check("component c = (-4) ** 0.5")
    assert [d.code for d in diags] == ["E217"]


@pytest.mark.parametrize("digits", ["1e309", "-1e309", "0 * 1e309"])
def test_round_with_an_infinite_digits_option_is_a_diagnostic(digits: str) -> None:
    # found by test_fuzz.py: this used to crash the checker with OverflowError / ValueError
    # (since issue 13, the infinite constant itself is E217, before `round` sees it)
    prog, diags = check(f"component c = round(len(completion), digits={digits})")
    assert prog is None
    assert [d.code for d in diags] == ["E217"]
    assert "not a finite number" in diags[0].message


def test_unsupported_operations_are_E217() -> None:
    d = only("component c = 1\nc.weight = 2\nlet w = c.weight\ncomponent d = w")
    assert (d.code, d.message) == ("E217", "weights are known only in `reward` and `advantage`")
    d = only("component c = log(0)")
    assert (d.code, d.message) == ("E217", "`log` of a constant fails: math domain error")
    d = only("component c = 1 / 0")
    assert (d.code, d.message) == ("E217", "constant arithmetic fails: float division by zero")
    d = only("component c = 1\nc.weight = len(\"abc\") + count(\"a\", \"a\")")
    assert d.code == "E217" and d.message == "`count` works on samples and cannot be called in a weight expression"


@pytest.mark.parametrize("src,message", [
    ("advantage over group(prompt) = sum", "`sum` adds per-component advantages; use it after `each component`"),
    ('advantage over group(prompt) = "abc"', "an advantage stage must be a number, not `text`"),
    ("advantage over group(prompt) = x - mean(foo=1)", "`mean` has no option `foo`"),
    ("advantage over group(prompt) = (x - mean) / std(ddof=2)", "`ddof` is 0 (population) or 1 (sample)"),
    ("advantage over group(prompt) = x - std(foo=1)", "`std` has no option `foo`"),
])
def test_bad_advantage_stages_are_E301(src: str, message: str) -> None:
    d = only('component c = count(completion, "a")\n' + src)
    assert (d.code, d.message) == ("E301", message)


def test_mean_of_x_in_a_stage_is_the_group_mean_or_an_error() -> None:
    src = "component c = len(completion)\nadvantage over group(prompt) = x - mean(x)"
    _, diags = check(src)
    if not any(d.is_error for d in diags):
        adv = rewardlang.loads(src).score(completion=["a", "abc"], prompt=["p", "p"]).advantages
        assert adv.tolist() == [-1.0, 1.0]


def test_stage_shorthands_and_options_compile() -> None:
    prog, diags = check("component c = 1\nadvantage over group(prompt) = standardize(ddof=1, eps=1e-4) "
                        "then clip(-1, 1) then rank then loo then scale then tanh then center")
    assert diags == [] and prog is not None
    assert len(prog.advantage.stages) == 7


@pytest.mark.parametrize("src,code,message", [
    ('example { completion: "a", expect d = 1 }', "E402", "`d` is not a component"),
    ('example { completion: "a", expect c = "x" }', "E402", "an expected value is a number, `none`, or a list of them"),
    ('example { completion: "a", expect c = 1 +- "x" }', "E402", "a tolerance is a constant number"),
    ('example { completion: "a", completion: "b", expect c = 1 }', "E401", "`completion` is given twice"),
    ('example { completion: 5, expect c = 1 }', "E401", "`completion` must be text"),
])
def test_bad_examples(src: str, code: str, message: str) -> None:
    d = only('component c = count(completion, "a")\n' + src)
    assert (d.code, d.message) == (code, message)


def test_example_inputs_of_different_lengths_are_E401() -> None:
    prog, diags = check('component c = count(completion, "a")\n'
                        'example { completion: ["a", "b"], prompt: ["p", "q", "r"], expect c = 1 }')
    assert [(d.code, d.message) for d in diags] == [("E401", "`prompt` gives 3 rows, other inputs 2")]


def test_bad_parameter_defaults_are_E601() -> None:
    d = only("param p = text(1)\ncomponent c = 1")
    assert (d.code, d.message, span(d)) == ("E601", "the default of `p` must be a constant", (1, 11, 1, 18))


# ---------------------------------------------------------------- overrides (--set)


@pytest.mark.parametrize("params,message,where,hint", [
    ({"k": "abc"}, "--set k='abc': `k` is `number` (a finite number)", (1, 1, 1, 20), "the default stays 2.0"),
    ({"flag": "1"}, "--set flag='1': `flag` is `bool`", (2, 1, 2, 24), "the default stays true"),
    ({"kk": "3"}, "--set kk: no such parameter", None, "did you mean `k`?"),
    ({"c.weight": "x"}, "--set c.weight='x': a weight is a finite number", None, None),
    ({"c.weigth": "2"}, "--set c.weigth: no such parameter", None, "did you mean `c.weight`?"),
])
def test_bad_overrides_are_E602(params: dict, message: str, where: tuple | None, hint: str | None) -> None:
    src = "param k: number = 2\nparam flag: bool = true\ncomponent c = k if flag else 0\n"
    d = only(src, params)
    assert (d.code, d.message, d.hint) == ("E602", message, hint)
    assert (span(d) if where else d.loc) == where


def test_good_overrides_are_coerced_to_the_declared_type() -> None:
    src = "param k: number = 2\nparam flag: bool = true\ncomponent c = k if flag else 0\n"
    prog, diags = check(src, {"k": "3.5", "flag": "false", "c.weight": "2", "train.seed": "7"})
    assert diags == []
    assert prog.params == {"k": 3.5, "flag": False} and prog.train == {"seed": 7}


# ---------------------------------------------------------------- warnings


def test_or_on_a_value_that_is_never_none_warns() -> None:
    d = only("component c = len(completion) or 0")
    assert (d.code, d.message, span(d)) == ("W002", "the left side of `or` is never none, so the default is unused",
                                            (1, 34, 1, 35))


def test_used_inputs_and_defaulted_components_do_not_warn() -> None:
    prog, diags = check('input ref: text\ncomponent c = len(tag(completion, "a") or ref)')
    assert diags == [] and prog is not None


# ---------------------------------------------------------------- every error in one run


def test_all_errors_of_a_spec_are_reported_in_one_run() -> None:
    src = (
        "input ref: txt\n"                                           # E207
        "let markers = count(completion, /Step(/)\n"                 # E004
        "component a = len(completon)\n"                             # E101
        "component b = lenn(completion)\n"                           # E102
        "component b = 1\n"                                          # E103
        "component c in [1, 0] = markers\n"                          # E208
        'component d = strip(completion)\n'                          # E209
        "component e = step(len(completion), <= 1: 0)\n"             # E214
        'component f = len(tag(completion, "a", dotall=3)) or 0\n'  # E204
        "z.weight = 2\n"                                             # E211
        "advantage over group(pmpt) = x - mean\n"                    # E301
        "rewards { x = 1 }\n"                                        # E501
    )
    prog, diags = check(src, {"nope": "1"})
    assert prog is None
    got = [(d.code, d.loc.line if d.loc else None) for d in diags]
    assert sorted(got, key=lambda t: (t[1] or 0, t[0])) == sorted([
        ("E207", 1), ("E004", 2), ("E101", 3), ("E102", 4), ("E103", 5), ("E208", 6), ("E209", 7), ("E214", 8),
        ("E204", 9), ("E211", 10), ("E301", 11), ("E501", 12), ("E602", None), ("W001", 1),
    ], key=lambda t: (t[1] or 0, t[0]))
    # load() raises one SpecError carrying all of them, sorted by location
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, params={"nope": "1"}, filename="many.reward")
    codes = [d.code for d in ei.value.diagnostics]
    assert len(codes) == 14 and sum(1 for d in ei.value.diagnostics if d.is_error) == 13
    assert str(ei.value).startswith("13 error(s)")


def test_errors_inside_an_unused_let_are_reported() -> None:
    prog, diags = check("let markers = count(completion, /Step(/)\ncomponent c = len(completion)")
    assert "E004" in [d.code for d in diags]


# ---------------------------------------------------------------- rendering


def test_rendering_points_at_the_right_columns() -> None:
    src = "let a = 1\ncomponent score = 1 if a > 0 else lenn(completion)\n"
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="specs/my.reward")
    text = ei.value.render(color=False)
    assert text == (
        "error[E102]: unknown function `lenn`\n"
        " --> specs/my.reward:2:35\n"
        "  |\n"
        "2 | component score = 1 if a > 0 else lenn(completion)\n"
        "  |                                   ^^^^\n"
        "  = hint: did you mean `len`?"
    )
    caret_line = text.splitlines()[4]
    src_line = text.splitlines()[3]
    start = caret_line.index("^")
    assert src_line[start:start + caret_line.count("^")] == "lenn"


def test_rendering_of_a_multiline_range_and_wide_gutter() -> None:
    src = "\n" * 11 + "component c = step(\n  len(completion),\n  <= 1: 0)\n"
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="w.reward")
    lines = ei.value.render().splitlines()
    assert lines[:2] == ["error[E214]: `step` needs an `else:` arm", " --> w.reward:12:15"]
    # a range spanning lines is underlined to the end of its first line
    assert lines[3] == "12 | component c = step("
    assert lines[4] == "   |               ^^^^^"
    assert lines[5] == "   = hint: say what the value is when no threshold holds: `else: 1`"


def test_rendering_without_location_or_source_and_with_color() -> None:
    d = Diagnostic("E602", "--set kk: no such parameter", None, hint="did you mean `k`?")
    assert d.render() == "error[E602]: --set kk: no such parameter\n  = hint: did you mean `k`?"
    w = Diagnostic("W001", "input `foo` is never used", Loc("gone.reward", 3, 1, 3, 5))
    assert w.render({}) == "warning[W001]: input `foo` is never used\n --> gone.reward:3:1"
    colored = Diagnostic("E101", "unknown name `q`", Loc("a.reward", 1, 1, 1, 2)).render({"a.reward": "q"}, color=True)
    assert "\x1b[31m" in colored and colored.replace("\x1b[31m", "").replace("\x1b[1m", "").replace(
        "\x1b[0m", "").replace("\x1b[34m", "").startswith("error[E101]: unknown name `q`")


def test_rendering_expands_tabs_so_the_caret_stays_aligned() -> None:
    src = "\tcomponent c = lenn(completion)\n"
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="tab.reward")
    lines = ei.value.render().splitlines()
    assert lines[3] == "1 |  component c = lenn(completion)"
    assert lines[4].index("^") == lines[3].index("lenn")


@pytest.mark.parametrize("text, cells", [("ééé日本語", 9), ("😀", 2), ("e\u0301e\u0301", 2)])
def test_the_caret_stands_under_its_name_after_wide_and_combining_characters(text: str, cells: int) -> None:
    # a terminal draws 日 and 😀 in two cells and a combining accent in none: the caret counts cells, not code points
    src = f'component c in [0, 9] = len("{text}") + zz\n'
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="wide.reward")
    lines = ei.value.render().splitlines()
    assert lines[1] == f" --> wide.reward:1:{src.index('zz') + 1}"
    caret = lines[4]
    assert caret.index("^") == len("1 | ") + len('component c in [0, 9] = len("') + cells + len('") + ')
    assert caret.count("^") == 2


def test_the_diagnostics_module_examples() -> None:
    import doctest

    from rewardlang import diagnostics

    result = doctest.testmod(diagnostics)
    assert result.failed == 0 and result.attempted >= 7


def test_rendering_shows_the_right_line_after_a_form_feed_in_a_comment() -> None:
    src = "# page one\x0c page two\ncomponent c = lenn(completion)\n"
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="ff.reward")
    assert "2 | component c = lenn(completion)" in ei.value.render()
