"""`rewardlang score`'s fixed costs cut without changing a byte (issue 38, item 4): records built a column at a time
equal the per-row :func:`record`, the pool is chosen on CPU work and a free core, and a clean run ends its process
without the interpreter's teardown while leaving its output whole."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path


import rewardlang
from rewardlang.runtime import scoring
from rewardlang.runtime.scoring import Scored, pool_pays, record, records

ROOT = Path(__file__).resolve().parents[1]

SPEC = r'''
input note: text?
let answer = tag(completion, "answer")
component fmt in [0, 1] = 1 if len(strip(answer)) > 0 else 0
component big = exp(len(completion))
component noted in [0, 4] = len(note)
    on_error none
component marks = len(matches(completion, /x/))
    spans matches(answer or "", /x+/, value=-1, label="x")
reward = fmt + noted + marks
advantage over group(prompt) = reward - mean
'''


def _result():
    prog = rewardlang.loads(SPEC)
    completions = ["<answer>xx y</answer>", "", "x" * 800, "é <answer>😀 x</answer>", "\u2028 x", "<answer> </answer>"]
    notes = ["abc", None, "abcde", "", None, "a"]
    return prog.score(completion=completions, note=notes, prompt=["p", "p", "q", "q", "r", "r"])


def test_records_equal_record_row_by_row() -> None:
    res = _result()
    # the result holds what every branch of a record writes: none, non-finite, errors, masks, spans, advantages
    assert any(v is None for v in _col(res, "noted")) and not math.isfinite(float(res.components["big"][2]))
    assert res.advantages is not None and any(res.masked["noted"]) and any(res.spans["marks"])
    got = records(res)
    want = [record(res, i) for i in range(len(res))]
    assert got == want
    # equal as JSON too (key order included), which is what `score` writes
    assert [json.dumps(r, ensure_ascii=False) for r in got] == [json.dumps(r, ensure_ascii=False) for r in want]


def _col(res, name: str) -> list:
    return [scoring.clean(x) for x in res.components[name]]


def test_scored_jsonl_is_json_dumps_of_each_record() -> None:
    res = _result()
    rows = [(i, {"completion": "c", "prompt": "p", "reward": "replaced", "x": [1, {"é": None}]}) for i in range(len(res))]
    scored = Scored(rows, res)
    lines = scored.jsonl().splitlines()
    want = []
    for i, (_, row) in enumerate(rows):
        rec = dict(row)
        rec.update(record(res, i))
        want.append(json.dumps(rec, ensure_ascii=False))
    assert lines == want


def test_an_empty_result_has_no_records() -> None:
    prog = rewardlang.loads("component n = len(completion)")
    res = prog.score(completion=[])
    assert records(res) == []


def test_the_pool_is_chosen_on_cpu_work_and_a_free_core() -> None:
    # the same work (8 s of CPU for 8,192 rows, 100,000 rows left): a pool where the batch had its core, none where
    # the machine's load stretched it to 40 s of wall time
    assert pool_pays(8.0, 8.5, 8192, 100_000, 2)
    assert not pool_pays(8.0, 40.0, 8192, 100_000, 2)
    # light work (0.4 s of CPU: 2.4 s to save on the rows left, against 2 x 1.5 s of start) never gets a pool, and
    # wall time alone never makes it look heavy: the same 0.4 s stretched to 20 s by the machine's load
    assert not pool_pays(0.4, 0.42, 8192, 100_000, 2) and not pool_pays(0.4, 20.0, 8192, 100_000, 2)
    assert not pool_pays(8.0, 8.5, 8192, 100_000, 1)                  # one core: nothing to share
    assert not pool_pays(0.0, 0.0, 0, 100_000, 2)                     # nothing measured: no pool


def _cli(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardlang", *args], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_a_clean_score_ends_fast_with_its_output_whole(tmp_path: Path) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i // 3}", "completion": "x" * (i % 7), "note": "ab"}) + "\n"
                            for i in range(300)))
    # an atexit handler registered by the command's process still runs (and says so on stderr)
    hook = tmp_path / "sitecustomize.py"
    hook.write_text("import atexit, sys\natexit.register(lambda: sys.stderr.write('atexit ran\\n'))\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    r = _cli(tmp_path, "score", str(spec), "-i", str(data), "-o", str(tmp_path / "o.jsonl"), "--no-progress", env=env)
    assert r.returncode == 0, r.stderr
    assert "atexit ran" in r.stderr and "rows" in r.stderr  # the summary, then the handler
    out = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert len(out) == 300 and out[5]["components"]["noted"] == 2.0
    # standard output is flushed before the process ends
    r = _cli(tmp_path, "score", str(spec), "-i", str(data), "--no-progress", "--no-summary", env=env)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 300, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == out
    # a failing run keeps the usual exit: status 1, its message, no output file
    (tmp_path / "bad.jsonl").write_text('{"completion": "x"}\n{oops\n')
    r = _cli(tmp_path, "score", str(spec), "-i", str(tmp_path / "bad.jsonl"), "-o", str(tmp_path / "b.jsonl"), env=env)
    # the first bad row in the file is the one named: line 1 lacks `prompt` (line 2 is not JSON)
    assert r.returncode == 1 and "bad.jsonl:1" in r.stderr and not (tmp_path / "b.jsonl").exists()


def test_exit_fast_needs_the_command_to_say_it_is_done(monkeypatch) -> None:
    from rewardlang import outputs

    monkeypatch.setattr(outputs, "_DONE", [])
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(AssertionError("exited")))
    outputs.exit_fast(0)  # nothing said done: returns, the caller exits as usual
    outputs._DONE.append(True)
    import threading

    ev = threading.Event()
    t = threading.Thread(target=ev.wait)
    t.start()
    try:
        outputs.exit_fast(0)  # a non-daemon thread still runs: the interpreter must wait for it, so no fast exit
    finally:
        ev.set()
        t.join()


def test_the_module_examples() -> None:
    import doctest

    from rewardlang.runtime import program

    result = doctest.testmod(scoring)
    assert result.failed == 0 and result.attempted >= 17
    # the records of a result (clean, record, records) live beside ScoreResult, in program.py
    result = doctest.testmod(program)
    assert result.failed == 0 and result.attempted >= 3


def test_rows_that_repeat_far_apart_are_told_from_groups_that_repeat_within() -> None:
    # 8 distinct programs, each repeated at once within its group (a GRPO group's identical samples): near repeats
    near = [{"completion": f"c{k // 4}", "prompt": f"p{k // 8}"} for k in range(64)]
    assert scoring.far_repeats(near, ["completion"], near=16) == 0.0
    # the same 16 rows again and again under new group names: every row after the first 16 repeats one 16 back
    far = [{"completion": f"c{k % 16}", "prompt": f"p{k}"} for k in range(64)]
    assert scoring.far_repeats(far, ["completion"], near=8) == 48 / 64
    assert scoring.far_repeats(far, ["completion", "prompt"], near=8) == 0.0  # the group name read too: distinct
    # list columns (tests as a list) compare by value
    rows = [{"tests": ["a", "b"]}, {"tests": ["x"]}, {"tests": ["a", "b"]}]
    assert scoring.far_repeats(rows, ["tests"], near=1) == 1 / 3


def _decision(tmp_path: Path, monkeypatch, rows: list[dict], pays: bool, spare: bool = False) -> dict:
    """What `score_file` asks :func:`pool_pays`, and when it starts and stops workers (``calls``: "start" before
    the probe's decision, "start after", "stop"; every run ends with a stop), ``pool_pays`` answering ``pays`` and the machine's load leaving
    a core to spare or not (``spare``)."""
    seen: dict = {"calls": []}

    def spy(cpu, wall, rows_, rows_left, cores, start=scoring.POOL_START_S):
        seen.update(rows=rows_, rows_left=rows_left, start=start, cores=cores)
        return pays

    monkeypatch.setattr(scoring, "pool_pays", spy)
    monkeypatch.setattr(scoring, "_core_to_spare", lambda cores: spare)
    monkeypatch.setattr(scoring.os, "cpu_count", lambda: 2)
    prog = rewardlang.loads("component n = len(completion)\nadvantage over group(prompt) = reward - mean")
    assert prog.in_workers
    prog.pool_min_rows = 256  # as for a spec with a heavy function (CodeBLEU, parsing)
    monkeypatch.setattr(prog, "start_pool", lambda n: seen["calls"].append("start after" if "rows" in seen else "start"))
    close = prog.close  # the real one too: a batch the decision sends to the workers starts real ones, which
    # must not outlive the test (a worker left running holds multiprocessing's resource tracker open)
    monkeypatch.setattr(prog, "close", lambda: (seen["calls"].append("stop"), close()))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o.jsonl"
    with open(out, "w") as f:
        scoring.score_file(prog, data, f)
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["components"]["n"] for r in got] == [float(len(r["completion"])) for r in rows]
    return seen


def test_score_decides_on_workers_after_a_probe_not_a_whole_batch(tmp_path: Path, monkeypatch) -> None:
    # issue 38: deciding after a whole first batch of 8,192 rows left a 13,120-row file too few rows to repay the
    # workers that would have saved a fifth of its time; the decision now comes after DECIDE_ROWS, at a group's end
    rows = [{"completion": f"x{k}" * (k % 5), "prompt": f"p{k // 8}"} for k in range(4 * scoring.DECIDE_ROWS)]
    seen = _decision(tmp_path, monkeypatch, rows, pays=True)
    assert seen["rows"] == scoring.DECIDE_ROWS and seen["rows_left"] == len(rows) - scoring.DECIDE_ROWS - 1
    # a worker's start is taken as this process's own, capped at the loaded machine's figure
    assert scoring.MIN_POOL_START_S <= seen["start"] <= scoring.POOL_START_S
    assert seen["calls"] == ["start after", "stop"]  # no core to spare: started once the probe said so (the stop: the end)
    assert _decision(tmp_path, monkeypatch, rows, pays=False)["calls"] == ["stop"]
    # a core to spare: the workers load while the probe is scored, and are stopped when it says no
    assert _decision(tmp_path, monkeypatch, rows, pays=True, spare=True)["calls"] == ["start", "start after", "stop"]
    assert _decision(tmp_path, monkeypatch, rows, pays=False, spare=True)["calls"] == ["start", "stop", "stop"]
    # rows that repeat far apart: cache hits here, fresh work in each worker -- no workers, whatever the probe cost
    far = [{"completion": f"c{k % 300}", "prompt": f"p{k // 8}"} for k in range(4 * scoring.DECIDE_ROWS)]
    assert _decision(tmp_path, monkeypatch, far, pays=True, spare=True)["calls"] == ["stop"]
    # a file too short to repay an early start: none, whatever the machine
    assert _decision(tmp_path, monkeypatch, rows[:2 * scoring.DECIDE_ROWS], pays=True, spare=True)["calls"] == \
        ["start after", "stop"]
