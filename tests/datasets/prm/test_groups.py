"""GEPO groups from the operators (`rewardlang prm-data --groups`): winners are the reference and the refactorings
that pass the tests, losers the variants that fail them, each exactly what running the tests says; infrastructure
failures never become a member; the spec's group settings apply; GEPO trains on the written file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rewardlang.datasets.prm import label
from rewardlang.sandbox import Sandbox

SQ = {"task_id": "sq", "prompt": "def sq(x):\n", "reference": "    y = x * x\n    return y\n",
      "tests": ["assert sq(3) == 9", "assert sq(0) == 0"], "entry_point": "sq"}
# `x < 0` -> `x < 1` (or `x < -1`) still passes these tests: an off_by_one mutant that passes
AB = {"task_id": "ab", "prompt": "def ab(x):\n", "reference": "    if x < 0:\n        return -x\n    return x\n",
      "tests": ["assert ab(-2) == 2", "assert ab(3) == 3", "assert ab(0) == 0"], "entry_point": "ab"}
OPS = ["return_none", "aug_assign", "arith_swap", "extract_variable", "off_by_one", "statement_to_pass",
       "comparison_flip", "negate_condition"]


def passes(prompt: str, body: str, tests: list[str]) -> bool:
    """Run the program and its asserts in this process: the oracle the groups must agree with."""
    env: dict = {}
    try:
        exec(prompt + body, env)  # noqa: S102 - our own fixed test programs
        for t in tests:
            exec(t, env)  # noqa: S102
    except Exception:  # noqa: BLE001 - any exception is a failing test, as in a test harness
        return False
    return True


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def built(sandbox) -> label.PrmData:
    return label.build([SQ, AB], operators=OPS, level="line", seed=0, sandbox=sandbox)


def test_golden_groups_equal_what_running_the_tests_says(built: label.PrmData) -> None:
    groups = label.groups_of([SQ, AB], built)
    by = {g["task_id"]: g for g in groups}
    assert set(by) == {"sq", "ab"}
    sq = by["sq"]
    # hand-checked: the only refactoring that applies is extract_variable on `y = x * x`; every mutant of sq fails
    assert sq["winners"] == ["    y = x * x\n    return y\n", "    tmp1 = x * x\n    y = tmp1\n    return y\n"]
    assert sq["winner_operators"] == ["reference", "extract_variable"]
    assert sorted(sq["losers"]) == sorted(["    pass\n    return y\n", "    y = x + x\n    return y\n",
                                           "    y = x * x\n    return None\n", "    y = x * x\n    pass\n"])
    for p in (SQ, AB):
        g = by[p["task_id"]]
        assert g["prompt"] == p["prompt"] and g["winners"][0] == p["reference"]
        assert len(set(g["winners"] + g["losers"])) == len(g["winners"]) + len(g["losers"])
        assert all(passes(p["prompt"], w, p["tests"]) for w in g["winners"])
        assert not any(passes(p["prompt"], lo, p["tests"]) for lo in g["losers"])
        assert [o == "reference" or label.mutate.OPERATORS[o].kind == "refactoring"
                for o in g["winner_operators"]] == [True] * len(g["winners"])
    # every judged variant is accounted for: in a group on its side, a passing mutant (left out), or a duplicate
    members = {(p["prompt"] + m) for g, p in ((by["sq"], SQ), (by["ab"], AB)) for m in g["winners"] + g["losers"]}
    passing_mutants = [code for _, code, _, kind, ok in built.judged if ok and kind == "mutation"]
    assert passing_mutants and all(c not in members for c in passing_mutants)
    assert all(passes("", c, AB["tests"] if c.startswith("def ab") else SQ["tests"]) for c in passing_mutants)
    c = built.group_counts
    assert c["mutants_passing"] == len(passing_mutants)
    assert c["winners"] + c["losers"] + c["mutants_passing"] + c["duplicates"] == len(built.judged) + 2
    assert c["groups"] == 2 and c["capped"] == 0 and built.counts["infra_dropped"] == 0


def test_group_settings_cap_and_minimum(built: label.PrmData) -> None:
    full = {g["task_id"]: g for g in label.groups_of([SQ, AB], built)}
    capped = {g["task_id"]: g for g in label.groups_of([SQ, AB], built, max_group=3)}
    for k, g in capped.items():
        assert len(g["winners"]) + len(g["losers"]) == 3 and g["winners"][0] == full[k]["winners"][0]
        assert set(g["losers"]) <= set(full[k]["losers"]) and set(g["winners"]) <= set(full[k]["winners"])
    assert built.group_counts["capped"] == 2
    n_sq = len(full["sq"]["losers"])
    few = label.groups_of([SQ, AB], built, min_losers=n_sq + 1)
    assert "sq" not in {g["task_id"] for g in few} and built.group_counts["too_few"] >= 1
    # the seeded order is reproducible: the same seed draws the same members under the cap
    assert label.groups_of([SQ, AB], built, max_group=3, seed=0) == list(capped.values())


class _InfraOnReturnNone:
    """Every program containing `return None` (and the second reference) comes back an infrastructure failure."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def evaluate(self, tasks):
        out = []
        for t, v in zip(tasks, self.sb.evaluate(tasks)):
            bad = "return None" in t.code or t.code == AB["prompt"] + AB["reference"]
            out.append(replace(v, outcome="infra", infra="slot died") if bad else v)
        return out


def test_infra_failures_never_become_members(sandbox) -> None:
    data = label.build([SQ, AB], operators=OPS, level="line", seed=0, sandbox=_InfraOnReturnNone(sandbox))
    groups = label.groups_of([SQ, AB], data)
    assert [g["task_id"] for g in groups] == ["sq"]          # ab's reference verdict was an infra failure
    assert data.counts["reference_infra"] == 1 and data.counts["infra_dropped"] >= 1
    assert all("return None" not in m for g in groups for m in g["winners"] + g["losers"])
    assert "return_none" not in groups[0]["loser_operators"]


def test_cli_groups_file_trains_gepo_one_step(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardlang.cli import app
    from rewardlang.trainers.gepo import load_groups
    from rewardlang.trainers.run import train

    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (SQ, AB)))
    spec = tmp_path / "cap.reward"
    spec.write_text('spec cap "groups of at most 3"\n'
                    "component rule in [0, 1] = 1 if len(completion) > 0 else 0\n"
                    "preference {\n    winners = rule == 1,\n    max_group = 3,\n}\n")
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "out"), "--level", "line",
                                   "--operators", ",".join(OPS), "--groups", "--spec", str(spec)])
    assert res.exit_code == 0, res.output
    assert "GEPO groups 2 of 2 problems" in res.output and "capped 2" in res.output
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["dpo.jsonl", "groups.jsonl", "report.json", "steps.jsonl"]
    rows = load_groups(str(out / "groups.jsonl"), "groups")
    assert [len(r["winners"]) + len(r["losers"]) for r in rows] == [3, 3]
    assert json.loads((out / "report.json").read_text())["groups"]["groups"] == 2
    # GEPO (tiny model) trains on the file as written
    run = train("specs/oorl_python.reward", sets={"train.algorithm": "gepo", "train.max_steps": 1,
                                            "train.prompts_per_step": 2, "train.learning_rate": 1e-3,
                                            "train.preference_data": str(out / "groups.jsonl")},
                flags={"output_dir": str(tmp_path / "run")}, progress=False)
    assert run.global_step == 1
    from rewardlang.trainers.metrics import read_metrics

    rec = [r for r in read_metrics(run.metrics_path) if "pref/groups" in r]
    assert rec and rec[0]["pref/groups"] == 2.0 and rec[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # π = π_ref


@pytest.mark.slow
def test_oorl_trains_one_step_on_the_written_groups(tmp_path: Path, built: label.PrmData) -> None:
    """specs/oorl_python.reward as shipped (algorithm oorl: REINFORCE++ on HumanEval prompts + GEPO on the file)."""
    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.run import train

    label.groups_of([SQ, AB], built)
    label.write(built, str(tmp_path / "out"))
    run = train("specs/oorl_python.reward", sets={"train.max_steps": 1, "train.batch_size": 4, "train.num_generations": 2,
                                            "train.max_completion_length": 16,
                                            "train.preference_data": str(tmp_path / "out" / "groups.jsonl")},
                flags={"output_dir": str(tmp_path / "run")}, progress=False)
    rec = [r for r in read_metrics(run.metrics_path) if "gepo/loss" in r]
    assert run.global_step == 1 and rec[0]["pref/groups"] == 2.0
    assert rec[0]["gepo/loss"] == pytest.approx(0.6931, abs=1e-3)  # first step: π = π_ref, every r̂ = 0
