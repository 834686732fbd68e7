"""Two processes (DDP on CPU, gloo): a prompt group split across processes gets the spec's advantage of the group."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# completion lengths vary a lot under a random policy, so every group has reward variance
LENGTH = '''spec length "longer is better, up to 60 characters"
input completion: text
input prompt: text
component length in [0, 1] = min(len(completion), 60) / 60
advantage over group(prompt) = (reward - mean) / (std(ddof=1) + 1e-4)
train { num_generations = 4 }
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not installed")
def test_two_process_run_gathers_groups_before_the_advantage(tmp_path) -> None:
    spec = tmp_path / "length.reward"
    spec.write_text(LENGTH)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(6)))
    run = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["torchrun", "--standalone", "--nproc_per_node", "2",
                           os.path.join(HERE, "ddp_worker.py"), str(spec), str(data), str(run)],
                          env=env, capture_output=True, text=True, timeout=540)
    # torchrun's own summary hides the workers' errors at the end: show the error lines first
    errors = [line for line in proc.stderr.splitlines() if "Error" in line or "error:" in line]
    assert proc.returncode == 0, "\n".join(errors[-30:]) + "\n---\n" + proc.stderr[-3000:]
    views = [json.loads((run / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [v["world"] for v in views] == [2, 2] and [v["step"] for v in views] == [3, 3]
    a, b = views
    # both processes see the same gathered batch: one prompt group of 4, two completions from each process
    assert a["groups"] == b["groups"] == [0, 0, 0, 0]
    np.testing.assert_array_equal(a["total"], b["total"])
    np.testing.assert_array_equal(a["advantages"], b["advantages"])
    total = np.array(a["total"])
    assert np.ptp(total) > 0, total  # not a zero-variance group: the check below is not vacuous
    expected = (total - total.mean()) / (total.std(ddof=1) + 1e-4)  # the toy spec's advantage over the group
    np.testing.assert_allclose(a["advantages"], expected, atol=1e-9)
    # each process trains on its own half of the group's advantages
    for r, v in enumerate(views):
        np.testing.assert_allclose(sorted(v["local_advantages"]), sorted(expected[2 * r:2 * r + 2]), atol=1e-6)
    # metrics are written once (by the main process), one record per step
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in records if "reward" in x] == [1, 2, 3]
