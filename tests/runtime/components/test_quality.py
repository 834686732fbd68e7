"""quality_score / quality_findings: hand-computed scores, failures that never improve a score, bad input,
batching, sharing of the analysis, and a spec scoring through it."""

from __future__ import annotations

import json
import math
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from rewardlang.runtime.api import Context
from rewardlang.runtime.components.quality import (
    QualityFindingsParams, QualityParams, quality_findings, quality_score,
)
from rewardlang.runtime.registry import load_all

# ---------------------------------------------------------------------------------- test programs
# P1: nothing for any analyzer to report.
P1 = 'def add(a, b):\n    """Add."""\n    return a + b\n\n\nprint(add(1, 2))\n'
# P2, findings (by hand):
#   maintainability: pylint W0611 unused-import os (medium 2.5); vulture unused import 'os' 90% (high 5:
#                    the library's parser bug makes every vulture finding high). 'load' is not reported
#                    unused: vulture counts the attribute pickle.load as a use of the name.   W_M = 7.5
#   security:        bandit B301 pickle.load (MEDIUM 2.5), B110 try/except/pass (LOW 1); B403 "import
#                    pickle" is not in the library's kept tests.                             W_S = 3.5
#   reliability:     open() in a try without finally (medium 2.5), bare except (high 5), except body is
#                    only pass (high 5).                                                     W_R = 12.5
#   performance:     none                                                                    W_P = 0.01
P2 = ('import os\nimport pickle\n\n\ndef load(path):\n    try:\n        return pickle.load(open(path, "rb"))\n'
      '    except:\n        pass\n')
# P3: vulture unused function 'join' (high 5, maintainability); in the loop, "s += str(it)" is both a
# growing structure (resource_use, medium 2.5) and a string concatenation (string_concat, medium 2.5).
P3 = 'def join(items):\n    s = ""\n    for it in items:\n        s += str(it)\n    return s\n'

S = {"M": 0.05, "S": 0.1, "P": 0.08, "R": 0.07}


def lib(wm: float = 0.01, ws: float = 0.01, wp: float = 0.01, wr: float = 0.01) -> float:
    """The library form computed by hand from weighted counts (0.01 stands for "no finding")."""
    return (1 / (1 + S["M"] * wm) + 1 / (1 + S["S"] * ws) + 1 / (1 + S["P"] * wp) + 1 / (1 + S["R"] * wr)) / 4


def score(codes: list[str], ctx: Context | None = None, **kw: object):
    return quality_score.fn(codes, params=QualityParams(**kw), ctx=ctx or Context(use_cache=False))


# ---------------------------------------------------------------------------------------- goldens
def test_registered_signatures() -> None:
    reg = load_all()
    assert reg["quality_score"].signature.range == (0.0, 1.0)
    assert str(reg["quality_score"].signature.returns) == "number"
    assert str(reg["quality_findings"].signature.returns) == "spans"
    assert not reg["quality_score"].in_workers and not reg["quality_findings"].in_workers


def test_golden_scores_both_forms() -> None:
    lib_r = score([P1, P2, P3])
    paper_r = score([P1, P2, P3], form="paper")
    assert lib_r.errors == [None] * 3 and paper_r.errors == [None] * 3
    assert lib_r.values[0] == pytest.approx(lib(), abs=1e-12)
    assert lib_r.values[1] == pytest.approx(lib(wm=7.5, ws=3.5, wr=12.5), abs=1e-12)
    assert lib_r.values[2] == pytest.approx(lib(wm=5, wp=5), abs=1e-12)
    assert paper_r.values == pytest.approx([1.0, 1 / (1 + 23.5), 1 / (1 + 10)], abs=1e-12)
    # the numbers themselves, for the record
    assert lib_r.values[1] == pytest.approx(0.7501368602, abs=1e-9)
    assert lib_r.details[1]["weighted"] == {"maintainability": 7.5, "security": 3.5, "performance": 0.0,
                                            "reliability": 12.5}
    assert lib_r.details[1]["findings"] == 7


def test_single_characteristic_scores() -> None:
    assert score([P2], characteristic="security").values[0] == pytest.approx(1 / (1 + 0.1 * 3.5))
    assert score([P2], characteristic="security", form="paper").values[0] == pytest.approx(1 / (1 + 3.5))
    assert score([P2], characteristic="performance").values[0] == pytest.approx(1 / (1 + 0.08 * 0.01))
    assert score([P2], characteristic="reliability", form="paper").values[0] == pytest.approx(1 / 13.5)


def test_ignore_unused_and_quirks() -> None:
    # the library drops unused-* findings whose message contains an ignored name (substring match)
    assert score([P3], ignore_unused=["join"]).values[0] == pytest.approx(lib(wp=5))
    assert score([P3], ignore_unused=["joi"]).values[0] == pytest.approx(lib(wp=5))
    # fixed rules: exact names, vulture severity from its confidence (60% -> medium)
    assert score([P3], quirks=False, ignore_unused=["joi"]).values[0] == pytest.approx(lib(wm=2.5, wp=5))
    code = textwrap.dedent("""
        def read(path):
            try:
                with open(path) as fh:
                    if not fh:
                        raise ValueError("empty")
                    return fh.read()
            except OSError as exc:
                raise RuntimeError("unreadable") from exc


        print(read("x"))
    """)
    # library: with-open counted as unclosed (medium) + raise in the try body (medium); fixed: neither
    assert score([code], analyzers=["exception_handling"]).values[0] == pytest.approx(lib(wr=5))
    assert score([code], analyzers=["exception_handling"], quirks=False).values[0] == pytest.approx(lib())


def test_vulture_uses_its_whitelists_like_its_command_line() -> None:
    # vulture's CLI scans the whitelist it ships for sys, which uses the name: only 'os' is unused (high)
    r = quality_findings.fn(["import os\nimport sys\n"], params=QualityFindingsParams(analyzers=["vulture"]),
                            ctx=Context(use_cache=False))
    assert [s.label for s in r.values[0]] == [
        "[maintainability/high, CWE-561] vulture unused-import: Unused import 'os' (90% confidence)"]


def test_complexity_threshold_and_file_length() -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(12))
    code = f"def f(x):\n{branches}    return -1\n\n\nprint(f(3))\n"   # complexity 13: rank C (low)
    assert score([code], analyzers=["radon"]).values[0] == pytest.approx(lib(wm=1))
    assert score([code], analyzers=["radon"], complexity_threshold="D").values[0] == pytest.approx(lib())
    long = "x = 1\n" * 1001   # more than 1000 lines: excessive-file-length (medium)
    assert score([long], analyzers=["radon"]).values[0] == pytest.approx(lib(wm=2.5))


def test_findings_as_spans() -> None:
    r = quality_findings.fn([P2], params=QualityFindingsParams(), ctx=Context(use_cache=False))
    spans = r.values[0]
    got = [(P2[s.start:s.end], s.value, s.label.split(":")[0]) for s in spans]
    assert got == [
        ("import os", -2.5, "[maintainability/medium, CWE-561] pylint W0611 unused-import"),
        ("import os", -5.0, "[maintainability/high, CWE-561] vulture unused-import"),
        ("try:", -2.5, "[reliability/medium, CWE-703] exception_handling improper-exception-handling"),
        ('pickle.load(open(path, "rb"))', -2.5, "[security/medium, CWE-502] bandit B301 blacklist"),
        ("except:", -1.0, "[security/low, CWE-703] bandit B110 try_except_pass"),
        ("except:", -5.0, "[reliability/high, CWE-703] exception_handling improper-exception-handling"),
        ("except:", -5.0, "[reliability/high, CWE-703] exception_handling improper-exception-handling"),
    ]
    sec = quality_findings.fn([P2], params=QualityFindingsParams(characteristic="security"),
                              ctx=Context(use_cache=False))
    assert [s.value for s in sec.values[0]] == [-2.5, -1.0]


def test_analysis_is_shared_between_functions_and_options() -> None:
    ctx = Context()
    codes = [P1, P2, P3]
    score(codes, ctx)
    runs = {k: v for k, v in ctx.stats.items() if k.endswith(".runs")}
    assert runs["tool.pylint.runs"] == 1 and runs["tool.bandit.runs"] <= 2 and runs["tool.pyanalyzers.runs"] <= 2
    score(codes, ctx, form="paper", characteristic="security")
    quality_findings.fn(codes, params=QualityFindingsParams(quirks=False, complexity_threshold="A"), ctx=ctx)
    assert {k: v for k, v in ctx.stats.items() if k.endswith(".runs")} == runs
    assert ctx.stats["quality.cache_hits"] == 2 * 3 * 8


def test_batch_invariance() -> None:
    codes = [P2, P3, "", "x = [1, 2]\nfor i in x:\n    print(i + 'a')\n"]
    together = score(codes).values
    alone = [score([c]).values[0] for c in codes]
    assert together == pytest.approx(alone, abs=0)


# ------------------------------------------------------------------------------ failing loudly
def test_missing_tool_is_infra_never_a_better_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLANG_TOOL_PYLINT", str(tmp_path / "no-pylint"))
    r = score([P1, P2])
    assert r.infra == [True, True]
    assert all("pylint" in e and "could not be started" in e for e in r.errors)
    assert all(math.isnan(v) for v in r.values)
    # without pylint in the analyzer set the others still score
    others = [a for a in QualityParams().analyzers if a != "pylint"]
    assert score([P2], analyzers=others).values[0] == pytest.approx(lib(wm=5, ws=3.5, wr=12.5))


def test_tool_crash_on_one_sample_is_that_samples_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_wrapper) -> None:
    crash = "CRASH_ME = 1\nprint(CRASH_ME)\n"
    monkeypatch.setenv("REWARDLANG_TOOL_BANDIT", tool_wrapper([sys.executable, "-m", "bandit"]))
    ctx = Context(use_cache=False)
    r = quality_score.fn([P1, crash, P2], params=QualityParams(), ctx=ctx)
    # the crash is this sample's own (the probe passes, bisection isolates it): its outcome, the worst score,
    # never a mask; the reason is in its details
    assert r.errors == [None, None, None] and r.infra == [False, False, False]
    assert r.values[1] == 0.0 and r.details[1]["invalid"].startswith("bandit: bandit exited with status 70")
    assert r.values[0] == pytest.approx(lib()) and r.values[2] == pytest.approx(lib(wm=7.5, ws=3.5, wr=12.5))
    assert ctx.stats["quality.invalid"] == 1 and ctx.stats["tool.bandit.sample_failures"] == 1
    # invalid="library": the crashing analyzer counts as no findings, as the library skips it
    lib_r = quality_score.fn([crash], params=QualityParams(invalid="library"), ctx=Context(use_cache=False))
    assert lib_r.errors == [None] and lib_r.values[0] == pytest.approx(lib())


def test_a_broken_tool_is_infra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nsys.exit('this vulture is broken')\n")
    monkeypatch.setenv("REWARDLANG_TOOL_PYANALYZERS", f"{sys.executable} {broken}")
    r = score([P1, P3], analyzers=["vulture", "radon"])
    assert r.infra == [True, True]
    assert all("broken" in e for e in r.errors)


@pytest.mark.slow
def test_tool_hanging_on_one_sample_times_out_for_it_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_wrapper) -> None:
    hang = "HANG_ME = 1\nprint(HANG_ME)\n"
    monkeypatch.setenv("REWARDLANG_TOOL_PYANALYZERS",
                       tool_wrapper([sys.executable, "-m", "rewardlang.runtime.tools.pyanalyzers"]))
    monkeypatch.setenv("REWARDLANG_TOOL_STARTUP_S", "4")
    params = QualityParams(analyzers=["vulture", "string_concat"])
    # the wrapper hangs asleep; a run's budget is of its CPU (issue 38), so the hanging run (and only it: the others
    # keep their real CPU, which a loaded machine keeps under their budget) reads as having used it: the sample's
    # own timeout, as a tool spinning on it would be
    from rewardlang.runtime.tools import command

    marks = tmp_path / "hanging"
    marks.mkdir()
    monkeypatch.setenv("HANG_MARKS", str(marks))
    real_cpu = command.session_cpu
    monkeypatch.setattr(command, "session_cpu", lambda sid: 1e9 if (marks / str(sid)).exists() else real_cpu(sid))
    r = quality_score.fn([P1, hang, P3], params=params, ctx=Context(use_cache=False, timeout=1.0))
    assert r.errors == [None, None, None] and not r.infra[1]
    assert r.values[1] == 0.0 and "timed out" in r.details[1]["invalid"]
    assert r.values[0] == pytest.approx(lib()) and r.values[2] == pytest.approx(lib(wm=5, wp=2.5))
    # as it is: asleep, no CPU used: held back by the machine, not the sample's doing: masked, never 0
    monkeypatch.undo()
    monkeypatch.setenv("REWARDLANG_TOOL_PYANALYZERS",
                       tool_wrapper([sys.executable, "-m", "rewardlang.runtime.tools.pyanalyzers"]))
    monkeypatch.setenv("REWARDLANG_TOOL_STARTUP_S", "1")
    r = quality_score.fn([P1, hang, P3], params=params, ctx=Context(use_cache=False, timeout=0.5))
    assert r.infra[1] and not r.infra[0] and not r.infra[2] and "too little CPU" in r.errors[1]
    assert r.values[0] == pytest.approx(lib()) and r.values[2] == pytest.approx(lib(wm=5, wp=2.5))


def test_per_file_budget_inside_the_analyzer_process(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file's budget is of the analyser process's CPU (issue 38): a file on which the analyser spins past it
    times out, alone; one on which it is held back without using CPU (asleep here, as a stopped or starved
    process is) does not, however long the wall clock runs."""
    import time

    from rewardlang.runtime.tools import pyanalyzers

    slow, held, fast = tmp_path / "slow.py", tmp_path / "held.py", tmp_path / "fast.py"
    slow.write_text("x = 1\n")
    held.write_text("y = 1\n")
    fast.write_text("import os\n")
    real = pyanalyzers._analyze_file

    def analyze_file(path: Path, analyzers, respect_noqa):  # type: ignore[no-untyped-def]
        if path.name == "slow.py":
            while True:   # CPU: the budget (0.2 s of it) runs out whatever the machine's load
                pass
        if path.name == "held.py":
            time.sleep(0.6)   # three times the budget of wall time, no CPU
        return real(path, analyzers, respect_noqa)

    monkeypatch.setattr(pyanalyzers, "_analyze_file", analyze_file)
    # main() is the analyzer process's entry point: it raises the recursion limit and installs a SIGPROF handler,
    # which must not leak into the rest of the test session
    limit, handler = sys.getrecursionlimit(), signal.getsignal(signal.SIGPROF)
    try:
        assert pyanalyzers.main(["--analyzers", "vulture", "--timeout", "0.2", str(slow), str(held), str(fast)]) == 0
    finally:
        sys.setrecursionlimit(limit)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, handler)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"file": "slow.py", "results": {"vulture": {"error": "timed out after 0.2s of CPU"}}}
    assert lines[1]["file"] == "held.py" and "error" not in lines[1]["results"]["vulture"]
    assert lines[2]["results"]["vulture"]["findings"][0]["name"] == "os"
    assert lines[3] == {"done": True}


# ----------------------------------------------------------------------------------- bad input
def test_bad_input_gets_a_value_never_a_mask() -> None:
    js = "function f(x) {\n  return x + 1;\n}\n"
    cases = {
        "empty": "",
        "syntax": "def f(:\n",
        "javascript": js,
        "nul": "x = 1\x00\n",
        "surrogate": "s = '\ud800'\nprint(s)\n",
        "parens": "x = " + "(" * 300 + "1" + ")" * 300 + "\n",
        "deep": "x = 1" + "+1" * 2000 + "\nprint(x)\n",
        "binary": bytes(range(256)).decode("latin-1"),
    }
    r = score(list(cases.values()))
    got = dict(zip(cases, zip(r.values, r.errors, r.infra)))
    assert got["empty"][0] == pytest.approx(lib()) and got["empty"][1] is None
    assert score([""], form="paper").values == [1.0]
    assert got["surrogate"][1] is None and got["surrogate"][0] == pytest.approx(lib())
    # code that does not parse is the completion's own failure: the worst score (0), never an error or a mask
    for name in ("syntax", "javascript", "nul", "parens", "binary"):
        value, error, infra = got[name]
        assert value == 0.0 and error is None and not infra
        assert r.details[list(cases).index(name)]["invalid"].startswith("not parseable Python")
    # the library's behaviour, as a named option: every analyzer skips it, so it scores as if it had no findings
    libr = score([cases[n] for n in ("syntax", "javascript", "nul", "parens", "binary")], invalid="library")
    assert libr.errors == [None] * 5 and libr.values == pytest.approx([lib()] * 5)
    assert score(["def f(:\n"], form="paper", invalid="library").values == [1.0]
    # deeply nested but parseable: astroid cannot rebuild it (pylint fails on this sample only): the worst ...
    deep_i = list(cases).index("deep")
    assert got["deep"][0] == 0.0 and got["deep"][1] is None
    assert "pylint" in r.details[deep_i]["invalid"] and "astroid-error" in r.details[deep_i]["invalid"]
    # ... while the in-Python analyzers raise their recursion limit and score it
    deep = score([cases["deep"]], analyzers=["radon", "vulture", "exception_handling"])
    assert deep.values[0] == pytest.approx(lib())


@pytest.mark.slow
def test_megabyte_file() -> None:
    big = "".join(f"def f{i}(x):\n    s = ''\n    for c in x:\n        s += str(c)\n    return s\n\n\n"
                  for i in range(15_000))
    assert len(big) > 1_000_000
    r = score([big], analyzers=["string_concat"])
    # 15,000 string concatenations in loops (medium 2.5 each)
    assert r.values[0] == pytest.approx(lib(wp=15_000 * 2.5))


# ---------------------------------------------------------------------------------- via a spec
def test_scoring_through_a_spec() -> None:
    import rewardlang

    src = textwrap.dedent('''
        spec quality_demo
        input completion: text
        let code = code_block(completion, "python") or completion
        component quality in [0, 1] = quality_score(code) on_error 0
        component secure in [0, 1] = quality_score(code, characteristic="security", form="paper") on_error 0
        component lint in [0, 1] = 1 - min(len(ruff(code)), 10) / 10   spans ruff(code)
        reward = quality + secure + lint
    ''')
    prog = rewardlang.loads(src)
    completions = [f"Here:\n```python\n{P2}```\n", "def f(:\n", P1]
    out = prog.score(completion=completions)
    assert out.components["quality"] == pytest.approx([lib(wm=7.5, ws=3.5, wr=12.5), 0.0, lib()])
    assert out.components["secure"] == pytest.approx([1 / 4.5, 0.0, 1.0])
    # the unparseable completion scores the worst quality by itself, not through on_error
    assert out.errors["quality"][1] is None and not out.masked["quality"][1]
    # the spans land on the completion's characters, inside its code block
    spans = out.spans["lint"][0]
    assert [(completions[0][s.start:s.end], s.label[:4]) for s in spans] == [("os", "F401"), ("except", "E722")]
