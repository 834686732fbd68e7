"""Identical work done once (issue 38 item 4): distinct-n per distinct text with its words split once for every n,
and CodeBLEU's tree features shared by programs that strip to the same text. Each shortcut must give exactly
what the row-by-row (or unshared) path gives, on odd and hostile inputs too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.api import Context
from rewardlang.runtime.code import codebleu as cb
from rewardlang.runtime.columns import CellError, Col
from rewardlang.runtime.components.codebleu import codebleu, dataflow_match, syntax_match
from rewardlang.runtime.components.text import LazyWords, distinct, distinct_py, words

# the characters str.split() splits on, beyond the ASCII space (so the shortcut must split as Python does)
WHITESPACE = [" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u2028",
              "\u3000"]
TEXT = st.one_of(
    st.sampled_from(["", " ", "a", "a a", "a a a a", "x = 1\nx = 1\n", "é é ü", "a\u2003a\u00a0a", "\u3000"]),
    st.text(st.sampled_from(["a", "b", "é", "\U0001f600", *WHITESPACE]), max_size=30),
    st.text(max_size=20),
)


def _row_by_row(texts: list[str | None], bad: np.ndarray, n: int) -> list[float]:
    return [1.0 if b else distinct_py(t.split(), n) for t, b in zip(texts, bad)]


@settings(max_examples=150, deadline=None)
@given(pool=st.lists(TEXT, min_size=1, max_size=5), picks=st.lists(st.integers(0, 4), min_size=1, max_size=12),
       bad_at=st.sets(st.integers(0, 11)))
def test_distinct_once_per_text_equals_row_by_row(pool: list[str], picks: list[int], bad_at: set[int]) -> None:
    texts = [pool[i % len(pool)] for i in picks]  # repeats, as in a GRPO batch
    bad = np.array([i in bad_at for i in range(len(texts))])
    lazy = LazyWords(texts)
    for n in (1, 2, 3, 4, 5):  # one LazyWords for every n: the words split once are shared
        assert lazy.distinct(n, bad).tolist() == _row_by_row(texts, bad, n)


def test_distinct_through_the_function_on_the_python_path() -> None:
    texts = ["a b a b", None, "a b a b", "", "x  y\u3000x y", "a b a b"]
    none = np.array([t is None for t in texts])
    err: list[CellError | None] = [None] * len(texts)
    err[3] = CellError("upstream failure")
    col = words.fn(Col(texts, none, err, kind="obj"), params=None, ctx=Context())
    assert isinstance(col.v, LazyWords)
    ctx = Context(extra={"run_rows": 10})  # a short run: the Numba kernel is not loaded, the Python path runs
    for n in (2, 3):
        out = distinct.fn(col, n, params=None, ctx=ctx)
        bad = col.bad()
        assert out.v.tolist() == _row_by_row(texts, bad, n)
        assert out.none is not None and out.none.tolist() == none.tolist()
        assert out.err is not None and out.err[3] is err[3]


def test_an_unflagged_none_fails_as_the_row_by_row_path_does() -> None:
    with pytest.raises(TypeError):
        distinct_py(None, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        LazyWords(["a b", None]).distinct(2, np.zeros(2, dtype=bool))


# -- CodeBLEU: tree features shared by programs that strip to the same text ---------------------------------

BASE = "def f(a, b):\n    c = a + b\n    for i in range(c):\n        a += i\n    return a\n"
VARIANTS = [
    BASE,
    "# a comment\n" + BASE,
    BASE.replace("    c = a + b\n", "    c = a + b  # sum\n"),
    BASE.replace("def f(a, b):\n", 'def f(a, b):\n    """Docstring."""\n'),
    BASE.replace("def f(a, b):\n", "def f(a, b):\n    'single-quoted docstring'\n"),
    "",
    "# only a comment\n",
    '"""only a docstring"""\n',
    "def f(a, b:\n    return a +\n",  # syntax errors
    "def f(a):\n    s = '''never closed\n",  # tokenize fails: kept unstripped
    "x = " + "(" * 400 + "1" + ")" * 400 + "\n",  # deep nesting (beyond the dataflow depth bound)
    "x = " + "(" * 400 + "1" + ")" * 400 + "  # deep, commented\n",
    "def größe(ä, ß):\n    ü = ä + ß\n    return ü\n",  # unicode identifiers
    "# é\ndef größe(ä, ß):\n    ü = ä + ß\n    return ü\n",
    "def f(\ud800):\n    return \udfff\n",  # lone surrogates
]


def test_programs_that_strip_alike_share_their_tree_features() -> None:
    cb.clear_caches()
    a, b = cb.features(VARIANTS[0]), cb.features(VARIANTS[1])
    assert a is not b and a.text != b.text and a.stripped == b.stripped
    assert a.tree() is b.tree()
    assert cb.features(VARIANTS[5]).tree() is not a.tree()
    # unshared features (no cache) have their own
    c = cb.features(VARIANTS[1], cache=False)
    assert c.tree() is not a.tree()
    assert c.subtrees == a.subtrees and c.dataflow() == a.dataflow()


@pytest.mark.parametrize("impl", [codebleu, syntax_match, dataflow_match])
def test_shared_tree_features_score_as_unshared_ones(impl) -> None:
    codes = [c for c in VARIANTS for _ in VARIANTS]
    refs = [r for _ in VARIANTS for r in VARIANTS]
    cb.clear_caches()
    shared = impl.fn(codes, refs, params=None, ctx=Context())
    alone = [impl.fn([c], [r], params=None, ctx=Context(use_cache=False)) for c, r in zip(codes, refs)]
    assert shared.values == [x.values[0] for x in alone]
    assert shared.details == [x.details[0] for x in alone]
    assert shared.errors == [x.errors[0] for x in alone] == [None] * len(codes)
    # in the other order the first program of each stripped text differs: the same values again
    cb.clear_caches()
    again = impl.fn(codes[::-1], refs[::-1], params=None, ctx=Context())
    assert again.values == shared.values[::-1]
