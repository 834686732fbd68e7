"""The spec's audits while training (rewardlang/trainers/audit.py), in every generating trainer: scored on each
audited step's own samples at their period, logged as `audit/NAME` and `audit/gap/NAME` beside the reward, the
statistics every step, the hack probes and the reference answer at the audit period (`probe/NAME`), the audited
samples kept in `RUN_DIR/audits/`; the alarm said once, written to `alarms.jsonl` and the README, and with
`train.stop_on_alarm = true` a checkpoint and a stop with status 1. And the audits never change what is trained: a
run with them is bit-identical to the run without them (rewards, losses, gradient norms, final weights).
Tiny model, a few 6-token completions: seconds per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlang.trainers.audit import AlarmStop
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

SPEC = """
spec audited "short, lower-case completions"
input secret: text?
component short in [0, 1] = 1 if len(completion) < 12 else 0
component letters in [0, 1] = count(completion, /[a-z]/) / max(len(completion), 1)
{audits}
preference {{
    winners = short == 1,
    losers = short == 0,
}}
train {{
    algorithm = "{algo}",
    max_steps = 4,
    num_generations = 2,
    prompts_per_step = 2,
    max_completion_length = 6,
    learning_rate = 1e-3,
    save_steps = 100,
}}
"""

AUDITS = """
audit has_secret in [0, 1] = number(contains(completion, secret or "zz")) every 2 steps window 4 steps
    on_error 0
audit dom = component_dominance window 4 steps
audit drift = length_drift
"""


def _run(tmp_path: Path, algo: str, audits: str = AUDITS, sets: dict | None = None, reference: bool = False):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC.format(algo=algo, audits=audits))
    data = tmp_path / "prompts.jsonl"
    rows = [{"prompt": f"Task {i}", "secret": "e", **({"solution": "def f():\n    return 1"} if reference else {})}
            for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return train(str(spec), sets=sets or {}, flags={"model": "tiny", "dataset": str(data),
                                                     "output_dir": str(tmp_path / "run")}, progress=False)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Each trainer's run with the audits and a reference column (so the probes run too), trained once for the
    module: the tests below read it, none changes it."""
    runs: dict = {}

    def get(algo: str):  # type: ignore[no-untyped-def]
        if algo not in runs:
            runs[algo] = _run(tmp_path_factory.mktemp(f"audited-{algo}"), algo, reference=True)
        return runs[algo]

    return get


@pytest.mark.parametrize("algo", ["grpo", "ppo", "gepo", "dpo", "oorl"])
def test_every_generating_trainer_audits_its_own_samples(tmp_path: Path, audited, algo: str) -> None:  # type: ignore[no-untyped-def]
    # GRPO and PPO: the module's runs with a reference column (the tests below use them too); the others without
    # one, as a data set without solutions gives them: the audits must work either way
    result = audited(algo) if algo in ("grpo", "ppo") else _run(tmp_path, algo)
    run = Path(result.run_dir)
    recs = {r["step"]: r for r in read_metrics(str(run / "metrics.jsonl")) if "step" in r and "train_runtime" not in r}
    assert sorted(recs) == [1, 2, 3, 4]
    # the audit of samples at step 1, every 2 steps and the last step; its gap beside it (both on [0, 1])
    assert [s for s in recs if "audit/has_secret" in recs[s]] == [1, 2, 4]
    for s in (1, 2, 4):
        r = recs[s]
        assert 0.0 <= r["audit/has_secret"] <= 1.0
        assert r["audit/gap/has_secret"] == pytest.approx(r["reward"] / 2 - r["audit/has_secret"])
    # the statistics every step (length drift reads the completions' mean length in characters)
    assert all("audit/drift" in r and r["audit/drift"] == r["completions/mean_chars"] for r in recs.values())
    # the audited samples, as a rollout file: one row per sample of the step, with the audit's value
    rows = [json.loads(line) for line in (run / "audits" / "step-000002.jsonl").read_text().splitlines()]
    samples = [r for r in rows if r["kind"] == "sample"]
    assert samples and all(r["step"] == 2 and set(r["audits"]) == {"has_secret"} and r["secret"] == "e"
                           for r in samples)
    assert sum(r["audits"]["has_secret"] for r in samples) / len(samples) == pytest.approx(
        recs[2]["audit/has_secret"])
    assert not (run / "audits" / "step-000003.jsonl").exists()
    meta = json.loads((run / "audits.json").read_text())
    assert [a["name"] for a in meta["audits"]] == ["has_secret", "dom", "drift"]
    assert meta["reward_range"] == [0.0, 2.0] and meta["audits"][0]["gap"] == "scaled"
    readme = (run / "README.md").read_text()
    assert "## Audits" in readme and "| step | reward | has_secret | gap has_secret |" in readme


def test_probes_and_the_reference_answer_at_the_audit_period(audited) -> None:  # type: ignore[no-untyped-def]
    """With a reference column the probes are held against the reference answer laid out as the step's best sample;
    the empty answer is short (1) and earns more than the long reference here: an alarm, said once."""
    result = audited("grpo")
    run = Path(result.run_dir)
    recs = {r["step"]: r for r in read_metrics(str(run / "metrics.jsonl")) if "train_runtime" not in r}
    for s in (1, 2, 4):
        assert recs[s]["probe/empty_answer"] == 1.0  # short 1, letters 0 (no characters)
        assert "probe/reference" in recs[s] and recs[s]["probe/reference"] < 1.0
    assert "probe/empty_answer" not in recs[3]
    alarms = [json.loads(line) for line in (run / "alarms.jsonl").read_text().splitlines()]
    empty = [a for a in alarms if a["name"] == "empty_answer"]
    assert len(empty) == 1 and empty[0]["kind"] == "probe" and empty[0]["step"] == 1
    assert "probe `empty answer` earned 1 at step 1, at least as much as the reference answer" in empty[0]["line"]
    assert empty[0]["line"] in (run / "README.md").read_text()
    probes = [json.loads(line) for line in (run / "audits" / "step-000001.jsonl").read_text().splitlines()
              if '"kind": "reference"' in line]
    assert probes and probes[0]["completion"].count("return 1") == 1


def test_stop_on_alarm_saves_a_checkpoint_and_stops(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(AlarmStop) as ei:
        _run(tmp_path, "grpo", reference=True, sets={"train.stop_on_alarm": True})
    assert "alarm: probe `" in str(ei.value) and "train.stop_on_alarm = true" in str(ei.value)
    run = tmp_path / "run"
    assert (run / "checkpoint-1" / "trainer_state.json").exists()  # saved at the alarm's step
    steps = [r["step"] for r in read_metrics(str(run / "metrics.jsonl")) if "train_runtime" not in r]
    assert steps == [1]
    assert "warning: alarm: probe `" in capsys.readouterr().err


def test_stop_on_alarm_from_the_command_line_exits_1(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardlang.trainers.cli import app

    spec = tmp_path / "s.reward"
    spec.write_text(SPEC.format(algo="ppo", audits=AUDITS))
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}", "secret": "e", "solution": "x = 1"}) + "\n"
                            for i in range(6)))
    res = CliRunner().invoke(app, ["train", "--spec", str(spec), "--model", "tiny", "--dataset", str(data),
                                   "--output", str(tmp_path / "run"), "--set", "train.stop_on_alarm=true",
                                   "--no-progress"])
    assert res.exit_code == 1
    assert "training stopped: alarm: probe `empty answer` earned 1 at step 1" in res.output
    assert (tmp_path / "run" / "checkpoint-1").is_dir()


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_the_trained_run_is_bit_identical_with_and_without_audits(tmp_path: Path, audited, algo: str) -> None:  # type: ignore[no-untyped-def]
    import torch
    from safetensors.torch import load_file

    plain = _run(tmp_path / "plain", algo, audits="")
    with_audits = audited(algo)  # the audits and the probes (a reference column)
    a = [r for r in read_metrics(plain.metrics_path) if "train_runtime" not in r]
    b = [r for r in read_metrics(with_audits.metrics_path) if "train_runtime" not in r]
    keys = [k for k in a[0] if k.startswith(("reward", "rewards/", "loss", "grad_norm", "advantages/", "kl",
                                             "entropy", "masked/"))]
    assert keys and all(k in b[0] for k in keys)
    for ra, rb in zip(a, b, strict=True):
        assert {k: ra[k] for k in keys} == {k: rb[k] for k in keys}
    wa = load_file(str(Path(plain.final_dir) / "model.safetensors"))
    wb = load_file(str(Path(with_audits.final_dir) / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_resumed_run_keeps_its_alarms_and_says_none_twice(tmp_path: Path) -> None:
    """AuditGuard.restore: the alarms up to the checkpoint stay (and are not said again when the same records are
    seen), those after it go with the records after it."""
    import rewardlang
    from rewardlang.trainers.audit import AuditGuard

    prog = rewardlang.loads("component c in [0, 1] = 1\naudit a in [0, 1] = 0 every 1 step window 2 steps")
    run = tmp_path / "run"
    guard = AuditGuard(prog, str(run))
    recs = [{"step": s, "reward": 0.2 * s, "audit/a": 0.0} for s in range(1, 5)]
    for r in recs:
        guard.observe(r["step"], {k: v for k, v in r.items() if k != "step"})
    lines = (run / "alarms.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [2]
    # a resume from step 1: the alarm of step 2 is gone, and fires again when step 2 is trained again
    again = AuditGuard(prog, str(run))
    again.restore(recs, 1)
    assert (run / "alarms.jsonl").read_text() == ""
    assert [a.step for a in again.observe(2, {"reward": 0.4, "audit/a": 0.0})] == [2]
    # a resume from step 3: the alarm of step 2 is known, never said twice
    later = AuditGuard(prog, str(run))
    later.restore(recs, 3)
    assert [json.loads(x)["step"] for x in (run / "alarms.jsonl").read_text().splitlines()] == [2]
    assert later.observe(4, {"reward": 0.8, "audit/a": 0.0}) == []
