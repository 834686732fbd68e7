"""``parses`` and ``syntax_errors``: golden cases, the prefix scan against brute force, bad input, a spec."""

from __future__ import annotations

import ast
import io
import random
import time
import tokenize

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.api import Context, Span
from rewardlang.runtime.code import validity
from rewardlang.runtime.code.validity import first_violation, tree_sitter_errors
from rewardlang.runtime.components.dense import first_violation as first_violation_fn
from rewardlang.runtime.components.syntax import SyntaxParams, parses, syntax_errors, too_long

CPY = SyntaxParams()
TS = SyntaxParams(method="tree_sitter")


def spans(code: str, params: SyntaxParams = CPY) -> list[Span]:
    res = syntax_errors.fn([code], params=params, ctx=Context())
    assert res.errors == [None], res.errors
    return res.values[0]


def test_valid_code_has_no_spans() -> None:
    for code in ["", "# only a comment\n", "def f(x):\n    return x\n", "return 1\n", "x = 1"]:
        assert spans(code) == []
        assert spans(code, TS) == []
    assert parses.fn(["x = 1", "", "return 1"], params=None, ctx=Context()).values == [True, True, True]


def test_invalid_token_mid_file() -> None:
    code = "x = 1\ny = = 2\nz = 3\n"
    assert spans(code) == [Span(10, len(code), -1.0, "invalid syntax")]  # at the second "="
    assert spans(code, TS) == [Span(10, 11, -1.0, "ERROR")]
    assert parses.fn([code], params=None, ctx=Context()).values == [False]
    assert parses.fn([code], params=TS, ctx=Context()).values == [False]


def test_indentation_error_that_tree_sitter_accepts() -> None:
    code = "def f():\n    return 1\n  x = 2\n"
    assert spans(code, TS) == []  # tree-sitter recovers silently
    assert parses.fn([code], params=TS, ctx=Context()).values == [True]
    # CPython: the whole third line, from its start
    assert spans(code) == [Span(22, len(code), -1.0, "unindent does not match any outer indentation level")]
    assert parses.fn([code], params=CPY, ctx=Context()).values == [False]


def test_unclosed_paren_at_eof_marks_the_unfinished_statement() -> None:
    code = "x = 1\ntotal = sum(\n    xs,\n"
    # incomplete, not invalid: the span starts at the line where the unfinished statement begins
    assert spans(code) == [Span(6, len(code), -1.0, "'(' was never closed")]
    v = first_violation(code)
    assert v is not None and v.incomplete and v.line == 2
    for code, line in [("if x:\n", 1), ("def f():\n    y = 1\n    z = '''doc\n", 3), ("x = 1 \\\n", 1)]:
        v = first_violation(code)
        assert v is not None and v.incomplete and v.line == line, (code, v)


def test_error_reported_elsewhere_is_placed_where_the_code_breaks() -> None:
    # CPython says "'(' was never closed" at line 1; lines 1-2 are a viable prefix, line 3 is not
    code = "x = (1,\n 2\ndef g(): pass\n"
    assert spans(code)[0].start == code.index("def")
    v = first_violation(code)
    assert v is not None and v.line == 3 and not v.incomplete


def test_tree_sitter_missing_node_is_zero_width() -> None:
    assert spans("def f(:\n    pass\n", TS) == [Span(6, 6, -1.0, "MISSING )")]


def _incomplete_or_valid(text: str) -> bool:
    try:
        compile(text, "<t>", "exec", ast.PyCF_ONLY_AST | 0x4000, dont_inherit=True)
        return True
    except SyntaxError as e:
        return e.msg == "incomplete input"


def _brute(code: str) -> int | None:
    """First k such that lines[:k] is neither valid nor incomplete (compiled one by one). Text that ends inside a
    string is incomplete only when a string may stand where it starts (docs/components/syntax.md): the tokenize
    module finds the open string here, and an empty string with a line continuation takes its place."""
    lines = code.splitlines(keepends=True)
    for k in range(1, len(lines) + 1):
        text = "".join(lines[:k])
        if not _incomplete_or_valid(text):
            return k
        try:
            list(tokenize.generate_tokens(io.StringIO(text).readline))
        except tokenize.TokenError as e:
            if "string" in str(e.args[0]):
                row, col = e.args[1]
                at = sum(len(x) for x in text.splitlines(keepends=True)[:row - 1]) + col
                if not _incomplete_or_valid(text[:at] + "''\\\n"):
                    return k
    return None


BODY = ["x = 1", "def f(a):", "    return a", "if x:", "    y = (1,", "    2)", "else:", "    pass", "z = [",
        "]", "  w = 3", "q = = 1", "for i in r:", "    s += i", "class A:", "    b: int = 2", "@dec", "t = '''",
        "'''"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(BODY), min_size=1, max_size=70))
def test_prefix_scan_equals_brute_force(lines: list[str]) -> None:
    code = "\n".join(lines) + "\n"
    v = first_violation(code)
    try:
        compile(code, "<t>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        assert v is None
        return
    except SyntaxError:
        assert v is not None
    k = _brute(code)
    if k is None:
        assert v.incomplete
    else:
        assert not v.incomplete and v.line == k
        # the span starts on line k and everything before it is a viable prefix
        start_of_k = sum(len(x) for x in code.splitlines(keepends=True)[:k - 1])
        assert start_of_k <= v.start < start_of_k + len(code.splitlines(keepends=True)[k - 1])


def test_bisection_on_long_code() -> None:
    rng = random.Random(5)
    for _ in range(20):
        lines = ["x = 1"] * rng.randrange(60, 400)
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(["y = = 2", "  z = 3", "def (:", "else:"])
        code = "\n".join(lines) + "\n"
        v = first_violation(code)
        assert v is not None and v.line == _brute(code) == i + 1


def test_bad_inputs() -> None:
    nul = "x = 1\x00\n"
    assert spans(nul) == [Span(5, len(nul), -1.0, "source code string cannot contain null bytes")]
    # lone surrogates count as U+FFFD: fine in a string literal, invalid as a name
    assert spans("x = '\ud800'\n") == []
    assert spans("\ud800 = 1\n")[0].start == 0
    # nesting: CPython's parenthesis limit is a located syntax error; deeper recursion is "too deep"
    deep = "x = 1\n" + "(" * 300 + "1" + ")" * 300 + "\n"
    s = spans(deep)
    assert s[0].label == "too many nested parentheses" and s[0].end == len(deep)
    minus = "x = " + "-" * 150_000 + "1\n"
    s = spans(minus)
    assert s == [Span(0, len(minus), -1.0, s[0].label)] and "too deeply nested" in s[0].label
    assert parses.fn([minus], params=None, ctx=Context()).values == [False]
    # another language
    assert spans("public class A { int x = 1; }")[0].start == 7
    assert spans("public class A { int x = 1; }", TS) != []
    binary = bytes(range(256)).decode("latin-1")
    assert len(spans(binary)) == 1 and len(spans(binary, TS)) >= 1


def test_size_limit_and_timeout() -> None:
    big = "x = 1\n" * 50_000 + "y = = 2\n"  # 300 kB
    # longer than max_chars: not compiled, invalid from its start -- the completion's outcome, not an error
    res = syntax_errors.fn([big], params=CPY, ctx=Context())
    assert res.errors == [None] and res.values[0] == [Span(0, len(big), -1.0, too_long(len(big), 200_000))]
    assert parses.fn([big], params=CPY, ctx=Context()).values == [False]
    assert first_violation_fn.fn([big], params=CPY, ctx=Context()).values == [0]
    res = syntax_errors.fn([big], params=TS, ctx=Context())
    assert res.errors == [None] and res.values[0] == [Span(len(big) - 4, len(big) - 3, -1.0, "ERROR")]
    ok = SyntaxParams(max_chars=1_000_000)
    # running out of time is the machine's failure, not the code's: infrastructure (masked, never a score)
    res = syntax_errors.fn([big], params=ok, ctx=Context(timeout=1e-9))
    assert res.values == [None] and "time budget" in (res.errors[0] or "") and res.infra == [True]
    res = syntax_errors.fn([big], params=ok, ctx=Context(timeout=60))
    assert res.values[0] == [Span(len(big) - 8 + 4, len(big), -1.0, "invalid syntax")]


def test_never_executes_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\nimport os\nos.system('touch {marker}')\n"
    assert spans(code) == []
    assert not marker.exists()


def test_cache_is_transparent() -> None:
    codes = ["x = = 1", "x = 1", "if x:\n"]
    ctx = Context()
    a = syntax_errors.fn(codes, params=None, ctx=ctx).values
    b = syntax_errors.fn(codes, params=None, ctx=ctx).values  # from the cache
    c = syntax_errors.fn(codes, params=None, ctx=Context(use_cache=False)).values
    assert a == b == c
    assert ctx.cache.hits >= 3


def test_through_a_spec() -> None:
    import rewardlang

    prog = rewardlang.loads(
        'spec s "syntax"\n'
        'let code = code_block(completion, "python") or ""\n'
        'component syntax in [0, 1] = 1 if parses(code) else 0   spans syntax_errors(code)\n'
        'component ts in [0, 1] = 1 if parses(code, method="tree_sitter") else 0\n')
    good = "Here:\n```python\nx = 1\n```"
    bad = "Here:\n```python\nx = 1\n  y = 2\n```"
    out = prog.score(completion=[good, bad])
    assert list(out.components["syntax"]) == [1.0, 0.0]
    assert list(out.components["ts"]) == [1.0, 1.0]
    start = bad.index("  y")  # the code block ends before the closing fence's newline
    assert out.spans["syntax"][1] == [Span(start, bad.index("\n```", start), -1.0, "unexpected indent")]
    assert out.spans["syntax"][0] == []


def test_timing_is_bounded_for_one_megabyte() -> None:
    """1 MB of code through the tree-sitter method and through the cpython limit: no crash, a defined answer."""
    big = ("def f(x):\n    return x + 1\n" * 40_000)[:1_000_000]
    t = time.monotonic()
    assert isinstance(tree_sitter_errors(big), list)
    res = parses.fn([big], params=None, ctx=Context())
    assert res.values == [False] and res.errors == [None]
    assert time.monotonic() - t < 60  # generous: only guards against an unbounded scan


def test_too_deep_is_a_clean_exception() -> None:
    with pytest.raises(validity.TooDeep):
        validity.is_valid("x = " + "-" * 200_000 + "1\n")
