"""CodeBLEU: parity with the codebleu 0.7.0 package on the HumanEval corpus, hand-computed cases, properties,
bad input and a spec."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.api import Context
from rewardlang.runtime.code import codebleu as cb
from rewardlang.runtime.components.codebleu import (
    CodeBLEUParams,
    DataflowParams,
    PartParams,
    bleu4,
    codebleu,
    dataflow_match,
    syntax_match,
    weighted_ngram_match,
)

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "benchmarks" / "corpus.py"
pytest.importorskip("codebleu")

PKG_KEYS = {"ngram": "ngram_match_score", "weighted_ngram": "weighted_ngram_match_score",
            "syntax": "syntax_match_score", "dataflow": "dataflow_match_score"}




def _package_in_subprocess(weights: tuple[float, ...]) -> list[dict[str, float]]:
    """The package on every corpus pair, in an interpreter with PYTHONHASHSEED=0 (its dataflow match depends
    on the string hash seed; rewardlang reproduces seed 0)."""
    prog = f"""
import importlib.util, json, logging, sys
logging.disable(logging.WARNING)
spec = importlib.util.spec_from_file_location("bench_corpus", {str(CORPUS)!r})
mod = importlib.util.module_from_spec(spec); sys.modules["bench_corpus"] = mod; spec.loader.exec_module(mod)
from codebleu import calc_codebleu
out = [calc_codebleu([r.reference], [r.candidate], "python", weights={tuple(weights)!r}) for r in mod.load_corpus()]
print(json.dumps(out))
"""
    res = subprocess.run([sys.executable, "-c", prog], env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def _ours(rows: list[Any], params: CodeBLEUParams) -> tuple[list[float], list[dict[str, float]]]:
    res = codebleu.fn([r.candidate for r in rows], [r.reference for r in rows], params=params,
                      ctx=Context(use_cache=False))
    assert all(e is None for e in res.errors)
    return list(res.values), list(res.details)


@pytest.mark.slow
@pytest.mark.parametrize("weights", [(0.25, 0.25, 0.25, 0.25), (0.4, 0.0, 0.3, 0.3)])
def test_corpus_parity_with_the_package(weights: tuple[float, float, float, float], corpus_module) -> None:
    rows = corpus_module.load_corpus()
    assert len(rows) == 1312
    pkg = _package_in_subprocess(weights)
    cb.clear_caches()
    values, details = _ours(rows, CodeBLEUParams(weights=weights))
    theta = weights[3]
    n_zero = 0
    for r, v, d, p in zip(rows, values, details, pkg):
        for part, key in PKG_KEYS.items():
            if part in d:  # parts with weight 0 are not computed
                assert d[part] is not None  # every HumanEval reference has dataflow edges
                assert abs(d[part] - p[key]) <= 1e-9, (r.task_id, r.kind, part, d[part], p[key])
        if p["dataflow_match_score"] != 0:
            assert abs(v - p["codebleu"]) <= 1e-9, (r.task_id, r.kind)
        else:  # the package's `dataflow or 1`: it adds theta where the match is zero; we do not
            n_zero += 1
            assert abs(v - (p["codebleu"] - theta)) <= 1e-9, (r.task_id, r.kind)
    assert n_zero == 193  # every empty candidate, and deleted-line candidates that lost all dataflow


def test_parts_equal_the_package_in_process_order(corpus_module) -> None:
    """dataflow_order="process" equals the package run in this very process (whatever its hash seed)."""
    from codebleu import calc_codebleu

    rows = corpus_module.load_corpus()[::6]
    res = dataflow_match.fn([r.candidate for r in rows], [r.reference for r in rows],
                            params=DataflowParams(dataflow_order="process"), ctx=Context(use_cache=False))
    for r, v in zip(rows, res.values):
        p = calc_codebleu([r.reference], [r.candidate], "python")
        assert abs(v - p["dataflow_match_score"]) <= 1e-9


# -- hand-computed cases ----------------------------------------------------------------------------------


def one(impl: Any, code: str, ref: str, params: Any = None) -> Any:
    res = impl.fn([code], [ref], params=params, ctx=Context(use_cache=False))
    assert res.errors == [None], res.errors
    return res.values[0]


def test_bleu4_golden() -> None:
    assert one(bleu4, "a b c d", "a b c d") == 1.0
    # p1 = 3/3, p2 = 2/2, p3 = 1/1, p4 = 0/1 -> 0.1/1 (smoothing); BP = exp(1 - 4/3)
    assert one(bleu4, "a b c", "a b c d") == pytest.approx(math.exp(1 - 4 / 3) * 0.1 ** 0.25, abs=1e-15)
    # no unigram in common: 0, whatever the smoothing
    assert one(bleu4, "x y", "a b") == 0.0
    assert one(bleu4, "", "a b") == 0.0
    # clipping: "a a a a" against "a b": p1 = 1/4, p2..p4 = 0 -> smoothed; BP = 1 (4 > 2)
    assert one(bleu4, "a a a a", "a b") == pytest.approx(math.exp(0.25 * (math.log(1 / 4) + math.log(0.1 / 3)
                                                                        + math.log(0.1 / 2) + math.log(0.1))))


def test_weighted_ngram_golden() -> None:
    # unigrams: return (keyword, weight 1) matches, x (0.2) does not -> 1/1.2; bigrams 0 -> 0.1/1; no 3- or
    # 4-grams in the reference -> 0.1/max(1, 0); brevity penalty with the package's reference length 2: 1
    want = (1 / 1.2) ** 0.25 * 0.1 ** 0.75
    assert one(weighted_ngram_match, "return y", "return x") == pytest.approx(want, abs=1e-15)
    # a one-token candidate: the package's brevity penalty exp(1 - 2/1)
    want = math.exp(-1) * math.exp(0.25 * (math.log(1 / 1.2) + 3 * math.log(0.1)))
    assert one(weighted_ngram_match, "return", "return x") == pytest.approx(want, abs=1e-15)


def test_syntax_match_golden() -> None:
    # subtrees of "x = 1": module, expression_statement, assignment; integers' values are not in the tree
    assert one(syntax_match, "x = 2", "x = 1") == 1.0
    assert one(syntax_match, "x = 1\ny = 2", "x = 1") == pytest.approx(2 / 3)
    assert one(syntax_match, "y = f(1)", "x = 1") == 0.0
    # comments and docstrings are removed first
    assert one(syntax_match, "x = 1  # c", "x = 1") == 1.0
    # duplicates count on the reference side: "x = 1\nx = 1" has module + 2 x (stmt, assignment)
    assert one(syntax_match, "x = 1", "x = 1\nx = 1") == pytest.approx(4 / 5)
    assert one(syntax_match, "", "") == 1.0


def test_dataflow_golden() -> None:
    ref = "def f(a):\n    b = a + 1\n    return b\n"
    assert one(dataflow_match, ref, ref) == 1.0
    assert one(dataflow_match, "def g(u):\n    v = u + 1\n    return v\n", ref) == 1.0  # renamed
    # reference edges: a<-[], b<-[a, 1], a<-[a], 1<-[], b<-[b]; "b = a" keeps a<-[] and a<-[a] only
    assert one(dataflow_match, "def f(a):\n    b = a\n    return b\n", ref) == pytest.approx(2 / 5)
    assert one(dataflow_match, "", ref) == 0.0
    # a reference without dataflow edges: undefined -> none
    assert one(dataflow_match, "def f():\n    return 1\n", "def f():\n    return 1\n") is None


def test_combination_zero_is_zero_and_no_reference_dataflow_renormalizes() -> None:
    ref = "def f(a):\n    b = a + 1\n    return b\n"
    p = CodeBLEUParams(weights=(0.4, 0.0, 0.3, 0.3))
    assert one(codebleu, "", ref, p) == 0.0  # the package gives 0.3 here
    no_df = "def f():\n    return 1\n"
    assert one(codebleu, no_df, no_df, p) == 1.0
    s = cb.score("def f():\n    return 2\n", no_df)
    assert s.dataflow is None
    want = (0.4 * s.ngram + 0.3 * s.syntax) / 0.7
    assert one(codebleu, "def f():\n    return 2\n", no_df, p) == pytest.approx(want, abs=1e-15)
    assert cb.combine(s, (0, 0, 0, 1)) == 0.0


def test_weights_are_validated() -> None:
    with pytest.raises(ValueError):
        CodeBLEUParams(weights=(0.5, 0.5, 0.5, 0.5))
    with pytest.raises(ValueError):
        CodeBLEUParams(weights=(1.5, -0.5, 0, 0))
    with pytest.raises(ValueError):
        CodeBLEUParams(lang="java")  # type: ignore[arg-type]


# -- properties -------------------------------------------------------------------------------------------

SNIPPETS = [
    "", "x = 1", "def f(a):\n    return a + 1\n", "def f(b):\n    c = b\n    return c\n",
    "for i in range(3):\n    print(i)\n", "if x:\n    y = 1\nelse:\n    y = 2\n", "def f(:\n", "return",
    "s = [v * 2 for v in xs if v]\n", "# only a comment\n", "x = (1,\n", "while n > 0:\n    n -= 1\n",
]
CODE = st.one_of(st.sampled_from(SNIPPETS), st.text(alphabet=st.sampled_from(list("abx=1 ():\n+")),
                                                    max_size=30))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(CODE, CODE), min_size=1, max_size=8))
def test_batch_invariance_and_cache_transparency(pairs: list[tuple[str, str]]) -> None:
    codes = [c for c, _ in pairs]
    refs = [r for _, r in pairs]
    for impl in (codebleu, bleu4, weighted_ngram_match, syntax_match, dataflow_match):
        batch = impl.fn(codes, refs, params=None, ctx=Context()).values
        alone = [impl.fn([c], [r], params=None, ctx=Context(use_cache=False)).values[0] for c, r in pairs]
        cached_ctx = Context()
        impl.fn(codes, refs, params=None, ctx=cached_ctx)
        again = impl.fn(codes, refs, params=None, ctx=cached_ctx).values
        assert batch == alone == again


@settings(max_examples=60, deadline=None)
@given(CODE, CODE)
def test_ranges_and_identity(code: str, ref: str) -> None:
    assert 0.0 <= one(codebleu, code, ref) <= 1.0
    # a program against itself: every subtree and edge is found; BLEU-4 is 1 from 4 tokens on (shorter
    # programs have no 4-gram, whose precision is smoothed to 0.1)
    assert one(syntax_match, ref, ref) == 1.0
    assert one(dataflow_match, ref, ref) in (1.0, None)
    toks = ref.split()
    if len(toks) >= 4:
        assert one(bleu4, ref, ref) == pytest.approx(1.0)
        # the weighted unigram recall divides by max(1, Σ weights): below 1 (a few non-keywords) it is < 1
        if sum(1 if t in cb.PYTHON_KEYWORDS else 0.2 for t in toks) >= 1:
            assert one(weighted_ngram_match, ref, ref) == pytest.approx(1.0)
            assert one(codebleu, ref, ref) == pytest.approx(1.0)


# -- bad input --------------------------------------------------------------------------------------------


def test_bad_inputs_score_or_fail_cleanly() -> None:
    ref = "def f(a):\n    return a\n"
    cases = {
        "empty": "",
        "binary": bytes(range(256)).decode("latin-1") * 4,
        "surrogates": "def f(\ud800):\n    return \udfff\n",
        "nul": "x = 1\x00\ny = x\n",
        "deep": "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n",
        "deep_list": "x = " + "[" * 2000 + "]" * 2000 + "\n",
        "java": "public class A { static int f(int a) { return a; } }",
        "unterminated": "def f(a):\n    s = '''never closed\n",
    }
    res = codebleu.fn(list(cases.values()), [ref] * len(cases), params=None, ctx=Context(use_cache=False))
    assert res.errors == [None] * len(cases)
    assert all(0.0 <= v <= 1.0 for v in res.values)
    assert res.values[0] == 0.0
    # the same junk as the reference
    res = codebleu.fn(list(cases.values()), list(cases.values()), params=None, ctx=Context(use_cache=False))
    assert res.errors == [None] * len(cases)
    # code over the size limit is the completion's doing: the worst score, 0, not an error that would mask it;
    # a reference over it is the data's problem: a per-sample error; the rest of the batch is scored
    big = "x = 1\n" * 200_000
    res = codebleu.fn([big, ref, ref], [ref, ref, big], params=None, ctx=Context(use_cache=False))
    assert res.values[:2] == [0.0, 1.0] and res.errors[:2] == [None, None]
    assert res.values[2] is None and "reference has" in (res.errors[2] or "")


def test_large_program_scores() -> None:
    big = "".join(f"def f{i}(a, b):\n    c = a + b * {i}\n    return c\n" for i in range(1500))  # ~60 kB
    res = codebleu.fn([big], [big], params=None, ctx=Context(use_cache=False))
    assert res.errors == [None] and res.values[0] == pytest.approx(1.0)


# -- through a spec ---------------------------------------------------------------------------------------


def test_through_a_spec(corpus_module) -> None:
    import rewardlang

    mod = corpus_module
    prog = rewardlang.loads(
        'spec s "codebleu"\n'
        'input reference: code\n'
        'let answer = tag(completion, "answer", dotall=true) or ""\n'
        'let code = code_block(answer, "python") or answer\n'
        'component acc in [0, 1] = step(codebleu(code, reference, weights=(.4, 0, .3, .3)), '
        '<= 0.2: 0, <= 0.4: 0.5, else: 1)\n'
        'component cb in [0, 1] = codebleu(code, reference)\n'
        'component df in [0, 1] = dataflow_match(code, reference) or 0\n')
    rows = mod.load_corpus()[:16]
    out = prog.score(completion=[mod.as_completion(r.candidate) for r in rows], reference=[r.reference for r in rows])
    direct = codebleu.fn([r.candidate for r in rows], [r.reference for r in rows], params=None,
                         ctx=Context(use_cache=False)).values
    assert list(out.components["cb"]) == pytest.approx(direct, abs=1e-12)
    assert out.components["acc"][0] == 1.0  # identical
    assert out.components["acc"][5] == 0.0  # empty answer
    assert out.components["df"][5] == 0.0


def test_part_params_reject_unknown_options() -> None:
    with pytest.raises(ValueError):
        PartParams(weights=(1, 0, 0, 0))  # type: ignore[call-arg]
