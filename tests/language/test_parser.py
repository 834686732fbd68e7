"""The parser: every construct becomes the right syntax node with its source location; syntax errors are
located diagnostics (E001 unexpected token, E002 unexpected character, E003 unexpected end of file, E005 invalid
literal) with expected-token hints."""

from __future__ import annotations

import pytest

from rewardlang import syntax as S
from rewardlang.parser import ParseFailure, parse


def one(src: str) -> S.Stmt:
    mod = parse(src, "t.reward")
    assert len(mod.body) == 1, mod.body
    return mod.body[0]


def expr(src: str) -> S.Expr:
    stmt = one(f"let v = {src}")
    assert isinstance(stmt, S.Let)
    return stmt.value


def text_of(src: str, loc: S.Loc) -> str:
    return src[loc.start:loc.end]


def fail(src: str) -> "Diagnostic":  # noqa: F821
    with pytest.raises(ParseFailure) as ei:
        parse(src, "bad.reward")
    d = ei.value.diagnostic
    assert d.loc is not None and d.loc.file == "bad.reward"
    return d


# ---------------------------------------------------------------- statements


def test_spec_statement_with_and_without_doc() -> None:
    s = one('spec codepo "the doc"')
    assert isinstance(s, S.SpecStmt) and s.name == "codepo" and s.doc == "the doc"
    assert (s.loc.line, s.loc.column, s.loc.end_line, s.loc.end_column) == (1, 1, 1, 22)
    s = one("spec bare")
    assert s.doc is None and s.name == "bare"


def test_import_and_from_import_with_name_locations() -> None:
    s = one('import "lib/x.reward"')
    assert isinstance(s, S.Import) and s.path == "lib/x.reward" and s.names is None
    src = 'from "lib.reward" import alpha, beta'
    s = one(src)
    assert isinstance(s, S.Import) and s.path == "lib.reward"
    assert [n for n, _ in s.names] == ["alpha", "beta"]
    (_, la), (_, lb) = s.names
    assert (la.line, la.column, la.end_column) == (1, 26, 31)
    assert text_of(src, la) == "alpha" and text_of(src, lb) == "beta"


def test_param_with_type_default_and_doc() -> None:
    s = one('param gamma: number = 0.5 "the discount"')
    assert isinstance(s, S.Param)
    assert (s.name, s.type.text, s.doc) == ("gamma", "number", "the discount")
    assert s.default == S.Number(None, 0.5, "0.5")  # type: ignore[arg-type]
    s = one("param flag = true")
    assert s.type is None and s.doc is None and s.default == S.Bool(None, True)  # type: ignore[arg-type]


def test_input_types_and_column() -> None:
    s = one('input ref: list[text]? from "solutions"')
    assert isinstance(s, S.Input)
    assert (s.name, s.type.text, s.column) == ("ref", "list[text]?", "solutions")
    assert (s.type.loc.column, s.type.loc.end_column) == (12, 23)
    s = one("input n: number")
    assert (s.type.text, s.column) == ("number", None)


def test_component_with_range_and_all_clauses() -> None:
    src = ("component acc in [0, 1] = codebleu(completion, ref)\n"
           "    on_error 0\n"
           "    timeout 2.5\n"
           "    spans matches(completion, /x/)")
    s = one(src)
    assert isinstance(s, S.Component) and s.name == "acc"
    assert s.range == (S.Number(None, 0.0, "0"), S.Number(None, 1.0, "1"))  # type: ignore[arg-type]
    assert isinstance(s.value, S.Call) and s.value.func == "codebleu"
    assert s.on_error == S.Number(None, 0.0, "0")  # type: ignore[arg-type]
    assert s.timeout == S.Number(None, 2.5, "2.5")  # type: ignore[arg-type]
    assert isinstance(s.spans, S.Call) and s.spans.func == "matches"
    assert (s.loc.line, s.loc.end_line) == (1, 4)
    assert set(s.clause_locs) == {"on_error", "timeout", "spans"}
    assert s.clause_locs["timeout"].line == 3
    # clauses may come in any order; no range
    s = one("component c = 1 spans x on_error none")
    assert s.range is None and s.timeout is None and isinstance(s.on_error, S.NoneLit)


def test_weight_reward_and_advantage() -> None:
    s = one("acc.weight = linear(2.0 -> 1.0, steps=10)")
    assert isinstance(s, S.Weight) and s.component == "acc"
    call = s.value
    assert isinstance(call, S.Call) and call.func == "linear"
    assert isinstance(call.args[0], S.Arrow) and call.args[0].left == S.Number(None, 2.0, "2.0")  # type: ignore
    assert call.args[1] == S.Keyword(None, "steps", S.Number(None, 10.0, "10"))  # type: ignore[arg-type]

    s = one("reward = a + b")
    assert isinstance(s, S.Reward) and isinstance(s.value, S.BinOp)

    s = one("advantage over group(prompt) each component = (x - mean) / (std + 1e-6) then sum "
            "then over batch: center")
    assert isinstance(s, S.Advantage)
    assert (s.scope.kind, s.scope.key, s.each_component) == ("group", "prompt", True)
    assert len(s.stages) == 3
    assert s.stages[0].scope is None and isinstance(s.stages[0].value, S.BinOp)
    assert s.stages[1].value == S.Name(None, "sum")  # type: ignore[arg-type]
    assert s.stages[2].scope == S.Scope(None, "batch", None) and s.stages[2].value == S.Name(None, "center")  # type: ignore
    s = one("advantage over batch = x")
    assert s.scope == S.Scope(None, "batch", None) and not s.each_component  # type: ignore[arg-type]


def test_example_inputs_expectations_and_tolerances() -> None:
    s = one('example "ok" { completion: "a", prompt: ["p", "q"], expect acc = 1 +- 0.5, '
            'expect reward = [1, 2] ± 1e-3, rep = 0, }')
    assert isinstance(s, S.Example) and s.name == "ok"
    assert [i.name for i in s.inputs] == ["completion", "prompt"]
    assert isinstance(s.inputs[1].value, S.ListLit) and len(s.inputs[1].value.items) == 2
    assert [(e.name, e.tolerance) for e in s.expects] == [
        ("acc", S.Number(None, 0.5, "0.5")), ("reward", S.Number(None, 1e-3, "1e-3")), ("rep", None)]  # type: ignore
    s = one("example {}")
    assert s.name is None and s.inputs == [] and s.expects == []


def test_train_section() -> None:
    s = one('train { algorithm = "grpo", num_generations = 4, }')
    assert isinstance(s, S.Section) and s.kind == "train"
    assert [(i.name, i.value) for i in s.items] == [
        ("algorithm", S.String(None, "grpo", '"grpo"')), ("num_generations", S.Number(None, 4.0, "4"))]  # type: ignore
    assert one("preference { x = 1 }").kind == "preference"


def test_statement_order_and_multiline_statements() -> None:
    src = "let a = f(\n    1,\n    2\n)\ncomponent c = a\n"
    mod = parse(src, "t.reward")
    assert [type(s).__name__ for s in mod.body] == ["Let", "Component"]
    a = mod.body[0]
    assert (a.loc.line, a.loc.column, a.loc.end_line, a.loc.end_column) == (1, 1, 4, 2)
    assert text_of(src, a.loc) == "let a = f(\n    1,\n    2\n)"
    assert mod.body[1].loc.line == 5


# ---------------------------------------------------------------- expressions


def test_literals() -> None:
    assert expr("1_000.5e2") == S.Number(None, 100050.0, "1_000.5e2")  # type: ignore[arg-type]
    assert expr(".5") == S.Number(None, 0.5, ".5")  # type: ignore[arg-type]
    assert expr('"a\\n\\"b"') == S.String(None, 'a\n"b', '"a\\n\\"b"')  # type: ignore[arg-type]
    assert expr('"""two\nlines"""').value == "two\nlines"
    r = expr(r"/Step\s\d+:/im")
    assert isinstance(r, S.Regex) and (r.pattern, r.flags) == (r"Step\s\d+:", "im")
    assert expr(r"/a\/b/") == S.Regex(None, r"a\/b", "", r"/a\/b/")  # type: ignore[arg-type]
    assert expr("true") == S.Bool(None, True) and expr("false") == S.Bool(None, False)  # type: ignore[arg-type]
    assert isinstance(expr("none"), S.NoneLit)
    assert expr("(1, 2)") == S.TupleLit(None, [S.Number(None, 1.0, "1"), S.Number(None, 2.0, "2")])  # type: ignore
    assert expr("(1,)") == S.TupleLit(None, [S.Number(None, 1.0, "1")])  # type: ignore[arg-type]
    assert expr("[]") == S.ListLit(None, [])  # type: ignore[arg-type]
    assert expr("(7)") == S.Number(None, 7.0, "7")  # type: ignore[arg-type]


def _n(v: float) -> S.Number:
    return S.Number(None, float(v), str(v))  # type: ignore[arg-type]


def _name(x: str) -> S.Name:
    return S.Name(None, x)  # type: ignore[arg-type]


def test_arithmetic_precedence_and_associativity() -> None:
    assert expr("1 + 2 * 3") == S.BinOp(None, "+", _n(1), S.BinOp(None, "*", _n(2), _n(3)))  # type: ignore
    assert expr("1 - 2 - 3") == S.BinOp(None, "-", S.BinOp(None, "-", _n(1), _n(2)), _n(3))  # type: ignore
    # ** binds tighter than unary minus on its left and is right-associative
    assert expr("-2 ** 2") == S.Unary(None, "-", S.BinOp(None, "**", _n(2), _n(2)))  # type: ignore
    assert expr("2 ** 3 ** 2") == S.BinOp(None, "**", _n(2), S.BinOp(None, "**", _n(3), _n(2)))  # type: ignore
    assert expr("2 ** -1") == S.BinOp(None, "**", _n(2), S.Unary(None, "-", _n(1)))  # type: ignore
    assert expr("a % b / c") == S.BinOp(None, "/", S.BinOp(None, "%", _name("a"), _name("b")), _name("c"))  # type: ignore


def test_boolean_comparison_and_conditional_precedence() -> None:
    a, b, c, d, e = (_name(x) for x in "abcde")
    assert expr("a or b and c") == S.BoolOp(None, "or", a, S.BoolOp(None, "and", b, c))  # type: ignore
    assert expr("not a == b") == S.Not(None, S.Compare(None, "==", a, b))  # type: ignore
    assert expr("a + 1 < b") == S.Compare(None, "<", S.BinOp(None, "+", a, _n(1)), b)  # type: ignore
    got = expr("a if b else c if d else e")
    assert got == S.IfExpr(None, b, a, S.IfExpr(None, d, c, e))  # type: ignore
    assert expr("a or b if c else d") == S.IfExpr(None, c, S.BoolOp(None, "or", a, b), d)  # type: ignore


def test_postfix_index_attr_and_calls() -> None:
    ix = expr("words(x)[0]")
    assert isinstance(ix, S.Index) and ix.index == _n(0)
    assert isinstance(ix.target, S.Call) and ix.target.func == "words"
    assert ix.target.args == [S.Positional(None, _name("x"))]  # type: ignore[arg-type]
    assert expr("acc.weight") == S.Attr(None, _name("acc"), "weight")  # type: ignore
    src = "let v = step(x, <= 0.2: 0, > 1: 2, else: 1)"
    call = one(src).value
    assert isinstance(call, S.Call) and call.func == "step"
    assert [type(a).__name__ for a in call.args] == ["Positional", "Arm", "Arm", "ElseArm"]
    assert (call.args[1].op, call.args[2].op) == ("<=", ">")
    assert (call.func_loc.column, call.func_loc.end_column) == (9, 13)
    assert text_of(src, call.args[1].loc) == "<= 0.2: 0"
    assert text_of(src, call.args[3].loc) == "else: 1"
    call = expr("piecewise(x, 0 -> 0, 1 -> 1,)")
    assert [type(a).__name__ for a in call.args] == ["Positional", "Arrow", "Arrow"]


def test_comprehension_argument() -> None:
    call = expr("sum(w * n for n, w in [(2, 0.4), (3, 0.4)] if n > 2)")
    (comp,) = call.args
    assert isinstance(comp, S.Comprehension)
    assert comp.targets == ["n", "w"]
    assert isinstance(comp.iter, S.ListLit) and len(comp.iter.items) == 2
    assert comp.cond == S.Compare(None, ">", _name("n"), _n(2))  # type: ignore[arg-type]
    assert comp.value == S.BinOp(None, "*", _name("w"), _name("n"))  # type: ignore[arg-type]


def test_expression_locations_are_exact() -> None:
    src = 'let v = 1 + count(completion, "Thus")\n'
    v = parse(src, "t.reward").body[0].value
    assert isinstance(v, S.BinOp)
    assert text_of(src, v.loc) == '1 + count(completion, "Thus")'
    call = v.right
    assert (call.loc.line, call.loc.column, call.loc.end_column) == (1, 13, 38)
    arg = call.args[0]
    assert text_of(src, arg.loc) == "completion" and (arg.loc.column, arg.loc.end_column) == (19, 29)
    # a later line: line and column of the token on that line, offsets into the whole source
    src2 = "let a = 1\n\n  let b = foo\n"
    b = parse(src2, "t.reward").body[1]
    assert (b.value.loc.line, b.value.loc.column, b.value.loc.end_column) == (3, 11, 14)
    assert text_of(src2, b.value.loc) == "foo"


def test_comments_are_collected_with_position_and_kind() -> None:
    src = "# head\nlet a = 1  # trailing\n  # indented own line\n"
    mod = parse(src, "t.reward")
    assert [(c.line, c.column, c.text, c.own_line) for c in mod.comments] == [
        (1, 1, "# head", True), (2, 12, "# trailing", False), (3, 3, "# indented own line", True)]
    assert len(mod.body) == 1


def test_newlines_are_whitespace_and_empty_source_parses() -> None:
    assert parse("", "e.reward").body == []
    assert parse("# only a comment\n", "e.reward").body == []
    a = parse("let\na\n=\n1", "t.reward").body[0]
    assert isinstance(a, S.Let) and a.name == "a" and (a.loc.line, a.loc.end_line) == (1, 4)
    crlf = parse("let a = 1\r\nlet b = 2\r\n", "t.reward").body
    assert [s.name for s in crlf] == ["a", "b"] and crlf[1].loc.line == 2


# ---------------------------------------------------------------- syntax errors


def test_unexpected_token_is_E001_with_location_and_expected_tokens() -> None:
    d = fail("let a = 1\nlet b = 1 +* 2\n")
    assert d.code == "E001"
    assert d.message == "unexpected '*'"
    assert (d.loc.line, d.loc.column, d.loc.end_line, d.loc.end_column) == (2, 12, 2, 13)
    # at most eight expected tokens are listed, then an ellipsis
    assert d.hint == "expected `(`, `+` or `-`, `[`, `false`, `none`, `true`, a /regex/, a name, …"


def test_missing_name_is_E001_expecting_a_name() -> None:
    d = fail("let 1 = 2")
    assert (d.code, d.message, d.loc.line, d.loc.column) == ("E001", "unexpected '1'", 1, 5)
    assert d.hint == "expected a name"


def test_keyword_in_the_wrong_place_is_E001() -> None:
    d = fail("component c = 1\nreward reward = 2")
    assert (d.code, d.loc.line, d.loc.column) == ("E001", 2, 8)
    assert d.hint == "expected `=`"


def test_unexpected_character_is_E002() -> None:
    d = fail("component c = 1 $ 2")
    assert d.code == "E002" and d.message == "unexpected character '$'"
    assert (d.loc.line, d.loc.column, d.loc.end_column) == (1, 17, 18)
    d = fail("let x = 1\n\tlet y = @")
    assert (d.code, d.loc.line, d.loc.column) == ("E002", 2, 10)
    assert d.hint is not None and d.hint.startswith("expected ") and "a string" in d.hint


def test_an_unclosed_string_is_E007_at_its_opening_quote() -> None:
    d = fail('let a = 1\nlet x = "abc\nlet y = 2')
    assert (d.code, d.message, d.loc.line, d.loc.column, d.loc.end_column) == ("E007", "unclosed string", 2, 9, 10)
    assert d.hint.startswith('a string closes on the line it opens: end it with `"`')
    d = fail('let a = 1\nlet x = """abc\n\nlet y = 2\n')  # triple-quoted: said at its three quotes
    assert (d.code, d.loc.line, d.loc.column, d.loc.end_column) == ("E007", 2, 9, 12)
    assert d.hint == 'the file ends before it is closed: close it with `"""`'


def test_unterminated_regex_gets_the_regex_hint() -> None:
    hint = "a /regex/ must close on the same line (escape `/` inside it as `\\/`)"
    d = fail("let x = count(completion, /abc)\n")
    assert (d.code, d.message, d.hint) == ("E002", "unexpected character '/'", hint)
    assert (d.loc.line, d.loc.column, d.loc.end_column) == (1, 27, 28)  # at the opening `/`
    # the line ends before the closing `/` (a regex cannot continue on the next line), also at the end of the file
    d = fail('let a = 1\nlet x = count(completion, /ab\\/c,\n  "d/")\n')
    assert (d.code, d.loc.line, d.loc.column, d.hint) == ("E002", 2, 27, hint)
    d = fail("let x = 1 + /ab")
    assert (d.code, d.loc.line, d.loc.column, d.hint) == ("E002", 1, 13, hint)
    d = fail("let x = [/a\\/]")  # the escaped `/` does not close it
    assert (d.code, d.loc.column, d.hint) == ("E002", 10, hint)


def test_a_slash_that_cannot_start_a_regex_stays_an_unexpected_operator() -> None:
    # a regex never starts with a space, `*` or `/`: these are operators in the wrong place, not regexes
    for src, column in (("let x = 1 + / 2", 13), ("let x = [1, //]", 13), ("let x = 2 * /* 3", 13),
                        ("let x = count(completion, /", 27)):
        d = fail(src)
        assert (d.code, d.message, d.loc.column) == ("E001", "unexpected '/'", column), src
        assert d.hint is not None and d.hint.startswith("expected "), src  # what may come, not the regex hint
    # a division whose right side is missing is not a regex either
    d = fail("let x = 4 / )")
    assert (d.code, d.message) == ("E006", "unmatched `)`")  # no bracket is open: said as CPython says it


def test_unexpected_end_of_file_is_E003_at_the_end() -> None:
    d = fail("let a = 1\nlet x = 1 +\n")
    assert d.code == "E003" and d.message == "unexpected end of file"
    assert (d.loc.line, d.loc.column) == (2, 12)
    d = fail("spec")
    assert (d.code, d.loc.line, d.loc.column, d.hint) == ("E003", 1, 5, "expected a name")
    d = fail("let x = ")
    assert (d.code, d.loc.line, d.loc.column) == ("E003", 1, 9)
    assert d.hint == "expected `(`, `+` or `-`, `[`, `false`, `none`, `not`, `true`, a /regex/, …"


def test_end_of_file_location_after_a_form_feed() -> None:
    d = fail("# page\x0cbreak\nlet x = 1 *")
    assert d.code == "E003" and (d.loc.line, d.loc.column) == (2, 12)
    d = fail("# page\x0cbreak\nlet x = (1")
    assert d.code == "E006" and (d.loc.line, d.loc.column) == (2, 9)


# ------------------------------------------------------------- an unclosed bracket, said at the bracket (issue 37)
@pytest.mark.parametrize(("src", "message", "at", "hint"), [
    # the case: the parser stopped at the next line's `component`, never mentioning the `(`
    ("component a = 1\ncomponent b = min(len(completion),\ncomponent c = 2\n", "unclosed `(`", (2, 18),
     "the next statement starts at 3:1 (`component`) before it is closed: close it with `)`"),
    ("component x = [1, 2\nlet y = 3\n", "unclosed `[`", (1, 15),
     "the next statement starts at 2:1 (`let`) before it is closed: close it with `]`"),
    ("train {\n  lr = 1\n\ncomponent c = 1\n", "unclosed `{`", (1, 7),
     "the next statement starts at 4:1 (`component`) before it is closed: close it with `}`"),
    ("component a = f(x\nacc.weight = 2\n", "unclosed `(`", (1, 16),
     "the next statement starts at 2:1 (`acc`) before it is closed: close it with `)`"),
    ("let a = 1\nlet x = (1, 2\n", "unclosed `(`", (2, 9), "the file ends before it is closed: close it with `)`"),
    ("let x = f([1, (2\n", "unclosed `(`", (1, 15), "the file ends before it is closed: close it with `)`"),
    ("component b = min([1, 2, 3)\n", "closing `)` does not match `[`", (1, 27),
     "`[` opened at 1:19 is closed by `]`: close it before this `)`"),
    ("component b = 1)\n", "unmatched `)`", (1, 16), "no bracket is open here: remove it, or open one before it"),
])
def test_an_unclosed_or_mismatched_bracket_is_E006_at_the_bracket(src: str, message: str, at: tuple, hint: str
                                                                  ) -> None:
    d = fail(src)
    assert (d.code, d.message, (d.loc.line, d.loc.column), d.hint) == ("E006", message, at, hint)
    assert d.loc.end_column == d.loc.column + 1  # the caret under the bracket alone


@pytest.mark.parametrize("src", [
    'let x = count(completion, "(") + 1\ncomponent c = x\n',            # a bracket in a string
    "let x = count(completion, /[(]/) + 1\ncomponent c = x\n",          # a bracket in a regex
    "# f(\nlet x = 1\ncomponent c = x\n",                                # a bracket in a comment
])
def test_brackets_in_strings_regexes_and_comments_are_not_brackets(src: str) -> None:
    parse(src, "t.reward")


def test_an_expression_over_several_lines_keeps_its_own_error() -> None:
    """A bracket still open where the parser stops, but no statement started since: the error is the token's."""
    d = fail("component c = min(len(completion),\n   2\n   3)\n")
    assert (d.code, d.message, d.loc.line) == ("E001", "unexpected '3'", 3)


def test_invalid_string_literal_is_E005() -> None:
    d = fail('let a = 1\nlet x = "\\N{no such character}"')
    assert d.code == "E005" and d.message.startswith("invalid string literal")
    assert (d.loc.line, d.loc.column, d.loc.end_column) == (2, 9, 32)


def test_repeated_component_clause_is_reported_at_the_second_clause() -> None:
    d = fail("component c = 1\n  on_error 0\n  on_error 1")
    assert d.code == "E216" and d.message == "`on_error` is given twice"
    assert (d.loc.line, d.loc.column) == (3, 3)


def test_absurdly_deep_nesting_is_a_diagnostic_not_a_crash() -> None:
    d = fail("let x = " + "-" * 5000 + "1")
    assert d.code == "E001" and "nested too deeply" in d.message
    assert d.loc is not None and d.loc.line == 1 and d.loc.column > 100  # where the nesting got too deep


def test_nesting_limit_does_not_depend_on_the_recursion_limit() -> None:
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)  # as a host program (or an analyzer) may have done
    try:
        d = fail("let x = " + "-" * 5000 + "1")
    finally:
        sys.setrecursionlimit(old)
    assert d.code == "E001" and "nested too deeply" in d.message


def test_reasonable_nesting_compiles_and_scores() -> None:
    import rewardlang

    src = ("spec s\ninput completion: text\ncomponent a = " + "abs(" * 150 + "len(completion)" + ")" * 150
           + "\nreward = a\n")
    assert rewardlang.loads(src).score(completion=["abc"]).total[0] == 3
