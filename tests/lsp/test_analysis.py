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


# two specs in the default run (every construct of the training section and audits: codepo; a small one: prm); the
# two largest (27 s and 10 s of the suite on 2 busy cores) in the slow run
@pytest.mark.parametrize("name", [pytest.param("dense_ppo.reward", marks=pytest.mark.slow),
                                  pytest.param("constructs.reward", marks=pytest.mark.slow),
                                  "codepo.reward", "prm.reward"])
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


AUDITED = '''input tests: text
input plus_tests: text
input entry_point: text
let code = code_block(completion) or ""
component correct in [0, 1] = tests_pass_rate(code, tests, entry_point)
component fmt in [0, 1] = 1 if len(code) > 0 else 0
audit hidden in [0, 1] = tests_pass_rate(code, plus_tests, entry_point) every 5 steps window 10 steps
    on_error 0
audit dom = component_dominance(threshold=0.8)
reward = correct + hidden
'''


def test_audits_in_the_language_server(sigs):
    a = A.analyse(AUDITED, "/tmp/audited.reward", sigs)
    assert [(d.code, d.message.split("\n")[0]) for d in a.diagnostics] == [
        ("E219", "`hidden` is an audit: it cannot be used in the reward")]
    (l0, c0), _ = a.diagnostics[0].range
    assert (l0, c0) == (9, 19)
    syms = {s.name: s for s in a.symbols()}
    assert syms["hidden"].kind == "event" and syms["hidden"].detail == "audit every 5 steps"
    assert {k.name for k in syms["hidden"].children} == {"every", "window", "on_error"}
    assert syms["dom"].detail == "audit every 1 step"
    text, _ = a.hover(6, 8)  # the audit's name
    assert "audit hidden: number" in text and "never part of the reward" in text
    assert "every 5 steps" in text and "alarm over 10 steps" in text and "[0, 1]" in text
    assert "component_dominance" in a.hover(8, 7)[0]
    # `reward = correct + hidden`: go to the audit's definition
    assert a.definition(9, 21)[1] == ((6, 6), (6, 12))
    # completions: an audit's clauses on its indented lines, statistics after `audit NAME = `, no audit in an
    # expression
    lines = AUDITED.split("\n")
    text2 = "\n".join(lines[:8]) + "\n    "
    labels = {c.label for c in A.complete(a, text2, "/tmp/audited.reward", 8, 4, sigs, [])}
    assert {"every", "window", "margin", "on_error", "timeout"} <= labels and "spans" not in labels
    text3 = "\n".join(lines[:8]) + "\naudit g = "
    labels = {c.label for c in A.complete(a, text3, "/tmp/audited.reward", 8, 10, sigs, [])}
    assert {"group_collapse", "length_drift", "entropy_collapse"} <= labels and "hidden" not in labels
    assert "audit" in {c.label for c in A.complete(a, "", "/tmp/x.reward", 0, 0, sigs, [])}
