"""``rewardlang eval --lang``: translated problems judged in the sandbox, a table per language. The translated
HumanEval (rewardlang.datasets.multilang) is built on another branch, so these tests give rows of their own
(``evens`` in every language) through the one function eval reads them from."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.trainers import evaluate as ev

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "sandbox"))
from lang_programs import LANGS, lang_tests, require, unit  # noqa: E402

#: the line of each unit that opens the function: the prompt ends with it, the completion writes the rest
OPENING = {"c": "int *evens(int n, int *len) {", "cpp": "std::vector<int> evens(int n) {",
           "java": "    public static List<Integer> evens(int n) {", "js": "function evens(n) {",
           "php": "function evens($n) {", "sh": "evens() {", "go": "func evens(n int) []int {"}


def split(lang: str, correct: bool = True) -> tuple[str, str]:
    code = unit(lang, correct)
    i = code.index(OPENING[lang]) + len(OPENING[lang]) + 1
    return code[:i], code[i:]


def rows_for(lang: str) -> list[dict]:
    prompt, _ = split(lang)
    return [{"task_id": "HumanEval/0", "prompt": prompt, "tests": json.dumps(lang_tests(lang)),
             "entry_point": "evens", "language": lang}]


@pytest.fixture()
def translated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "translated_humaneval", rows_for)


@pytest.mark.parametrize("lang", [x if x in ("cpp", "sh") else pytest.param(x, marks=pytest.mark.slow) for x in LANGS])
def test_eval_lang_completions_continuing_or_restating_the_prompt(lang: str, translated: None,
                                                                  tmp_path: Path) -> None:
    require(lang)
    from rewardlang.trainers.cli import app

    _, body = split(lang)
    _, wrong = split(lang, correct=False)
    full = unit(lang)
    comps = [body, f"Here it is:\n```{lang}\n{full}```\n", wrong]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"task_id": "HumanEval/0", "completion": c}) + "\n" for c in comps))
    out = tmp_path / "res.jsonl"
    res = CliRunner().invoke(app, ["eval", "--lang", lang, "--completions", str(path), "--k", "1",
                                   "--k", "3", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads([ln for ln in res.output.splitlines() if ln.startswith("{")][0])
    assert summary["pass@1"] == pytest.approx(2 / 3) and summary["pass@3"] == 1.0
    assert summary["language"] == lang
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["outcomes"] == ["pass", "pass", "fail"] and rec["language"] == lang
    assert res.output.splitlines()[0].split() == ["language", "problems", "completions", "pass@1", "pass@3", "masked"]


def test_eval_lang_errors_are_plain(translated: None, tmp_path: Path) -> None:
    from rewardlang.trainers.cli import app

    res = CliRunner().invoke(app, ["eval", "--lang", "rust"])
    assert res.exit_code == 1 and "--lang rust: one of python, c, cpp" in res.output
    res = CliRunner().invoke(app, ["eval", "--lang", "all", "--completions", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 1 and "--lang all" in res.output
    res = CliRunner().invoke(app, ["eval", "--lang", "cpp", "--problems", "HumanEval/7", "--completions", "x"])
    assert res.exit_code == 1 and "not among the 1 problems translated into cpp" in res.output
    assert "Traceback" not in res.output


def test_translated_humaneval_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_multilang(name, *a, **kw):  # noqa: ANN001, ANN202
        if name.startswith("rewardlang.datasets"):
            raise ImportError("No module named 'rewardlang.datasets'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_multilang)
    with pytest.raises(ValueError, match="translated HumanEval"):
        ev.translated_humaneval("cpp")


@pytest.mark.slow
def test_eval_lang_all_on_the_default_model(translated: None, tmp_path: Path) -> None:
    """The default offline model (SmolLM2-135M-Instruct) writes one completion per language; every one is
    judged (a verdict, never masked), and the table has a row per language."""
    for lang in LANGS:
        require(lang)
    from rewardlang.trainers.cli import app

    out = tmp_path / "all.jsonl"
    res = CliRunner().invoke(app, ["eval", "--lang", "all", "--limit", "1", "--max-new-tokens", "48",
                                   "--threads", "1", "--no-progress", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("language"))
    table = [ln.split() for ln in lines[head + 1:head + 9]]
    assert [r[0] for r in table] == ["python", "c", "cpp", "java", "js", "php", "sh", "go"]
    assert all(r[1] == "1" and r[2] == "1" and r[-1] == "0" for r in table)
    recs = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert len(recs) == 8 and all(r["outcomes"][0] is not None for r in recs)
    summary = json.loads(next(ln for ln in lines if ln.startswith("{")))
    assert set(summary["languages"]) == {r[0] for r in table}
