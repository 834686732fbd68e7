"""`rewardlang score --workers 2` writes exactly what `--workers 1` writes: the same bytes, the same bad rows named
and counted, the same rows before a data error, while its batches really go through the worker processes (the
caller reads and writes one batch while the workers score the next; issue 23, item 7)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app
from rewardlang.runtime import parallel

SPEC = r'''
spec par "numbers, none, errors, spans and a group advantage"
input note: text?
let answer = tag(completion, "answer")
component fmt in [0, 1] = 1 if len(strip(answer)) > 0 else 0
component steps = count(completion, /Step\s\d+:/, "→")
component rep = distinct(words(completion), 2)
component noted in [0, 4] = len(note)
    on_error none
component marks = len(matches(completion, /Step\s\d+:/))
    spans matches(answer or "", /x+/, value=-1, label="x")
reward = fmt + steps + rep + marks
advantage over group(prompt) = reward - mean
'''

runner = CliRunner()


def _rows(n: int) -> list[str]:
    pieces = ["Step 1: a", "\n2. b", "→ ", "<answer>xx y</answer>", "\u2028", "é ", "x x x", "", "<answer>",
              "😀 Step 22: z"]
    out = []
    for i in range(n):
        row = {"prompt": f"p{i // 4}", "completion": "".join(pieces[(i * 7 + j) % len(pieces)] for j in range(i % 9))
               + f" {i % 50}", "extra": [i, {"k": "ü"}]}
        if i % 5:
            row["note"] = "too long: out of range" if i % 13 == 0 else f"n{i % 100}"
        out.append(json.dumps(row, ensure_ascii=i % 2 == 0))
    return out


@pytest.fixture
def spied(monkeypatch) -> list[int]:
    """Rows handed to the worker pool, batch by batch (the real pool: the spy only records)."""
    seen: list[int] = []
    real = parallel.RowPool.submit

    def submit(self, cols, m, *a, **k):
        seen.append(m)
        return real(self, cols, m, *a, **k)

    monkeypatch.setattr(parallel.RowPool, "submit", submit)
    monkeypatch.setenv("REWARDLANG_POOL_MIN_ROWS", "1")  # every batch of this small file goes to the workers
    return seen


def _score(tmp_path: Path, lines: list[str], *args: str) -> tuple[int, str, str, bytes | None]:
    spec = tmp_path / "par.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    r = runner.invoke(app, ["score", str(spec), "-i", str(data), "--batch-size", "64", *args])
    r2 = runner.invoke(app, ["score", str(spec), "-i", str(data), "--batch-size", "64", "-o", str(out), *args])
    assert r2.exit_code == r.exit_code
    return r.exit_code, r.stdout, r.stderr, out.read_bytes() if out.exists() else None


def _summary(stderr: str) -> str:
    """The summary without what timing decides (the elapsed time, each component's share of it)."""
    return re.sub(r" *\d+% *", "", "\n".join(x for x in stderr.splitlines() if "scored in" not in x))


def test_workers_2_write_what_workers_1_writes_byte_for_byte(tmp_path: Path, spied: list[int]) -> None:
    lines = _rows(700)
    lines[100] = '{"prompt": "p25", "completion": 7}'   # a bad row (completion not text), skipped and counted
    lines[333] = '{"prompt": "p83", "completion": "a",'  # a bad line (not JSON)
    one = _score(tmp_path, lines, "--workers", "1", "--on-bad-row", "skip")
    assert spied == []
    two = _score(tmp_path, lines, "--workers", "2", "--on-bad-row", "skip")
    assert len(spied) >= 20, "the batches did not go to the worker pool"
    assert one[0] == two[0] == 0
    assert one[1] == two[1] and one[3] == two[3] and one[3] == one[1].encode("utf-8")
    assert one[1].count("\n") == 698  # (str.splitlines would also split at U+2028)
    assert _summary(one[2]) == _summary(two[2])
    assert "698 rows scored" in two[2] and "2 bad rows skipped" in two[2] and "rows.jsonl:101, " in two[2]
    assert "rows.jsonl:334" in two[2]
    rows = [json.loads(x) for x in two[1].split("\n")[:-1]]
    assert any("spans" in r for r in rows) and any("errors" in r for r in rows) and rows[0]["extra"] == [0, {"k": "ü"}]


@pytest.mark.parametrize("bad", ['{"prompt": "p90", "completion": 7}', '{"prompt": "p0", "completion": "a"}', "[1]"])
def test_a_data_error_under_workers_stops_where_one_process_stops(tmp_path: Path, spied: list[int], bad: str) -> None:
    # a wrong type (D001), a group seen before (D002), a line that is not an object (D003), in the 6th batch: the
    # batches before it are on standard output (as without workers), -o is left absent, exit 1
    lines = _rows(500)
    lines[360] = bad
    one = _score(tmp_path, lines, "--workers", "1")
    two = _score(tmp_path, lines, "--workers", "2")
    assert spied, "the batches did not go to the worker pool"
    assert one[0] == two[0] == 1
    assert one[1] == two[1] and one[1].count("\n") == 320  # 5 batches of 64 rows
    assert one[2] == two[2] and "error[D00" in two[2]
    assert ":361" in two[2] or "rows of group 'p0' are not contiguous" in two[2]
    assert one[3] is None and two[3] is None


# SIGINT in the slow run (40,000 rows to write each time): SIGINT on score in the default run is
# test_cli_outputs.py::test_score_killed_at_any_point_leaves_the_output_absent_or_complete[temp-SIGINT]
@pytest.mark.parametrize("sig", ["SIGTERM", pytest.param("SIGINT", marks=pytest.mark.slow)])
def test_interrupted_with_workers_leaves_no_output_and_no_process(tmp_path: Path, monkeypatch, sig: str) -> None:
    # signalled once the temporary holds rows (batches are in flight on the worker): one line, 143/130, no output
    # or temporary, and no worker process left behind (the driver of test_cli_outputs counts re-parented ones)
    import subprocess
    import sys

    from test_cli_outputs import DRIVER, ROOT

    monkeypatch.setenv("REWARDLANG_POOL_MIN_ROWS", "1")
    spec = tmp_path / "par.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(x + "\n" for x in _rows(40_000)), encoding="utf-8")
    d = tmp_path / "w"
    d.mkdir()
    argv = [sys.executable, "-m", "rewardlang", "score", str(spec), "-i", str(data), "-o", str(d / "out.jsonl"),
            "--batch-size", "100", "--workers", "2", "--no-summary", "--no-progress"]
    p = subprocess.run([sys.executable, "-c", DRIVER, "data", sig, str(d / ".out.jsonl.*.partial"), json.dumps(argv)],
                       check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["landed"] and res["rc"] == {"SIGTERM": 143, "SIGINT": 130}[sig], res
    by = " by SIGTERM" if sig == "SIGTERM" else ""
    assert res["stderr"].splitlines()[-1] == f"interrupted{by}: nothing written", res  # after the spec's warning
    assert list(d.iterdir()) == [] and res["left"] == [], res


def test_a_library_call_with_workers_leaves_the_processs_resource_tracker_running(tmp_path: Path,
                                                                                   spied: list[int]) -> None:
    # multiprocessing's resource tracker serves the whole process: a caller's own queues and locks are registered
    # with it. `score_file` from a library caller must leave it running (stopping it unlinks whatever is still
    # registered, the caller's too); only the CLI, whose process ends with the run, stops it (`ending=True`)
    import io
    import multiprocessing as mp
    import os
    from multiprocessing import resource_tracker

    from rewardlang.compiler import load_program
    from rewardlang.runtime.scoring import score_file

    spec = tmp_path / "par.reward"
    spec.write_text(SPEC)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(x + "\n" for x in _rows(300)), encoding="utf-8")
    # the caller's own lock, as a spawn-context one: its named semaphore is registered with the tracker (a fork
    # context's is unlinked at once and never registered), and a stopped tracker unlinks it
    lock = mp.get_context("spawn").Lock()
    sem = "/dev/shm/sem." + lock._semlock.name.lstrip("/")
    assert os.path.exists(sem)
    resource_tracker.ensure_running()
    tracker = resource_tracker._resource_tracker
    pid = tracker._pid
    out = io.StringIO()
    summ = score_file(load_program(str(spec)), data, out, batch_size=64, workers=2)
    assert len(spied) >= 4, "the batches did not go to the worker pool"
    assert out.getvalue().count("\n") == 300 and summ is not None
    assert pid is not None and tracker._pid == pid, "the library call stopped the process's resource tracker"
    assert os.path.exists(sem), "the caller's semaphore was unlinked"
    del lock


def test_score_run_inside_another_program_leaves_its_resource_tracker_running(tmp_path: Path, spied) -> None:
    """`score --workers` run by typer's CliRunner (a test, a notebook) is not the whole process: multiprocessing's
    resource tracker, which serves the whole process, keeps running, and what the caller registered with it (a
    spawn-context lock) is left alone. Stopping it at the command's end unlinked those semaphores: pytest's own
    exit then printed `sem_unlink ... FileNotFoundError` tracebacks for them. The `rewardlang` process itself
    still stops it at its end (the CLI tests that watch for processes left behind)."""
    import multiprocessing as mp
    import os
    from multiprocessing import resource_tracker

    lock = mp.get_context("spawn").Lock()
    sem = "/dev/shm/sem." + lock._semlock.name.lstrip("/")
    resource_tracker.ensure_running()
    pid = resource_tracker._resource_tracker._pid
    code, _out, err, _ = _score(tmp_path, _rows(300), "--workers", "2")
    assert code == 0, err
    assert len(spied) >= 4, "the batches did not go to the worker pool"
    assert resource_tracker._resource_tracker._pid == pid, "the command stopped the process's resource tracker"
    assert os.path.exists(sem), "the caller's semaphore was unlinked"
    del lock
