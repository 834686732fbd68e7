"""The compiled twins of tree.py, dataflow.py, strip.py and codebleu.py (setup.py, runtime/code/compiled.py)
compute exactly what the pure modules compute: flattened trees (kinds, types, extents, keys, syntax subtrees,
dataflow tokens), dataflow edges in both set orders, stripped text, and the four parts of CodeBLEU for pairs, on the HumanEval corpus, its broken variants, hostile
programs and generated ones. A twin built from another version of its source is never used.

Without a build (no Cython or C compiler, a source tree never built) the comparisons are skipped with that reason;
under CI (``CI=true``, where ``scripts/install.sh --test`` builds them) a missing or stale twin fails.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.code import codebleu as pure_codebleu
from rewardlang.runtime.code import compiled
from rewardlang.runtime.code import dataflow as pure_dataflow
from rewardlang.runtime.code import strip as pure_strip
from rewardlang.runtime.code import tree as pure_tree
from rewardlang.runtime.code.parse import parse, replace_surrogates

HOSTILE = [
    "",
    " ",
    "\n\n",
    "# only a comment\n",
    '"""only a docstring"""\n',
    "def f(a, b:\n    return a +\n",                         # syntax errors
    "def f(a):\n    s = '''never closed\n",                    # unterminated triple-quoted string
    "x = 'never closed\ny = 2\n",                              # unterminated string
    "x = " + "(" * 400 + "1" + ")" * 400 + "\n",               # 400-deep nesting
    "x = " + "[" * 400 + "]" * 400 + "  # deep, commented\n",
    "def größe(ä, ß):\n    ü = ä + ß\n    return ü\n",       # Unicode identifiers
    "# é\ndef f(x):\n    return x + 'ü' # ü\n",
    "def f(\ud800):\n    return \udfff\n",                     # lone surrogates
    "match x,:\n    case 1:\n        pass\n",                  # hidden MISSING nodes
    "1{'",
    "def f(:\n\treturn\x0c 1\r\n  \\\n  x\n",                  # tabs, form feed, CR, continuation
    "f'{a}{b!r:>{w}}' + f'''{x\n}'''\n",                       # fields inside f-strings
    "for i in range(3):\n    while i:\n        i -= 1\n    else:\n        j = [k for k in i if k]\n",
    "a, b = b, a = 1, 2\nx += y; z: int = x\nlambda q=1: q\n",
    "class C:\n  def m(self, *a, **k):\n    try:\n      pass\n    except E as e:\n      raise\n",
    "if x:\n  y = 1\nelif z:\n  y = 2\nelse:\n  y = 3\nprint(y)\n",
    "\x00\x01def",
    "def f():\n  return " + " + ".join(f"v{i}" for i in range(300)) + "\n",
]


def _twin(name: str) -> Any:
    try:
        twin = importlib.import_module(f"rewardlang.runtime.code._c_{name}")
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"_c_{name} is not built (scripts/install.sh --test builds it)")
        pytest.skip(f"the compiled twin _c_{name} is not built (python setup.py build_ext --inplace)")
    if twin.__source_sha256__ != compiled._source_digest(importlib.import_module(f"rewardlang.runtime.code.{name}")):
        if os.environ.get("CI"):
            pytest.fail(f"_c_{name} was built from another version of {name}.py")
        pytest.skip(f"_c_{name} was built from another version of {name}.py (rebuild it)")
    return twin


@pytest.fixture(scope="module")
def twins() -> dict[str, Any]:
    return {name: _twin(name) for name in compiled.NAMES}


def _corpus_programs(corpus_module: Any) -> list[str]:
    rows = corpus_module.load_corpus() + corpus_module.load_corpus(1)
    progs = sorted({r.candidate for r in rows} | {r.reference for r in rows})
    rng = random.Random(0)
    broken = []
    for p in progs[::7]:  # truncated and indented variants: error trees, MISSING nodes, misread extras
        broken.append(p[: rng.randrange(len(p) + 1)])
        broken.append("match x,:\n" + "".join("    " + ln for ln in p.splitlines(keepends=True)))
    return progs + broken + HOSTILE


def _flat_fields(flat: Any) -> tuple[Any, ...]:
    return (flat.lang, flat.kind, flat.types, flat.last, flat.subtrees, flat.tokens, flat.spans,
            sorted(flat.nodes), flat.max_depth, flat.keys)


def _same_program(twins: dict[str, Any], code: str) -> None:
    code = replace_surrogates(code)
    for stripped in {code, pure_strip.strip_or_keep(code)}:
        assert twins["strip"].strip_python(stripped) == pure_strip.strip_python(stripped)
        tree = parse(stripped)
        for kwargs in ({}, {"keep_keys": True}):
            a, b = pure_tree.flatten(tree, **kwargs), twins["tree"].flatten(tree, **kwargs)
            assert _flat_fields(a) == _flat_fields(b), stripped
        a, b = pure_tree.flatten(tree), twins["tree"].flatten(tree)
        for order in ("seed0", "process"):
            pe = pure_dataflow.dataflow_edges(a, stripped, order)
            assert pe == twins["dataflow"].dataflow_edges(b, stripped, order), stripped
            assert pe == twins["dataflow"].dataflow_edges(a, stripped, order)  # the twin reads a pure Flat too
            assert pure_dataflow.normalize(pe) == twins["dataflow"].normalize(pe)


def test_corpus_sample_and_hostile_programs(twins: dict[str, Any], corpus_module: Any) -> None:
    progs = _corpus_programs(corpus_module)
    sample = progs[: -len(HOSTILE)][::12] + HOSTILE
    assert len(sample) > 150
    for code in sample:
        _same_program(twins, code)
        assert twins["strip"].strip_or_keep(code) == pure_strip.strip_or_keep(code)


@pytest.mark.slow
def test_whole_corpus(twins: dict[str, Any], corpus_module: Any) -> None:
    progs = _corpus_programs(corpus_module)
    assert len(progs) > 1500
    for code in progs:
        _same_program(twins, code)


def _parts(scores: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.ngram, s.weighted_ngram, s.syntax, s.dataflow) for s in scores]


def test_pairs_score_alike(twins: dict[str, Any], corpus_module: Any) -> None:
    rows = corpus_module.load_corpus(2)[::6]
    codes = [r.candidate for r in rows] + HOSTILE + HOSTILE[::-1]
    refs = [r.reference for r in rows] + HOSTILE[::-1] + HOSTILE
    for cache in (False, True):
        for order in ("seed0", "process"):
            a = pure_codebleu.score_pairs(codes, refs, dataflow_order=order, cache=cache)
            b = twins["codebleu"].score_pairs(codes, refs, dataflow_order=order, cache=cache)
            assert _parts(a) == _parts(b)
    assert [pure_codebleu.combine(s, (0.4, 0, 0.3, 0.3)) for s in a] == \
        [twins["codebleu"].combine(s, (0.4, 0, 0.3, 0.3)) for s in b]


def test_exact_keys_on_small_programs(twins: dict[str, Any]) -> None:
    for code in HOSTILE[:8] + HOSTILE[10:]:
        tree = parse(replace_surrogates(code))
        a = pure_tree.flatten(tree, digest_over=None, keep_keys=True)
        b = twins["tree"].flatten(tree, digest_over=None, keep_keys=True)
        assert _flat_fields(a) == _flat_fields(b)


CODEISH = st.text(alphabet=st.sampled_from(list("abxy=1 ():[]{},.\n\t+-*'\"#\\forinwhileifelse:\ud800é")),
                  max_size=120)


@settings(max_examples=60, deadline=None)
@given(CODEISH)
def test_generated_programs(code: str) -> None:
    _same_program({name: _twin(name) for name in compiled.NAMES}, code)


PURE = {"tree": pure_tree, "dataflow": pure_dataflow, "strip": pure_strip, "codebleu": pure_codebleu}


def test_codebleu_uses_the_twins_when_built(twins: dict[str, Any]) -> None:
    assert {name: compiled.twin(PURE[name]) for name in compiled.NAMES} == twins
    assert all(why.startswith("compiled") for why in compiled.status().values())


def test_a_stale_or_missing_twin_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # runs without a build: a fake twin whose digest is not tree.py's is refused, a right one taken
    fake = types.ModuleType("rewardlang.runtime.code._c_tree")
    fake.__source_sha256__ = "0" * 64  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.delenv("REWARDLANG_PURE_PYTHON", raising=False)
    chosen, why = compiled._choose(pure_tree)
    assert chosen is pure_tree and "another version of tree.py" in why
    fake.__source_sha256__ = compiled._source_digest(pure_tree)  # type: ignore[attr-defined]
    assert compiled._choose(pure_tree) == (fake, "compiled (rewardlang.runtime.code._c_tree)")
    monkeypatch.setenv("REWARDLANG_PURE_PYTHON", "1")
    assert compiled._choose(pure_tree)[0] is pure_tree
    monkeypatch.delenv("REWARDLANG_PURE_PYTHON")
    monkeypatch.setitem(sys.modules, fake.__name__, None)  # import fails: not built
    chosen, why = compiled._choose(pure_tree)
    assert chosen is pure_tree and "not built" in why
    from rewardlang.runtime.code import pyset

    with pytest.raises(ValueError, match="no compiled twin"):
        compiled.twin(pyset)
    with pytest.raises(ValueError, match="no compiled twin"):
        compiled.twin(fake)  # a twin is not a pure module
