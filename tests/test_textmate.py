"""The VS Code TextMate grammar (editors/vscode/syntaxes/reward.tmLanguage.json), run by VS Code's own engine
(the `vscode-textmate` and `vscode-oniguruma` npm packages, installed by `scripts/install.sh --test` from the
committed package-lock.json into editors/vscode/test/node_modules): every shipped spec and test fixture
tokenises with no invalid token and no unscoped character, and the grammar agrees with the Pygments lexer on
the class (keyword / name / number / string / comment) of every character.

Without node or the npm packages the tests skip on a developer's machine and FAIL under CI=true."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rewardlang.highlight import scan

ROOT = Path(__file__).resolve().parents[1]
VSCODE = ROOT / "editors" / "vscode"
HARNESS = VSCODE / "test"
GOLDEN = ROOT / "tests" / "fixtures" / "highlight" / "golden.reward"
ALL_SPECS = sorted({*ROOT.glob("specs/**/*.reward"), *ROOT.glob("tests/**/*.reward")})
CLASSES = ("keyword", "name", "number", "string", "comment")


def _missing(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{why} (CI=true: the TextMate check must run; scripts/install.sh --test installs it)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def tokens() -> dict[Path, list]:
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed")
    for pkg in ("vscode-textmate", "vscode-oniguruma"):
        if not (HARNESS / "node_modules" / pkg / "package.json").exists():
            _missing(f"npm package {pkg} is not installed: run `npm ci` in {HARNESS.relative_to(ROOT)}")
    out = subprocess.run([node, str(HARNESS / "tokenize.js"), *map(str, ALL_SPECS)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return {Path(k): v for k, v in json.loads(out.stdout).items()}


def _tm_class(scopes: list[str]) -> str:
    s = scopes[-1]
    if s.startswith("comment."):
        return "comment"
    if s.startswith(("string.", "constant.character.escape")):
        return "string"
    if s.startswith("constant.numeric"):
        return "number"
    if s.startswith("keyword.operator.symbol"):
        return "operator"
    if s.startswith(("keyword.", "storage.type", "constant.language")):
        return "keyword"
    if s.startswith(("entity.name.function", "variable.")):
        return "name"
    if s.startswith("punctuation."):
        return "punctuation"
    return s


_PYGMENTS_CLASS = {"comment": "comment", "string": "string", "regex": "string", "number": "number",
                   "keyword": "keyword", "declaration": "keyword", "constant": "keyword", "type": "keyword",
                   "function": "name", "variable": "name", "builtin": "name", "name": "name",
                   "operator": "operator", "punctuation": "punctuation", "error": "error"}


def _tm_chars(text: str, toks: list) -> dict[int, str]:
    """Offset (code points) -> the TextMate class of the character there (TextMate counts UTF-16 units)."""
    lines = text.split("\n")
    starts = [0]
    for l in lines:
        starts.append(starts[-1] + len(l) + 1)
    out: dict[int, str] = {}
    for line, a, b, scopes in toks:
        units = []  # UTF-16 unit -> code point index in the line
        for i, ch in enumerate(lines[line]):
            units.extend([i] * (2 if ord(ch) > 0xFFFF else 1))
        for u in range(a, b):
            cp = units[u] if u < len(units) else len(lines[line])
            if not lines[line][cp:cp + 1].isspace():
                out[starts[line] + cp] = _tm_class(scopes)
    return out


def _pygments_chars(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for off, kind, piece in scan(text):
        for k, ch in enumerate(piece):
            if not ch.isspace():
                out[off + k] = _PYGMENTS_CLASS.get(kind, kind)
    return out


def test_grammar_and_extension_manifest():
    manifest = json.loads((VSCODE / "package.json").read_text())
    lang = manifest["contributes"]["languages"][0]
    assert lang["id"] == "reward" and lang["extensions"] == [".reward"]
    assert (VSCODE / lang["configuration"]).exists()
    grammar = manifest["contributes"]["grammars"][0]
    assert grammar["scopeName"] == "source.reward" and (VSCODE / grammar["path"]).exists()
    conf = json.loads((VSCODE / "language-configuration.json").read_text())
    assert conf["comments"]["lineComment"] == "#"
    lock = json.loads((HARNESS / "package-lock.json").read_text())
    assert {"node_modules/vscode-textmate", "node_modules/vscode-oniguruma"} <= set(lock["packages"])


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_tokenises_without_invalid_tokens(tokens, path):
    text = path.read_text(encoding="utf-8")
    toks = tokens[path]
    assert [t for t in toks if any("invalid" in s for s in t[3])] == []
    chars = _tm_chars(text, toks)
    unscoped = [(text.count("\n", 0, o) + 1, text[o]) for o, c in chars.items() if c == "source.reward"]
    assert unscoped == []
    assert len(chars) == sum(1 for ch in text if not ch.isspace())


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_textmate_and_pygments_agree(tokens, path):
    text = path.read_text(encoding="utf-8")
    tm, py = _tm_chars(text, tokens[path]), _pygments_chars(text)
    diff = [(text.count("\n", 0, o) + 1, text[max(0, o - 10):o + 10], tm.get(o), py.get(o))
            for o in sorted(set(tm) | set(py)) if tm.get(o) != py.get(o)
            and (tm.get(o) in CLASSES or py.get(o) in CLASSES)]
    assert diff[:5] == []


def test_golden_spec_classes_cover_every_class(tokens):
    text = GOLDEN.read_text(encoding="utf-8")
    tm = _tm_chars(text, tokens[GOLDEN])
    assert {c for c in tm.values()} >= set(CLASSES)
    # spot checks, by the word's first character
    for word, cls in [("spec", "keyword"), ("golden", "name"), ("group", "keyword"), ("2.5e1", "number"),
                      ("/Step", "string"), ("# a comment", "comment"), ("code_block", "name"), ("none", "keyword"),
                      ('"""Step', "string"), ("+-", "operator"), ("over(code)", "keyword"),
                      ("audit hidden", "keyword"), ("every 10", "keyword"), ("steps window", "keyword"),
                      ("limit steps", "name"), ("margin 0.2", "keyword")]:
        assert tm[text.index(word)] == cls, word
