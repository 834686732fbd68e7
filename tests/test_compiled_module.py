"""A module written by ``rewardlang compile`` runs as a script (JSONL in, JSONL out, the values of
``rewardlang score``) and is callable from Python through ``score(...)`` and ``program()`` (issue 13, item 18)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "codepo_text.reward"
DATA = ROOT / "examples" / "completions.jsonl"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled") / "codepo_text_reward.py"
    r = CliRunner().invoke(app, ["compile", str(SPEC), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _run(path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(path), *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=str(ROOT), timeout=300)


def _score_cli() -> list[dict]:
    r = CliRunner().invoke(app, ["score", str(SPEC), "-i", str(DATA), "--no-summary", "--no-progress"])
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


@pytest.mark.slow
def test_the_module_run_as_a_script_scores_like_rewardlang_score(compiled: Path, tmp_path: Path) -> None:
    want = _score_cli()
    out = tmp_path / "scored.jsonl"
    r = _run(compiled, "-i", str(DATA), "-o", str(out))
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(got) == len(want) > 3
    for g, w in zip(got, want):
        assert g["reward"] == pytest.approx(w["reward"], abs=1e-12)
        assert g["components"] == pytest.approx(w["components"], abs=1e-12)
        assert g["advantage"] == pytest.approx(w["advantage"], abs=1e-12)  # groups by the spec's prompt
    # standard input to standard output
    r = _run(compiled, stdin=DATA.read_text(encoding="utf-8"))
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["reward"] for x in r.stdout.splitlines()] == [g["reward"] for g in got]


@pytest.mark.slow
def test_the_script_names_a_bad_line_and_exits_1(compiled: Path) -> None:
    r = _run(compiled, stdin='{"completion": "a", "prompt": "p"}\n{not json\n')
    assert r.returncode == 1 and "<stdin>" not in r.stderr and ":2: invalid JSON" in r.stderr
    r = _run(compiled, "--help")
    assert r.returncode == 0 and "--group-by" in r.stdout


def test_the_module_is_callable_from_python(compiled: Path) -> None:
    import rewardlang

    spec = importlib.util.spec_from_file_location("codepo_text_reward_t", compiled)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    completion = ["<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>", "nothing"]
    got = mod.score(completion=completion, prompt=["p", "p"])
    want = rewardlang.load(str(SPEC)).score(completion=completion, prompt=["p", "p"])
    assert got.total.tolist() == want.total.tolist()
    assert got.advantages.tolist() == want.advantages.tolist()
    assert mod.program() is mod.program() and mod.program().name == "codepo_text"
