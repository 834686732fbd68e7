"""`rewardlang score --ray local` on a local Ray cluster (2 CPUs): the output equals the local run's byte for byte
(groups whole, advantages per group), bad rows skipped alike, located errors as in a local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "codepo.reward")


def _score(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardlang", "score", SPEC, "--no-progress", *args],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _data(path: Path, n: int, bad: bool = False) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.corpus import as_completion, load_corpus

    corpus = load_corpus()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            r = corpus[(i // 4) % len(corpus)]  # groups of 4 completions per prompt
            f.write(json.dumps({"prompt": f"{r.task_id}#{i // 4}", "reference": r.reference,
                                "completion": as_completion(r.candidate + f"\n# {i % 4}", "")}) + "\n")
            if bad and i == 37:
                f.write("{not json\n")


def test_ray_output_is_byte_identical(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    _data(data, 402, bad=True)
    local = _score("-i", str(data), "-o", str(tmp_path / "local.jsonl"), "--batch-size", "50",
                   "--on-bad-row", "skip", "--workers", "1")
    assert local.returncode == 0, local.stderr
    r = _score("-i", str(data), "-o", str(tmp_path / "ray.jsonl"), "--batch-size", "50", "--on-bad-row", "skip",
               "--ray", "local", "--workers", "2")
    assert r.returncode == 0, r.stderr
    a, b = (tmp_path / "local.jsonl").read_bytes(), (tmp_path / "ray.jsonl").read_bytes()
    assert a == b and a.count(b"\n") == 402
    assert "scored 402 rows on Ray (2 actors, 8 batches)" in r.stderr
    assert any("advantage" in json.loads(x) for x in a.splitlines())
    # a bad line under --on-bad-row fail: the local run's located message, no output file
    r = _score("-i", str(data), "-o", str(tmp_path / "fail.jsonl"), "--batch-size", "50", "--ray", "local",
               "--workers", "2")
    assert r.returncode == 1 and f"error[D003]: {data}:39: invalid JSON" in r.stderr
    assert not (tmp_path / "fail.jsonl").exists() and "Traceback" not in r.stderr
