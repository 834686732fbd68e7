"""`rewardlang score --ray local` on a local Ray cluster (2 CPUs): the output equals the local run's byte for byte
(groups whole, advantages per group), bad rows skipped alike, located errors as in a local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _titles(psutil: Any, proc: Any) -> list[str]:
    """The process titles of ``proc``'s descendants (those that exit meanwhile left out)."""
    out = []
    for c in proc.children(recursive=True):
        try:
            out.append(" ".join(c.cmdline()))
        except psutil.Error:
            pass
    return out


def test_a_lost_node(tmp_path: Path) -> None:
    """Two nodes started with `ray start` on this machine (a head and a worker node, one CPU each); the worker
    node's raylet killed (SIGKILL, from outside) while it scores a block: the blocks it had are scored on the head,
    the output is byte-identical to a local run, and one line names the blocks retried."""
    import signal
    import tempfile
    import time

    psutil = pytest.importorskip("psutil")
    ray_cli = str(Path(sys.executable).parent / "ray")
    data = tmp_path / "rows.jsonl"
    _data(data, 2400)
    local = _score("-i", str(data), "-o", str(tmp_path / "local.jsonl"), "--batch-size", "200", "--workers", "1")
    assert local.returncode == 0, local.stderr
    head, nm, om, metrics, agent, grpc, renv, wmin = _ports(8)
    # a local test cluster: no token (Ray 2.60 turns it on by default), and the head notices a dead node in ~2 s
    # rather than ~30 s
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", RAY_health_check_period_ms="500",
               RAY_health_check_failure_threshold="3", RAY_health_check_timeout_ms="1000")
    tmp = tempfile.mkdtemp(prefix="rlray")  # short: Ray's socket paths live under it

    def ray(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([ray_cli, *args], env=env, capture_output=True, text=True, timeout=300, check=False)

    try:
        # Ray waits a fixed 30 s for a node to register, which a busy machine can exceed: up to 3 tries
        for _ in range(3):
            # two loopback addresses (Ray turns 127.0.0.1 into the machine's own address): nothing leaves it
            r = ray("start", "--head", f"--port={head}", "--num-cpus=1", "--node-ip-address=127.0.0.2",
                    "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}")
            if r.returncode == 0:
                r = ray("start", f"--address=127.0.0.2:{head}", "--num-cpus=1", "--node-ip-address=127.0.0.3",
                        f"--node-manager-port={nm}", f"--object-manager-port={om}",
                        f"--metrics-export-port={metrics}", f"--dashboard-agent-listen-port={agent}",
                        f"--dashboard-agent-grpc-port={grpc}", f"--runtime-env-agent-port={renv}",
                        f"--min-worker-port={wmin}", f"--max-worker-port={wmin + 200}")
            if r.returncode == 0:
                break
            ray("stop", "--force")
        assert r.returncode == 0, r.stdout + r.stderr
        raylet = next(p for p in psutil.process_iter(["cmdline"])
                      if any(a == f"--node_manager_port={nm}" for a in p.info["cmdline"] or []))
        run = subprocess.Popen([sys.executable, "-m", "rewardlang", "score", SPEC, "--no-progress", "-i", str(data),
                                "-o", str(tmp_path / "ray.jsonl"), "--batch-size", "200", "--ray",
                                f"127.0.0.2:{head}", "--workers", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=dict(env, PYTHONPATH=str(ROOT)))
        killed = False
        deadline = time.monotonic() + 600
        while run.poll() is None and not killed and time.monotonic() < deadline:
            # the worker node's actor is scoring a block: its process title is ray::_Scorer.score
            if any("_Scorer.score" in title for title in _titles(psutil, raylet)):
                raylet.send_signal(signal.SIGKILL)
                killed = True
            time.sleep(0.02)
        out, err = run.communicate(timeout=600)
        assert killed, f"the worker node never scored a block:\n{err}"
        assert run.returncode == 0, err
        assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
        assert "scored 2400 rows on Ray (2 actors, 12 batches)" in err
        assert "retried on another actor after its node or actor was lost" in err and "rows.jsonl:" in err
        assert "Traceback" not in err
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120)
