"""Property tests (hypothesis): batch-size invariance, deduplication and caching change nothing, the Numba and
Python Distinct-n agree exactly (whitespace included), and ``fmt`` is idempotent and keeps the meaning of the
shipped specs and of generated ones."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rewardlang
from rewardlang import syntax as S
from rewardlang.diagnostics import SpecError
from rewardlang.fmt import format_source
from rewardlang.parser import parse
from rewardlang.runtime.components.text import distinct_py
from rewardlang.runtime.ngrams import distinct_words
from rewardlang.compiler import load_program

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(str(p) for p in (ROOT / "specs").rglob("*.reward"))
MAIN_SPECS = [p for p in SHIPPED if "/lib/" not in p]

WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- completions

PIECES = ["<reasoning>", "</reasoning>", "<answer>", "</answer>", "Step 1:", "Step 2:", "Thus", "Therefore", "→",
          "(1)", "a)", "1.", "```python\n", "```\n", "```", "print(x)", "x = 1", "TODO", "a", "b", "a b", " ", "\n",
          "\t", "\u00a0", "\u2028", "é", "中", "!", "0123456789"]

completions = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=12).map("".join)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def assert_same_scores(x: Any, y: Any, rows: list[int] | None = None) -> None:
    """ScoreResults equal (NaN == NaN); ``rows`` picks the rows of ``x`` that ``y`` holds."""
    idx = np.arange(len(x.total)) if rows is None else np.asarray(rows)
    assert _same(x.total[idx], y.total)
    assert set(x.components) == set(y.components)
    for k in x.components:
        assert _same(x.components[k][idx], y.components[k]), k
        assert x.masked[k][idx].tolist() == y.masked[k].tolist(), k
        assert [x.errors[k][i] for i in idx] == list(y.errors[k]), k
    for k in x.spans:
        assert [x.spans[k][i] for i in idx] == list(y.spans[k]), k


# a spec with none, errors, on_error, ranges, spans, and functions with per-call deduplication
RICH = '''
let a = tag(completion, "answer")
let zero = len(completion) * 0
component n = len(a) or -1
component masked = len(strip(a))
component err = 1 / (len(completion) - 5)
    on_error -1
component bounded in [0, 3] = count(completion, /Step \\d+:/, "Thus")
component rep = distinct(words(completion), 2)
component marked = 1
    spans matches(code_block(completion, "python") or "", /print/)
'''


@pytest.fixture(scope="module")
def rich():
    return rewardlang.loads(RICH)


@pytest.fixture(scope="module")
def codepo():
    return rewardlang.load(str(ROOT / "specs" / "codepo_text.reward"))


@FAST
@given(batch=st.lists(completions, min_size=1, max_size=8))
def test_batch_scores_equal_row_by_row_scores(rich, codepo, batch: list[str]) -> None:
    for prog in (rich, codepo):
        prompts = [f"p{i}" for i in range(len(batch))]
        whole = prog.score(completion=batch, prompt=prompts) if prog is codepo else prog.score(completion=batch)
        for i, c in enumerate(batch):
            one = prog.score(completion=[c], prompt=[prompts[i]]) if prog is codepo else prog.score(completion=[c])
            assert_same_scores(whole, one, [i])


def test_large_batch_equals_row_by_row(rich, codepo) -> None:
    # above the Numba threshold of distinct() (256 unique rows), where rows one by one take the Python path
    rng = random.Random(1234)
    batch = ["".join(rng.choice(PIECES) for _ in range(rng.randrange(12))) + f" w{rng.randrange(60)}"
             for _ in range(400)]
    assert len(set(batch)) > 256
    for prog in (rich, codepo):
        whole = prog.score(completion=batch, prompt=batch)
        for i, c in enumerate(batch):
            assert_same_scores(whole, prog.score(completion=[c], prompt=[c]), [i])


@FAST
@given(batch=st.lists(completions, min_size=1, max_size=6), data=st.data())
def test_duplicated_rows_score_like_unique_rows(rich, codepo, batch: list[str], data: st.DataObject) -> None:
    uniq = list(dict.fromkeys(batch))
    picks = data.draw(st.lists(st.integers(0, len(uniq) - 1), min_size=1, max_size=20))
    dup = [uniq[i] for i in picks]
    for prog in (rich, codepo):
        base = prog.score(completion=uniq, prompt=uniq)
        out = prog.score(completion=dup, prompt=dup)
        assert out.stats["unique_rows"] == len(set(dup))
        assert_same_scores(base, out, picks)
        # scoring again (warm caches) changes nothing
        assert_same_scores(out, prog.score(completion=dup, prompt=dup))


@FAST
@given(groups=st.lists(st.lists(completions, min_size=1, max_size=4), min_size=1, max_size=4))
def test_group_advantages_do_not_depend_on_the_other_groups(codepo, groups: list[list[str]]) -> None:
    batch = [c for g in groups for c in g]
    keys = [f"g{k}" for k, g in enumerate(groups) for _ in g]
    whole = codepo.score(completion=batch, prompt=keys).advantages
    start = 0
    for k, g in enumerate(groups):
        alone = codepo.score(completion=g, prompt=[f"g{k}"] * len(g)).advantages
        assert np.allclose(whole[start:start + len(g)], alone, atol=1e-12, equal_nan=True)
        start += len(g)


# ---------------------------------------------------------------- Distinct-n: Numba == Python


def test_the_whitespace_set_is_python_str_split() -> None:
    # every character Python splits on, alone and in runs, between words
    texts = [f"a{w}b{w}a{w}{w}b" for w in WHITESPACE] + ["a" + WHITESPACE + "b a" + WHITESPACE[::-1] + "b",
                                                           WHITESPACE, "", "word"]
    # and characters that are not whitespace though they look alike (zero width space, word joiner, BOM, ...)
    lookalikes = "\u200b\u2060\ufeff\u180e\u00ad\x00\x7f"
    texts += [f"a{c}b a{c}b" for c in lookalikes]
    for n in (1, 2, 3):
        expected = [distinct_py(t.split(), n) for t in texts]
        assert distinct_words(texts, n).tolist() == expected
    assert len(WHITESPACE) == 29  # \t\n\v\f\r, \x1c-\x1f, space, \x85, \xa0, \u1680, \u2000-\u200a, ...


unicode_words = st.lists(
    st.one_of(st.text(st.characters(blacklist_categories=()), min_size=1, max_size=4),
              st.sampled_from(["a", "b", "ab", "é", "中", "\ud800", "𝔘"])),
    max_size=30)
texts_with_whitespace = st.builds(
    lambda words, seps, lead: lead + "".join(w + s for w, s in zip(words, seps)),
    unicode_words, st.lists(st.text(st.sampled_from(WHITESPACE), min_size=1, max_size=3), min_size=30, max_size=30),
    st.text(st.sampled_from(WHITESPACE), max_size=2))


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.one_of(texts_with_whitespace, st.text(st.characters(blacklist_categories=()))),
                      min_size=1, max_size=8),
       n=st.integers(1, 5))
def test_numba_and_python_distinct_agree_exactly(texts: list[str], n: int) -> None:
    assert distinct_words(texts, n).tolist() == [distinct_py(t.split(), n) for t in texts]


def test_numba_distinct_of_none_is_one() -> None:
    assert distinct_words([None, "a a"], 2).tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- fmt


def _inputs_for(prog: Any, completions: list[str], rng: random.Random) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {"completion": completions}
    n = len(completions)
    for inp in prog.inputs:
        if inp.name == "completion" or not inp.used:
            continue
        if inp.type in ("text", "code"):
            col = [rng.choice(["", "3", "print(3)", "Add 1 and 2.", "x"]) for _ in range(n)]
        elif inp.type == "number":
            col = [float(rng.randrange(10)) for _ in range(n)]
        elif inp.type == "bool":
            col = [rng.random() < 0.5 for _ in range(n)]
        elif inp.type == "group":
            col = [rng.choice("ab") for _ in range(n)]
        else:
            col = [[] for _ in range(n)]
        if inp.nullable:
            col = [None if rng.random() < 0.2 else v for v in col]
        cols[inp.name] = col
    return cols


@pytest.mark.parametrize("path", SHIPPED, ids=[Path(p).name for p in SHIPPED])
def test_fmt_is_idempotent_on_shipped_specs(path: str) -> None:
    src = Path(path).read_text(encoding="utf-8")
    once = format_source(src, path)
    assert format_source(once, path) == once
    assert shape(parse(once, path).body) == shape(parse(src, path).body)
    assert [c.text for c in parse(once, path).comments] == [c.text for c in parse(src, path).comments]


@pytest.mark.parametrize("path", MAIN_SPECS, ids=[Path(p).name for p in MAIN_SPECS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(completions, min_size=1, max_size=6), seed=st.integers(0, 10**6))
def test_fmt_keeps_the_meaning_of_shipped_specs(path: str, batch: list[str], seed: int) -> None:
    src = Path(path).read_text(encoding="utf-8")
    before = _load_cached(path, src)
    after = _load_cached(path, format_source(src, path))
    if not before.missing_resources():  # a spec whose model is missing is refused by score() (E603)
        cols = _inputs_for(before, batch, random.Random(seed))
        assert_same_scores(before.score(**cols), after.score(**cols))
    else:
        assert [d.message for d in before.missing_resources()] == [d.message for d in after.missing_resources()]
    assert before.params == after.params and before.train == after.train
    assert [c.name for c in before.components] == [c.name for c in after.components]
    assert before.weights(7) == after.weights(7)


def shape(x: Any) -> Any:
    """A syntax tree without its source locations, for comparing trees."""
    if isinstance(x, S.Loc):
        return None
    if isinstance(x, (S.Node, S.Comment)):
        return (type(x).__name__,) + tuple(shape(getattr(x, f)) for f in x.__dataclass_fields__
                                           if f not in ("loc", "func_loc", "clause_locs"))
    if isinstance(x, (list, tuple)):
        return tuple(shape(i) for i in x)
    return x


_CACHE: dict[tuple[str, str], Any] = {}


def _load_cached(path: str, src: str) -> Any:
    key = (path, src)
    if key not in _CACHE:
        _CACHE[key] = load_program(path, source=src)
    return _CACHE[key]


# ---- generated specs: random expressions, written with random (often redundant) parentheses, spacing and
# comments; fmt must give the same syntax tree, be idempotent, and compile to a program with the same scores.


def _sp(draw: Any) -> str:
    return draw(st.sampled_from([" ", " ", "  ", "\n    ", " \t"]))


def _paren(draw: Any, text: str, compound: bool) -> str:
    # compound sub-expressions are always parenthesized (so the meaning is fixed); fmt removes what is redundant
    if compound or draw(st.integers(0, 5)) == 0:
        return f"({text})"
    return text


@st.composite
def num_expr(draw: Any, depth: int = 0) -> tuple[str, bool]:
    """(text, compound) of a number-valued expression."""
    leaves = [
        ("len(completion)", False), ("len(strip(completion))", False), ('count(completion, "a", /b+/i)', False),
        ('count(lower(completion), "x")', False), ("2", False), ("0.5", False), ("1_0", False), ("1e-3", False),
        ('(len(tag(completion, "a")) or 7)', False), ("k", False), ("number(flag)", False),
        ("distinct(words(completion), 2)", False),
    ]
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.integers(0, 9))
    sp = _sp(draw)
    if kind <= 2:
        a, ca = draw(num_expr(depth + 1))
        b, cb = draw(num_expr(depth + 1))
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return f"{_paren(draw, a, ca)}{sp}{op} {_paren(draw, b, cb)}", True
    if kind == 3:
        a, ca = draw(num_expr(depth + 1))
        return f"-{_paren(draw, a, ca)}", True
    if kind == 4:
        a, ca = draw(num_expr(depth + 1))
        # (not 0.5: a negative constant base crashes the checker, see test_checker.py)
        e = draw(st.sampled_from(["2", "3", "-1"]))
        return f"{_paren(draw, a, ca)} ** {e}" if not e.startswith("-") else f"{_paren(draw, a, ca)} ** ({e})", True
    if kind == 5:
        c, cc = draw(bool_expr(depth + 1))
        a, ca = draw(num_expr(depth + 1))
        b, cb = draw(num_expr(depth + 1))
        return f"{_paren(draw, a, ca)} if {_paren(draw, c, cc)} else {_paren(draw, b, cb)}", True
    if kind == 6:
        a, _ = draw(num_expr(depth + 1))
        b, _ = draw(num_expr(depth + 1))
        f = draw(st.sampled_from(["min", "max"]))
        return f"{f}({a},{sp}{b})", False
    if kind == 7:
        a, _ = draw(num_expr(depth + 1))
        return draw(st.sampled_from([f"clip({a}, 0, 3)", f"abs({a})", f"round({a}, digits=2)",
                                     f"piecewise({a}, 0 -> 0, 2 -> 1, 5 -> 0.5)",
                                     f"step({a}, <= 1: 0, < 4: 0.5, else: 1)", f"tanh({a})"])), False
    if kind == 8:
        return draw(st.sampled_from(["sum(w * count(completion, p) for p, w in [(\"a\", 1), (\"b\", 0.5)])",
                                     "mean(len(completion) > n for n in [1, 5, 9] if n != 5)"])), False
    a, ca = draw(num_expr(depth + 1))
    return f"number({a} > 1)", False


@st.composite
def bool_expr(draw: Any, depth: int = 0) -> tuple[str, bool]:
    kind = draw(st.integers(0, 5))
    if depth >= 3 or kind == 0:
        return draw(st.sampled_from([("flag", False), ("true", False), ('contains(completion, "a")', False),
                                     ("search(completion, /^x/m)", False)]))
    if kind <= 2:
        a, ca = draw(num_expr(depth + 1))
        b, cb = draw(num_expr(depth + 1))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"{_paren(draw, a, ca)} {op} {_paren(draw, b, cb)}", True
    if kind <= 4:
        a, ca = draw(bool_expr(depth + 1))
        b, cb = draw(bool_expr(depth + 1))
        op = draw(st.sampled_from(["and", "or"]))
        return f"{_paren(draw, a, ca)} {op} {_paren(draw, b, cb)}", True
    a, ca = draw(bool_expr(depth + 1))
    return f"not {_paren(draw, a, ca)}", True


@st.composite
def specs(draw: Any) -> str:
    lines: list[str] = []

    def comment() -> None:
        if draw(st.integers(0, 3)) == 0:
            lines.append(draw(st.sampled_from(["# a comment", "#", "   # indented", "# ü → ±"])))
        if draw(st.integers(0, 3)) == 0:
            lines.append("")

    if draw(st.booleans()):
        lines.append('spec generated "a generated spec: \\"quoted\\", tab\\t"')
    comment()
    lines.append(f"param k: number = {draw(st.sampled_from(['2', '0.5', '-1', '3e0']))} \"k\"")
    lines.append(f"param flag = {draw(st.sampled_from(['true', 'false']))}")
    n_comp = draw(st.integers(1, 3))
    names = [f"c{i}" for i in range(n_comp)]
    for i, name in enumerate(names):
        comment()
        if draw(st.booleans()):
            e, _ = draw(num_expr())
            lines.append(f"let l{i} = {e}")
            value = f"l{i} + 1"
        else:
            value, _ = draw(num_expr())
        head = f"component {name}"
        if draw(st.integers(0, 2)) == 0:
            head += " in [-5, 5]"
        trailer = draw(st.sampled_from(["", "  # trailing"]))
        lines.append(f"{head} = {value}{trailer}")
        if draw(st.booleans()):
            lines.append(f"    on_error {draw(st.sampled_from(['0', '-1', 'none']))}")
        if draw(st.integers(0, 3)) == 0:
            lines.append("    spans matches(completion, /a/, value=-1)")
    comment()
    for name in names:
        if draw(st.integers(0, 2)) == 0:
            lines.append(f"{name}.weight = {draw(st.sampled_from(['2', 'k', 'linear(2 -> 1, steps=10)']))}")
    if draw(st.booleans()):
        terms = " + ".join(f"{n}.weight * {n}" for n in names)
        lines.append(f"reward = {terms}{draw(st.sampled_from(['', ' - 1', ' * 2']))}")
    if draw(st.booleans()):
        lines.append("advantage over group(prompt) = " + draw(st.sampled_from([
            "(x - mean) / (std(ddof=1) + 1e-4)", "tanh((reward - mean) / (std + 1e-8)) then center",
            "rank then x - 0.5", "x - mean then over batch: clip(x, -1, 1)"])))
    comment()
    if draw(st.booleans()):
        lines.append("train {num_generations=4,   learning_rate = 1e-5,}")
    if draw(st.booleans()):
        lines.append('example "e" { completion: "a b", expect ' + names[0] + " = 0 +- 1e9 }")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))


@settings(max_examples=int(__import__("os").environ.get("RL_GEN_EXAMPLES", "80")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=specs(), batch=st.lists(completions, min_size=1, max_size=5))
def test_fmt_of_generated_specs_is_idempotent_and_keeps_the_meaning(src: str, batch: list[str]) -> None:
    once = format_source(src, "gen.reward")
    assert format_source(once, "gen.reward") == once
    assert shape(parse(once).body) == shape(parse(src).body)
    try:
        before = load_program("gen.reward", source=src)
    except SpecError as exc:
        with pytest.raises(SpecError) as again:
            load_program("gen.reward", source=once)
        assert [d.code for d in again.value.diagnostics] == [d.code for d in exc.diagnostics]
        assume(False)
        return
    after = load_program("gen.reward", source=once)
    out_b = before.score(completion=batch, prompt=["p"] * len(batch))
    out_a = after.score(completion=batch, prompt=["p"] * len(batch))
    assert_same_scores(out_b, out_a)
    if out_b.advantages is not None:
        assert _same(out_b.advantages, out_a.advantages)
    assert before.weights(4) == after.weights(4) and before.params == after.params and before.train == after.train


# ---------------------------------------------------------------- fmt bugs found while writing the above


def test_fmt_output_of_a_doc_with_an_escaped_carriage_return_parses() -> None:
    out = format_source('spec a "x\\ry"\ncomponent c = 1\n')
    assert shape(parse(out).body) == shape(parse('spec a "x\\ry"\ncomponent c = 1\n').body)


def test_fmt_is_idempotent_with_a_line_separator_in_a_doc() -> None:
    once = format_source('spec a "x\\u2028y"\n\ncomponent c = 1\n')
    assert format_source(once) == once


def test_fmt_keeps_trailing_comments_on_their_lines() -> None:
    src = "component c = 1  # value\n    on_error 0  # policy\n"
    assert format_source(src) == src
    # clauses are written in a fixed order: each comment goes with its clause
    src = "component c in [0, 9] = 1  # value\n  spans matches(completion, /a/)  # s\n  timeout 2\n  on_error 0  # e\n"
    assert format_source(src) == ("component c in [0, 9] = 1  # value\n    on_error 0  # e\n    timeout 2\n"
                                  "    spans matches(completion, /a/)  # s\n")
    # example items (inputs are written before expectations) and train settings
    src = ('example "e" {  # head\n  expect c = 1,  # x\n  # about the input\n  completion: "a"  # in\n}  # end\n'
           "train { lr = 1,  # lr\n  steps = 2 }\ncomponent c = 1\n")
    assert format_source(src) == ('example "e" {  # head\n    # about the input\n    completion: "a",  # in\n'
                                  "    expect c = 1,  # x\n}  # end\ntrain {\n    lr = 1,  # lr\n    steps = 2,\n}\n"
                                  "component c = 1\n")
    # a comment inside an expression written on one line: the last trailing comment trails it, the others go above
    src = "let x = min(1,  # one\n  # own\n  2)  # two\ncomponent c = x\n"
    assert format_source(src) == "# one\n# own\nlet x = min(1, 2)  # two\ncomponent c = x\n"
    # a statement on one line: its comment stays on the first line
    assert format_source('example { completion: "a", expect c = 1 }  # all\ncomponent c = 1\n') == (
        'example {  # all\n    completion: "a",\n    expect c = 1,\n}\ncomponent c = 1\n')


@st.composite
def commented_specs(draw: Any) -> str:
    """Specs whose multi-line statements carry comments on any line, trailing or on lines of their own."""
    def c() -> str:
        return draw(st.sampled_from(["", "", "  # t", "  #", "  # ü"]))

    def own() -> list[str]:
        return [draw(st.sampled_from(["# o", "    # p"]))] if draw(st.integers(0, 3)) == 0 else []

    lines = own()
    lines.append("component c in [0, 9] = min(1," + c())
    lines += own() + ["    2)" + c()]
    clauses = draw(st.permutations(["on_error 0", "timeout 2", "spans matches(completion, /a/)"]))
    for cl in clauses[:draw(st.integers(0, 3))]:
        lines += own() + ["    " + cl + c()]
    lines += own() + ['example "e" {' + c()]
    items = draw(st.permutations(['completion: ["a",' + c() + '\n  "b"]', "expect c = 1", 'prompt: "p"']))
    for it in items:
        lines += own() + ["    " + it + "," + c()]
    lines += own() + ["}" + c(), "train {" + c()]
    for it in ("lr = 1", "steps = 2"):
        lines += own() + ["    " + it + "," + c()]
    lines += own() + ["}" + c()]
    return "\n".join(lines) + "\n"


@FAST
@given(src=commented_specs())
def test_fmt_keeps_every_comment_and_is_idempotent(src: str) -> None:
    once = format_source(src)
    assert format_source(once) == once
    assert shape(parse(once).body) == shape(parse(src).body)
    assert sorted(c.text.rstrip() for c in parse(once).comments) == sorted(c.text.rstrip() for c in parse(src).comments)
    # a trailing comment of a clause, example item or train setting stays on that clause's, item's or setting's line
    for line in src.split("\n"):
        code, sep, comment = line.partition("  #")
        first = code.strip().split(" ")[0]
        if sep and first in ("on_error", "timeout", "spans", "expect", "prompt:", "lr", "steps"):
            assert any(out.strip().startswith(code.strip()) and out.endswith("  #" + comment)
                       for out in once.split("\n")), (line, once)
