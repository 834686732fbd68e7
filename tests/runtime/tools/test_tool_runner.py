"""The generic batch runner: one run per batch, failure isolation, infra vs per-sample errors, deadlines."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from rewardlang.runtime.tools import command
from rewardlang.runtime.tools.command import Bound
from rewardlang.runtime.tools.runner import (
    BatchTool, Completed, FileResult, file_name_for, resolve_command, run_batch, run_command,
)

# A stand-in analysis tool: reports the length of every file; "CRASH" in a file makes the whole run exit 3,
# "SLEEP" makes it hang, "REPORTED" is a failure the tool reports for that file only, and ALWAYS_CRASH in
# the environment breaks the tool for every input (including the probe).
FAKE_TOOL = textwrap.dedent("""
    import json, os, pathlib, sys, time
    if os.environ.get("ALWAYS_CRASH"):
        sys.exit(5)
    out = {}
    for f in sys.argv[1:]:
        text = pathlib.Path(f).read_text()
        if "CRASH" in text:
            print("Traceback: boom", file=sys.stderr)
            sys.exit(3)
        if "SLEEP" in text:
            time.sleep(60)
        out[f] = "reported failure" if "REPORTED" in text else len(text)
    print(json.dumps(out))
""")


class FakeTool(BatchTool):
    name = "fake"
    startup_s = 5.0

    def __init__(self, script: Path, shards: int = 1, env_extra: dict[str, str] | None = None) -> None:
        self.script = script
        self.shards = shards
        self.env_extra = env_extra or {}

    def argv(self, files: list[str], workdir: Path) -> list[str]:
        return resolve_command("fake", [sys.executable, str(self.script)]) + files

    def env(self, workdir: Path) -> dict[str, str]:
        return {**super().env(workdir), **self.env_extra}

    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        if run.returncode != 0:
            return {}, f"fake exited with status {run.returncode}: {run.tail()}"
        out = {}
        for f, v in json.loads(run.stdout).items():
            out[f] = FileResult(error=v) if isinstance(v, str) else FileResult(findings=[v])
        return out, None


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    p = tmp_path / "fake_tool.py"
    p.write_text(FAKE_TOOL)
    return p


def _sources(texts: list[str]) -> dict[str, str]:
    return {file_name_for(t): t for t in texts}


def test_one_run_per_shard_and_results_mapped_back(script: Path) -> None:
    texts = [f"x = {i}\n" * (i + 1) for i in range(7)]
    stats: Counter = Counter()
    out = run_batch(FakeTool(script, shards=2), _sources(texts), timeout=5, workers=2, stats=stats)
    assert {n: r.findings for n, r in out.items()} == {file_name_for(t): [len(t)] for t in texts}
    assert stats["tool.fake.runs"] == 2
    assert stats["tool.fake.probes"] == 0


def test_a_crashing_sample_is_isolated_and_only_it_fails(script: Path) -> None:
    texts = [f"a = {i}\n" for i in range(6)] + ["CRASH = 1\n"]
    stats: Counter = Counter()
    out = run_batch(FakeTool(script), _sources(texts), timeout=5, workers=2, stats=stats)
    bad = out[file_name_for("CRASH = 1\n")]
    assert bad.error is not None and "status 3" in bad.error and "boom" in bad.error and not bad.infra
    for t in texts[:-1]:
        assert out[file_name_for(t)].ok and out[file_name_for(t)].findings == [len(t)]
    assert stats["tool.fake.probes"] == 1 and stats["tool.fake.bisections"] >= 1


def test_a_hanging_sample_times_out_alone(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample on which the tool uses its whole budget of CPU (here: every run reads as having used it) is that
    sample's timeout, found by bisection; the others get their results."""
    # a run over k files may take 1.4 + 0.1 k s: a run alone (the probe, a sample isolated) still has 1.5 s
    monkeypatch.setenv("REWARDLANG_TOOL_STARTUP_S", "1.4")
    monkeypatch.setattr(command, "session_cpu", lambda sid: 1e9)
    texts = ["b = 1\n", "b = 2\n", "SLEEP = 1\n", "b = 3\n"]
    stats: Counter = Counter()
    out = run_batch(FakeTool(script), _sources(texts), timeout=0.1, workers=2, stats=stats)
    bad = out[file_name_for("SLEEP = 1\n")]
    assert bad.error is not None and "timed out" in bad.error and not bad.infra
    assert [out[file_name_for(t)].findings for t in ("b = 1\n", "b = 2\n", "b = 3\n")] == [[6], [6], [6]]
    assert stats["tool.fake.starved"] == 0


def test_a_run_the_machine_holds_back_is_masked_never_a_timeout(script: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """Issue 38: a run that reaches its deadline under its budget of CPU (a stopped or starved job: here the
    runs read as having used no CPU, and the hanging one sleeps) goes on to three times its deadline, then is
    the machine's doing: the batch is rerun in parts (its other samples get their results) and the sample
    still held back alone is masked and counted, never the worst value."""
    # a run over k files reaches its deadline at 0.35 + 0.15 k s and is held back to 3 x that: a run alone (the
    # probe, a sample isolated) still has 1.5 s, and the call's budget (3 x the first run's 2.85 s) leaves 2.25 s
    # over the three rounds' 6.3 s
    monkeypatch.setenv("REWARDLANG_TOOL_STARTUP_S", "0.35")
    monkeypatch.setattr(command, "session_cpu", lambda sid: 0.0)
    texts = ["b = 1\n", "b = 2\n", "SLEEP = 1\n", "b = 3\n"]
    stats: Counter = Counter()
    t0 = time.monotonic()
    out = run_batch(FakeTool(script), _sources(texts), timeout=0.15, workers=2, stats=stats)
    bad = out[file_name_for("SLEEP = 1\n")]
    assert bad.infra and bad.error is not None and "too little CPU" in bad.error
    assert [out[file_name_for(t)].findings for t in ("b = 1\n", "b = 2\n", "b = 3\n")] == [[6], [6], [6]]
    assert stats["tool.fake.starved"] >= 1 and stats["tool.fake.starved_samples"] == 1
    assert stats["tool.fake.timeouts"] == 0 and stats["tool.fake.sample_failures"] == 0
    assert time.monotonic() - t0 < 30   # each run held back at most 3 x its deadline, not the sleep's 60 s


def test_bound_goes_on_while_the_run_is_under_its_cpu_and_leaves_out_the_callers_stops() -> None:
    """:class:`Bound` alone: past the deadline a run under its CPU budget gets more time (up to 3 x), one that
    has used it is over; a wait that came back late (this process stopped) moves the deadline by the delay."""
    now = time.monotonic()
    b = Bound(now - 1.0, timeout=0.5)
    cpu = [0.1]
    orig = command.session_cpu
    try:
        command.session_cpu = lambda sid: cpu[0]      # type: ignore[assignment]
        assert b.left(123) > 0 and not b.starved       # 0.1 s of 0.5: held back, goes on
        cpu[0] = 0.6
        b.end = time.monotonic() - 0.01
        assert b.left(123) <= 0 and not b.starved      # its budget used: its own timeout
        late = Bound(now - 2.0, timeout=0.5)           # 4 x its deadline ago, never used its CPU
        cpu[0] = 0.0
        assert late.left(123) <= 0 and late.starved
    finally:
        command.session_cpu = orig                     # type: ignore[assignment]
    s = Bound(now, timeout=10.0)
    s.waited(now - 30.0, 1.0)                          # a 1 s wait that returned 29 s late
    assert s.lost == pytest.approx(29.0, abs=0.5) and s.end == pytest.approx(now + 10.0 + s.lost, abs=0.01)
    s2 = Bound(now, timeout=10.0)
    s2.waited(time.monotonic() - 1.2, 1.0)             # 0.2 s late: a starved caller, not a stop
    assert s2.lost == 0.0


def test_a_real_run_under_its_cpu_is_given_more_time(tmp_path: Path) -> None:
    """No stand-in: a real run that sleeps past its deadline (no CPU used) is waited for past it, and one that
    sleeps for ever is killed at 3 x its deadline as starved, with ``timed_out`` set and no exit status."""
    r = run_command([sys.executable, "-c", "import time; time.sleep(1.2); print('done')"], timeout=0.8)
    assert r.returncode == 0 and r.stdout.strip() == "done" and not r.timed_out and not r.starved
    r = run_command([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.4)
    assert r.timed_out and r.starved and r.returncode != 0 and r.elapsed < 30


def test_a_failure_the_tool_reports_for_one_file_needs_no_isolation(script: Path) -> None:
    stats: Counter = Counter()
    out = run_batch(FakeTool(script), _sources(["c = 1\n", "REPORTED = 1\n"]), timeout=5, stats=stats)
    assert out[file_name_for("REPORTED = 1\n")].error == "reported failure"
    assert out[file_name_for("c = 1\n")].findings == [6]
    assert stats["tool.fake.runs"] == 1


def test_a_tool_broken_for_everything_is_infra_for_every_sample(script: Path) -> None:
    out = run_batch(FakeTool(script, env_extra={"ALWAYS_CRASH": "1"}), _sources(["d = 1\n", "d = 2\n"]), timeout=5)
    assert len(out) == 2
    for r in out.values():
        assert r.infra and r.error is not None and "broken" in r.error and "status 5" in r.error


def test_a_missing_executable_is_infra(script: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REWARDLANG_TOOL_FAKE", str(tmp_path / "no-such-tool"))
    out = run_batch(FakeTool(script), _sources(["e = 1\n", "e = 2\n"]), timeout=5)
    for r in out.values():
        assert r.infra and r.error is not None and "could not be started" in r.error


def test_time_budget_bounds_isolation_and_leftovers_are_infra(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 16 hanging samples: isolating each would take many rounds; the call's budget (3 x OVERRUN x the first
    # run's deadline, 0.34 + 16 x 0.01 s) runs out first and what is left is an infrastructure failure, not 16
    # sample errors. A run alone (the probe) may take 0.35 s of CPU.
    monkeypatch.setenv("REWARDLANG_TOOL_STARTUP_S", "0.34")
    texts = [f"SLEEP = {i}\n" for i in range(16)]
    stats: Counter = Counter()
    out = run_batch(FakeTool(script), _sources(texts), timeout=0.01, workers=2, stats=stats)
    assert len(out) == 16
    assert all(not r.ok for r in out.values())
    assert any(r.infra and "budget" in (r.error or "") for r in out.values())
    assert stats["tool.fake.budget_exhausted"] >= 1


def test_run_command_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    r = run_command(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"], timeout=0.5)
    assert r.timed_out
    pid = int(pidfile.read_text())
    status = Path(f"/proc/{pid}/status")

    def gone() -> bool:  # exited, or a zombie waiting to be reaped by init
        try:
            return "State:\tZ" in status.read_text()
        except FileNotFoundError:
            return True

    # SIGKILL was sent to the whole group; the kernel may take a moment to finish the grandchild off
    deadline = time.monotonic() + 5
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone(), "the grandchild survived its group's kill"


def test_run_command_reports_missing_executable(tmp_path: Path) -> None:
    r = run_command([str(tmp_path / "nope")], timeout=5)
    assert r.missing and r.returncode is None


def test_file_names_depend_on_content_only() -> None:
    assert file_name_for("x = 1\n") == file_name_for("x = 1\n")
    assert file_name_for("x = 1\n") != file_name_for("x = 2\n")
    name = file_name_for("\ud800")  # lone surrogates do not break naming
    assert name.startswith("m_") and name.endswith(".py") and name[2:-3].isalnum()


def test_resolve_command_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLANG_TOOL_DEMO", "python3 -m demo --flag 'a b'")
    assert resolve_command("demo", ["x"]) == ["python3", "-m", "demo", "--flag", "a b"]
    monkeypatch.delenv("REWARDLANG_TOOL_DEMO")
    assert resolve_command("demo", ["x"]) == ["x"]
    assert os.environ.get("REWARDLANG_TOOL_DEMO") is None


def test_batch_directory_location_and_fallback(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlang.runtime.tools import runner

    monkeypatch.setenv("REWARDLANG_TOOL_TMPDIR", str(tmp_path))
    assert runner._temp_roots() == [str(tmp_path)]
    # an unusable first location (missing, full) falls back to the next one
    monkeypatch.setattr(runner, "_temp_roots", lambda: [str(tmp_path / "does-not-exist"), str(tmp_path)])
    out = run_batch(FakeTool(script), _sources(["f = 1\n"]), timeout=5)
    assert out[file_name_for("f = 1\n")].findings == [6]
    assert not list(tmp_path.glob("rewardlang-fake-*"))  # cleaned up
