"""Comment/docstring stripping equals the codebleu package's ``remove_comments_and_docstrings`` exactly."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.code.strip import strip_or_keep, strip_python, strip_python_reference

codebleu_utils = pytest.importorskip("codebleu.parser.utils")




def package(source: str) -> str:
    """What the package's syntax and dataflow matches parse: its function, or the text where it raises."""
    try:
        return codebleu_utils.remove_comments_and_docstrings(source, "python")
    except Exception:  # noqa: BLE001 - the package falls back to the raw text
        return source


def test_golden() -> None:
    src = 'def f(x):\n    """Doc."""\n    # comment\n\n    y = x  # trailing\n    return "s"\n'
    assert strip_python(src) == 'def f(x):\n    y = x  \n    return "s"'
    # a statement-level string after a NEWLINE goes too, one after a comment line (NL) stays
    assert strip_python('x = 1\n"gone"\n') == "x = 1"
    assert strip_python('def f():\n    x = 1\n    # c\n    "kept"\n') == 'def f():\n    x = 1\n    "kept"'
    # a backslash continuation joins the lines (the space before the backslash is no token's: it goes);
    # tabs between tokens become single spaces
    assert strip_python("x = 1 + \\\n    2\n") == "x = 1 +    2"
    assert strip_python("x\t=\t1\n") == "x = 1"
    # tokenize failures: None (the caller keeps the raw text)
    assert strip_python("if x:\n        y\n    z\n") is None
    assert strip_python("x = (\n") is None
    assert strip_python("s = '''open\n") is None
    assert strip_or_keep("x = (\n") == "x = (\n"
    assert strip_python("") == ""


def test_corpus_equals_package(corpus_module) -> None:
    rows = corpus_module.load_corpus()
    texts = sorted({r.candidate for r in rows} | {r.candidate.strip() for r in rows} | {r.reference.strip()
                                                                                       for r in rows})
    for t in texts:
        assert strip_or_keep(t) == package(t), t


def test_stdlib_chunks_equal_package() -> None:
    """Random line ranges of standard-library modules: unterminated strings, broken indentation, tabs..."""
    import os

    libdir = Path(os.__file__).parent
    files = sorted(libdir.glob("*.py"))[:60]
    rng = random.Random(7)
    n = 0
    for f in files:
        lines = f.read_text(encoding="utf-8", errors="replace").split("\n")
        for _ in range(6):
            i = rng.randrange(len(lines))
            chunk = "\n".join(lines[i:i + rng.randrange(1, 50)])
            assert strip_or_keep(chunk) == package(chunk), (f, i)
            n += 1
    assert n == 360


CODEISH = st.text(alphabet=st.sampled_from(list("ab1 \t\n#'\"\\():[]{}=,.\r\fé")), max_size=80)


@settings(max_examples=400, deadline=None)
@given(CODEISH)
def test_fuzz_fast_equals_tokenize(src: str) -> None:
    assert strip_python(src) == strip_python_reference(src)
    assert strip_or_keep(src) == package(src)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "def f(x):", "    return x", '    """doc"""', "x = (1,", "     2)", "# c", "", "    ", "\tif y:",
    "        pass", "s = '''a", "b'''", "z = 'q' \\", "  + 'r'", "class A:", "  y = [", "]", "x = 1  # t",
]), max_size=12))
def test_fuzz_lines_equal_package(lines: list[str]) -> None:
    src = "\n".join(lines)
    assert strip_or_keep(src) == package(src)
    assert strip_or_keep(src + "\n") == package(src + "\n")
