"""The execution functions with ``language``: a constant, a column, an unknown constant (a located check
error), an unknown per-row value (that row's error, counted), and ``code_block`` with each language's fences."""

from __future__ import annotations

import json
import os
import sys

import pytest

import rewardlang
from rewardlang.diagnostics import SpecError
from rewardlang.runtime import registry
from rewardlang.runtime.api import Context

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sandbox"))
from lang_programs import lang_tests, require, unit  # noqa: E402

SQ = "def sq(x):\n    return x * x\n"
HE_TESTS = "def check(candidate):\n    assert candidate(2) == 4\n"


def test_signature_has_language() -> None:
    sig = registry.signatures()["tests_pass_rate"]
    assert "language: text" in sig.usage()


def test_constant_language_in_a_spec_and_fences() -> None:
    require("cpp")
    prog = rewardlang.loads('''
input tests: any
component correct in [0, 1] = tests_pass_rate(code_block(completion, "cpp") or "", tests, language="cpp")
component coderl in [-1, 1] = outcome(code_block(completion, "c++") or "", tests, language="cpp")
''')
    t = json.dumps(lang_tests("cpp"))
    completions = [f"Here:\n```c++\n{unit('cpp')}```", f"```cxx\n{unit('cpp', False)}```", "```cpp\nint x\n```",
                   "no code"]
    out = prog.score(completion=completions, tests=[t] * 4)
    assert out.components["correct"].tolist() == pytest.approx([1.0, 1 / 3, 0.0, 0.0])
    assert out.components["coderl"].tolist() == pytest.approx([1.0, -0.3, -1.0, -1.0])


def test_language_column_with_an_unknown_row(tmp_path) -> None:
    require("js")
    require("sh")
    ctx = Context(timeout=2.0)
    f = registry.load_all()["outcome_label"].fn
    langs = ["js", "sh", "python", "Rust", None]
    codes = [unit("js"), unit("sh", False), SQ, "x", SQ]
    tests = [lang_tests("js"), json.dumps(lang_tests("sh")), HE_TESTS, "{}", HE_TESTS]
    r = f(codes, tests, [None, None, "sq", None, "sq"], langs, params=None, ctx=ctx)
    assert list(r.values) == ["pass", "fail", "pass", None, "pass"]
    assert r.errors[3] is not None and "unknown language 'Rust'" in r.errors[3]
    assert not any(r.infra)
    assert ctx.stats["sandbox.unknown_language"] == 1


def test_unknown_constant_language_is_a_located_check_error() -> None:
    src = ('input tests: any\n'
           'component c in [0, 1] = tests_pass_rate(completion, tests, language="rust")\n')
    with pytest.raises(SpecError) as ei:
        rewardlang.loads(src, filename="bad.reward")
    d = ei.value.diagnostics[0]
    assert d.code == "E203"
    assert "unknown language 'rust'" in d.message
    assert d.loc.line == 2 and d.loc.column == src.splitlines()[1].index('"rust"') + 1
    assert "'cpp'" in (d.hint or "")


def test_plain_text_tests_for_another_language_are_a_row_error() -> None:
    require("c")
    ctx = Context(timeout=2.0)
    r = registry.load_all()["tests_pass_rate"].fn([unit("c")], ["assert evens(5) == [0,2,4]"], None, "c",
                                                  params=None, ctx=ctx)
    assert r.values[0] is None and "cannot be judged safely" in r.errors[0] and not r.infra[0]
