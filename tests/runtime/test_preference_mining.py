"""Preference mining: golden cases for each strategy, ties, masked samples, prompts without a pair, the
vectorized miners against the per-row reference (benchmarks/bench_mining.py), and `rewardlang pairs` end to end."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import rewardlang
from rewardlang.cli import app
from rewardlang.runtime.preference import group_ids, mine_groups, mine_pairs, rank_rows

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_mining", ROOT / "benchmarks" / "bench_mining.py")
bench = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench)  # type: ignore[union-attr]

G = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 3])
R = np.array([1.0, 0.0, 1.0, 0.5, 0.3, 0.3, 0.3, 2.0, np.nan, 1.0])
OK = np.array([True, True, True, True, True, True, True, True, True, True])


def pairs(**kw):  # noqa: ANN003, ANN201
    c, r = mine_pairs(G, R, OK, **kw)
    return list(zip(c.tolist(), r.tolist()))


def test_max_min_golden_ties_first_and_shortest() -> None:
    # group 0: best rank 1.0 at rows 0 and 2 (first: row 0), worst row 1; group 1 all tied; group 2 has one
    # unmasked sample (row 8 is NaN); group 3 a single sample
    assert pairs(strategy="max_min") == [(0, 1)]
    # shortest: row 2 is shorter than row 0
    tie = np.array([9, 1, 3, 5, 1, 1, 1, 1, 1, 1])
    assert pairs(strategy="max_min", tie=tie) == [(2, 1)]
    assert pairs(strategy="max_min", margin=1.5) == []


def test_all_pairs_margin_and_cap() -> None:
    assert pairs(strategy="all") == [(0, 1), (2, 1), (0, 3), (2, 3), (3, 1)]
    assert pairs(strategy="all", margin=0.6) == [(0, 1), (2, 1)]
    assert pairs(strategy="all", max_pairs=3) == [(0, 1), (2, 1), (0, 3)]
    assert pairs(strategy="all", max_pairs=1, tie=np.array([9, 1, 3, 5, 1, 1, 1, 1, 1, 1])) == [(2, 1)]


def test_threshold_split() -> None:
    assert pairs(strategy="threshold", chosen_min=1.0, rejected_max=0.0) == [(0, 1), (2, 1)]
    assert pairs(strategy="threshold", chosen_min=0.5, rejected_max=0.5) == [(0, 1), (2, 1), (0, 3), (2, 3),
                                                                             (3, 1)]
    # ties never pair even inside the split: group 1 is all 0.3 (>= 0.3 and <= 0.3, difference 0)
    assert pairs(strategy="threshold", chosen_min=0.3, rejected_max=0.3) == [(0, 1), (2, 1), (3, 1)]


def test_masked_samples_never_enter_a_pair() -> None:
    ok = OK.copy()
    ok[1] = False                      # the worst of group 0 is masked
    c, r = mine_pairs(G, R, ok, strategy="max_min")
    assert list(zip(c.tolist(), r.tolist())) == [(0, 3)]
    c, r = mine_pairs(G, R, ok, strategy="all")
    assert 1 not in c.tolist() + r.tolist()


def test_groups_min_sizes_and_cap() -> None:
    g = np.array([0] * 6 + [1] * 3 + [2] * 2)
    w = np.array([1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0], bool)
    lo = ~w
    gg, rows, isw = mine_groups(g, w, lo)
    assert gg.tolist() == [0] * 6 and rows.tolist() == [0, 1, 2, 3, 4, 5]   # group 1 has no loser, 2 no winner
    assert isw.tolist() == [True] * 4 + [False] * 2
    gg, rows, isw = mine_groups(g, w, lo, max_group=4)     # winners keep max(2, 4 - 2) = 2 places
    assert rows.tolist() == [0, 1, 4, 5]
    gg, rows, isw = mine_groups(g, w, lo, min_winners=5)
    assert len(rows) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.5, 1.0, 1.5, float("nan")]), st.booleans(),
                          st.integers(0, 3)), max_size=40),
       st.sampled_from(["max_min", "all", "threshold"]), st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from([None, 1, 2]), st.booleans())
def test_vectorized_miners_equal_the_per_row_reference(rows, strategy, margin, cap, use_tie) -> None:
    groups = [r[0] for r in rows]
    rank = [r[1] for r in rows]
    valid = [r[2] for r in rows]
    tie = [float(r[3]) for r in rows] if use_tie else None
    kw = dict(strategy=strategy, margin=margin, max_pairs=cap, chosen_min=1.0, rejected_max=0.5)
    ref = bench.baseline_pairs(groups, rank, valid, tie=tie, **kw)
    gid, _ = group_ids(groups)
    c, r = mine_pairs(gid, np.array(rank, dtype=float), np.array(valid, dtype=bool),
                      tie=None if tie is None else np.array(tie), **kw)
    assert list(zip(c.tolist(), r.tolist())) == ref
    w = [v and x >= 1 for v, x in zip(valid, rank)]
    lo = [v and x < 1 for v, x in zip(valid, rank)]
    ref_g = bench.baseline_groups(groups, w, lo, max_group=None if cap is None else cap + 2)
    g, m, isw = mine_groups(gid, np.array(w, bool), np.array(lo, bool), max_group=None if cap is None else cap + 2)
    assert list(zip(g.tolist(), m.tolist(), isw.tolist())) == ref_g


SPEC = """\
component rule in [0, 1] = 1 if contains(completion, "return") else 0
component short in [0, 1] = 1 / (1 + len(completion))
preference { pairs = "all", rank = rule + short, winners = rule == 1, max_pairs = 2 }
"""


def test_rank_rows_evaluates_the_spec_expressions() -> None:
    prog = rewardlang.loads(SPEC)
    comps = {"rule": np.array([1.0, 0.0, np.nan]), "short": np.array([0.5, 0.25, 0.1])}
    rk = rank_rows(prog, np.array([1.5, 0.25, np.nan]), comps, np.array([False, False, True]))
    assert rk.rank[:2].tolist() == [1.5, 0.25] and math.isnan(rk.rank[2])
    assert rk.valid.tolist() == [True, False, False][:1] + [True, False]
    assert rk.winners.tolist() == [True, False, False] and rk.losers.tolist() == [False, True, False]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_pairs_command_scored_rows_masked_and_summary(tmp_path: Path) -> None:
    (tmp_path / "s.reward").write_text(SPEC, encoding="utf-8")
    rows = [
        {"prompt": "a", "completion": "return 1", "reward": 1.5, "components": {"rule": 1, "short": 0.5}},
        {"prompt": "a", "completion": "x", "reward": 0.5, "components": {"rule": 0, "short": 0.5}},
        {"prompt": "a", "completion": "yy", "reward": None, "components": {"rule": None, "short": 0.3},
         "masked": ["rule"]},
        {"prompt": "a", "completion": "zzz", "reward": 0.25, "components": {"rule": 0, "short": 0.25}},
        {"prompt": "b", "completion": "p", "reward": 0.5, "components": {"rule": 0, "short": 0.5}},
        {"prompt": "b", "completion": "q", "reward": 0.5, "components": {"rule": 0, "short": 0.5}},
        {"prompt": "c", "completion": "q", "reward": None, "components": {"rule": None, "short": 0.5},
         "masked": ["rule"]},
    ]
    _write(tmp_path / "in.jsonl", rows)
    res = CliRunner().invoke(app, ["pairs", str(tmp_path / "s.reward"), "-i", str(tmp_path / "in.jsonl"),
                                   "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 0, res.output
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(o["chosen"], o["rejected"]) for o in out] == [("return 1", "zzz"), ("return 1", "x")]
    assert out[0]["margin"] == pytest.approx(1.25) and out[0]["score_chosen"] == 1.5
    assert "7 samples (2 masked) in 3 prompts -> 2 pairs from 1 prompts" in res.stderr
    assert "1 (all tied)" in res.stderr and "1 (fewer than 2 unmasked samples)" in res.stderr
    assert "pairs per prompt -> prompts: 2: 1" in res.stderr
    res = CliRunner().invoke(app, ["pairs", str(tmp_path / "s.reward"), "-i", str(tmp_path / "in.jsonl"),
                                   "-o", str(tmp_path / "groups.jsonl"), "--groups"])
    assert res.exit_code == 0, res.output
    grp = [json.loads(x) for x in (tmp_path / "groups.jsonl").read_text().splitlines()]
    assert grp == [{"prompt": "a", "winners": ["return 1"], "losers": ["x", "zzz"], "winner_scores": [1.5],
                    "loser_scores": [0.5, 0.25]}]
    assert "2 (no winners (all failing))" in res.stderr  # b all fail, c is masked


def test_pairs_command_scores_raw_rows_and_output_is_complete_or_absent(tmp_path: Path) -> None:
    (tmp_path / "s.reward").write_text(SPEC, encoding="utf-8")
    _write(tmp_path / "raw.jsonl", [{"prompt": "a", "completion": "return"}, {"prompt": "a", "completion": "no"}])
    res = CliRunner().invoke(app, ["pairs", str(tmp_path / "s.reward"), "-i", str(tmp_path / "raw.jsonl"),
                                   "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 0, res.output
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [{"prompt": "a", "chosen": "return", "rejected": "no", "score_chosen": pytest.approx(1 + 1 / 7),
                    "score_rejected": pytest.approx(1 / 3), "margin": pytest.approx(1 + 1 / 7 - 1 / 3)}]
    _write(tmp_path / "bad.jsonl", [{"prompt": "a", "completion": "x"}, {"completion": "y"}])
    res = CliRunner().invoke(app, ["pairs", str(tmp_path / "s.reward"), "-i", str(tmp_path / "bad.jsonl"),
                                   "-o", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 1 and "bad.jsonl:2: no `prompt` column" in res.stderr
    assert not (tmp_path / "none.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pairs-")] == []
    # --groups without a winners rule is a clear error
    (tmp_path / "nw.reward").write_text("component rule = len(completion)\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["pairs", str(tmp_path / "nw.reward"), "-i", str(tmp_path / "raw.jsonl"),
                                   "-o", str(tmp_path / "g.jsonl"), "--groups"])
    assert res.exit_code == 1 and "no `winners` rule" in res.stderr and not (tmp_path / "g.jsonl").exists()


def test_module_doctests() -> None:
    import doctest

    import rewardlang.runtime.preference as mod

    result = doctest.testmod(mod)
    assert result.attempted >= 6 and result.failed == 0


def test_groups_command_with_no_group_and_rows_scored_by_another_spec(tmp_path: Path) -> None:
    """No prompt forming a group writes an empty, complete file (it crashed); rows scored by a spec without this
    spec's components are refused by name instead of being read as masked (every row silently dropped)."""
    spec = tmp_path / "g.reward"
    spec.write_text("component ok in [0, 1] = 1 if contains(completion, \"return\") else 0\n"
                    "preference { winners = ok == 1 }\n")
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"prompt": p, "completion": "x = 1"}) + "\n" for p in ("a", "a", "b")))
    out = tmp_path / "groups.jsonl"
    res = CliRunner().invoke(app, ["pairs", str(spec), "-i", str(raw), "-o", str(out), "--groups"])
    assert res.exit_code == 0, res.output
    assert out.read_text() == "" and "no winners" in res.output
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"prompt": "a", "completion": c, "reward": 1.0, "components": {"x": 1.0}})
                             + "\n" for c in ("return 1", "x")))
    out2 = tmp_path / "g2.jsonl"
    res = CliRunner().invoke(app, ["pairs", str(spec), "-i", str(other), "-o", str(out2), "--groups"])
    assert res.exit_code == 1 and "`ok`" in res.output and "another spec" in res.output
    assert not out2.exists()
