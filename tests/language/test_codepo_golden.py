"""Golden cases for CodePO's rule-based rewards and advantages (Zhang et al., Eqs. 2, 3, 6, 7, 9-11) through the
shipped spec ``specs/codepo_text.reward``. Every expected value is computed here by hand from the paper's
formulas (exact fractions where possible), never by calling rewardlang.

    R_format  = 1 if <reasoning> (stripped) has > 10 chars and <answer> (stripped) is non-empty, else 0   (Eq. 2)
    R_reason  = 0.5 * min(|M|, 10) / 10 + 0.5 * [|M| >= 3]                                              (Eq. 3)
    R_rep     = -(1/3) * sum_{n=2..4} (1 - Distinct-n) * w_n,  w = (0.4, 0.4, 0.2)                      (Eq. 6)
    Distinct-n = |unique n-grams| / |n-grams|  (1 when the text has fewer than n words)                (Eq. 7)
    A_i = tanh((R_i - mu) / (sigma + 1e-8)) - mean_j tanh((R_j - mu) / (sigma + 1e-8))               (Eqs. 9-11)
"""

from __future__ import annotations

import math
from fractions import Fraction as F
from pathlib import Path

import pytest

import rewardlang

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "codepo_text.reward")

W = (F(2, 5), F(2, 5), F(1, 5))  # w_2, w_3, w_4


@pytest.fixture(scope="module")
def prog():
    return rewardlang.load(SPEC)


@pytest.fixture(scope="module")
def prog_strict_answer():
    return rewardlang.load(SPEC, params={"answer_dotall": False})


@pytest.fixture(scope="module")
def prog_markers_in_reasoning():
    return rewardlang.load(SPEC, params={"markers_in_reasoning": True})


def score(p, completions: list[str], prompts: list[str] | None = None):
    prompts = prompts if prompts is not None else [f"p{i}" for i in range(len(completions))]
    return p.score(completion=completions, prompt=prompts)


def reason(m: int) -> F:
    """Eq. 3 for a marker count m."""
    return F(1, 2) * F(min(m, 10), 10) + F(1, 2) * (1 if m >= 3 else 0)


def rep(d2: F, d3: F, d4: F) -> F:
    """Eq. 6 from the three Distinct-n ratios."""
    return -F(1, 3) * sum((1 - d) * w for d, w in zip((d2, d3, d4), W))


# ---------------------------------------------------------------- Eq. 2: format


FORMAT_CASES = [
    ("x = 1", 0),                                                                     # no tags
    ("<reasoning>long enough reasoning</reasoning>", 0),                              # no answer
    ("<answer>x</answer>", 0),                                                        # no reasoning
    ("<reasoning>long enough reasoning</reasoning><answer>   </answer>", 0),          # empty answer
    ("<reasoning>long enough reasoning</reasoning><answer></answer>", 0),             # empty answer
    ("<reasoning>  0123456789 \n</reasoning><answer>x</answer>", 0),                  # exactly 10 stripped chars
    ("<reasoning>  0123456789a \n</reasoning><answer>x</answer>", 1),                 # 11 stripped chars
    ("<reasoning>0123456789ab</reasoning><answer> x </answer>", 1),
    ("<answer>x</answer><reasoning>the reasoning comes after</reasoning>", 1),        # order does not matter
    ("<reasoning>step one\nstep two</reasoning><answer>x</answer>", 1),               # multi-line reasoning
    ("<reasoning>abc</reasoning> <reasoning>0123456789abc</reasoning><answer>a</answer>", 0),  # first tag counts
    ("<REASONING>0123456789abc</REASONING><ANSWER>a</ANSWER>", 0),                    # tags are case-sensitive
]


@pytest.mark.parametrize("completion,expected", FORMAT_CASES)
def test_format_eq2(prog, completion: str, expected: int) -> None:
    assert score(prog, [completion]).components["format"].tolist() == [float(expected)]


def test_multiline_answer_depends_on_answer_dotall(prog, prog_strict_answer) -> None:
    multi = "<reasoning>0123456789ab</reasoning><answer>line1\nline2</answer>"
    single = "<reasoning>0123456789ab</reasoning><answer>line1</answer>"
    # DOTALL (the default reading): the answer spans lines and is found
    assert score(prog, [multi, single]).components["format"].tolist() == [1.0, 1.0]
    # the regex exactly as printed in Algorithm 1 (no DOTALL): a multi-line answer never matches
    assert score(prog_strict_answer, [multi, single]).components["format"].tolist() == [0.0, 1.0]
    # the reasoning regex is DOTALL in Algorithm 1 either way
    multi_reasoning = "<reasoning>step one\nstep two</reasoning><answer>x</answer>"
    assert score(prog_strict_answer, [multi_reasoning]).components["format"].tolist() == [1.0]
    assert prog_strict_answer.params["answer_dotall"] is False and prog.params["answer_dotall"] is True


# ---------------------------------------------------------------- Eq. 3: reasoning markers


REASON_CASES = [
    ("no markers at all", 0),
    ("Step 1: a. Step 2: b. Thus c.", 3),                   # 2 x `Step\s\d+:` + `Thus`
    ("Therefore x. Thus y.", 2),
    ("Thus " * 10, 10),
    ("Thus " * 12, 12),                                      # capped at 10
    ("1. a\n 2. b\n(3) c\na) d\n→ e", 5),                    # numbered, (n), lettered, arrow
    ("Step 10: x\nStep2: y", 1),                             # `Step\s\d+:` needs the whitespace
    ("thus therefore", 0),                                   # case-sensitive
    ("<reasoning>Step 1: go</reasoning><answer>(1)(22)</answer>", 3),
]


@pytest.mark.parametrize("completion,markers", REASON_CASES)
def test_reason_eq3(prog, completion: str, markers: int) -> None:
    got = score(prog, [completion]).components["reason"][0]
    assert got == pytest.approx(float(reason(markers)), abs=1e-12)


def test_reason_eq3_values_at_the_thresholds(prog) -> None:
    # |M| = 2 -> 0.1, 3 -> 0.65 (the indicator switches on), 10 -> 1.0, 12 -> 1.0
    got = score(prog, ["Thus " * 2, "Thus " * 3, "Thus " * 10, "Thus " * 12]).components["reason"].tolist()
    assert got == pytest.approx([0.1, 0.65, 1.0, 1.0], abs=1e-12)


def test_markers_in_reasoning_option(prog, prog_markers_in_reasoning) -> None:
    c = "Thus Thus <reasoning>Step 1: go</reasoning><answer>Therefore</answer>"
    # whole completion: Thus, Thus, Step 1:, Therefore = 4 markers; inside <reasoning>: only `Step 1:`
    assert score(prog, [c]).components["reason"][0] == pytest.approx(float(reason(4)))
    assert score(prog_markers_in_reasoning, [c]).components["reason"][0] == pytest.approx(float(reason(1)))
    # no <reasoning> tag: nothing is counted
    assert score(prog_markers_in_reasoning, ["Thus Thus Thus"]).components["reason"].tolist() == [0.0]


# ---------------------------------------------------------------- Eqs. 6-7: repetition


REP_CASES = [
    # words a b a b a b: bigrams 5 (2 unique), trigrams 4 (2 unique), 4-grams 3 (2 unique)
    ("a b a b a b", rep(F(2, 5), F(2, 4), F(2, 3))),
    # a a a a a: 4 bigrams (1 unique), 3 trigrams (1), 2 4-grams (1)
    ("a a a a a", rep(F(1, 4), F(1, 3), F(1, 2))),
    # fewer than n words: Distinct-n = 1
    ("a a a", rep(F(1, 2), F(1), F(1))),
    ("a a", rep(F(1), F(1), F(1))),
    ("a", F(0)),
    ("", F(0)),
    # every kind of whitespace separates words: a b a b -> bigrams ab, ba, ab
    ("a\tb\na\u00a0b", rep(F(2, 3), F(1), F(1))),
    ("x\u3000y\u2028x\x1cy  \r\n", rep(F(2, 3), F(1), F(1))),
    # all distinct
    ("the quick brown fox jumps", F(0)),
]


@pytest.mark.parametrize("completion,expected", REP_CASES)
def test_rep_eq6_eq7(prog, completion: str, expected: F) -> None:
    got = score(prog, [completion]).components["rep"][0]
    assert got == pytest.approx(float(expected), abs=1e-12)


def test_rep_the_same_in_large_batches(prog) -> None:
    # large batches count n-grams with the Numba kernel; the values must not change
    texts = [c for c, _ in REP_CASES]
    # a unique last word per row, so that deduplication keeps the batch above the Numba threshold (256 rows)
    batch = [f"{t} u{i}" for i in range(300 // len(texts) + 1) for t in texts]
    assert len(set(batch)) >= 300
    got = score(prog, batch).components["rep"]
    for i, t in enumerate(batch):
        words = t.split()
        ratios = []
        for n in (2, 3, 4):
            grams = [tuple(words[j:j + n]) for j in range(len(words) - n + 1)]
            ratios.append(F(len(set(grams)), len(grams)) if grams else F(1))
        assert got[i] == pytest.approx(float(rep(*ratios)), abs=1e-12), t


# ---------------------------------------------------------------- Eq. 1 (without R_acc): the total


def test_total_is_the_unit_weighted_sum(prog) -> None:
    cs = ["<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>", "a a a a a", "hello"]
    out = score(prog, cs)
    # format 1 + reason 0.65 + rep 0;  0 + 0 + rep(a a a a a);  0
    expected = [1 + reason(3), rep(F(1, 4), F(1, 3), F(1, 2)), F(0)]
    assert out.total.tolist() == pytest.approx([float(e) for e in expected], abs=1e-12)
    assert out.weights == {"format": 1.0, "reason": 1.0, "rep": 1.0}


# ---------------------------------------------------------------- Eqs. 9-11: the advantage


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: list[float], ddof: int = 0) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - ddof))


def codepo_advantage(rewards: list[float]) -> list[float]:
    mu, sigma = _mean(rewards), _std(rewards)
    squashed = [math.tanh((r - mu) / (sigma + 1e-8)) for r in rewards]
    centre = _mean(squashed)
    return [s - centre for s in squashed]


GOOD = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>"


def test_group_advantage_eqs_9_to_11(prog) -> None:
    cs = [GOOD, "a a a a a", "hello"]
    out = score(prog, cs, ["p", "p", "p"])
    rewards = [1 + float(reason(3)), float(rep(F(1, 4), F(1, 3), F(1, 2))), 0.0]
    assert out.advantages.tolist() == pytest.approx(codepo_advantage(rewards), abs=1e-12)
    # the spec's own example pins the same numbers
    assert out.advantages.tolist() == pytest.approx([0.9907176735465056, -0.5795579838417187,
                                                     -0.41115968970478695], abs=1e-9)


def test_groups_are_normalized_separately_even_when_interleaved(prog) -> None:
    cs = [GOOD, "x", "a a a a a", "Thus Thus", "hello", "Thus Thus Thus"]
    groups = ["p", "q", "p", "q", "p", "q"]
    out = score(prog, cs, groups)
    r = out.total.tolist()
    rp = [r[0], r[2], r[4]]
    rq = [r[1], r[3], r[5]]
    # "x": 0;  "Thus Thus": reason(2), one bigram;  "Thus Thus Thus": reason(3) + rep with Distinct-2 = 1/2
    assert rq == pytest.approx([0.0, float(reason(2)), float(reason(3) + rep(F(1, 2), F(1), F(1)))], abs=1e-12)
    ap, aq = codepo_advantage(rp), codepo_advantage(rq)
    assert out.advantages.tolist() == pytest.approx([ap[0], aq[0], ap[1], aq[1], ap[2], aq[2]], abs=1e-12)


def test_zero_variance_and_singleton_groups_get_zero_advantage(prog) -> None:
    out = score(prog, ["same", "same", "same", GOOD], ["p", "p", "p", "alone"])
    assert out.advantages.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert out.stats["zero_variance_groups"] == 2 and out.stats["groups"] == 2


def test_masked_sample_is_excluded_from_the_group_statistics(prog) -> None:
    rewards = [1.0, float("nan"), 0.0, 0.5, 2.0]
    groups = ["g", "g", "g", "g", "h"]
    adv = prog.advantages(rewards, groups)
    expected = codepo_advantage([1.0, 0.0, 0.5])
    assert math.isnan(adv[1])
    assert [adv[0], adv[2], adv[3]] == pytest.approx(expected, abs=1e-12)
    assert adv[4] == 0.0
    # the same numbers as if the masked sample were not in the batch at all
    assert prog.advantages([1.0, 0.0, 0.5], ["g"] * 3).tolist() == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- other normalizations over the CodePO terms


TERMS = 'import "lib/codepo_terms.reward"\n'


def _variant(pipeline: str):
    return rewardlang.loads(TERMS + pipeline, filename=str(ROOT / "specs" / "variant.reward"))


BATCH = [GOOD, "a a a a a", "hello", "Thus Thus Thus Thus", "a b a b a b", "<reasoning>0123456789ab</reasoning>"
         "<answer>y</answer>"]
GROUPS = ["p", "p", "p", "q", "q", "q"]


def test_trl_default_grpo_normalization() -> None:
    p = _variant("advantage over group(prompt) = (x - mean) / (std(ddof=1) + 1e-4)")
    out = p.score(completion=BATCH, prompt=GROUPS)
    r = out.total.tolist()
    expected = []
    for i, g in enumerate(GROUPS):
        xs = [r[j] for j in range(len(r)) if GROUPS[j] == g]
        expected.append((r[i] - _mean(xs)) / (_std(xs, ddof=1) + 1e-4))
    assert out.advantages.tolist() == pytest.approx(expected, abs=1e-12)
    # by hand for group q: "Thus Thus Thus Thus" = reason(4) + rep (Distinct-2 = 1/3, Distinct-3 = 1/2);
    # "a b a b a b" = rep only; the well-formed answer = format 1
    rq = [float(reason(4) + rep(F(1, 3), F(1, 2), F(1))), float(rep(F(2, 5), F(2, 4), F(2, 3))), 1.0]
    assert r[3:] == pytest.approx(rq, abs=1e-12)


def test_normalize_each_component_then_sum_then_batch() -> None:
    p = _variant("advantage over group(prompt) each component = (x - mean) / (std + 1e-6) then sum "
                 "then over batch: (x - mean) / (std + 1e-6)")
    out = p.score(completion=BATCH, prompt=GROUPS)
    n = len(BATCH)
    summed = [0.0] * n
    for name in ("format", "reason", "rep"):
        v = out.components[name].tolist()
        for i, g in enumerate(GROUPS):
            xs = [v[j] for j in range(n) if GROUPS[j] == g]
            summed[i] += (v[i] - _mean(xs)) / (_std(xs) + 1e-6)   # population std; unit weights
    expected = [(s - _mean(summed)) / (_std(summed) + 1e-6) for s in summed]
    assert out.advantages.tolist() == pytest.approx(expected, abs=1e-9)
    # the components themselves, by hand
    assert out.components["format"].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert out.components["reason"].tolist() == pytest.approx([0.65, 0, 0, 0.7, 0, 0], abs=1e-12)
