"""ruff / ruff_lines / pylint reward functions: spans, batching, isolation, failures, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rewardlang.runtime.api import Context, Span
from rewardlang.runtime.components.lint import (
    PylintParams, RuffParams, pylint_spans, ruff_line_spans, ruff_spans,
)
from rewardlang.runtime.registry import load_all

def _ruff_bin() -> str:
    from ruff.__main__ import find_ruff_bin

    return find_ruff_bin()


def ruff(codes: list[str], ctx: Context | None = None, **kw: object):
    return ruff_spans.fn(codes, params=RuffParams(**kw), ctx=ctx or Context(use_cache=False))


def pylint(codes: list[str], ctx: Context | None = None, **kw: object):
    return pylint_spans.fn(codes, params=PylintParams(**kw), ctx=ctx or Context(use_cache=False))


# ------------------------------------------------------------------------------------------ ruff
def test_registered_signatures() -> None:
    reg = load_all()
    for name in ("ruff", "ruff_lines", "pylint"):
        sig = reg[name].signature
        assert str(sig.returns) == "spans" and sig.spans_of == "code" and not reg[name].in_workers


def test_ruff_spans_are_character_ranges_of_the_code() -> None:
    code = "import os\nx = 'é' ; y = undefined\n"
    r = ruff([code], select=["E", "F"])
    assert r.errors == [None]
    assert r.values[0] == [
        Span(7, 9, -1.0, "F401: `os` imported but unused"),
        Span(18, 19, -1.0, "E702: Multiple statements on one line (semicolon)"),
        Span(24, 33, -1.0, "F821: Undefined name `undefined`"),
    ]
    assert [code[s.start:s.end] for s in r.values[0]] == ["os", ";", "undefined"]
    assert r.details[0] == {"rules": {"F401": 1, "E702": 1, "F821": 1}, "classes": {"warning": 2, "error": 1}}


def test_bom_crlf_and_non_bmp_characters() -> None:
    code = "\ufeffimport sys\r\ns = '😀😀'; t = nope\r\n"
    spans = ruff([code], select=["F"]).values[0]
    assert [code[s.start:s.end] for s in spans] == ["sys", "nope"]


def test_default_selection_is_rufffs_default_set() -> None:
    # E501 (line length) and W291 (trailing whitespace) are not in E4/E7/E9/F
    code = "x = 1   \n" + "y = '" + "a" * 100 + "'\n" + "import os\n"
    labels = [s.label.split(":")[0] for s in ruff([code]).values[0]]
    assert labels == ["E402", "F401"]
    labels = [s.label.split(":")[0] for s in ruff([code], select=["E", "W", "F"], ignore=["E402"]).values[0]]
    assert labels == ["W291", "E501", "F401"]


def test_noqa_does_not_hide_findings_unless_asked() -> None:
    code = "import os  # noqa\nimport sys  # noqa: F401\n"
    assert len(ruff([code], select=["F"]).values[0]) == 2
    assert ruff([code], select=["F"], respect_noqa=True).values[0] == []


def test_syntax_errors_and_other_languages_are_findings() -> None:
    js = "function f(x) {\n  return x + 1;\n}\nconsole.log(f(1));\n"
    r = ruff(["def f(:\n  pass", js, ""])
    assert r.errors == [None, None, None]
    assert r.values[0][0] == Span(6, 7, -1.0, "invalid-syntax: Expected a parameter or the end of the parameter list")
    assert r.values[1][0].label.startswith("invalid-syntax: Simple statements must be separated")
    assert r.values[2] == []
    for code, spans in zip(["def f(:\n  pass", js], r.values):
        assert all(0 <= s.start <= s.end <= len(code) for s in spans)


def test_bad_input_never_crashes() -> None:
    garbage = bytes(range(256)).decode("latin-1") * 4
    surrogate = "x = '\ud800'\ny = undefined\n"
    deep = "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n"
    big = "".join(f"v{i} = undefined_{i}\n" for i in range(60_000))  # ~1.3 MB
    r = ruff([garbage, surrogate, deep, big], select=["F"])
    assert r.errors == [None] * 4
    assert r.values[0] and all(0 <= s.start <= s.end <= len(garbage) for s in r.values[0])
    assert [surrogate[s.start:s.end] for s in r.values[1]] == ["undefined"]
    assert isinstance(r.values[2], list)
    assert len(r.values[3]) == 60_000
    last = r.values[3][-1]
    assert big[last.start:last.end] == "undefined_59999"


def test_one_ruff_process_per_batch_and_cache() -> None:
    ctx = Context()
    codes = [f"import m{i}\n" for i in range(40)] + ["import m0\n"]
    r = ruff_spans.fn(codes, params=RuffParams(), ctx=ctx)
    assert ctx.stats["tool.ruff.runs"] == 1
    assert all(len(v) == 1 for v in r.values)
    ruff_spans.fn(codes[:5], params=RuffParams(), ctx=ctx)
    assert ctx.stats["tool.ruff.runs"] == 1  # all cached
    ruff_spans.fn(codes[:5], params=RuffParams(select=["E"]), ctx=ctx)
    assert ctx.stats["tool.ruff.runs"] == 2  # other options, other key


def test_batch_invariance() -> None:
    codes = ["import os\n", "x = y\n", "def f(:\n", "import os\n\n\n\nx = 1;\n", "", "a = 1\nb = a\n"]
    together = ruff(codes, select=["E", "F", "W"]).values
    alone = [ruff([c], select=["E", "F", "W"]).values[0] for c in codes]
    assert together == alone


def test_params_are_validated() -> None:
    with pytest.raises(ValidationError):
        RuffParams(select=["e501"])
    with pytest.raises(ValidationError):
        RuffParams(select=[])
    with pytest.raises(ValidationError):
        RuffParams(line_length=0)
    with pytest.raises(ValidationError):
        PylintParams(enable=["W 0611"])


def test_ruff_crash_on_one_sample_fails_only_that_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_wrapper) -> None:
    codes = ["import os\n", "CRASH_ME = 1\n", "x = undefined\n"]
    base = ruff(codes).values
    monkeypatch.setenv("REWARDLANG_TOOL_RUFF", tool_wrapper([_ruff_bin()]))
    ctx = Context(use_cache=False)
    r = ruff_spans.fn(codes, params=RuffParams(), ctx=ctx)
    assert r.errors[1] is not None and "70" in r.errors[1] and "wrapped tool crashed" in r.errors[1]
    assert r.infra == [False, False, False]
    assert r.values[0] == base[0] and r.values[2] == base[2]
    assert ctx.stats["ruff.errors"] == 1


def test_missing_ruff_is_infra_for_every_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLANG_TOOL_RUFF", str(tmp_path / "no-ruff-here"))
    r = ruff(["import os\n", "x = 1\n"])
    assert r.infra == [True, True]
    assert all(e is not None and "could not be started" in e for e in r.errors)


# ------------------------------------------------------------------------------------ ruff_lines
def test_ruff_lines_cover_whole_flagged_lines() -> None:
    code = "x = 1\nif x is (\n    'abc'\n):\n    pass\nimport os\n"
    r = ruff_line_spans.fn([code], params=RuffParams(select=["E", "F"]), ctx=Context(use_cache=False))
    spans = r.values[0]
    # F632 spans lines 2-4; E402 and F401 share line 6 (one span, both codes)
    assert [code[s.start:s.end] for s in spans] == ["if x is (\n", "    'abc'\n", "):\n", "import os\n"]
    assert [s.label for s in spans] == ["line 2: F632", "line 3: F632", "line 4: F632", "line 6: E402, F401"]
    assert all(s.value == -1.0 for s in spans)


def test_ruff_lines_range_ending_at_a_line_start_does_not_flag_that_line() -> None:
    code = "def f(:\n  pass"
    spans = ruff_line_spans.fn([code], params=RuffParams(), ctx=Context(use_cache=False)).values[0]
    assert [(s.start, s.end, s.label) for s in spans] == [(0, 8, "line 1: invalid-syntax")]


def test_ruff_lines_last_line_without_break_and_crlf() -> None:
    code = "import os\r\nimport sys"
    spans = ruff_line_spans.fn([code], params=RuffParams(), ctx=Context(use_cache=False)).values[0]
    assert [code[s.start:s.end] for s in spans] == ["import os\r\n", "import sys"]


# ---------------------------------------------------------------------------------------- pylint
def test_pylint_spans_convert_byte_columns_to_characters() -> None:
    code = "x = 'é'; y = undefined_v\n"
    r = pylint([code], enable=["undefined-variable"])
    assert r.values[0] == [Span(13, 24, -1.0, "E0602: Undefined variable 'undefined_v'")]
    assert code[13:24] == "undefined_v"


def test_pylint_pragmas_are_neutralised_unless_respected() -> None:
    code = "import os  # pylint: disable=unused-import\n"
    assert [s.label for s in pylint([code], enable=["W"]).values[0]] == ["W0611: Unused import os"]
    assert pylint([code], enable=["W"], respect_pragmas=True).values[0] == []


def test_pylint_syntax_error_is_a_finding_and_one_run_per_batch() -> None:
    ctx = Context(use_cache=False)
    codes = ["def f(:\n", "import os\n", "x = 1\n"]
    r = pylint_spans.fn(codes, params=PylintParams(), ctx=ctx)
    assert r.errors == [None, None, None]
    assert [s.label.split(":")[0] for s in r.values[0]] == ["E0001"]
    assert r.details[1] == {"rules": {"W0611": 1}, "classes": {"W": 1}}
    assert [s.label for s in r.values[1]] == ["W0611: Unused import os"]
    assert r.values[2] == []
    assert ctx.stats["tool.pylint.runs"] == 1


def test_pylint_never_compares_samples_with_each_other() -> None:
    body = "".join(f"    v{i} = a * {i} + b\n" for i in range(12))
    code1 = f"def f(a, b):\n{body}    return v0\n"
    code2 = f"def g(a, b):\n{body}    return v1\n"
    r = pylint([code1, code2], enable=["R", "similarities"])
    assert not any("R0801" in s.label for spans in r.values for s in spans)


def test_pylint_internal_failure_is_a_sample_error() -> None:
    deep = "x = 1" + "+1" * 2000 + "\n"   # parses, but astroid's recursive rebuild fails
    r = pylint([deep, "import os\n"], enable=["W"])
    assert r.errors[0] is not None and "astroid-error" in r.errors[0] and not r.infra[0]
    assert r.errors[1] is None and [s.label for s in r.values[1]] == ["W0611: Unused import os"]


_POOL = ["import os\n", "x = y\n", "def f(:\n", "a = 1;\n", "", "if x == None:\n    pass\n", "import os\nos = 1\n",
         "l = lambda: 0\n", "try:\n    a()\nexcept:\n    pass\n", "x = 'é'; y = und\n", "\ufeffimport sys\r\n"]
_ALONE: dict[str, list[Span]] = {}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=1, max_size=8))
def test_property_results_do_not_depend_on_the_batch(batch: list[str]) -> None:
    got = ruff(batch, select=["E", "F"]).values
    for code, spans in zip(batch, got):
        if code not in _ALONE:
            _ALONE[code] = ruff([code], select=["E", "F"]).values[0]
        assert spans == _ALONE[code]
