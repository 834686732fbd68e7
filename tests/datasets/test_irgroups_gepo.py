"""GEPO on real IR groups (built by `rewardlang ir-groups` from the C corpus): on a tiny model the implicit-reward
margin between equivalent IRs (winners) and killed mutants (losers) rises, for 2 seeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rewardlang.datasets import cfuncs
from rewardlang.datasets.irgroups import build_group

pytestmark = pytest.mark.slow

SPEC = """\
spec ir_gepo "GEPO on groups of LLVM IR"

component rule in [0, 1] = 1 if contains(completion, "define") else 0

train {
    algorithm = "gepo",
}
"""


@pytest.fixture(scope="module")
def groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("clang") is None:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail("clang is missing (CI=true: scripts/install.sh installs it)")
        pytest.skip("clang is not installed")
    names = ["nth_triangular", "clamp_scale_0", "clamp_scale_1", "clamp_scale_2"]  # short IR: fast on CPU
    rows = cfuncs.rows([f for f in cfuncs.corpus() if f.name in names])
    out = tmp_path_factory.mktemp("ir") / "groups.jsonl"
    with open(out, "w") as fh:
        for row in rows:
            g = build_group(row, losers=2, seed=0).group
            assert g is not None
            fh.write(json.dumps(g) + "\n")
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_gepo_separates_equivalent_irs_from_mutants(groups: Path, tmp_path: Path, seed: int) -> None:
    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.run import train

    spec = tmp_path / "ir.reward"
    spec.write_text(SPEC)
    res = train(str(spec), sets={"train.max_steps": 12, "train.learning_rate": 1e-4, "train.prompts_per_step": 2,
                                 "train.save_steps": 12, "train.preference_data": str(groups)},
                flags={"output_dir": str(tmp_path / "run"), "seed": seed}, progress=False)
    assert res.global_step == 12
    assert all("pref/margin" in r for r in read_metrics(res.metrics_path) if "loss" in r)
    # Before training the policy is the reference: every implicit reward is 0, so margin 0 and accuracy 0.
    got = _implicit(res.run_dir, groups)
    assert got["margin"] > 0 and got["accuracy"] > 0.5, got


def _implicit(run_dir: str, groups: Path, beta: float = 0.1) -> dict[str, float]:
    """Mean over groups of mean_W − mean_L of β(log π − log π_ref), and the share of winner/loser pairs ordered
    right, under the final policy against the initial one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rewardlang.trainers.gepo import sequence_logps, tokenize_members

    pol = AutoModelForCausalLM.from_pretrained(f"{run_dir}/final").eval()
    ref = AutoModelForCausalLM.from_pretrained(f"{run_dir}/initial_model").eval()
    tok = AutoTokenizer.from_pretrained(f"{run_dir}/final")
    margins, acc = [], []
    for line in groups.read_text().splitlines():
        g = json.loads(line)
        members = g["winners"] + g["losers"]
        b = tokenize_members(tok, [g["prompt"]] * len(members), members)
        with torch.no_grad():
            r = beta * (sequence_logps(pol, **b) - sequence_logps(ref, **b))
        w, lo = r[: len(g["winners"])], r[len(g["winners"]):]
        margins.append(float(w.mean() - lo.mean()))
        acc.append(float((w[:, None] > lo[None, :]).float().mean()))
    return {"margin": sum(margins) / len(margins), "accuracy": sum(acc) / len(acc)}
