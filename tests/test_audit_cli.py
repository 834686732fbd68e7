"""``rewardlang audit``: a run directory's audits recomputed from its records, and any engine's rollouts scored and
audited with a spec; the table, the alarms, a plot, JSON; exit 1 when an alarm fires; bad rows named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from rewardlang.cli.app import app

SPEC = """
component letters in [0, 1] = count(completion, /[a-z]/) / max(len(completion), 1)
audit digits in [0, 1] = count(completion, /[0-9]/) / max(len(completion), 1) every 2 steps window 6 steps margin 0.1
audit drift = length_drift(margin=0.5) window 6 steps
"""


def _rollouts(path: Path, hack: bool) -> None:
    rows = []
    for step in range(1, 9):
        k = step if hack else 0
        # hack: more letters each step, digits gone; honest: the same mix every step
        for i in range(4):
            text = "a" * (2 + 3 * k) + ("" if hack and step > 2 else "1" * 3)
            rows.append({"step": step, "prompt": f"p{i}", "completion": text})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rollouts_of_a_hack_alarm_and_exit_1(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rollouts.jsonl"
    _rollouts(data, hack=True)
    res = CliRunner().invoke(app, ["audit", str(spec), "-i", str(data), "-o", str(tmp_path / "t.json"),
                                   "--plot", str(tmp_path / "p.png")])
    assert res.exit_code == 1, res.output
    assert "audits of 32 rollouts of" in res.output and "(8 steps)" in res.output
    assert "alarm: audit `digits` fell while the reward rose: over steps 1-6" in res.output
    out = json.loads((tmp_path / "t.json").read_text())
    assert [a["name"] for a in out["alarms"]] == ["digits", "drift"]
    assert [r["step"] for r in out["records"] if "audit/digits" in r] == [1, 2, 4, 6, 8]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_honest_rollouts_no_alarm_exit_0(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rollouts.jsonl"
    _rollouts(data, hack=False)
    res = CliRunner().invoke(app, ["audit", str(spec), "-i", str(data), "--all-steps"])
    assert res.exit_code == 0, res.output
    assert "no alarm" in res.output
    lines = [line.split() for line in res.output.splitlines() if line.strip()[:1].isdigit()]
    assert [int(x[0]) for x in lines] == list(range(1, 9))  # --all-steps: every step audited


def test_bad_rows_are_named(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rollouts.jsonl"
    data.write_text('{"step": 1, "completion": "a"}\n{"completion": "b"}\nnot json\n')
    res = CliRunner().invoke(app, ["audit", str(spec), "-i", str(data)])
    assert res.exit_code == 1
    assert f"{data}:2: no whole-number `step` column" in res.output
    assert f"{data}:3:" in res.output and "2 bad row(s)" in res.output


def test_a_run_directory_recomputed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "audits.json").write_text(json.dumps({"spec": "s", "reward_range": [0.0, 1.0], "audits": [
        {"name": "hidden", "kind": "samples", "every": 2, "window": 4, "margin": 0.1, "range": [0, 1],
         "statistic": None, "options": {}, "text": "x", "gap": "scaled"}]}))
    recs = [{"step": s, "reward": 0.1 * s, **({"audit/hidden": 0.2} if s in (1, 2, 4) else {})} for s in range(1, 5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = CliRunner().invoke(app, ["audit", str(run)])
    assert res.exit_code == 1, res.output
    assert "alarm: audit `hidden` stayed flat while the reward rose: over steps 1-4" in res.output
    assert (run / "audits.png").exists() and f"plot: {run / 'audits.png'}" in res.output
    # a run without audits says so
    (run / "audits.json").unlink()
    res = CliRunner().invoke(app, ["audit", str(run)])
    assert res.exit_code == 1 and "the run has no audits.json" in res.output
    # a rollouts file goes with a spec, not a run directory
    res = CliRunner().invoke(app, ["audit", str(run), "-i", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 1 and "goes with a spec file" in res.output


def test_the_offline_audit_imports_no_torch(tmp_path: Path) -> None:
    import subprocess

    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rollouts.jsonl"
    _rollouts(data, hack=False)
    code = ("import sys\nfrom rewardlang.cli.app import app\n"
            f"try:\n    app(['audit', {str(spec)!r}, '-i', {str(data)!r}])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr
