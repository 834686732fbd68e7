"""Issue 25: what a new user hits in the language-side commands (pairs, explain, prm-data, fmt, check): each bad
input a plain located error, never an internal one; each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAIRS_SPEC = """\
spec toy "pairs"

input completion: text
component rule in [0, 1] = 1 if contains(completion, "return") else 0
component short in [0, 1] = 1 if len(completion) < 10 else 0

preference { pairs = "max_min", winners = rule == 1 }
"""


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------- major 4
@pytest.mark.parametrize(("field", "value", "shown"), [
    ("reward", "0.5", '`reward` must be a number (or null for a masked score), got "0.5"'),
    ("reward", [1], "`reward` must be a number (or null for a masked score), got [1]"),
    ("reward", True, "`reward` must be a number (or null for a masked score), got true"),
    ("rule", "x", '`components.rule` must be a number (or null for a masked score), got "x"'),
    ("short", {"a": 1}, '`components.short` must be a number (or null for a masked score), got {"a": 1}'),
])
@pytest.mark.parametrize("groups", [False, True])
def test_pairs_on_scores_that_are_not_numbers_names_the_line_and_field(tmp_path: Path, field: str, value: object,
                                                                       shown: str, groups: bool) -> None:
    spec = tmp_path / "toy.reward"
    spec.write_text(PAIRS_SPEC)
    rows = [{"prompt": "p", "completion": c, "reward": r, "components": {"rule": r, "short": 0.0}}
            for c, r in (("return 1", 1.0), ("pass", 0.0), ("return 2", 1.0))]
    bad = rows[2]
    if field == "reward":
        bad["reward"] = value
    else:
        bad["components"][field] = value
    data = _jsonl(tmp_path / "scored.jsonl", rows)
    out = tmp_path / "pairs.jsonl"
    res = CliRunner().invoke(app, ["pairs", str(spec), "-i", str(data), "-o", str(out)]
                             + (["--groups"] if groups else []))
    assert res.exit_code == 1, res.output
    assert f"error: {data}:3: {shown}" in res.output
    assert "internal error" not in res.output and "Traceback" not in res.output and not out.exists()


def test_pairs_names_a_completion_that_is_not_text(tmp_path: Path) -> None:
    spec = tmp_path / "toy.reward"
    spec.write_text(PAIRS_SPEC)
    data = _jsonl(tmp_path / "raw.jsonl", [{"prompt": "p", "completion": "return 1"}, {"prompt": "p", "completion": 5}])
    res = CliRunner().invoke(app, ["pairs", str(spec), "-i", str(data), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 1 and f"error: {data}:2: `completion` must be text, got 5" in res.output


# ----------------------------------------------------------------------- major 9
TOKENS_SPEC = """\
spec toks "per-token"

input completion: text
input n: number
component c in [-1, 1] = 1 / n
    spans matches(completion, /b/, value=-1)
    tokens spans
"""


def test_explain_tokens_says_a_row_is_masked_and_why(tmp_path: Path) -> None:
    spec = tmp_path / "t.reward"
    spec.write_text(TOKENS_SPEC)
    data = _jsonl(tmp_path / "rows.jsonl", [{"completion": "abab", "n": 0}, {"completion": "abab", "n": 1}])
    res = CliRunner().invoke(app, ["explain", str(spec), "-i", str(data), "--tokens"])
    assert res.exit_code == 0, res.output
    assert "this row is masked: `c` (" in res.output and "division by zero" in res.output
    assert "a trainer leaves it out" in res.output
    res = CliRunner().invoke(app, ["explain", str(spec), "-i", str(data), "--tokens", "--row", "1"])
    assert res.exit_code == 0 and "masked" not in res.output and "-1" in res.output
    res = CliRunner().invoke(app, ["explain", str(spec), "-i", str(data), "--tokens", "--row", "1",
                                   "--tokenizer", "tiny"])
    assert res.exit_code == 0 and "sum of per-token rewards: -2" in res.output


@pytest.mark.slow
def test_explain_tokens_takes_the_default_model_name(tmp_path: Path) -> None:
    spec = tmp_path / "t.reward"
    spec.write_text(TOKENS_SPEC)
    data = _jsonl(tmp_path / "rows.jsonl", [{"completion": "abab", "n": 1}])
    res = CliRunner().invoke(app, ["explain", str(spec), "-i", str(data), "--tokens", "--tokenizer", "smollm2"])
    assert res.exit_code == 0, res.output
    assert "sum of per-token rewards: -2" in res.output


def test_explain_tokens_keeps_two_spaces_between_columns_whatever_the_values() -> None:
    # the README's command: values such as -0.01094 are wider than a column sized by its name
    res = CliRunner().invoke(app, ["explain", str(ROOT / "specs" / "dense_ppo.reward"), "-i",
                                   str(ROOT / "examples" / "code_samples.jsonl"), "--tokens", "--set", "mapping=authors"])
    assert res.exit_code == 0, res.output
    lines = [x for x in res.output.splitlines() if x[:4].strip().isdigit()]
    assert len(lines) > 100
    header = next(x for x in res.output.splitlines() if "token" in x and "reward" in x)
    for line in lines:  # the value columns start after the token's 16 characters: each value stands apart
        cells = line[4 + 2 + 16:]
        assert cells.startswith("  ") and len(cells.split()) == len(header.split()) - 2, line
        assert len(line) == len(header)


# ----------------------------------------------------------------------- prm-data (minors)
SQ = {"task_id": "sq", "prompt": "def sq(x):\n", "reference": "    y = x * x\n    return y\n",
      "tests": ["assert sq(3) == 9", "assert sq(0) == 0"], "entry_point": "sq"}
HUMANEVAL_STYLE = {"task_id": "inc", "prompt": "def inc(x):\n", "reference": "    return x + 1\n",
                   "tests": "def check(candidate):\n    assert candidate(1) == 2\n"}


def test_prm_data_refuses_a_negative_limit(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "p.jsonl", [SQ])
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(data), "-o", str(tmp_path / "out"), "--limit", "-1"])
    assert res.exit_code == 1 and "--limit must be 0 (every problem) or positive (got -1)" in res.output
    assert not (tmp_path / "out").exists()


def test_prm_data_names_a_row_without_the_entry_point_its_tests_need(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "p.jsonl", [SQ, HUMANEVAL_STYLE, {**SQ, "entry_point": 5}])
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(data), "-o", str(tmp_path / "out"), "--level", "line",
                                   "--operators", "return_none"])
    assert res.exit_code == 0, res.output
    assert f"warning: {data}: line 2: no `entry_point`: its tests define check(candidate)" in res.output
    assert f"warning: {data}: line 3: `entry_point` must be the function's name, got 5" in res.output
    assert "does not pass its tests" not in res.output
    # with its entry point the same row is labelled
    data = _jsonl(tmp_path / "q.jsonl", [{**HUMANEVAL_STYLE, "entry_point": "inc"}])
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(data), "-o", str(tmp_path / "o2"), "--level", "line",
                                   "--operators", "return_none"])
    assert res.exit_code == 0 and "does not pass" not in res.output and "1 DPO rows" in res.output


def test_prm_data_without_groups_removes_an_earlier_runs_groups(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "p.jsonl", [SQ])
    out = tmp_path / "out"
    args = ["prm-data", "--dataset", str(data), "-o", str(out), "--level", "line", "--operators",
            "return_none,rename_local"]
    res = CliRunner().invoke(app, [*args, "--groups"])
    assert res.exit_code == 0 and (out / "groups.jsonl").exists()
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert not (out / "groups.jsonl").exists() and f"removed {out / 'groups.jsonl'}" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["dpo.jsonl", "report.json", "steps.jsonl"]


# ----------------------------------------------------------------------- already fixed before this branch (pinned)
def test_check_reports_a_misspelled_name_once(tmp_path: Path) -> None:
    spec = tmp_path / "dense_ppo.reward"
    spec.write_text((ROOT / "specs" / "dense_ppo.reward").read_text().replace('let src = code or ""',
                                                                               'let src = codezz or ""'))
    assert "codezz" in spec.read_text()
    res = CliRunner().invoke(app, ["check", str(spec)])
    assert res.exit_code == 1 and res.output.count("error[E101]") == 1 and "1 error(s)" in res.output


# ----------------------------------------------------------------------- fmt (minor)
def test_every_shipped_spec_is_formatted() -> None:
    specs = sorted((ROOT / "specs").glob("*.reward"))
    assert len(specs) >= 10
    res = CliRunner().invoke(app, ["fmt", "--check", *map(str, specs)])
    assert res.exit_code == 0, res.output


def test_fmt_wraps_a_long_list_default_and_stays_idempotent(tmp_path: Path) -> None:
    from rewardlang.fmt import format_source

    names = [f"operator_number_{i}" for i in range(12)]
    src = f'param ops: list[text] = {json.dumps(names)} "the operators"  # all of them\ncomponent c = len(ops)\n'
    out = format_source(src)
    assert max(len(line) for line in out.splitlines()) <= 100
    assert out.splitlines()[0] == "param ops: list[text] = ["
    assert out.splitlines()[-2] == ']' + ' "the operators"  # all of them'
    assert format_source(out) == out
    import rewardlang

    assert rewardlang.loads(out).params["ops"] == names == rewardlang.loads(src).params["ops"]
    prm = format_source((ROOT / "specs" / "prm.reward").read_text())
    assert max(len(line) for line in prm.splitlines() if '"comparison_flip"' in line or '"rename_local"' in line) <= 100


def test_the_formatter_and_attribution_docstrings_run() -> None:
    import doctest

    from rewardlang import fmt
    from rewardlang.runtime import attribution

    assert doctest.testmod(fmt).failed == 0  # its module example expected "# n" from "#n" and failed
    assert doctest.testmod(attribution).failed == 0
