"""Issue 36: dense PPO's authors' mode made exact where it was not, and dense_ppo's test limit. Expected values are
worked out by hand from the authors' lines (stg-tud/RL-CodeGeneration @ bb3551d, cited per test) under the repo's
byte-level BPE (one token a piece as listed); the replay against SmolLM2's tokenizer is
tests/trainers/test_authors_mapping.py."""

from __future__ import annotations

import pytest
import torch

import rewardlang
from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.runtime.api import Context
from rewardlang.runtime.components.dense import ScriptTestsParams, script_tests, script_tests_pass_rate
from rewardlang.trainers.dense import DenseRewards
from rewardlang.trainers.model import build_tokenizer

ADD_TESTS = "['assert f(1) == 2']"
REF = "def f(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def authors():
    tok = build_tokenizer()
    dense = DenseRewards(rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors"}), tok)

    def run(text: str, eos: bool, tests: str = ADD_TESTS, entry: str = "f", ref: str = REF):
        ids = tok(text)["input_ids"] + ([tok.eos_token_id] if eos else [])
        out = dense(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long),
                    {"tests": [tests], "entry_point": [entry], "reference": [ref]})
        assert not out.masked.any()
        return [tok.decode([i]) for i in ids], out

    return run


FENCE = ["`", "`", "`", "p", "y", "th", "on"]
FENCE_SYNTAX = [0.0] * 5 + [2.0, 2.0]  # the two tokens before the marker is seen get 2.0 (syncode_wrapper.py:82)


def test_code_ending_inside_a_docstring_is_viable_until_the_end_of_sequence(authors) -> None:
    """SynCode accepts a token while the code stays a viable prefix (GrammarConstrainer.is_valid: the remainder a
    prefix of an acceptable terminal); the EOS only where its grammar accepts the end ($END). The first token after
    the marker is judged against empty code: start_from = input_ids.size(1) + 1 (syncode_wrapper.py:80), the code
    is input_ids[start_from:] with the checked token appended (grammar_constrainer.py, _get_partial_codes)."""
    pieces, out = authors("```python\ndef f(x):\n    '''Add", eos=True)
    assert pieces == FENCE + ["\n", "def", " f", "(", "x", "):", "\n   ", " '", "'", "'", "A", "dd", "<|endoftext|>"]
    # "\n": +1 (empty code); "def" .. "dd": every prefix of "def f(x):\n    '''Add" is viable (+1); EOS: the code
    # is no whole program (an open docstring): -1. Before: -1 from the unfinished line's start ("\n   ").
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 12 + [-1.0]


def test_code_ending_inside_an_open_bracket(authors) -> None:
    """Same lines as above: an open bracket keeps the code viable; cut at the length limit (no EOS) every code
    token is +1, with the EOS the EOS alone is -1."""
    pieces, out = authors("```python\nx = f(1,\n", eos=True)
    assert pieces == FENCE + ["\n", "x", " =", " f", "(", "1", ",", "\n", "<|endoftext|>"]
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 8 + [-1.0]
    _, cut = authors("```python\nx = f(1,\n", eos=False)
    assert cut.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 8


def test_the_end_of_sequence_token_after_a_whole_program_is_plus_one(authors) -> None:
    """An unclosed block whose code is a whole program: SynCode accepts the EOS there ($END), +1."""
    pieces, out = authors("```python\nx = 1\n", eos=True)
    assert pieces == FENCE + ["\n", "x", " =", " 1", "\n", "<|endoftext|>"]
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 6


def test_the_token_after_the_opening_marker_is_never_parsed(authors) -> None:
    """syncode_wrapper.py:78-82: the marker is found in the text before token k; start_from = size + 1 leaves token
    k out of every later check's code (_get_partial_codes decodes input_ids[start_from:]). A title after
    ```python: " t" is +1 (empty code) and the code SynCode parses is "itle\\nx = 1\\n...", a name then an
    assignment: +1. The close is completed by the last token, never seen (the check runs before each token), so
    the backticks are code: "itle\\nx = 1\\n`" is not viable, -1 on each."""
    pieces, out = authors("```python title\nx = 1\n```", eos=False)
    assert pieces == FENCE + [" t", "it", "le", "\n", "x", " =", " 1", "\n", "`", "`", "`"]
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 8 + [-1.0] * 3
    # a character no program can start with, right after the marker: never parsed either
    pieces, out = authors("```python)\nx = 1\n```", eos=False)
    assert pieces == FENCE + [")", "\n", "x", " =", " 1", "\n", "`", "`", "`"]
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 6 + [-1.0] * 3


def test_a_violation_inside_the_code_is_minus_one_from_its_token(authors) -> None:
    pieces, out = authors("```python\nx = = 1\n```", eos=False)
    assert pieces == FENCE + ["\n", "x", " =", " =", " 1", "\n", "`", "`", "`"]
    # "x =" viable, "x = =" not: -1 from the second " =" on
    assert out.components["syntax"][0].tolist() == FENCE_SYNTAX + [1.0] * 3 + [-1.0] * 6


# -- HumanEval's check(): each assert a test ------------------------------------------------------------------------

HE0 = load_humaneval()[0]
NEIGHBOURS = ("from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
              "    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))\n")
NEVER = "from typing import List\n\n\ndef has_close_elements(numbers, threshold):\n    return False\n"


def test_humaneval_check_is_scored_as_the_fraction_of_its_asserts() -> None:
    """rewards/extra_rewards.py:100-121 (calculate_pass_at_k): each test runs as `code + "\\n" + test`, passed when
    it exits with 0 (run_code_subprocess, lines 128-146); the value is passed / len(test_cases). HumanEval/0's
    check() has 7 asserts, each a test. By hand: comparing neighbours only fails the 3rd (5.9 and 5.0 are not
    neighbours) and the 5th (nor are 2.0 and 2.0): 5/7; `return False` passes the 2nd, 4th and 7th: 3/7."""
    assert HE0["task_id"] == "HumanEval/0" and len(script_tests(HE0["tests"], HE0["entry_point"])) == 7
    codes = [HE0["solution"], NEIGHBOURS, NEVER]
    n = len(codes)
    got = script_tests_pass_rate.fn(codes, [HE0["tests"]] * n, [HE0["entry_point"]] * n,
                                    params=ScriptTestsParams(timeout=2), ctx=Context(use_cache=False))
    assert got.infra == [False] * n and got.values == pytest.approx([1.0, 5 / 7, 3 / 7])
    # the one-test reading, kept as the named option humaneval_check = "whole": all or nothing
    whole = script_tests_pass_rate.fn(codes, [HE0["tests"]] * n, [HE0["entry_point"]] * n,
                                      params=ScriptTestsParams(timeout=2, check="whole"), ctx=Context(use_cache=False))
    assert whole.values == pytest.approx([1.0, 0.0, 0.0])


def test_humaneval_0_through_the_spec() -> None:
    """specs/dense_ppo.reward under mapping = "authors": the tests term of HumanEval/0 is 5/7 (each assert a test),
    -0.3 with humaneval_check = "whole" (extra_rewards.py:121: no test passed). Per token, 5/7 is stored in bfloat16
    on the code range (tests/trainers/test_authors_mapping.py's replay, under SmolLM2's tokenizer: under the repo's
    byte-level BPE their masked code loses the marker, whose first pieces are lint -1 and syntax 0)."""
    text = "```python\n" + NEIGHBOURS + "```"
    cols = {"unit_tests": [HE0["tests"]], "entry_point": [HE0["entry_point"]], "reference": [HE0["solution"]]}
    for check, want in (("asserts", 5 / 7), ("whole", -0.3)):
        prog = rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors", "humaneval_check": check})
        assert prog.score([text], **cols).components["tests"].tolist() == pytest.approx([want]), check


def _canonical_rates(rows: list[dict]) -> list[float]:
    got = script_tests_pass_rate.fn([r["solution"] for r in rows], [r["tests"] for r in rows],
                                    [r["entry_point"] for r in rows], params=ScriptTestsParams(timeout=10),
                                    ctx=Context(use_cache=False))
    assert not any(got.infra)
    return got.values


def test_canonical_solutions_pass_each_of_their_asserts() -> None:
    rows = load_humaneval()
    sample = [rows[i] for i in (0, 2, 32, 53, 100)]  # /32: one test (a loop of asserts with set-up before it)
    assert len(script_tests(rows[32]["tests"], rows[32]["entry_point"])) == 1
    assert _canonical_rates(sample) == [1.0] * len(sample)


@pytest.mark.slow
def test_every_canonical_solution_passes_each_of_its_asserts() -> None:
    assert _canonical_rates(load_humaneval()) == [1.0] * 164


# -- dense_ppo's test limit ----------------------------------------------------------------------------------------

def test_the_default_mapping_limits_tests_relative_to_the_reference() -> None:
    """The default mapping runs the tests under the limit the other shipped specs use: max(1 s, 4 x the reference's
    CPU time on the same tests), at most the 10 s timeout (docs/sandbox.md); the paper's code gives 2 s of wall
    time per test (extra_rewards.py:110), authors' mode 2 s of CPU per test. Counters, never clocks."""
    prog = rewardlang.load("specs/dense_ppo.reward")
    endless = "```python\nfrom typing import List\n\n\ndef has_close_elements(numbers, threshold):\n" \
              "    while True:\n        pass\n```"
    good = "```python\n" + HE0["solution"] + "```"
    r = prog.score([good, endless], unit_tests=[HE0["tests"]] * 2, entry_point=[HE0["entry_point"]] * 2,
                   reference=[HE0["reference"]] * 2, solution=[HE0["solution"]] * 2)
    assert r.components["tests"].tolist() == pytest.approx([1.0, -0.3])
    assert r.stats["sandbox.limit_relative"] == 2 and r.stats["sandbox.timeouts"] == 1
    assert r.stats.get("sandbox.limit_no_reference", 0) == 0
