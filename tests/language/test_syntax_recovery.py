"""Syntax errors, all in one run: after a syntax error the parser resumes at the next line that starts a
statement (panic-mode recovery), so each statement's error is reported, in file order, each located and hinted as
a lone one is; a statement left unfinished where the next one starts (an operator or `=` at the end of a line) is
said at the operator, not where the parser gave up inside the next statement. A spec that parses never takes this
path."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang import parser as P
from rewardlang.diagnostics import Diagnostic
from rewardlang.parser import ParseFailure, parse

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "specs").rglob("*.reward"))
UNCHECKED = "names, types and examples are checked once the spec parses"


def failures(src: str) -> list[Diagnostic]:
    with pytest.raises(ParseFailure) as ei:
        parse(src, "m.reward")
    diags = ei.value.diagnostics
    assert diags and ei.value.diagnostic is diags[0]
    for d in diags:
        assert d.loc is not None and d.loc.file == "m.reward"
    return diags


def where(diags: list[Diagnostic]) -> list[tuple[str, int, int]]:
    return [(d.code, d.loc.line, d.loc.column) for d in diags]


def test_every_statement_gets_its_own_syntax_error() -> None:
    src = ('component a in [0, 1] = len(completion) +* 2\n'
           'component b in [0, 1] = $\n'
           'let c = foo(\n'
           'component d in [0, 1] = "abc\n')
    diags = failures(src)
    assert where(diags) == [("E001", 1, 42), ("E002", 2, 25), ("E006", 3, 12), ("E007", 4, 25)]
    assert [d.message for d in diags] == ["unexpected '*'", "unexpected character '$'", "unclosed `(`",
                                          "unclosed string"]
    assert diags[0].hint.startswith("expected `(`, `+` or `-`")
    assert diags[2].hint == "the next statement starts at 4:1 (`component`) before it is closed: close it with `)`"
    assert diags[3].hint.startswith('a string closes on the line it opens')
    # the offsets are the file's: each caret's characters are the offending ones
    assert [src[d.loc.start:d.loc.end] for d in diags] == ["*", "$", "(", '"']
    # the checks after parsing did not run: the last error says so, once
    assert [d.notes for d in diags] == [[], [], [], [UNCHECKED]]


def test_errors_in_a_train_block_and_after_a_multi_line_expression() -> None:
    src = ('spec demo """\n'
           'let x = this line is the doc, not a statement $\n'   # inside a string: no statement, no error
           '"""\n'
           'let total = min(\n'
           '    len(completion),\n'
           '    10) +* 1\n'                                      # 6: after a bracketed expression over 3 lines
           'component a in [0, 1] = total / 10\n'
           'train {\n'
           '  learning_rate = 1e-5,\n'
           '  num_generations = $,\n'                            # 10: inside the train block
           '}\n'
           'component b in [0, 1] = [1, 2\n'                     # 12: the next statement starts inside `[`
           'component c in [0, 1] = count(completion, "x") ==\n'  # 13: an operator and nothing after it
           'reward = a + b\n'
           'example { completion: "abc", expect a = 1 +- }\n')   # 15: a tolerance without its value
    diags = failures(src)
    assert where(diags) == [("E001", 6, 10), ("E002", 10, 21), ("E006", 12, 25), ("E001", 13, 48),
                            ("E001", 15, 46)]
    assert diags[1].message == "unexpected character '$'"
    assert diags[2].hint == "the next statement starts at 13:1 (`component`) before it is closed: close it with `]`"
    assert diags[3].message == "missing operand after `==`"
    assert (diags[3].loc.end_line, diags[3].loc.end_column) == (13, 50)
    assert diags[4].message == "unexpected '}'"


def test_the_first_error_is_the_one_a_whole_parse_reports() -> None:
    src = "let a = 1\nlet b = 1 +* 2\nlet c = 2\nlet d = (\n"
    first = failures(src)[0]
    assert (first.code, first.message, first.loc.line, first.loc.column) == ("E001", "unexpected '*'", 2, 12)
    assert where(failures(src)) == [("E001", 2, 12), ("E006", 4, 9)]


# ---------------------------------------------------------------- an operator at the end of a statement


@pytest.mark.parametrize(("src", "message", "at", "next_at"), [
    # the case: it was `unexpected '='` at 2:7, `let` having been read as the operand of `+`
    ("let q = 1 +\nlet r = 2\n", "missing operand after `+`", (1, 11), "2:1 (`let`)"),
    ("component c = len(completion) *\ncomponent d = 1\n", "missing operand after `*`", (1, 31),
     "2:1 (`component`)"),
    ("let ok = len(completion) > 3 and\nreward = ok\n", "missing operand after `and`", (1, 30), "2:1 (`reward`)"),
    ("let ok = not\ninput prompt: text\n", "missing operand after `not`", (1, 10), "2:1 (`input`)"),
    ("let n = -\nc.weight = 2\n", "missing operand after `-`", (1, 9), "2:1 (`c`)"),
    ("let x = 2 **\ntrain { lr = 1 }\n", "missing operand after `**`", (1, 11), "2:1 (`train`)"),
    ("let x = 1 # a comment after it\n  # and a comment line\nlet y = x <=   # note\nexample { }\n",
     "missing operand after `<=`", (3, 11), "4:1 (`example`)"),
])
def test_an_operator_before_the_next_statement_is_said_at_the_operator(src: str, message: str, at: tuple,
                                                                       next_at: str) -> None:
    [d] = failures(src)
    assert (d.code, d.message, (d.loc.line, d.loc.column)) == ("E001", message, at)
    op = message.split("`")[1]
    assert d.loc.end_column == d.loc.column + len(op) and src[d.loc.start:d.loc.end] == op
    assert d.hint == (f"the statement runs on into the next one, at {next_at}: write the operand after `{op}`, "
                      f"or remove the `{op}`")


def test_an_equals_sign_without_its_value() -> None:
    [d] = failures("let x =\nlet y = 2\n")
    assert (d.code, d.message, d.loc.line, d.loc.column) == ("E001", "missing value after `=`", 1, 7)
    assert d.hint == "the statement runs on into the next one, at 2:1 (`let`): write the value after `=`"


def test_an_unfinished_statement_without_an_operator_is_said_at_the_next_statement() -> None:
    # what the whole parse says: the next statement's keyword, where the `=` had to come
    d, e = failures("component t in [0, 1]\ncomponent u in [0, 1] = $\n")
    assert (d.code, d.message, d.loc.line, d.loc.column, d.loc.end_column) == ("E001", "unexpected 'component'",
                                                                              2, 1, 10)
    assert d.hint == "expected `=`"
    assert where([e]) == [("E002", 2, 25)]


def test_an_operator_at_the_end_of_the_file_stays_E003() -> None:
    d = failures("let a = 1\nlet x = 1 +\n")[-1]
    assert (d.code, d.loc.line, d.loc.column) == ("E003", 2, 12)


# ---------------------------------------------------------------- where a spec is not cut


@pytest.mark.parametrize("src", [
    # a keyword read as a name inside an open bracket (not followed by what starts a statement)
    "let a = 1 +* 2\nlet b = max(1,\ninput)\n",
    "let a = 1 +* 2\nlet b = (\ninput if true else 0)\n",
    # `reward = ...` inside brackets: a keyword argument, a setting, an expectation
    "let a = 1 +* 2\nlet b = f(\nreward = 1)\n",
    "let a = 1 +* 2\nexample {\ncompletion: \"x\",\nreward = 1\n}\n",
    # an input's column on its own line
    "let a = 1 +* 2\ninput prompt: text\nfrom \"col\"\n",
    # a statement-looking line inside a triple-quoted string
    'let a = 1 +* 2\nlet doc = """\nlet b = $\n"""\n',
])
def test_a_line_that_may_continue_a_statement_does_not_start_one(src: str) -> None:
    assert where(failures(src)) == [("E001", 1, 12)]


def test_a_from_line_is_never_cut_at() -> None:
    # after an input, `from "col"` is its column: a whole parse reads `from "col" import x` so, and fails at `x`
    diags = failures('input prompt: text\nfrom "col" import x\nlet a = $\n')
    assert where(diags) == [("E001", 2, 19), ("E002", 3, 9)]
    assert diags[0].message == "unexpected 'x'" and diags[0].hint == "expected a string"


def test_a_keyword_line_indented_unlike_the_statements_is_not_cut_at() -> None:
    # the `$` on line 3 is not parsed as a statement of its own: the error of line 2's statement is its `(`
    diags = failures("let a = 1 +* 2\nlet b = f(1,\n    let c = $\n")
    assert where(diags) == [("E001", 1, 12), ("E006", 2, 10)]
    assert diags[1].hint == "the next statement starts at 3:5 (`let`) before it is closed: close it with `)`"


def test_brackets_in_strings_regexes_and_comments_do_not_count() -> None:
    # `reward =` at the start of a line counts as a statement only outside brackets: these are not brackets
    src = ('let a = count(completion, "(") + 1\n'
           'let b = count(completion, /[(]/) +* a # (\n'
           'reward = $\n')
    assert where(failures(src)) == [("E001", 2, 35), ("E002", 3, 10)]
    # a `/` after an operand divides (no /regex/ hides the `(` after it), so `reward =` is inside `f(`
    assert where(failures("let a = 1 +* 2\nlet b = f(x /(1 + y / 2)\nreward = $\n")) == [("E001", 1, 12),
                                                                                         ("E006", 2, 10)]


def test_statements_indented_alike_are_cut() -> None:
    assert where(failures("  let a = 1 +* 2\n  let b = $\n")) == [("E001", 1, 14), ("E002", 2, 11)]


def test_a_parse_failure_from_one_diagnostic_still_works() -> None:
    d = Diagnostic("E001", "syntax error", None)
    pf = ParseFailure(d)
    assert pf.diagnostics == [d] and pf.diagnostic is d and str(pf) == "syntax error"


# ---------------------------------------------------------------- the happy path, and robustness


@pytest.mark.parametrize("spec", SHIPPED, ids=lambda p: p.name)
def test_a_spec_that_parses_takes_no_recovery_path(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("recovery ran on a spec that parses")

    monkeypatch.setattr(P, "_recover", refuse)
    monkeypatch.setattr(P, "_statement_heads", refuse)
    parse(spec.read_text(encoding="utf-8"), str(spec))


def test_mutated_specs_give_sorted_distinct_located_errors() -> None:
    rng = random.Random(20240612)
    sources = [p.read_text(encoding="utf-8") for p in SHIPPED]
    failed = 0
    for _ in range(120):
        chars = list(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(chars))
            chars.insert(i, rng.choice(['(', ')', '[', ']', '{', '}', '"', '"""', '+', '*', ',', '=', '$', '\n',
                                        '/', '#', ' not ', '\nlet ', '\ncomponent x = ']))
        src = "".join(chars)
        try:
            parse(src, "m.reward")
            continue
        except ParseFailure as pf:
            diags = pf.diagnostics
        failed += 1
        keys = [(d.loc.line, d.loc.column) for d in diags]
        assert keys == sorted(keys)
        assert len({(d.code, *k) for d, k in zip(diags, keys)}) == len(diags)
        n_lines = src.count("\n") + 1
        for d in diags:
            assert d.code.startswith("E00") and 1 <= d.loc.line <= n_lines
            if d.loc.end > d.loc.start:  # located by offsets too: they agree with line and column
                assert src.count("\n", 0, d.loc.start) + 1 == d.loc.line
                assert d.loc.start - (src.rfind("\n", 0, d.loc.start) + 1) + 1 == d.loc.column
        assert [bool(d.notes) for d in diags] == [False] * (len(diags) - 1) + [True]
    assert failed > 60


def test_check_prints_and_counts_every_syntax_error(tmp_path: Path) -> None:
    from rewardlang.cli import app

    spec = tmp_path / "m.reward"
    spec.write_text('component a in [0, 1] = len(completion) +* 2\ncomponent b in [0, 1] = $\nlet q = 1 +\n'
                    'let r = 2\n')
    r = CliRunner().invoke(app, ["check", str(spec)])
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    assert f"error[E001]: unexpected '*'\n --> {spec}:1:42" in r.stderr
    assert f"error[E002]: unexpected character '$'\n --> {spec}:2:25" in r.stderr
    assert f"error[E001]: missing operand after `+`\n --> {spec}:3:11" in r.stderr
    assert f"{spec}: 3 error(s)" in r.stderr
