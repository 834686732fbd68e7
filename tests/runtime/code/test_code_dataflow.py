"""Dataflow edges equal the codebleu package's ``get_data_flow``; the seed-0 set order equals a real
``PYTHONHASHSEED=0`` interpreter."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.code.dataflow import MAX_DEPTH, dataflow_edges, normalize
from rewardlang.runtime.code.parse import language, parse
from rewardlang.runtime.code.pyset import set_order0, str_hash0
from rewardlang.runtime.code.strip import strip_or_keep
from rewardlang.runtime.code.tree import flatten

dfm = pytest.importorskip("codebleu.dataflow_match")




def package_edges(code: str) -> list:  # type: ignore[type-arg]
    from codebleu.parser import DFG_python
    from tree_sitter import Parser

    return dfm.get_data_flow(code, [Parser(language()), DFG_python])


def ours(code: str, order: str = "process") -> list:  # type: ignore[type-arg]
    return dataflow_edges(flatten(parse(code)), code, order)


def test_golden() -> None:
    code = "def f(a):\n    b = a + 1\n    return b\n"
    edges = ours(code)
    assert edges == [("a", 3, "comesFrom", [], []), ("b", 6, "computedFrom", ["a", "1"], [8, 10]),
                     ("a", 8, "comesFrom", ["a"], [3]), ("1", 10, "comesFrom", [], []),
                     ("b", 12, "comesFrom", ["b"], [6])]
    assert edges == package_edges(code)
    assert normalize(edges) == [("var_0", "comesFrom", []), ("var_2", "computedFrom", ["var_0", "var_1"]),
                                ("var_0", "comesFrom", ["var_0"]), ("var_1", "comesFrom", []),
                                ("var_2", "comesFrom", ["var_2"])]
    assert normalize(edges) == dfm.normalize_dataflow(edges)
    # no variable relations at all: no edges
    assert ours("def f():\n    return 1\n") == [] == package_edges("def f():\n    return 1\n")
    assert ours("") == []


def test_loops_branches_comprehensions() -> None:
    code = ("def g(xs, k=2):\n    t = 0\n    for i, x in enumerate(xs):\n        if x > k:\n            t += x\n"
            "        elif x < 0:\n            t -= 1\n        else:\n            t = t * i\n    while t > 10:\n"
            "        t //= 2\n    ys = [y * t for y in xs if y]\n    a, b = b, a = 1, 2\n    return ys, t\n")
    assert ours(code) == package_edges(code)
    assert len(ours(code)) > 20


def test_corpus_equals_package(corpus_module) -> None:
    rows = corpus_module.load_corpus()
    texts = sorted({strip_or_keep(r.candidate.strip()) for r in rows}
                   | {strip_or_keep(r.reference.strip()) for r in rows})
    for t in texts:
        assert ours(t) == package_edges(t), t


def _mutate(code: str, rng: random.Random) -> str:
    lines = code.split("\n")
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(4)
        i = rng.randrange(len(lines))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 2 and lines[i]:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + rng.choice(["(", ")", ":", " = ", "for ", ",", "\t", "'"]) + lines[i][j:]
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        if not lines:
            lines = [""]
    return "\n".join(lines)


def test_mutated_corpus_equals_package(corpus_module) -> None:
    """Broken programs exercise the reference's failure paths (None fields, ERROR nodes)."""
    rows = corpus_module.load_corpus()
    rng = random.Random(3)
    refs = sorted({r.reference for r in rows})
    for _ in range(600):
        code = _mutate(rng.choice(refs), rng)
        assert ours(code) == package_edges(code), code


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("abxy12 \n:()[]=+,.'\"") + ["for ", " in ", "if ", "else", "    ",
                                                                    "while ", "def ", "lambda ", "\n    "]),
                max_size=30).map("".join))
def test_fuzz_equals_package(code: str) -> None:
    assert ours(code) == package_edges(code)


def test_misread_extra_node_like_the_package() -> None:
    """py-tree-sitter's node.children calls the comment here a "block" (an alias misapplied to an extra); the
    reference counts it as a token, so token positions shift, and ours must shift the same way."""
    code = ') in while \n+def \n    : def ":= in b#c12 in \n    yx, y[a for a in b]\na: ,return "while else.#c=#cy'
    assert ours(code) == package_edges(code)
    assert ours(code)[3] == ("a", 16, "comesFrom", [], [])


def test_too_deep_has_no_edges() -> None:
    code = "x = " + "(" * (MAX_DEPTH + 5) + "y" + ")" * (MAX_DEPTH + 5) + "\nz = x\n"
    assert ours(code) == []


def test_seed0_order_equals_a_seed0_interpreter() -> None:
    rng = random.Random(11)
    alpha = "abcxyz_Aé中𝔘0"
    cases = []
    for _ in range(400):
        pool = ["".join(rng.choice(alpha) for _ in range(rng.randrange(0, 8))) for _ in range(rng.randrange(1, 40))]
        cases.append([rng.choice(pool) for _ in range(rng.randrange(0, 60))])
    names = sorted({s for c in cases for s in c})
    prog = ("import json, sys\nd = json.load(sys.stdin)\n"
            "print(json.dumps({'h': [hash(s) for s in d['names']], 'o': [list(set(c)) for c in d['cases']]}))")
    out = subprocess.run([sys.executable, "-c", prog], input=json.dumps({"names": names, "cases": cases}),
                         env={"PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout)
    assert [str_hash0(s) for s in names] == ref["h"]
    assert [set_order0(c) for c in cases] == ref["o"]


def test_orders_differ_only_in_merged_name_order() -> None:
    code = "def f(a, b):\n    for i in a:\n        b = b + i * a\n    return b\n"
    seed0, process = ours(code, "seed0"), ours(code, "process")
    assert [(e[0], e[1], e[2], sorted(e[3])) for e in seed0] == [(e[0], e[1], e[2], sorted(e[3])) for e in process]
    with pytest.raises(ValueError):
        ours(code, "sorted")


@pytest.mark.parametrize("kind", ["while", "for"])
def test_loops_nested_past_the_budget_have_no_dataflow_in_bounded_work(kind: str) -> None:
    """The reference walks each loop's body twice, so loops nested d deep cost 2^d walks of the innermost body (26
    nested `while` loops in 1.3 KB took a scoring process 629 s, deaf to SIGTERM). The loops' passes draw on a
    budget of nodes; past it the program has no dataflow, as past MAX_DEPTH: the budget stops the walk, not a clock."""
    from rewardlang.runtime.code import dataflow

    def nested(d: int) -> str:
        head = "".join("    " * (k + 1) + (f"while a{k}:\n" if kind == "while" else f"for a{k} in b{k}:\n")
                       for k in range(d))
        return "def f(x):\n" + head + "    " * (d + 1) + "x = x + 1\n"

    deep = nested(40)
    walk = dataflow._DFG(flatten(parse(deep)), deep, "seed0")
    with pytest.raises(dataflow._Fail, match="MAX_LOOP_NODES"):
        walk.run(0, {})
    assert dataflow_edges(flatten(parse(deep)), deep) == []
    shallow = nested(4)  # ordinary nesting is followed, as the reference follows it
    assert dataflow_edges(flatten(parse(shallow)), shallow) != []


def test_the_loop_budget_is_far_above_what_humaneval_needs() -> None:
    import gzip

    from rewardlang.datasets.humaneval import humaneval_path
    from rewardlang.runtime.code import dataflow

    used = []
    for r in (json.loads(x) for x in gzip.open(humaneval_path(), "rt")):
        code = r["prompt"] + r["canonical_solution"]
        walk = dataflow._DFG(flatten(parse(code)), code, "seed0")
        walk.run(0, {})
        used.append(dataflow.MAX_LOOP_NODES - walk.loop_budget)
    assert 0 < max(used) < dataflow.MAX_LOOP_NODES // 100
