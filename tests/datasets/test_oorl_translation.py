"""specs/oorl.reward is the paper's rule reward on translation rows (`rewardlang data translate`): a translation
written here (the reference of tests/datasets/references, after the target's declaration, in one fenced block)
earns 1 in every OORL target; its mutant compiles and earns 0; broken code does not compile; a block in the wrong
language breaks the format. Scored through the sandbox, judged in the trusted process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from langtools import need  # noqa: E402
from test_multilang_references import _refs  # noqa: E402

import rewardlang  # noqa: E402
from rewardlang.datasets import load_humaneval, translation_rows  # noqa: E402

SPEC = str(Path(__file__).parents[2] / "specs" / "oorl.reward")
FENCE = {"cpp": "cpp", "java": "java", "php": "php", "sh": "bash", "js": "javascript"}
BROKEN = {"cpp": "return ;;; }}", "java": "return ;;; }}", "php": "return ;;; }}", "sh": "fi fi done",
          "js": "return ;;; }}"}


# The rule reward's code is the same for every target: the default run keeps a compiled target (cpp) and the
# interpreted ones (php, sh, js); java (3 s of JVM start and compile) is in the slow run, and its toolchain is judged
# in the default run by tests/sandbox/test_languages.py and tests/datasets/test_multilang_*.py.
@pytest.mark.parametrize("lang", ["cpp", pytest.param("java", marks=pytest.mark.slow), "php", "sh", "js"])
def test_rule_reward_on_translations(lang: str) -> None:
    need(lang)
    name = "HumanEval_3"
    code, mut = _refs(lang)[name]
    decl = {r["task_id"]: r["prompt"] for r in load_humaneval(lang)}["HumanEval/3"]
    row = next(r for r in translation_rows("python", lang, "all") if r["task_id"] == "HumanEval/3")
    assert decl.strip() in row["prompt"] and row["language"] == lang and row["source_language"] == "python"

    def answer(body: str, fence: str = FENCE[lang]) -> str:
        return f"Here it is.\n```{fence}\n{decl}{body}\n```\n"

    completions = [answer(code), answer(code.replace(mut["replace"], mut["with"])), answer(BROKEN[lang]),
                   answer(code, "python"), answer(code) + answer(code)]
    n = len(completions)
    prog = rewardlang.load(SPEC)
    out = prog.score(completion=completions, prompt=[row["prompt"]] * n, tests=[row["tests"]] * n,
                     entry_point=[row["entry_point"]] * n, language=[lang] * n)
    assert list(out.components["format"]) == [1, 1, 1, 0, 0]
    assert list(out.components["compiles"]) == [1, 1, 0, 0, 0]
    assert list(out.components["passes"]) == [1, 0, 0, 0, 0]
    assert list(out.total) == [1, 0, 0, 0, 0] and not any(m.any() for m in out.masked.values())


def test_the_dataset_names_the_paper_targets() -> None:
    from rewardlang.trainers.data import OORL_TARGETS, load_rows

    rows, what = load_rows("translate")
    assert {r["language"] for r in rows} == set(OORL_TARGETS) == {"cpp", "java", "php", "sh", "js"}
    assert all(r["split"] == "train" for r in rows) and "train split" in what
    held = {r["task_id"] for r in translation_rows("python", "cpp", "heldout")}
    assert held and not held & {r["task_id"] for r in rows if r["language"] == "cpp"}


# Every label (pass, fail, compile_error, format_error) is reached with sh and js in the default run; cpp (5 s: the
# judge and the spec compile each answer) is in the slow run, its rule reward on the same answers in the default run
# (test_rule_reward_on_translations[cpp]).
@pytest.mark.parametrize("lang", [pytest.param("cpp", marks=pytest.mark.slow), "sh", "js"])
def test_heldout_eval_judges_as_the_rule_reward(lang: str) -> None:
    """`train.eval`'s judge on translation rows (trainers/evaluate.py) gives the spec's verdict on the same answers:
    pass exactly where the rule reward is 1, format_error (never run) where the format fails, compile_error where
    the block does not compile."""
    from rewardlang.trainers.evaluate import judge, summarize

    need(lang)
    code, mut = _refs(lang)["HumanEval_3"]
    decl = {r["task_id"]: r["prompt"] for r in load_humaneval(lang)}["HumanEval/3"]
    row = next(r for r in translation_rows("python", lang, "all") if r["task_id"] == "HumanEval/3")

    def answer(body: str, fence: str = FENCE[lang]) -> str:
        return f"Here it is.\n```{fence}\n{decl}{body}\n```\n"

    completions = [answer(code), answer(code.replace(mut["replace"], mut["with"])), answer(BROKEN[lang]),
                   answer(code, "python"), answer(code) + answer(code), answer(code)[:-5]]
    n = len(completions)
    out = rewardlang.load(SPEC).score(completion=completions, prompt=[row["prompt"]] * n, tests=[row["tests"]] * n,
                                      entry_point=[row["entry_point"]] * n, language=[lang] * n)
    (labels,) = judge([row], [completions])
    assert [int(x == "pass") for x in labels] == [int(t) for t in out.total] == [1, 0, 0, 0, 0, 0]
    assert labels[0] == "pass" and labels[1] == "fail" and labels[2] == "compile_error"
    assert labels[3:] == ["format_error"] * 3 and list(out.components["format"])[3:] == [0, 0, 0]
    rec = {"n": n, "correct": 1, "infra": 0}
    assert summarize([rec], [1])["pass@1"] == pytest.approx(1 / 6)


def test_heldout_problems_of_a_translation_run() -> None:
    """train.eval = N on `translate:...`: N problems of the held-out split in every target (the same problems),
    never among the training rows; the training rows lose nothing to the evaluation."""
    from rewardlang.trainers.data import load_rows, split_heldout, translation_heldout

    held = translation_heldout("translate", 3)
    assert [r["language"] for r in held] == [t for t in ("cpp", "java", "php", "sh", "js") for _ in range(3)]
    ids = {r["task_id"] for r in held}
    assert len(ids) == 3 and all(r["split"] == "heldout" for r in held)
    assert all({r["task_id"] for r in held if r["language"] == t} == ids for t in ("cpp", "sh"))
    train, _ = load_rows("translate")
    assert not ids & {r["task_id"] for r in train}
    assert split_heldout(train, 3) == (train, [])
    assert translation_heldout("translate", 3) == held  # fixed: the same problems every run
    with pytest.raises(Exception, match="choose at most"):
        translation_heldout("translate", 1000)
