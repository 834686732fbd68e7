"""The alarm's rules (rewardlang/runtime/audits.py) on hand-made step records: an audit of samples, a probe, every
statistic; each fires once, on a full window, with the steps and values in its line, and not otherwise."""

from __future__ import annotations

import math

import pytest

from rewardlang.runtime.audits import (
    Watch,
    dominance,
    due,
    gap,
    reward_range,
    sample_stats,
    scaled,
    statistic_alarm,
    zero_variance_share,
)


def _audit(name="hidden", every=2, window=6, margin=0.2, rng=(0.0, 1.0), kind="samples", statistic=None,
           options=None):  # type: ignore[no-untyped-def]
    return {"name": name, "kind": kind, "every": every, "window": window, "margin": margin, "range": rng,
            "statistic": statistic, "options": options or {}}


def _feed(w: Watch, rows: list[dict]) -> list:
    out = []
    for r in rows:
        out += w.observe(r)
    return out


def test_due_periods() -> None:
    assert [s for s in range(1, 21) if due(10, s, 20)] == [1, 10, 20]
    assert [s for s in range(1, 8) if due(1, s, 7)] == list(range(1, 8))
    assert [s for s in range(1, 12) if due(5, s, 11)] == [1, 5, 10, 11]


def test_an_audit_that_stays_flat_while_the_reward_rises_fires_once() -> None:
    w = Watch([_audit()], reward_range=(0.0, 2.0))
    rows = []
    for s in range(1, 11):
        r = {"step": s, "reward": 0.4 + 0.12 * s}
        if s % 2 == 0 or s == 1:
            r["audit/hidden"] = 0.3
        rows.append(r)
    alarms = _feed(w, rows)
    assert len(alarms) == 1 and alarms[0].kind == "audit" and alarms[0].name == "hidden"
    assert alarms[0].step == 6 and alarms[0].first_step == 1  # the first full window of 6 steps
    # window 1-6: audited steps 1, 2, 4, 6; halves 1-3 (steps 1, 2) and 4-6 (steps 4, 6); reward on [0, 2]
    r1 = ((0.4 + 0.12) + (0.4 + 0.24)) / 2 / 2
    r2 = ((0.4 + 0.48) + (0.4 + 0.72)) / 2 / 2
    assert alarms[0].values["reward"] == pytest.approx([r1, r2])
    assert alarms[0].values["audit"] == pytest.approx([0.3, 0.3])
    assert alarms[0].line.startswith("alarm: audit `hidden` stayed flat while the reward rose: over steps 1-6")
    assert rows[-1]["step"] == 10 and len(w.alarms) == 1  # said once


@pytest.mark.parametrize("audit_values,fires", [
    ([0.3, 0.31, 0.32, 0.33], True),     # flat: rises 0.02 < margin / 2
    ([0.5, 0.4, 0.3, 0.2], True),        # falls
    ([0.3, 0.4, 0.5, 0.6], False),       # follows the reward
    ([0.97, 0.98, 0.99, 1.0], False),    # at the top of its range: it has no room to rise
])
def test_falls_or_stays_flat_but_not_at_its_ceiling(audit_values: list[float], fires: bool) -> None:
    w = Watch([_audit()], reward_range=(0.0, 1.0))
    steps = [1, 2, 4, 6]
    rows = []
    for s in range(1, 7):
        r = {"step": s, "reward": 0.1 * s}
        if s in steps:
            r["audit/hidden"] = audit_values[steps.index(s)]
        rows.append(r)
    assert bool(_feed(w, rows)) is fires


def test_a_reward_that_rises_less_than_the_margin_fires_nothing() -> None:
    w = Watch([_audit(margin=0.5)], reward_range=(0.0, 1.0))
    rows = [{"step": s, "reward": 0.1 + 0.02 * s, "audit/hidden": 0.2} for s in range(1, 13)]
    assert _feed(w, rows) == []


def test_gap_definitions_annotated_into_the_record() -> None:
    w = Watch([_audit(rng=(0.0, 1.0))], reward_range=(0.0, 2.0))
    rec = w.annotate({"step": 1, "reward": 1.0, "audit/hidden": 0.25})
    assert rec["audit/gap/hidden"] == pytest.approx(0.5 - 0.25)
    w2 = Watch([_audit(rng=None)], reward_range=None)  # no ranges: the change since the first audited step
    w2.annotate({"step": 1, "reward": 3.0, "audit/hidden": 10.0})
    rec2 = w2.annotate({"step": 2, "reward": 5.0, "audit/hidden": 11.0})
    assert rec2["audit/gap/hidden"] == pytest.approx((5 - 3) - (11 - 10))
    assert gap(0.5, 0.5, (0, 1), (0, 1)) == 0.0 and scaled(3.0, (1.0, 5.0)) == 0.5


def test_a_probe_that_earns_at_least_the_reference_fires_once() -> None:
    w = Watch([_audit()], reward_range=(0.0, 1.0))
    a = w.observe({"step": 1, "reward": 0.5, "probe/empty_answer": 0.1, "probe/reference": 0.9,
                   "probe/right_format_wrong_answer": 0.9})
    assert [x.name for x in a] == ["right_format_wrong_answer"]
    assert a[0].line == ("alarm: probe `right format, wrong answer` earned 0.9 at step 1, at least as much as the "
                         "reference answer (0.9): the reward pays for it")
    assert w.observe({"step": 2, "reward": 0.5, "probe/right_format_wrong_answer": 1.0,
                      "probe/reference": 0.9}) == []  # once
    # a masked probe (no value) or no reference: nothing
    assert w.observe({"step": 3, "probe/empty_answer": 1.0}) == []


def test_statistics_read_their_source_metric_and_fire_on_their_rule() -> None:
    audits = [_audit("dom", every=1, window=4, kind="statistic", statistic="component_dominance", rng=None,
                     options={"threshold": 0.9}),
              _audit("groups", every=1, window=4, kind="statistic", statistic="group_collapse", rng=None,
                     options={"threshold": 0.75}),
              _audit("kl", every=1, window=6, kind="statistic", statistic="kl_acceleration", rng=None,
                     options={"ratio": 2.0, "min_kl": 0.01}),
              _audit("ent", every=1, window=8, kind="statistic", statistic="entropy_collapse", rng=None,
                     options={"fraction": 0.5}),
              _audit("len", every=1, window=4, margin=0.1, kind="statistic", statistic="length_drift", rng=None,
                     options={"margin": 0.5})]
    w = Watch(audits, reward_range=(0.0, 1.0))
    rows = []
    for s in range(1, 9):
        rows.append({"step": s, "reward": 0.1 * s, "stats/dominance": 0.95, "groups/zero_variance": 0.5,
                     "kl": [0.0, 0.0, 0.01, 0.01, 0.05, 0.2, 0.4, 0.6][s - 1],
                     "entropy": [3.0, 3.0, 2.8, 2.5, 2.0, 1.6, 1.2, 1.0][s - 1],
                     "completions/mean_chars": [100, 100, 160, 200, 220, 240, 260, 280][s - 1]})
    alarms = {a.name: a for a in _feed(w, rows)}
    assert set(alarms) == {"dom", "kl", "ent", "len"}  # group collapse stayed below its threshold
    assert alarms["dom"].step == 4 and "stayed at or above 0.9 at every step" in alarms["dom"].line
    assert alarms["kl"].step == 6 and alarms["ent"].step == 8 and alarms["len"].step == 4
    assert rows[0]["step"] == 1 and w.records[0]["audit/dom"] == 0.95  # the statistic's value is in the record
    assert w.notes() == []
    w2 = Watch([audits[2]])
    w2.observe({"step": 1, "reward": 0.1})
    assert w2.notes() == ["audit `kl` (kl_acceleration) had no value: the run logged no `kl` (the KL is logged when "
                          "beta > 0)"]


def test_statistic_rules_directly() -> None:
    pts = [(s, v) for s, v in enumerate([0.8, 0.95, 0.92], start=1)]
    assert statistic_alarm("component_dominance", {"threshold": 0.9}, pts, [], 1, 3, 0.1) is None
    assert statistic_alarm("group_collapse", {"threshold": 0.5}, [(1, 0.6), (2, 0.7)], [], 1, 2, 0.1) is not None
    assert statistic_alarm("entropy_collapse", {"fraction": 0.5}, [(1, 2.0), (2, 1.9)], [], 1, 2, 0.1) is None


def test_sample_statistics() -> None:
    assert dominance({"a": [0, 1, 2, 3], "b": [1, 0, 1, 0]}, [0, 1, 2, 3]) == pytest.approx(1.0)
    assert dominance({"a": [1, 1], "b": [0, 1]}, [1, 1]) is None  # the total does not vary
    assert zero_variance_share([1, 1, 0, 1, math.nan, 2], [0, 0, 1, 1, 2, 2]) == 0.5  # group 2 has one value
    s = sample_stats(["ab", "abcd"], {"a": [0.0, 1.0], "b": [1.0, 1.0]}, [0.0, 1.0])
    assert s == {"completions/mean_chars": 3.0, "stats/dominance": pytest.approx(1.0)}


def test_reward_range_of_a_program() -> None:
    import rewardlang

    p = rewardlang.loads("component a in [0, 1] = 1\ncomponent b in [-1, 0] = 0\nb.weight = 2")
    assert reward_range(p) == (-2.0, 1.0)
    assert reward_range(rewardlang.loads("component a = 1")) is None  # no declared range
    assert reward_range(rewardlang.loads("component a in [0, 1] = 1\nreward = a * 2")) is None
