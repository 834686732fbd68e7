"""DenseRewards: the spec's (B, T) per-token reward under a real tokenizer, golden cases computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import rewardlang
from rewardlang.trainers.dense import DenseRewards
from rewardlang.trainers.model import build_tokenizer

TESTS = "def check(candidate):\n    assert candidate(1) == 2\n"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()  # the repo's byte-level BPE (vocab 512), trained locally on HumanEval's text


def _pieces(tok, ids):
    return [tok.decode([i]) for i in ids]


def test_every_attribution_form_on_a_real_completion(tok) -> None:
    forms = (Path(__file__).parents[1] / "fixtures" / "token_forms.reward").read_text(encoding="utf-8")
    prog = rewardlang.loads(forms + "acc.weight = 2\nplain.weight = 0\n")
    text = "A TODO\n```python\nx = 1\ny = (\n```"
    ids = tok(text)["input_ids"]
    assert _pieces(tok, ids) == ["A", " T", "O", "D", "O", "\n", "`", "`", "`", "p", "y", "th", "on", "\n",
                                 "x", " =", " 1", "\n", "y", " =", " (", "\n", "`", "`", "`"]
    out = DenseRewards(prog, tok)(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), {})
    assert out.texts == [text] and not out.masked.any()
    z = [0.0] * 25
    # by hand: code = "x = 1\ny = (" is tokens 14..20; the violation is the unfinished line "y = (" (tokens 18-20);
    # the fences are "```python\n" (6..13) and "\n```" (21..24)
    want = {
        "acc": z[:24] + [3.0],
        "tests": z[:14] + [0.5] * 7 + z[:4],
        "todo": [0.25] + [-1.0] * 4 + [0.25] * 20,
        "lines": z[:16] + [2.0] + z[:3] + [2.0] + z[:4],   # the last token of "x = 1" and of "y = ("
        "syntax": z[:6] + [2.0] * 8 + [1.0] * 4 + [-1.0] * 3 + [2.0] * 4,
        "plain": z[:24] + [7.0],
    }
    for name, vec in want.items():
        assert out.components[name][0].tolist() == pytest.approx(vec), name
    total = [2 * a + t + d + ln + s for a, t, d, ln, s in
             zip(want["acc"], want["tests"], want["todo"], want["lines"], want["syntax"])]  # plain has weight 0
    assert out.rewards[0].tolist() == pytest.approx(total)


def test_dense_ppo_spec_equals_the_papers_formula(tok) -> None:
    """R_t = 0.1 lint_t + 0.1 syntax_t + 0.7 tests_t + 0.1 dfg_t on a hand-built completion (KL is the trainer's)."""
    prog = rewardlang.load("specs/dense_ppo.reward")
    text = "Sure:\n```python\nimport os\ndef inc(x):\n    return x +\n```\nok"
    ids = tok(text)["input_ids"] + [tok.eos_token_id]
    assert _pieces(tok, ids) == ["S", "u", "re", ":", "\n", "`", "`", "`", "p", "y", "th", "on", "\n",
                                 "i", "mp", "ort", " o", "s", "\n", "def", " in", "c", "(", "x", "):", "\n   ",
                                 " return", " x", " +", "\n", "`", "`", "`", "\n", "o", "k", "<|endoftext|>"]
    T = len(ids) + 3  # right padding that must stay 0
    batch = torch.full((1, T), tok.pad_token_id)
    batch[0, :len(ids)] = torch.tensor(ids)
    mask = torch.zeros(1, T, dtype=torch.long)
    mask[0, :len(ids)] = 1
    cols = {"tests": [TESTS], "entry_point": ["inc"], "reference": ["def inc(x):\n    return x + 1\n"]}
    out = DenseRewards(prog, tok)(batch, mask, cols)
    # lint (ruff on the whole response): lines 1 "Sure:", 2 "```python", 5 "    return x +", 6 "```" are
    # invalid-syntax, line 7 "ok" is W292; lines 3-4 are clean (+1). Token 25 "\n   " overlaps line 5: -1.
    # The EOS has width 0: nothing.
    lint = [-1.0] * 13 + [1.0] * 12 + [-1.0] * 11 + [0.0]
    # syntax: fence tokens 2.0; code tokens +1 up to CPython's first violation (the dangling "+", token 28), -1 on
    # it; "\nok" after the closing fence 0
    syntax = [0.0] * 5 + [2.0] * 8 + [1.0] * 15 + [-1.0] + [2.0] * 4 + [0.0] * 4
    # tests: nothing passes (the code does not compile): -0.3 on the code tokens 13..28
    tests = [0.0] * 13 + [-0.3] * 16 + [0.0] * 8
    # dfg: the dataflow of the reference (x -> x) is all found: 1.0 - 0.5 on the code tokens
    dfg = [0.0] * 13 + [0.5] * 16 + [0.0] * 8
    for name, vec in (("lint", lint), ("syntax", syntax), ("tests", tests), ("dfg", dfg)):
        assert out.components[name][0, :len(ids)].tolist() == pytest.approx(vec, abs=1e-6), name
    R = [0.1 * a + 0.1 * b + 0.7 * c + 0.1 * d for a, b, c, d in zip(lint, syntax, tests, dfg)]
    assert out.rewards[0, :len(ids)].tolist() == pytest.approx(R, abs=1e-6)
    assert out.rewards[0, len(ids):].tolist() == [0.0, 0.0, 0.0]
    assert out.rewards.dtype == torch.float32 and out.rewards.shape == (1, T)


def test_padding_masked_rows_and_sequence_specs(tok) -> None:
    # any reward expression when no component has a `tokens` clause: the total on the last valid token
    prog = rewardlang.loads('''
component n = len(completion)
component bad = 1 / (len(completion) - 2)
reward = n * 2 + bad
''')
    a, b = tok("abc")["input_ids"], tok("xy")["input_ids"]
    ids = torch.tensor([a + [0] * (4 - len(a)), b + [0] * (4 - len(b))])
    mask = torch.tensor([[1] * len(a) + [0] * (4 - len(a)), [1] * len(b) + [0] * (4 - len(b))])
    dense = DenseRewards(prog, tok)
    out = dense(ids, mask, {})
    assert out.texts == ["abc", "xy"]
    assert out.masked.tolist() == [False, True]  # 1 / 0 fails without on_error: the row is masked
    row = [0.0] * 4
    row[len(a) - 1] = 3 * 2 + 1.0
    assert out.rewards.tolist() == [row, [0.0] * 4]
    assert dense.fallbacks == 0
