"""The two halves of the multi-language work meet: every reference solution written here (tests/datasets/references)
passes its translated HumanEval row *through the sandbox* (`tests_all_pass(code, tests, entry_point, language=L)`,
judged by rewardlang/sandbox/values.py in the trusted process), and each one's mutant does not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from langtools import need  # noqa: E402
from test_multilang_references import FAST, LANGS, _refs  # noqa: E402

from rewardlang.datasets import load_humaneval  # noqa: E402
from rewardlang.runtime import registry  # noqa: E402
from rewardlang.runtime.api import Context  # noqa: E402


def _through_sandbox(lang: str, names: tuple[str, ...] | None) -> None:
    need(lang)
    rows = {r["task_id"].replace("/", "_"): r for r in load_humaneval(lang)}
    refs = _refs(lang)
    if names is not None:
        refs = {k: v for k, v in refs.items() if k in names}
    codes, tests, entries, order = [], [], [], []
    for name, (code, mut) in refs.items():
        row = rows[name]
        for text in (code, code.replace(mut["replace"], mut["with"])):
            codes.append(row["prompt"] + text)
            tests.append(row["tests"])
            entries.append(row["entry_point"])
        order.append(name)
    impl = registry.load_all()["outcome_label"]
    res = impl(codes, tests, entries, language=lang, params=None, ctx=Context(use_cache=False))
    labels = res.values
    for k, name in enumerate(order):
        ref, mutant = labels[2 * k], labels[2 * k + 1]
        assert ref == "pass", f"{lang}/{name}: the reference gives {ref} in the sandbox ({res.details[2 * k]})"
        assert mutant in ("fail", "runtime_error"), f"{lang}/{name}: the mutant gives {mutant}"


# One language of each kind of toolchain in the default run: C for the natively compiled ones (cpp and go, 1-3 s of
# compiles, in the slow run), Java, and the interpreted js, php and sh. Every language's references are proven right
# in the default run by test_multilang_references.py (fast set, each language), and every language runs through the
# sandbox there by tests/sandbox/test_languages.py.
_NATIVE_SLOW = {"cpp", "go"}


@pytest.mark.parametrize("lang", [pytest.param(lang, marks=[pytest.mark.slow] * (lang in _NATIVE_SLOW))
                                  for lang in LANGS])
def test_references_pass_through_the_sandbox_fast_set(lang: str) -> None:
    _through_sandbox(lang, FAST)


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_references_pass_through_the_sandbox(lang: str) -> None:
    _through_sandbox(lang, None)
