"""`rewardlang serve` on 127.0.0.1: OpenRLHF's protocol, JSON rows, batching of concurrent clients, 4xx/503, metrics,
graceful shutdown. Every loop is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "quality_grpo.reward")


def _start(*extra: str, spec: str = SPEC) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "rewardlang", "serve", spec, "--port", "0", *extra],
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    seen = ""
    for _ in range(100):  # the spec's warnings come first
        line = p.stderr.readline()
        seen += line
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if m or not line:
            break
    if not m:
        p.kill()
        raise AssertionError(seen + p.stderr.read())
    url = f"http://127.0.0.1:{m.group(1)}"
    for _ in range(300):  # up to 30 s for the spec to compile and uvicorn to serve
        try:
            if _get(url + "/health")[0] == 200:
                return p, url
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise AssertionError("the server never answered /health")


def _get(url: str) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, json.loads(r.read())


def _post(url: str, body: bytes | dict) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _stop(p: subprocess.Popen) -> int:
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()


def _sample(i: int) -> dict:
    rows = [json.loads(x) for x in (ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()]
    return rows[i % len(rows)]


def test_protocols_errors_and_metrics() -> None:
    p, url = _start("--window-ms", "300", "--max-pending", "64")
    try:
        r = _sample(0)
        st, out = _post(url + "/get_reward", {"query": [r["prompt"] + r["completion"] + "</s>"],
                                              "prompts": [r["prompt"]],
                                              "labels": [{"tests": r["tests"], "entry_point": r["entry_point"]}]})
        assert st == 200 and out["rewards"] == pytest.approx(0.9746877660183311)
        assert list(out["extra_logs"]) == ["rl_masked", "rl_format", "rl_correct", "rl_quality"]
        st, out = _post(url + "/score", {"rows": [r, {"completion": "no other columns"}]})
        assert st == 200 and [x["rl_masked"] for x in out["results"]] == [0.0, 1.0]
        assert out["results"][0]["score"] == pytest.approx(0.9746877660183311)
        # 16 concurrent clients inside one 300 ms window share batches
        res: list = [None] * 16

        def client(i: int) -> None:
            res[i] = _post(url + "/score", {"rows": [_sample(i)]})

        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert all(x is not None and x[0] == 200 for x in res)
        st, m = _get(url + "/metrics")
        assert m["requests"] == 18 and m["rows"] == 19 and m["batches"] < 18 and m["batch_size_max"] > 1
        assert m["bad_rows"] == 1 and m["infra_failures"] == 0 and m["sandbox_level"]
        # bad requests: located 4xx, the server goes on
        assert _post(url + "/score", b'{"rows": [1,')[0] == 400
        st, out = _post(url + "/score", b'{"rows": [1,')
        assert "line 1 column" in out["error"]
        st, out = _post(url + "/score", {"rows": "x"})
        assert st == 422 and "`rows` must be a list" in out["error"]
        st, out = _post(url + "/", {"query": ["a", "b"], "prompts": ["a"], "labels": [{}, {}]})
        assert st == 422 and "2 queries, 1 prompts" in out["error"]
        # more rows than may ever wait: retrying cannot help, so 413 (not 503), naming the option
        st, out = _post(url + "/score", {"rows": [{}] * 65})
        assert st == 413 and "at most 64 (--max-pending)" in out["error"]
        assert _get(url + "/health")[0] == 200
    finally:
        assert _stop(p) == 0


def test_graceful_shutdown_answers_accepted_requests() -> None:
    p, url = _start("--window-ms", "2000", "--shutdown-timeout", "120")  # a grace period no load can exceed
    got: list = []
    t = threading.Thread(target=lambda: got.append(_post(url + "/score", {"rows": [_sample(0)]})))
    t.start()
    for _ in range(100):  # until the request is parked in the batcher's window
        if _get(url + "/metrics")[1]["pending_rows"] >= 1:
            break
        time.sleep(0.05)
    code = _stop(p)
    t.join(60)
    assert code == 0 and got and got[0][0] == 200
    assert got[0][1]["results"][0]["score"] == pytest.approx(0.9746877660183311)


def test_port_in_use_is_a_plain_error() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = subprocess.run([sys.executable, "-m", "rewardlang", "serve", SPEC, "--port", str(port)],
                           check=False, capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        s.close()
    assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_masked_rows_say_why_in_the_answer_and_the_log(tmp_path: Path) -> None:
    """Issue 37 item 14: a masked row's answer says why (`error`; OpenRLHF's answer: `errors`), a missing column
    is "missing" (it was called "null", and only in the log), and every mask is logged with the client."""
    spec = tmp_path / "m.reward"
    spec.write_text("input n: number\ninput k: number?\ncomponent c in [0, 10] = n + k if k != none else none\n"
                    "reward = c\n")
    p, url = _start(spec=str(spec))
    try:
        st, out = _post(url + "/score", {"rows": [{"completion": "a", "n": 1, "k": 2}, {"completion": "a"},
                                                  {"completion": "a", "n": None}, {"completion": "a", "n": 1}]})
        assert st == 200
        res = out["results"]
        assert [r["rl_masked"] for r in res] == [0.0, 1.0, 1.0, 1.0] and res[0]["score"] == 3.0
        assert [r["error"] for r in res] == [None, "column `n` missing (the spec's input `n` reads it)",
                                            res[2]["error"], "component `c`: none"]
        assert res[2]["error"].startswith("column `n` is null")
        # OpenRLHF: a query that does not start with its prompt, a label the spec cannot map, a good one
        st, out = _post(url + "/get_reward", {"query": ["P: done", "Q: done", "P: x"], "prompts": ["Q:", "Q:", "P:"],
                                              "labels": [{"n": 1, "k": 1}, [1], {"n": 1, "k": 1}]})
        assert st == 200 and out["rewards"] == [0.0, 0.0, 2.0] and out["extra_logs"]["rl_masked"] == [1.0, 1.0, 0.0]
        assert out["errors"][0] == ("the query does not start with its prompt (the response is the query after "
                                    "the prompt)")
        assert out["errors"][1].startswith("the label cannot be mapped") and out["errors"][2] is None
        st, out = _post(url + "/get_reward", {"query": ["P: done"], "prompts": ["Q:"], "labels": [{"n": 1}]})
        assert out["rewards"] == 0.0 and out["errors"].startswith("the query does not start")  # scalar for one
    finally:
        assert _stop(p) == 0
    log = p.stderr.read()
    assert "3 of 4 row(s) of a request from 127.0.0.1:" in log and "(POST /score) masked" in log
    assert "row 1: column `n` missing" in log and "row 3: component `c`: none" in log
    assert "row 0: the query does not start with its prompt" in log and "row 1: the label cannot be mapped" in log
