"""Issue 32, class 2, beyond ir-groups: every data builder that runs code it read (``prm-data``'s labelling,
``data robot --verify``) runs it only in the sandbox at the level scoring uses, and refuses where none can be
had. (``ir-groups``: test_irgroups_sandboxed.py.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path


from rewardlang.datasets.prm import label
from rewardlang.sandbox import Sandbox, SandboxConfig

ROOT = Path(__file__).resolve().parents[2]


def _no_bwrap_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has the interpreter and no bubblewrap, with the bwrap level asked for by name."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        os.symlink(sys.executable, bin_dir / "python3")
    return {**os.environ, "PATH": str(bin_dir), "REWARDLANG_SANDBOX_LEVEL": "bwrap", "PYTHONPATH": str(ROOT)}


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlang", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_prm_data_refuses_without_a_sandbox_level(tmp_path: Path) -> None:
    r = _cli(["prm-data", "--dataset", "humaneval", "--limit", "1", "-o", str(tmp_path / "out")], tmp_path,
             _no_bwrap_env(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "error: prm-data runs every program it builds from its input" in r.stderr
    assert "bubblewrap" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_data_robot_verify_refuses_without_a_sandbox_level(tmp_path: Path) -> None:
    r = _cli(["data", "robot", "--verify", "-o", str(tmp_path / "robot.jsonl")], tmp_path, _no_bwrap_env(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "error: data robot --verify runs every program it builds from its input" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "robot.jsonl").exists()


def test_prm_data_rows_run_only_in_the_sandbox(tmp_path: Path) -> None:
    """A row whose reference writes a marker on the host, connects to a loopback listener and reads a host file at
    import: the labelling still runs (each attempt fails inside and is caught), and nothing reaches the host."""
    host = tmp_path / "host"
    host.mkdir()
    os.chmod(host, 0o777)
    secret = host / "secret.txt"
    secret.write_text("424242")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    hits: list[int] = []

    def accept() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            hits.append(1)
            c.close()

    threading.Thread(target=accept, daemon=True).start()
    attack = (f"import os, socket\n"
              f"ESCAPED = []\n"
              f"try:\n    open({str(host / 'marker')!r}, 'w').write('ran on the host')\n    ESCAPED.append('w')\n"
              f"except OSError:\n    pass\n"
              f"try:\n    ESCAPED.append(open({str(secret)!r}).read())\nexcept OSError:\n    pass\n"
              f"try:\n    socket.create_connection(('127.0.0.1', {srv.getsockname()[1]}), 1)\n"
              f"    ESCAPED.append('net')\nexcept OSError:\n    pass\n")
    rows = [{"task_id": "t/0", "prompt": attack + "def inc(x):\n", "reference": "    y = x + 1\n    return y\n",
             "tests": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
             "entry_point": "inc"}]
    try:
        with Sandbox(SandboxConfig(slots=1)) as sb:
            data = label.build(rows, operators=["return_none", "aug_assign"], level="line", sandbox=sb)
            assert sb.stray_processes() == []
    finally:
        srv.close()
    assert data.reference_ok == [0] and data.counts["infra_dropped"] == 0
    assert data.counts["labelled"] >= 1 and data.dpo  # return_none fails the tests: a DPO row
    assert not (host / "marker").exists() and hits == []
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


def test_robot_verify_says_an_infrastructure_failure_is_not_the_tasks(tmp_path, monkeypatch) -> None:
    """`data robot --verify` when the sandbox fails on one task's program (a slot that did not start under load):
    that task is named as not verified, an infrastructure failure, never as a task whose canonical program fails
    its worlds; the tasks that did fail are counted apart; nothing is written."""
    import pytest

    from rewardlang.datasets import commands, sandboxed
    from rewardlang.datasets.cli import DataSetError, write_robot
    from rewardlang.runtime.components import robot

    class Result:
        def __init__(self, n: int) -> None:
            self.values = ["success"] * n
            self.details = [{}] * n
            self.values[1], self.details[1] = None, {"infra": "LevelUnavailable: bwrap slot failed to start"}
            self.values[2], self.details[2] = "simulation_error", {"error": "no such object"}

    monkeypatch.setattr(sandboxed, "require_sandbox", lambda _what: None)
    monkeypatch.setattr(robot.robot_outcome_label, "fn", lambda programs, tasks, **_: Result(len(programs)))
    out = tmp_path / "robot.jsonl"
    with pytest.raises(DataSetError) as err:
        write_robot(out, verify=commands.verify_robot)
    lines = str(err.value).splitlines()
    assert "not verified: the sandbox could not run its canonical program" in lines[0]
    assert "infrastructure failure, not the task's" in lines[0] and "canonical program gives" not in lines[0]
    assert "the canonical program gives simulation_error" in lines[1]
    assert lines[-1] == "1 task(s) fail their worlds, 1 could not be run (infrastructure); nothing written"
    assert not out.exists()
