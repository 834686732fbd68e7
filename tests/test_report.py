"""`rewardlang report`: the pre-flight report's figures on rows built so that every figure is known (two of eight
groups have the same completion in every row, the repetition penalty is 0 on every row), its reward-hack probes,
and the HTML page being self-contained (no script, nothing fetched)."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "codepo_text.reward"
GOOD = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>```python\ndef f(x):\n    return x\n```</answer>"
SHORT = "<reasoning>short</reasoning><answer>x</answer>"
NONE = "no tags at all"


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory) -> Path:
    rows = []
    for p in range(8):
        for k in range(4):
            # groups 0-5 mix the three completions; groups 6 and 7 repeat one completion (zero variance)
            c = [GOOD, SHORT, NONE, SHORT][(p + k) % 4] if p < 6 else NONE
            rows.append({"prompt": f"problem {p}", "completion": c})
    path = tmp_path_factory.mktemp("report") / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardlang", "report", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def rep(rows_file) -> dict:
    res = _run(str(SPEC), "-i", str(rows_file), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "warning[D003]" in res.stderr  # the bad line is skipped and counted
    return json.loads(res.stdout)


def test_counts_groups_and_zero_variance(rep):
    assert rep["rows"] == 32 and rep["bad_rows"] == 1
    g = rep["groups"]
    assert (g["groups"], g["zero_variance"], g["zero_variance_share"], g["singletons"]) == (8, 2, 0.25, 0)
    assert g["advantage"]["valid"] == 32


def test_component_distributions(rep):
    fmt = rep["components"]["format"]
    # format is 1 for GOOD only: groups 0-5 hold GOOD in one row each (6 of 32 rows)
    assert fmt["mean"] == pytest.approx(6 / 32) and fmt["min"] == 0 and fmt["max"] == 1
    assert sum(fmt["histogram"]["counts"]) == 32 and fmt["histogram"]["counts"][-1] == 6
    assert rep["components"]["rep"]["constant"] is True  # no repetition anywhere: flagged as constant
    assert fmt["none_share"] == 0 and fmt["reasons"] == []
    assert rep["correlations"]["format"]["rep"] is None  # undefined against a constant, not 0
    assert rep["correlations"]["format"]["format"] == pytest.approx(1.0)
    assert rep["total"]["max"] == pytest.approx(rep["extremes"]["highest"][0]["total"])


def test_latency_per_component_and_phase(rep):
    # the scorer's own timings: each component's computation over the distinct rows, and the batch's phases
    assert rep["unique_rows"] == 3  # GOOD, SHORT and NONE: the prompt only groups, so the rows are computed once
    for c in rep["components"].values():
        assert c["seconds"] > 0 and c["ms_per_row"] == pytest.approx(c["seconds"] * 1000 / 32)
    assert set(rep["phases"]) == {"dedup", "rows", "policy_reward", "advantage"}
    assert sum(rep["phases"].values()) <= rep["scoring_seconds"]


def test_extremes_carry_their_breakdown(rep):
    top = rep["extremes"]["highest"][0]
    assert top["completion"] == GOOD and top["components"]["format"] == 1
    assert rep["extremes"]["lowest"][0]["completion"] in (NONE, SHORT)


def test_probes(rep):
    p = rep["probes"]
    assert p["threshold"] == pytest.approx(rep["total"]["p50"])
    got = {r["probe"]: r for r in p["results"]}
    assert list(got) == ["empty answer", "prompt copied back", "right format, wrong answer", "endless repetition",
                         "always-equal object"]
    assert got["empty answer"]["total"] == 0 and not got["empty answer"]["flagged"]
    # codepo_text rewards the layout only: the best row's layout with a wrong answer earns the full format term
    assert got["right format, wrong answer"]["components"]["format"] == 1
    assert got["right format, wrong answer"]["flagged"]


def test_html_is_self_contained(rows_file, tmp_path):
    out = tmp_path / "report.html"
    res = _run(str(SPEC), "-i", str(rows_file), "-o", str(out))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    for banned in ("<script", " src=", "href=", "@import", "url("):
        assert banned not in page
    assert page.count("<svg") == 5  # total, three components, advantage

    class Check(HTMLParser):
        void = {"meta", "br", "rect", "line"}

        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag not in self.void:
                self.stack.append(tag)

        def handle_endtag(self, tag):
            if tag in self.void:
                return
            assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
            self.stack.pop()

    c = Check()
    c.feed(page)
    assert c.stack == []
    assert "zero variance" in page and "FLAGGED" in page
    # the spec's source, coloured by rewardlang's lexer with inline styles (no stylesheet to fetch)
    spec_html = page[page.index("<h2>The spec</h2>"):]
    assert "specs/codepo_text.reward" in spec_html and 'class="err"' not in spec_html
    assert re.search(r'<span style="[^"]*">component</span>', spec_html)
    pre = re.search(r"<pre[^>]*>(.*?)</pre>", spec_html, re.S).group(1)
    assert html.unescape(re.sub(r"<[^>]+>", "", pre)) == SPEC.read_text(encoding="utf-8")  # nothing lost


def test_output_is_never_an_input_and_is_written_whole(rows_file, tmp_path):
    before = rows_file.read_bytes()
    res = _run(str(SPEC), "-i", str(rows_file), "-o", str(rows_file))
    assert res.returncode == 1 and "is the input file" in res.stderr and "Traceback" not in res.stderr
    assert rows_file.read_bytes() == before  # refused before any work: the rows are intact
    res = _run(str(SPEC), "-i", str(rows_file), "-o", str(tmp_path / "missing" / "r.html"))
    assert res.returncode == 1 and "does not exist" in res.stderr
    assert not (tmp_path / "missing").exists()
    out = tmp_path / "r.json"
    res = _run(str(SPEC), "-i", str(rows_file), "-o", str(out), "--format", "json")
    assert res.returncode == 0 and json.loads(out.read_text())["rows"] == 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary left beside it


def test_audits_in_the_report(tmp_path):
    """A spec's audits: each audit of samples' distribution, its gap to the total (both on [0, 1]) and what each
    probe earns on it; statistics are listed; the HTML page has an Audits section."""
    import rewardlang
    from rewardlang.report import build_report, render_html

    spec = tmp_path / "a.reward"
    spec.write_text(
        "input tests: text\ninput plus_tests: text\ninput entry_point: text\n"
        "let code = code_block(completion, \"python\") or \"\"\n"
        "component correct in [0, 1] = tests_pass_rate(code, tests, entry_point) if len(code) > 0 else 0\n"
        "component fmt in [0, 1] = 1 if len(code) > 0 else 0\n"
        "audit hidden in [0, 1] = tests_pass_rate(code, plus_tests, entry_point) if len(code) > 0 else 0\n"
        "audit dom = component_dominance\n", encoding="utf-8")
    tests = "def check(candidate):\n    assert candidate(1) == 2\n"
    plus = tests + "    assert candidate(5) == 6\n"
    rows = [{"completion": f"```python\ndef inc(x):\n    {body}\n```", "tests": tests, "plus_tests": plus,
             "entry_point": "inc"} for body in ("return x + 1", "return 2")]
    rep = build_report(rewardlang.load(str(spec)), rows)
    hidden = rep["audits"]["samples"]["hidden"]
    assert hidden["mean"] == 0.75 and hidden["range"] == [0.0, 1.0]
    # totals 2 and 2 on [0, 2] -> 1; hidden 1 and 0.5 -> gap 1 - 0.75
    assert hidden["gap"] == 0.25
    assert rep["audits"]["statistics"] == [{"name": "dom", "text": "component_dominance", "every": 1}]
    probes = {p["probe"]: p for p in rep["probes"]["results"] if p["applies"]}
    assert probes["right format, wrong answer"]["audits"] == {"hidden": 0.0}
    page = render_html(rep)
    assert "<h2>Audits</h2>" in page and "gap 0.25" in page
