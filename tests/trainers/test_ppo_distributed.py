"""PPO on two processes (DDP on CPU, gloo): advantages whitened over both processes' tokens, one set of weights,
one metrics record per update."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not installed")
def test_two_process_ppo_whitens_globally_and_stays_in_sync(tmp_path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(6)))
    run = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["torchrun", "--standalone", "--nproc_per_node", "2",
                           os.path.join(HERE, "ppo_ddp_worker.py"), os.path.join(HERE, "toy_dense.reward"),
                           str(data), str(run)], env=env, capture_output=True, text=True, timeout=540)
    errors = [line for line in proc.stderr.splitlines() if "Error" in line or "error:" in line]
    assert proc.returncode == 0, "\n".join(errors[-30:]) + "\n---\n" + proc.stderr[-3000:]
    a, b = (json.loads((run / f"rank{r}.json").read_text()) for r in (0, 1))
    assert [a["world"], b["world"]] == [2, 2] and a["step"] == b["step"] == 3
    # DDP keeps one policy and critic: the same weights on both processes after 3 updates
    assert a["checksum"] == b["checksum"]
    # global whitening: over both processes' tokens the advantages have mean 0 and (unbiased) std 1 ...
    adv = np.array(a["advantages"] + b["advantages"])
    mask = np.array(a["train_mask"] + b["train_mask"]).astype(bool)
    assert abs(adv[mask].mean()) < 1e-5 and abs(adv[mask].std(ddof=1) - 1) < 1e-4
    # ... while each process's own share is not whitened on its own (the check above is not vacuous)
    own = np.array(a["advantages"])[np.array(a["train_mask"]).astype(bool)]
    assert abs(own.mean()) > 1e-3 or abs(own.std(ddof=1) - 1) > 1e-3
    # each process sampled its own prompt: the data are split, not duplicated
    assert a["texts"] != b["texts"]
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in records if "reward" in x] == [1, 2, 3]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not installed")
def test_two_processes_put_a_tied_batch_aside_together(tmp_path) -> None:
    """`resample_tied` decides on both processes' groups (gathered): a batch is put aside only when every group of
    every process tied, so the processes never drift apart in the data (a drift would hang their collectives)."""
    from test_resample_tied import MODES, SPEC, expected_rounds

    from rewardlang.trainers.ppo import _DataOrder

    spec = tmp_path / "toy_resample.reward"
    spec.write_text(SPEC, encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}", "mode": m}) + "\n" for i, m in enumerate(MODES)))
    run = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    sets = json.dumps({"train.algorithm": "ppo", "train.advantage_estimator": "reinforce_pp", "train.resample_tied": 3,
                       "train.max_completion_length": 12})
    proc = subprocess.run(["torchrun", "--standalone", "--nproc_per_node", "2",
                           os.path.join(HERE, "ppo_ddp_worker.py"), str(spec), str(data), str(run), sets],
                          env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (json.loads((run / f"rank{r}.json").read_text()) for r in (0, 1))
    expected = expected_rounds(3, 0, 3)   # one prompt on each process: the same positions as 2 on one
    assert a["resampled"] == b["resampled"] == sum(expected)
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [int(x["resample/rounds"]) for x in records if "reward" in x] == expected
    # a step where one process's group varied and the other's tied is not put aside (decided on both)
    order = _DataOrder(len(MODES), 0)
    kept = [s + sum(expected[:s + 1]) for s in range(3)]   # the position of the batch each step trained on
    split = [k for k in kept if len({MODES[order.index(k * 2 + r)] for r in (0, 1)}) == 2]
    assert sum(expected) > 0 and split, (expected, split)
