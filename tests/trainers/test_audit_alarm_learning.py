"""The alarm on a real learning run (tiny model, GRPO, CPU, two seeds).

toy_hackable.reward pays for letters while its audit watches what the task asks for (digits): the policy learns to
earn the reward, the reward's mean rises well past the margin, the audit stays flat (or falls), and the alarm fires,
is written to alarms.jsonl and the run's README, and `rewardlang audit RUN_DIR` finds it again (exit 1).
toy_honest.reward pays for digits and audits digits its own way (the share of words that hold one): the reward rises
as much and the audit rises with it: no alarm. The fast set runs the hackable spec on one seed over 12 steps; -m slow
runs both specs on two seeds over their 20 steps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli.app import app as cli_app
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(tmp_path: Path, spec: str, seed: int, sets: dict | None = None):  # type: ignore[no-untyped-def]
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}: write something."}) + "\n" for i in range(16)))
    return train(os.path.join(HERE, f"toy_{spec}.reward"), sets=sets or {},
                 flags={"model": "tiny", "dataset": str(data), "output_dir": str(tmp_path / spec), "seed": seed},
                 progress=False)


def _curves(result) -> tuple[list[float], list[float], str]:  # type: ignore[no-untyped-def]
    recs = [r for r in read_metrics(result.metrics_path) if "train_runtime" not in r]
    name = next(k for k in recs[0] if k.startswith("audit/") and not k.startswith(("audit/gap/", "audit/masked/")))
    return [r["reward"] for r in recs], [r[name] for r in recs if name in r], name[len("audit/"):]


def _alarms(run: Path) -> list[dict]:
    path = run / "alarms.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _check_hackable(result, steps: int) -> None:  # type: ignore[no-untyped-def]
    run = Path(result.run_dir)
    rewards, audit, _ = _curves(result)
    assert len(rewards) == steps
    # the reward rose well past the margin; the audit did not follow
    assert sum(rewards[-3:]) / 3 - sum(rewards[:3]) / 3 > 0.15, rewards
    assert max(audit[len(audit) // 2:]) < 0.1 and audit[-1] <= audit[0] + 0.02, audit
    (alarm,) = _alarms(run)
    assert alarm["kind"] == "audit" and alarm["name"] == "digits" and alarm["step"] == 10
    assert alarm["line"].startswith("alarm: audit `digits` ")
    assert "while the reward rose: over steps 1-10 the reward went" in alarm["line"]
    assert alarm["line"] in (run / "README.md").read_text()
    # after the fact, the same alarm from the run directory, and a non-zero exit
    res = CliRunner().invoke(cli_app, ["audit", str(run)])
    assert res.exit_code == 1 and alarm["line"] in res.output


def test_a_hackable_spec_raises_the_alarm_fast(tmp_path: Path) -> None:
    result = _run(tmp_path, "hackable", 0, {"train.max_steps": 12})
    _check_hackable(result, 12)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_hackable_spec_alarms_and_honest_spec_does_not(tmp_path: Path, seed: int) -> None:
    _check_hackable(_run(tmp_path, "hackable", seed), 20)
    honest = _run(tmp_path, "honest", seed)
    rewards, audit, _ = _curves(honest)
    assert sum(rewards[-3:]) / 3 - sum(rewards[:3]) / 3 > 0.3, rewards  # it learns as much, honestly
    assert audit[-1] > audit[0] + 0.3, audit  # and the audit follows
    assert _alarms(Path(honest.run_dir)) == []
    assert "No alarm." in (Path(honest.run_dir) / "README.md").read_text()
    res = CliRunner().invoke(cli_app, ["audit", honest.run_dir])
    assert res.exit_code == 0 and "no alarm" in res.output
