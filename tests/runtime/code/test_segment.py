"""Segmentation (PRLCoder): golden cases, properties on all 164 HumanEval solutions, and use from a spec."""

from __future__ import annotations

import ast
import textwrap

import pytest

from rewardlang.runtime.api import Span
from rewardlang.runtime.code.segment import partition, segments
from rewardlang.datasets.humaneval import load_humaneval

CODE = (
    "def f(xs):\n"
    '    """Doc."""\n'
    "    total = 0  # running\n"
    "\n"
    "    # loop\n"
    "    for x in sorted(xs,\n"
    "                    reverse=True):\n"
    "        if x > 2:\n"
    "            total += x\n"
    "    a = 1; b = 2\n"
    "    return total + a + b\n"
)


def _lines(code: str, spans: list[tuple[int, int]]) -> list[str]:
    return [code[a:b] for a, b in spans]


def test_block_level_golden() -> None:
    assert _lines(CODE, segments(CODE, "block")) == [
        "    total = 0  # running\n",
        "    for x in sorted(xs,\n                    reverse=True):\n        if x > 2:\n            total += x\n",
        "    a = 1; b = 2\n",
        "    return total + a + b\n",
    ]


def test_line_level_golden() -> None:
    assert _lines(CODE, segments(CODE, "line")) == [
        "    total = 0  # running\n",
        "    for x in sorted(xs,\n                    reverse=True):\n",
        "        if x > 2:\n",
        "            total += x\n",
        "    a = 1; b = 2\n",
        "    return total + a + b\n",
    ]


def test_bare_body_helpers_and_bad_input() -> None:
    body = "    y = x * 2\n    return y"
    assert _lines(body, segments(body, "block")) == ["    y = x * 2\n", "    return y"]
    two = "def helper(a):\n    return a\n\ndef main(a):\n    b = helper(a)\n    return b\n"
    assert _lines(two, segments(two)) == ["    b = helper(a)\n", "    return b\n"]
    assert _lines(two, segments(two, function="helper")) == ["    return a\n"]
    assert segments("def f(:\n    pass\n") == []
    with pytest.raises(ValueError, match="unknown segment level"):
        segments(CODE, "token")
    assert partition(CODE, segments(CODE), 0)[1].startswith("\n    # loop\n    for")


@pytest.mark.parametrize("level", ["line", "block"])
def test_humaneval_properties(level: str) -> None:
    """On all 164 canonical solutions: ordered, disjoint, whole lines, inside the solution; blocks are whole
    statements; the partition concatenates back to the solution."""
    for row in load_humaneval():
        code = row["prompt"] + row["reference"]
        spans = segments(code, level, row["entry_point"])
        assert spans, row["task_id"]
        # the steps are the solution's, not the prompt's (HumanEval/115's prompt has `import math` before its docstring)
        assert spans[0][0] >= len(row["prompt"]) or row["task_id"] == "HumanEval/115", row["task_id"]
        prev = 0
        for a, b in spans:
            assert prev <= a < b <= len(code)
            assert a == 0 or code[a - 1] == "\n"
            assert code[b - 1] == "\n" or b == len(code)
            prev = b
            if level == "block":
                ast.parse(textwrap.dedent(code[a:b]))
        start = spans[0][0]
        assert "".join(partition(code, spans, start)) == code[start:]


def test_through_a_spec() -> None:
    import rewardlang

    prog = rewardlang.loads(
        'spec s "segments"\n'
        'let code = code_block(completion, "python") or ""\n'
        'component n in [0, 20] = min(len(segments(code, level="line")), 20)   spans segments(code)\n')
    text = "Here:\n```python\ndef f(x):\n    y = x\n    return y\n```"
    out = prog.score(completion=[text])
    assert list(out.components["n"]) == [2.0]
    start = text.index("    y")
    assert out.spans["n"][0] == [Span(start, start + 10, 1.0, "block 1"), Span(start + 10, start + 22, 1.0, "block 2")]
