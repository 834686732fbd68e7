"""Issue 25 major 8: the dense syntax reward's fence value goes to the fence only; prose on the fence's line gets
what prose gets elsewhere (0, docs/specs/dense_ppo.md), so where a newline goes cannot change an answer's reward."""

from __future__ import annotations

import pytest
import torch

import rewardlang
from rewardlang.trainers.dense import DenseRewards
from rewardlang.trainers.model import build_tokenizer

CODE = "def inc(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def syntax():
    tok = build_tokenizer()
    prog = rewardlang.load("specs/dense_ppo.reward")
    dense = DenseRewards(prog, tok)

    def run(text: str) -> list[tuple[str, float]]:
        ids = tok(text)["input_ids"]
        out = dense(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), {
            "tests": ["assert inc(1) == 2"], "entry_point": ["inc"], "reference": [CODE]})
        assert not out.masked.any()
        return list(zip([tok.decode([i]) for i in ids], out.components["syntax"][0].tolist(), strict=True))

    return run


def test_prose_on_the_fence_lines_gets_nothing(syntax) -> None:
    placed = syntax("Sure: ```python\n" + CODE + "``` Hope it helps")
    text = "".join(p for p, _ in placed)
    # every character of the prose before the opening fence and after the closing one is on a token worth 0
    pos, values = 0, []
    for piece, v in placed:
        values.append((pos, pos + len(piece), v))
        pos += len(piece)
    prose = [(0, text.index("```")), (text.rindex("```") + 3, len(text))]
    for a, b in prose:
        touching = [v for s, e, v in values if s < b and e > a and text[max(s, a):min(e, b)].strip()]
        assert touching and all(v == 0.0 for v in touching), (text[a:b], touching)
    assert sum(v == 2.0 for _, v in placed) >= 6  # the fences keep their value


def test_where_the_newline_goes_does_not_change_the_reward(syntax) -> None:
    same_line = syntax("```python\n" + CODE + "``` Hope it helps")
    next_line = syntax("```python\n" + CODE + "```\nHope it helps")
    before_same = syntax("Here: ```python\n" + CODE + "```")
    before_next = syntax("Here:\n```python\n" + CODE + "```")
    assert sum(v for _, v in same_line) == pytest.approx(sum(v for _, v in next_line))
    assert sum(v for _, v in before_same) == pytest.approx(sum(v for _, v in before_next))
