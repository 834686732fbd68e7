"""Mutation and refactoring operators: golden edits, determinism, the plug-in hook, and the acceptance
properties on all 164 HumanEval canonical solutions (parseable; only the segment differs)."""

from __future__ import annotations

import ast

import pytest

from rewardlang.datasets.prm import mutate
from rewardlang.datasets.prm.mutate import Edit, Site, apply, candidates, operator
from rewardlang.runtime.code.segment import segments
from rewardlang.datasets.humaneval import load_humaneval

CODE = (
    "def f(xs, n):\n"
    "    total = 0\n"
    "    for i in range(1, len(xs)):\n"
    "        if xs[i] > n and i % 2 == 0:\n"
    "            total += xs[i] * 2\n"
    "        else:\n"
    "            continue\n"
    "    ok = True\n"
    "    return total\n"
)


def _seg(text: str) -> tuple[int, int]:
    a = CODE.index(text)
    return a, a + len(text)


FOR_BLOCK = _seg("    for i in range(1, len(xs)):\n        if xs[i] > n and i % 2 == 0:\n"
                 "            total += xs[i] * 2\n        else:\n            continue\n")


def _all(name: str, seg: tuple[int, int]) -> set[str]:
    return {CODE[:e.start] + e.text + CODE[e.end:] for e in candidates(name, CODE, seg)}


def test_golden_mutations() -> None:
    hdr = _seg("        if xs[i] > n and i % 2 == 0:\n")
    assert {c[hdr[0]:].split("\n")[0] for c in _all("comparison_flip", hdr)} == {
        "        if xs[i] <= n and i % 2 == 0:", "        if xs[i] > n and i % 2 != 0:"}
    assert {c[hdr[0]:].split("\n")[0] for c in _all("and_or", hdr)} == {"        if xs[i] > n or i % 2 == 0:"}
    assert {c[hdr[0]:].split("\n")[0] for c in _all("negate_condition", hdr)} == {
        "        if not (xs[i] > n and i % 2 == 0):"}
    rng = _seg("    for i in range(1, len(xs)):\n")
    assert {c[rng[0]:].split("\n")[0] for c in _all("off_by_one", rng)} == {
        "    for i in range(2, len(xs)):", "    for i in range(0, len(xs)):",
        "    for i in range(1, len(xs) + 1):", "    for i in range(1, len(xs) - 1):"}
    assert {c[rng[0]:].split("\n")[0] for c in _all("zero_iteration", rng)} == {"    for i in []:"}
    aug = _seg("            total += xs[i] * 2\n")
    assert {c[aug[0]:].split("\n")[0] for c in _all("arith_swap", aug)} == {
        "            total -= xs[i] * 2", "            total += xs[i] + 2"}
    assert {c[aug[0]:].split("\n")[0] for c in _all("aug_assign", aug)} == {"            total = total + (xs[i] * 2)"}
    assert _all("break_continue", _seg("            continue\n")) == {CODE.replace("continue", "break")}
    assert _all("true_false", _seg("    ok = True\n")) == {CODE.replace("ok = True", "ok = False")}
    assert _all("return_none", _seg("    return total\n")) == {CODE.replace("return total", "return None")}
    assert _all("statement_to_pass", _seg("    return total\n")) == {CODE.replace("return total", "pass")}
    assert not _all("break_continue", _seg("    return total\n"))


def test_golden_refactorings() -> None:
    assert not candidates("for_to_while", CODE, FOR_BLOCK)  # a `continue` of its own: not applicable
    loop = "def g(n):\n    s = 0\n    for k in range(n, 0, -2):\n        s += k\n    return s\n"
    (e,) = candidates("for_to_while", loop, (20, 69))
    new = loop[:e.start] + e.text + loop[e.end:]
    assert new == ("def g(n):\n    s = 0\n    k = n\n    k_stop = 0\n    while k > k_stop:\n        s += k\n"
                   "        k -= 2\n    return s\n")
    ns: dict = {}
    exec(new, ns)
    assert ns["g"](7) == sum(range(7, 0, -2))
    # swap_if_else on the for block: the else branch comes first, under `not`
    (sw,) = candidates("swap_if_else", CODE, FOR_BLOCK)
    assert CODE[:sw.start] + sw.text + CODE[sw.end:] == CODE.replace(
        "        if xs[i] > n and i % 2 == 0:\n            total += xs[i] * 2\n        else:\n            continue\n",
        "        if not (xs[i] > n and i % 2 == 0):\n            continue\n        else:\n            total += xs[i] * 2\n")
    ex = _seg("            total += xs[i] * 2\n")
    got = _all("extract_variable", ex)
    assert CODE.replace("            total += xs[i] * 2\n",
                        "            tmp1 = xs[i] * 2\n            total += tmp1\n") in got


def test_rename_is_local_and_sound() -> None:
    code = "def f(xs):\n    out = [y * 2 for y in xs]\n    return out\n"
    seg = (11, 42)
    edits = candidates("rename_local", code, seg)
    # `out` is used outside the segment and `xs` is a parameter: only the comprehension variable is renamed
    assert [code[:e.start] + e.text + code[e.end:] for e in edits] == [
        "def f(xs):\n    out = [y_1 * 2 for y_1 in xs]\n    return out\n"]


def test_deterministic_under_seed() -> None:
    a = [apply("off_by_one", CODE, FOR_BLOCK, seed=s) for s in range(6)]
    b = [apply("off_by_one", CODE, FOR_BLOCK, seed=s) for s in range(6)]
    assert a == b and len({m.code for m in a if m}) > 1  # the seed chooses among the sites


def test_plugin_operator_and_errors() -> None:
    @operator("test_double_return", kind="mutation")
    def double(site: Site) -> list[Edit]:
        return [Edit(site.start, site.end, site.text.replace("return total", "return total * 2"))]

    try:
        m = apply("test_double_return", CODE, _seg("    return total\n"))
        assert m is not None and m.segment == "    return total * 2\n" and m.kind == "mutation"
        assert "test_double_return" in mutate.names("mutation")
    finally:
        del mutate.OPERATORS["test_double_return"]
    with pytest.raises(KeyError, match="unknown operator"):
        apply("nope", CODE, FOR_BLOCK)
    with pytest.raises(ValueError, match="kind"):
        operator("x", kind="other")


@pytest.mark.parametrize("level", [pytest.param("line", marks=pytest.mark.slow), "block"])
def test_humaneval_every_operator_parses_and_stays_in_its_segment(level: str) -> None:
    """Acceptance: on all 164 canonical solutions, every operator's output parses and differs from the
    solution only inside its segment (byte-identical prefix and suffix)."""
    applied = {name: 0 for name in mutate.OPERATORS}
    for row in load_humaneval():
        code = row["prompt"] + row["reference"]
        for seg in segments(code, level, row["entry_point"]):
            for name in mutate.OPERATORS:
                m = apply(name, code, seg, seed=1)
                if m is None:
                    continue
                applied[name] += 1
                ast.parse(m.code)
                assert m.code != code
                assert m.code[:seg[0]] == code[:seg[0]], (row["task_id"], name)
                assert m.code[m.new_end:] == code[seg[1]:], (row["task_id"], name)
    # for_to_while and swap_if_else rewrite a whole compound statement: at line level they never apply
    whole = {"for_to_while", "swap_if_else"} if level == "line" else set()
    assert all(n > 0 for name, n in applied.items() if name not in whole), applied
    assert all(applied[name] == 0 for name in whole), applied
