"""Proof that the translated tests are right: reference solutions written by hand in each target language
(tests/datasets/references/<lang>/HumanEval_<n>.<ext>: the completion after the row's prompt) compile, run with
the generated harness, record every case, and equal every expected value (the contract's comparator); a mutant of
each (references/<lang>/mutants.json: one operator or constant changed) fails at least one case.

Programs run directly with the toolchains (fd 3 a pipe, a timeout), not through the sandbox. The default run
takes a few problems per language; ``-m slow`` runs all 20 per language (Java's compiles batched in one JVM).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langtools import judge, need, parse_records, run_programs

from rewardlang.datasets.multilang import load_humaneval

REFS = Path(__file__).parent / "references"
LANGS = ("c", "cpp", "java", "js", "php", "sh", "go")
EXT = {"c": "c", "cpp": "cpp", "java": "java", "js": "js", "php": "php", "sh": "sh", "go": "go"}
# the fast set: a list parameter and a string result (the slow set adds the other 18)
FAST = ("HumanEval_3", "HumanEval_11")


def _refs(lang: str) -> dict[str, tuple[str, dict[str, str]]]:
    mutants = json.loads((REFS / lang / "mutants.json").read_text())
    return {name: ((REFS / lang / f"{name}.{EXT[lang]}").read_text(), m) for name, m in sorted(mutants.items())}


def _check(lang: str, names: tuple[str, ...] | None) -> None:
    need(lang)
    rows = {r["task_id"].replace("/", "_"): r for r in load_humaneval(lang)}
    refs = _refs(lang)
    if names is not None:
        refs = {k: v for k, v in refs.items() if k in names}
    sources, mutant_sources, order = [], [], []
    for name, (code, mut) in refs.items():
        row = rows[name]
        harness = json.loads(row["tests"])["harness"]
        assert code.count(mut["replace"]) == 1, f"{lang}/{name}: the mutant's text must occur once"
        sources.append(row["prompt"] + code + "\n" + harness)
        mutant_sources.append(row["prompt"] + code.replace(mut["replace"], mut["with"]) + "\n" + harness)
        order.append(name)
    results = run_programs(lang, sources + mutant_sources)
    for i, name in enumerate(order):
        mut = refs[name][1]
        tests = json.loads(rows[name]["tests"])
        n = len(tests["cases"])
        ok, obs, diag = results[i]
        assert ok, f"{lang}/{name}: the reference does not compile:\n{diag}"
        records = parse_records(obs, n)
        assert len(records) == n, f"{lang}/{name}: {len(records)} of {n} cases recorded\n{diag}"
        verdicts = judge(tests, records, lang)
        bad = [(j, tests["cases"][j]["expected"], records[j]) for j, v in enumerate(verdicts) if not v]
        assert not bad, f"{lang}/{name}: cases (index, expected, got) differ: {bad[:5]}"
        mok, mobs, mdiag = results[len(order) + i]
        assert mok, f"{lang}/{name}: the mutant does not compile (it must fail on values):\n{mdiag}"
        mverdicts = judge(tests, parse_records(mobs, n), lang)
        assert not all(mverdicts), f"{lang}/{name}: the mutant {mut} passes every case"


@pytest.mark.parametrize("lang", LANGS)
def test_references_fast_set(lang: str) -> None:
    _check(lang, FAST)


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_references_all(lang: str) -> None:
    refs = _refs(lang)
    assert len(refs) >= 20, f"{lang}: at least 20 reference solutions"
    _check(lang, None)
