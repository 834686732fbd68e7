"""The `reward` Pygments lexer (rewardlang/highlight.py): every shipped spec and test fixture tokenises with no
error token, a golden spec gets the expected token classes, Pygments finds the lexer through the
`pygments.lexers` entry point pyproject.toml declares, and the CLI colours source lines only on a terminal."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pygments.token import Error, Keyword, Name, Number, String

from rewardlang.highlight import RewardLexer, scan

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "fixtures" / "highlight" / "golden.reward"
ALL_SPECS = sorted({*ROOT.glob("specs/**/*.reward"), *ROOT.glob("tests/**/*.reward")})

GOLDEN_KINDS = [
    ('declaration', 'spec'), ('variable', 'golden'), ('string', '"every token class of the language"'),
    ('comment', '# a comment'), ('declaration', 'input'), ('variable', 'tests'), ('type', 'text'),
    ('keyword', 'from'), ('string', '"unit_tests"'), ('declaration', 'input'), ('variable', 'task'),
    ('type', 'group'), ('declaration', 'param'), ('variable', 'limit'), ('type', 'number'),
    ('number', '2.5e1'), ('string', '"a documented parameter"'), ('declaration', 'let'),
    ('variable', 'code'), ('function', 'code_block'), ('builtin', 'completion'),
    ('string', '"python"'), ('keyword', 'or'), ('string', '""'), ('declaration', 'let'),
    ('variable', 'ratio'), ('function', 'len'), ('name', 'code'), ('number', '4'),
    ('declaration', 'let'), ('variable', 'hits'), ('function', 'count'), ('builtin', 'completion'),
    ('regex', '/Step\\s\\d+:/im'), ('string', '"Thus"'), ('declaration', 'let'), ('variable', 'ok'),
    ('keyword', 'not'), ('name', 'hits'), ('number', '0'), ('keyword', 'and'), ('constant', 'true'),
    ('keyword', 'or'), ('constant', 'none'), ('constant', 'none'), ('declaration', 'component'),
    ('variable', 'short'), ('keyword', 'in'), ('number', '0'), ('number', '1'), ('number', '1'),
    ('keyword', 'if'), ('name', 'ratio'), ('name', 'limit'), ('keyword', 'else'), ('number', '0'),
    ('keyword', 'on_error'), ('number', '0'), ('keyword', 'tokens'), ('keyword', 'over'),
    ('name', 'code'), ('name', 'short'), ('name', 'weight'), ('number', '0.5'),
    ('declaration', 'audit'), ('variable', 'hidden'), ('keyword', 'in'), ('number', '0'), ('number', '1'),
    ('function', 'min'), ('name', 'ratio'), ('number', '1'), ('keyword', 'every'), ('number', '10'),
    ('keyword', 'steps'), ('keyword', 'window'), ('name', 'limit'), ('keyword', 'steps'), ('keyword', 'margin'),
    ('number', '0.2'), ('keyword', 'timeout'), ('number', '5'),
    ('keyword', 'advantage'), ('keyword', 'over'), ('keyword', 'group'), ('name', 'task'),
    ('name', 'center'), ('keyword', 'example'), ('string', '"a golden example"'),
    ('builtin', 'completion'), ('string', '"""Step 1: x"""'), ('keyword', 'expect'), ('name', 'short'),
    ('number', '1'), ('number', '0.01'), ('keyword', 'train'), ('name', 'beta'), ('number', '0.1'),
]


def test_there_are_specs_to_tokenise():
    assert len(ALL_SPECS) >= 15 and GOLDEN in ALL_SPECS


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_and_fixture_tokenises_without_errors(path):
    text = path.read_text(encoding="utf-8")
    tokens = list(RewardLexer().get_tokens_unprocessed(text))
    assert [t for _, t, v in tokens if t in Error] == []
    assert "".join(v for _, _, v in tokens) == text  # nothing lost, nothing added
    assert any(t in Keyword for _, t, _ in tokens) and any(t in Name for _, t, _ in tokens)


def test_golden_spec_token_classes():
    text = GOLDEN.read_text(encoding="utf-8")
    got = [(k, p) for _, k, p in scan(text) if k not in ("whitespace", "punctuation", "operator")]
    assert got == GOLDEN_KINDS


def test_audit_clause_words_are_keywords_only_in_their_shape():
    src = ("component margin = 1\ncomponent steps = 2\nmargin.weight = steps\n"
           "audit a = margin + steps every 5 steps window n step margin .5\n")
    got = [(k, p) for _, k, p in scan(src) if p in ("margin", "steps", "step", "every", "window")]
    assert got == [("variable", "margin"), ("variable", "steps"), ("name", "margin"), ("name", "steps"),
                   ("name", "margin"), ("name", "steps"), ("keyword", "every"), ("keyword", "steps"),
                   ("keyword", "window"), ("keyword", "step"), ("keyword", "margin")]


def test_regex_or_division_by_context():
    kinds = [(k, p) for _, k, p in scan("let a = n / 2 / m\nlet b = count(x, /a/ )\nlet c = (n) /2/ 1")
             if k in ("regex", "operator")]
    assert kinds == [("operator", "="), ("operator", "/"), ("operator", "/"), ("operator", "="),
                     ("regex", "/a/"), ("operator", "="), ("operator", "/"), ("operator", "/")]


def test_pygments_token_types():
    toks = {v: t for t, v in RewardLexer().get_tokens('let x = f(1, "s", /r/) # c\n')}
    assert toks["let"] in Keyword and toks["x"] in Name and toks["f"] is Name.Function
    assert toks["1"] in Number and toks['"s"'] in String and toks["/r/"] is String.Regex


def test_entry_point_declared_and_found_by_pygments(tmp_path):
    """pyproject.toml's `pygments.lexers` entry, installed as metadata, is how Pygments (and so mkdocs, Sphinx,
    any highlighter) finds the lexer by alias and by file name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    eps = project["project"]["entry-points"]["pygments.lexers"]
    assert eps == {"reward": "rewardlang.highlight:RewardLexer"}
    dist = tmp_path / "rewardlang_probe-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rewardlang-probe\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[pygments.lexers]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "from pygments.lexers import get_lexer_by_name, get_lexer_for_filename\n"
            "print(type(get_lexer_by_name('reward')).__module__, type(get_lexer_for_filename('a.reward')).__name__)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(ROOT)], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["rewardlang.highlight", "RewardLexer"]


def test_diagnostic_source_lines_coloured_only_with_colour():
    from rewardlang.diagnostics import Diagnostic
    from rewardlang.syntax import Loc

    src = "let x = lenn(completion)\n"
    d = Diagnostic("E102", "unknown function `lenn`", Loc("my.reward", 1, 9, 1, 13, 8, 12))
    plain = d.render({"my.reward": src}, color=False)
    assert "\x1b[" not in plain and "1 | let x = lenn(completion)" in plain
    coloured = d.render({"my.reward": src}, color=True)
    line = next(l for l in coloured.split("\n") if "lenn" in l and "|" in l)
    assert "\x1b[" in line.split("|", 1)[1]  # the source itself is highlighted, not only the gutter
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", line).endswith("let x = lenn(completion)")


def test_fmt_stdout_to_a_pipe_is_plain(tmp_path):
    spec = tmp_path / "a.reward"
    spec.write_text("let  x=len(completion)\ncomponent c=x\n")
    out = subprocess.run([sys.executable, "-m", "rewardlang", "fmt", "--stdout", str(spec)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    assert out.stdout == "let x = len(completion)\ncomponent c = x\n"
