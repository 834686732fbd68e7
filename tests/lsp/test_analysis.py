"""rewardlang.lsp.analysis without the protocol: every answer on every prefix of the shipped specs (what an
editor holds while a spec is typed) comes back without raising, and positions convert both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardlang.lsp import analysis as A
from rewardlang.runtime import registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sigs():
    return registry.signatures()


@pytest.mark.parametrize("name", ["dense_ppo.reward", "constructs.reward", "codepo.reward", "prm.reward"])
def test_every_answer_on_prefixes_of_a_spec(sigs, name):
    path = ROOT / "specs" / name
    full = path.read_text(encoding="utf-8")
    for cut in range(0, len(full) + 1, max(1, len(full) // 60)):
        text = full[:cut]
        a = A.analyse(text, str(path), sigs)
        idx = A.LineIndex(text)
        for off in {0, cut // 2, max(0, cut - 1), cut}:
            line, ch = idx.position(off)
            a.hover(line, ch)
            a.definition(line, ch)
            A.complete(a, text, str(path), line, ch, sigs, [])
        a.symbols()
        for d in a.diagnostics:
            (l0, c0), (l1, c1) = d.range
            assert (l0, c0) <= (l1, c1) and l1 <= text.count("\n") + 1, (cut, d)


def test_line_index_round_trip_with_wide_characters():
    text = "a🙂b\nλ\n\nend"
    idx = A.LineIndex(text)
    for off in range(len(text) + 1):
        assert idx.offset(*idx.position(off)) == off
    assert idx.position(text.index("b")) == (0, 3)  # 🙂 is two UTF-16 units
    assert idx.offset(5, 0) == len(text)  # past the end: clamped
