"""bandit and the in-Python analysers of a small batch run one after the other in one fork of their warm helper
(issue 38): every raw result is the one their separate runs give, and a pair that does not end cleanly runs
apart (never a result from a broken run)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from rewardlang.runtime.tools import codequal, runner
from rewardlang.runtime.tools.command import Completed

ROOT = Path(__file__).resolve().parents[3]

#: what the analysers find, and what could reach one run from the one before it in the same process: nesting
#: deep enough that the recursion limit decides (the in-Python analysers raise it), `# nosec` and pylint pragmas,
#: non-ASCII columns, code bandit and vulture flag, long functions radon ranks
CODES = [
    "import os\nimport pickle\n\n\ndef load(path):\n    try:\n        return pickle.load(open(path, 'rb'))\n"
    "    except:\n        pass\n",
    "def f(x):\n    assert x  # nosec\n    return eval(x)  # nosec\n",
    "import os  # pylint: disable=unused-import\nPASSWORD = 'hunter2'\n",
    "def g(é, ü):\n    s = ''\n    for k in range(é):\n        s += str(k) + 'ü'\n    return s\n",
    "x = " + "(" * 180 + "1" + ")" * 180 + "\n",
    "def deep(a):\n" + "".join("    " * (k + 1) + f"if a > {k}:\n" for k in range(60)) + "    " * 61 + "return a\n",
    "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n",
    "def branchy(a, b, c, d, e, f, g):\n" + "".join(f"    if a == {k}:\n        return {k}\n" for k in range(25))
    + "    return -1\n",
    "class A:\n    def m(self, unused):\n        return 1\n\n\ndef unused_fn():\n    return 2\n",
    "",
    "print('ok')\n",
    "def h():\n    while True:\n        with open('f') as fh:\n            data = [0] * 10 ** 6\n            fh.read()\n",
]


def _raw(codes: list[str], monkeypatch: pytest.MonkeyPatch, together: bool) -> tuple[list, Counter]:
    monkeypatch.setenv("REWARDLANG_TOOL_TOGETHER", "1" if together else "0")
    stats: Counter = Counter()
    raw = codequal.analyze(codes, timeout=30, stats=stats)
    return [{a: (r.findings, r.error, r.infra, r.meta) for a, r in sorted(per.items())} for per in raw], stats


@pytest.mark.parametrize("size", [1, 5, len(CODES)])
def test_together_every_result_is_the_separate_runs_one(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in range(0, len(CODES), size):
        part = CODES[k:k + size]
        apart, st_apart = _raw(part, monkeypatch, together=False)
        together, st_together = _raw(part, monkeypatch, together=True)
        assert together == apart
        assert st_together["tool.together.runs"] == 1 and st_together["tool.together.apart"] == 0
        assert st_apart["tool.together.runs"] == 0
    found = _raw(CODES, monkeypatch, together=True)[0]
    assert all(per["bandit"][0] for per in found[:3])  # there was something to find (B301/B110, B307, B105)
    assert sum(1 for per in found for a, r in per.items() if r[0]) > len(CODES)


def test_a_pair_that_does_not_end_cleanly_runs_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    apart, _ = _raw(CODES[:4], monkeypatch, together=False)

    def killed(argvs, **kw):  # noqa: ANN001, ANN003 - the child killed from outside: no exit status at all
        return [Completed(list(a), None, "", "", timed_out=False) for a in argvs]

    monkeypatch.setattr(runner, "run_warm_many", killed)
    got, stats = _raw(CODES[:4], monkeypatch, together=True)
    assert got == apart
    assert stats["tool.together.runs"] == 1 and stats["tool.together.apart"] == 1
    assert stats["tool.bandit.runs"] == 1 and stats["tool.pyanalyzers.runs"] == 1


def test_a_failed_report_in_the_pair_runs_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    apart, _ = _raw(CODES[:4], monkeypatch, together=False)
    real = runner.run_warm_many

    def garbled(argvs, **kw):  # noqa: ANN001, ANN003 - the second run's report is cut
        runs = real(argvs, **kw)
        runs[1] = Completed(runs[1].argv, 0, runs[1].stdout[: len(runs[1].stdout) // 2], "")
        return runs

    monkeypatch.setattr(runner, "run_warm_many", garbled)
    got, stats = _raw(CODES[:4], monkeypatch, together=True)
    assert got == apart and stats["tool.together.apart"] == 1


def test_a_batch_beyond_the_limit_runs_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codequal, "TOGETHER_MAX", 3)
    got, stats = _raw(CODES[:4], monkeypatch, together=True)
    assert stats["tool.together.runs"] == 0 and got == _raw(CODES[:4], monkeypatch, together=False)[0]


@pytest.mark.slow
def test_together_on_the_humaneval_corpus_in_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.corpus import load_corpus
    finally:
        sys.path.remove(str(ROOT))
    rows = load_corpus()
    codes = sorted({r.candidate for r in rows} | {r.reference for r in rows})[::6]
    assert len(codes) > 150
    for k in range(0, len(codes), 16):
        part = codes[k:k + 16]
        assert _raw(part, monkeypatch, together=True)[0] == _raw(part, monkeypatch, together=False)[0]
