"""`rewardlang serve` against hostile clients, on raw sockets (issue 32, class 3): what a client could hold of the
server (connections, file descriptors, memory, queue rows, the shutdown) is bounded, and well-behaved clients are
still answered. docs/scale.md "Limits" and docs/sandbox.md's threat table name these tests.

No assertion depends on how fast this machine is: every wait is a loop with a generous bound (a deadline the server
must meet within seconds is checked against tens of seconds), and a state the test needs (rows parked in the
batcher, a batch being scored) is polled for through /metrics, never slept for."""

from __future__ import annotations

import base64
import contextlib
import http.client
import importlib.util
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT = str(ROOT / "specs" / "codepo_text.reward")  # no sandbox: the server starts in a second
QUALITY = str(ROOT / "specs" / "quality_grpo.reward")
_MIB = 1 << 20
#: how long a SIGTERM'd server may take to exit here: the documented bound is --shutdown-timeout (5 s, 2 in the slow
#: test) and a second or two; the issue's server had not exited after 30 s. The margin is for a loaded machine (two
#: cores shared by many jobs), so that the check fails on a server that does not stop, not on a slow machine
STOP_BOUND = 30.0


@pytest.fixture(autouse=True, params=["httptools", pytest.param("h11", marks=pytest.mark.slow)])
def http_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every guard, on the parser the server runs by default (httptools, compiled) and, in the slow set, on h11
    (``REWARDLANG_SERVER_HTTP=h11``, what runs where httptools is not installed)."""
    if request.param == "httptools" and importlib.util.find_spec("httptools") is None:
        pytest.skip("httptools is not installed (pip install httptools): the server runs h11")
    monkeypatch.setenv("REWARDLANG_SERVER_HTTP", "auto" if request.param == "httptools" else "h11")
    return request.param


def test_the_server_runs_the_parser_it_says(tmp_path: Path, http_parser: str) -> None:
    """/metrics names the parser; a value of REWARDLANG_SERVER_HTTP that is neither is a usage error (exit 1)."""
    s = _start(tmp_path)
    try:
        assert s.metrics()["http_parser"] == http_parser
    finally:
        assert s.stop()[0] == 0
    r = subprocess.run([sys.executable, "-m", "rewardlang", "serve", TEXT, "--port", "0"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "REWARDLANG_SERVER_HTTP": "fast"})
    assert r.returncode == 1 and "REWARDLANG_SERVER_HTTP='fast': auto or h11" in r.stderr, r.stderr


class Server:
    def __init__(self, p: subprocess.Popen, port: int, log: Path) -> None:
        self.p, self.port, self.log = p, port, log
        self.url = f"http://127.0.0.1:{port}"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str, headers: dict | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metrics(self) -> dict:
        st, m = self.get("/metrics")
        assert st == 200, m
        return m

    def wait_metrics(self, ok, what: str, bound: float = 120.0) -> dict:
        end = time.monotonic() + bound
        while True:
            m = self.metrics()
            if ok(m):
                return m
            assert time.monotonic() < end, f"{what}: never reached; last metrics {m}"
            time.sleep(0.1)

    def stop(self, bound: float = 60.0) -> tuple[int, float]:
        """SIGTERM; (exit code, seconds to exit). Killed (and the test failed) past ``bound``."""
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            code = self.p.wait(bound)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(30)
            raise AssertionError(f"the server did not exit within {bound} s of SIGTERM:\n{self.stderr()[-3000:]}")
        return code, time.monotonic() - t0


def _start(tmp_path: Path, *extra: str, spec: str = TEXT, nofile: int | None = None,
           env: dict | None = None) -> Server:
    log = tmp_path / f"server-{time.monotonic_ns()}.log"

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    p = subprocess.Popen([sys.executable, "-m", "rewardlang", "serve", spec, "--port", "0", *extra],
                         stderr=log.open("w"), stdout=subprocess.DEVNULL, cwd=ROOT, preexec_fn=limit,  # noqa: PLW1509
                         start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    end = time.monotonic() + 120
    port = None
    while port is None:
        m = re.search(r"http://[^:]+:(\d+) ", log.read_text()) if log.exists() else None
        if m:
            port = int(m.group(1))
            break
        if p.poll() is not None or time.monotonic() > end:
            p.kill()
            raise AssertionError("the server did not start: " + log.read_text())
        time.sleep(0.05)
    s = Server(p, port, log)
    while True:
        try:
            if s.get("/health", {"Authorization": f"Bearer {(env or {}).get('REWARDLANG_SERVE_TOKEN', '')}"})[0] == 200:
                return s
        except OSError:
            pass
        if time.monotonic() > end:
            p.kill()
            raise AssertionError("the server never answered /health: " + s.stderr())
        time.sleep(0.1)


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    return s


def _response(s: socket.socket) -> tuple[int, bytes]:
    """(status, body) of one response read from ``s`` (status 0 when the connection ended before one came)."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return 0, buf
            buf += chunk
    except (ConnectionResetError, BrokenPipeError):
        return 0, buf
    head, _, body = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, body


def _closed_by_server(s: socket.socket, bound: float = 60.0) -> bool:
    """True once the server closes ``s`` (EOF or reset), reading and discarding what it sends; False if it is still
    open after ``bound`` seconds."""
    s.settimeout(bound)
    try:
        while s.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return True


def _request(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _session_processes(sid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getsid(int(d.name)) == sid:
                    out.append(int(d.name))
            except (ProcessLookupError, PermissionError):
                pass
    return out


def test_slowloris_beyond_the_fd_limit_leaves_health_answered_and_sigterm_prompt(tmp_path: Path) -> None:
    """The issue's own case: 300 clients send part of their headers and stop, the server's fd limit at 256.
    Before: /health timed out (accept() failed with EMFILE, logged without end) and SIGTERM did not stop it."""
    srv = _start(tmp_path, nofile=256)
    socks = []
    try:
        for _ in range(300):
            s = _connect(srv.port)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        st, out = srv.get("/health")  # a well-behaved client, while all 300 are still connected
        assert st == 200 and out["status"] == "ok"
        m = srv.metrics()
        assert m["connections_open"] <= m["connections_limit"] < 256
        assert m["connections_dropped"] >= 300 - m["connections_limit"]
        assert "Too many open files" not in srv.stderr()
        code, took = srv.stop()
        assert code == 0 and took < STOP_BOUND, took
        assert "Traceback" not in srv.stderr()
    finally:
        for s in socks:
            s.close()
        if srv.p.poll() is None:
            srv.p.kill()


def test_deadlines_close_slow_headers_slow_bodies_and_silent_connections(tmp_path: Path) -> None:
    srv = _start(tmp_path, "--header-timeout", "1", "--body-timeout", "1")
    try:
        silent = _connect(srv.port)  # connects and sends nothing
        partial = _connect(srv.port)  # part of the headers, then nothing
        partial.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\n")
        body = _connect(srv.port)  # whole headers, part of the body
        body.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"rows\": [")
        chunked = _connect(srv.port)  # a chunked body that stops
        chunked.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"row\r\n")
        assert _closed_by_server(silent)
        st, msg = _response(partial)
        assert st == 408 and b"headers did not arrive within 1 s" in msg and _closed_by_server(partial)
        st, msg = _response(body)
        assert st == 408 and b"body did not arrive within 1 s" in msg and _closed_by_server(body)
        st, _ = _response(chunked)
        assert st == 408 and _closed_by_server(chunked)
        # a header byte every 0.1 s never extends the deadline: closed long before the 600 bytes are sent
        trickle = _connect(srv.port)
        sent = 0
        try:
            for b in b"GET /health HTTP/1.1\r\nX-A: " + b"a" * 580:
                trickle.sendall(bytes([b]))
                sent += 1
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < 600 and _closed_by_server(trickle)
        m = srv.metrics()
        assert m["timeouts_header"] >= 3 and m["timeouts_body"] >= 2 and m["connections_open"] == 1
        # a keep-alive client between requests is still served (the deadline starts again after each answer)
        k = _connect(srv.port)
        for _ in range(3):
            k.sendall(_request("GET", "/health"))
            assert _response(k)[0] == 200
    finally:
        code, took = srv.stop()
    assert code == 0 and took < STOP_BOUND, took


def test_request_size_is_bounded_before_the_body_is_held(tmp_path: Path) -> None:
    srv = _start(tmp_path, "--max-pending", "64")  # the default size limits: 16 MiB a request
    try:
        # Expect: 100-continue: refused from the headers, the body is never asked for
        s = _connect(srv.port)
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 50331648\r\nExpect: 100-continue\r\n\r\n")
        st, msg = _response(s)
        assert st == 413 and b"50331648 bytes; the limit is 16777216 (--max-request-mb)" in msg
        assert _closed_by_server(s)
        # the case: a 48 MiB body sent whole before the answer is read (as urllib, requests and aiohttp
        # do): 413, read and dropped as it arrives; the server's peak memory does not grow by the body
        peak0 = _peak_rss_kib(srv.p.pid)
        row = {"prompt": "p", "completion": "x" * 1000}
        blob = json.dumps({"rows": [row] * (48 * _MIB // 1030)}).encode()
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", "/score", body=blob, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 413 and b"the limit is 16777216" in r.read()
        c.close()
        grew = (_peak_rss_kib(srv.p.pid) - peak0) / 1024
        assert grew < 16, f"peak memory grew by {grew:.0f} MiB for a refused 48 MiB body"
        # a chunked body has no length to check: it is counted as it arrives, refused past the limit
        s = _connect(srv.port)
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 65536
        try:
            for _ in range(17 * 16):
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        st, msg = _response(s)
        assert st == 413 and b"over 16777216 bytes" in msg
        # headers beyond 16 KiB: refused (431), whether they arrive at once or in pieces, the connection closed
        for pieces in (1, 64):
            s = _connect(srv.port)
            big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n"
            try:
                for k in range(pieces):
                    s.sendall(big[k * len(big) // pieces:(k + 1) * len(big) // pieces])
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert _response(s)[0] == 431 and _closed_by_server(s)
        # more rows than may ever wait: 413 at once, not a 503 to retry for ever
        assert srv.get("/health")[0] == 200
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/score", body=json.dumps({"rows": [row] * 65}))
        r = c.getresponse()
        assert r.status == 413 and b"at most 64 (--max-pending)" in r.read()
        # and a request within the limits is scored
        c.request("POST", "/score", body=json.dumps({"rows": [row]}))
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["results"][0]["rl_masked"] == 0.0
        m = srv.metrics()
        assert m["rejected_too_large"] >= 3 and m["held_bytes"] == 0
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_a_full_server_drops_idle_connections_and_refuses_only_when_all_are_answered(tmp_path: Path) -> None:
    """8 connections at most: idle keep-alive and half-sent ones make way for new clients; when all 8 are being
    answered a ninth is refused with 503 at once (never queued until an fd runs out). SIGTERM then answers the
    8 parked requests."""
    srv = _start(tmp_path, "--max-connections", "8", "--window-ms", "60000", "--shutdown-timeout", "120")
    row = json.dumps({"rows": [{"prompt": "p", "completion": "```python\ndef f():\n    return 1\n```"}]}).encode()
    busy: list[socket.socket] = []
    try:
        idle = []
        for _ in range(8):  # 8 keep-alive clients that asked once and stay connected
            s = _connect(srv.port)
            s.sendall(_request("GET", "/health"))
            assert _response(s)[0] == 200
            idle.append(s)
        half = _connect(srv.port)
        half.sendall(b"GET /he")
        for _ in range(3):
            assert srv.get("/health")[0] == 200  # each new client is answered
        assert srv.metrics()["connections_dropped"] >= 2
        assert _closed_by_server(idle[0], 30)  # the longest-idle client made way first
        # park requests until 8 connections are all being answered (a parked one that the server had not read
        # yet when another client came may be the one dropped: it is sent again)
        end = time.monotonic() + 120
        refused = None
        while refused is None:
            assert time.monotonic() < end, "never saw a full server refuse"
            busy = [s for s in busy if s.fileno() != -1]
            while len(busy) < 8:
                s = _connect(srv.port)
                s.sendall(_request("POST", "/score", row))
                busy.append(s)
            s = _connect(srv.port)
            s.sendall(_request("GET", "/health"))
            st, msg = _response(s)
            s.close()
            if st == 503:
                refused = msg
                break
            for b in list(busy):  # this client was served by dropping one that was not parked yet: find it
                b.settimeout(0.05)
                try:
                    if b.recv(1) == b"":
                        b.close()
                except (TimeoutError, BlockingIOError):
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    b.close()
                if b.fileno() != -1:  # a socket the server dropped was closed just above
                    b.settimeout(60)
        assert b"too many connections" in refused
        for s in idle:
            assert _closed_by_server(s, 30)
    finally:
        code, _ = srv.stop(bound=180)
    assert code == 0
    answered = [_response(s) for s in busy]
    assert [st for st, _ in answered] == [200] * 8, answered  # SIGTERM: the parked requests were scored


def test_a_client_that_leaves_takes_its_rows_out_of_the_queue(tmp_path: Path) -> None:
    srv = _start(tmp_path, "--window-ms", "60000", "--shutdown-timeout", "60")
    try:
        s = _connect(srv.port)
        rows = [{"prompt": "p", "completion": f"c{i}"} for i in range(50)]
        s.sendall(_request("POST", "/score", json.dumps({"rows": rows}).encode()))
        srv.wait_metrics(lambda m: m["pending_rows"] == 50, "50 rows parked")
        s.close()
        m = srv.wait_metrics(lambda m: m["pending_rows"] == 0, "the rows taken out of the queue")
        assert m["requests_abandoned"] == 1 and m["rows"] == 0
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_a_client_that_does_not_read_its_answers_is_dropped(tmp_path: Path) -> None:
    srv = _start(tmp_path, "--body-timeout", "1")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    flood = _request("GET", "/metrics") * 200

    def send() -> None:
        try:
            for _ in range(500):  # 100,000 pipelined requests, never reading one answer
                s.sendall(flood)
        except OSError:
            pass

    t = threading.Thread(target=send, daemon=True)
    t.start()
    try:
        m = srv.wait_metrics(lambda m: m["timeouts_write"] >= 1, "the unread client dropped")
        assert m["connections_open"] == 1  # only this /metrics request's own
        t.join(60)
        assert not t.is_alive()  # its sends fail: the server closed the connection
    finally:
        s.close()
        code, took = srv.stop()
    assert code == 0 and took < STOP_BOUND, took


@pytest.mark.slow
def test_sigterm_ends_the_server_within_seconds_whatever_its_clients_do(tmp_path: Path) -> None:
    """Slow headers, slow bodies, a client that never reads and a batch of programs that run to their time limit
    in the sandbox: SIGTERM ends the server within seconds (--shutdown-timeout 2), the request being scored is
    answered 503, and no process of the server's is left."""
    srv = _start(tmp_path, "--shutdown-timeout", "2", spec=QUALITY)
    socks = []
    try:
        for _ in range(20):
            s = _connect(srv.port)
            s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        for _ in range(5):
            s = _connect(srv.port)
            s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"rows\": [")
            socks.append(s)
        spin = "```python\ndef f(x):\n    while True:\n        pass\n```"
        rows = [{"prompt": "def f(x):\n", "completion": spin + f"\n# {i}", "tests": "assert f(1) == 1",
                 "entry_point": "f"} for i in range(8)]
        slow = _connect(srv.port)
        slow.sendall(_request("POST", "/score", json.dumps({"rows": rows}).encode()))
        srv.wait_metrics(lambda m: m["batches"] >= 1 and m["pending_rows"] == 0, "the slow batch scoring")
        code, took = srv.stop(bound=60)
        assert code == 0 and took < STOP_BOUND, took
        st, msg = _response(slow)
        assert st in (0, 503), (st, msg)  # never a 500, never a hang
        left = _session_processes(srv.p.pid)
        end = time.monotonic() + 10  # the sandbox's slots are being killed as the server exits
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = _session_processes(srv.p.pid)
        assert not left, left
    finally:
        for s in socks:
            s.close()
        if srv.p.poll() is None:
            srv.p.kill()


def test_shared_token_and_the_warning_beyond_loopback(tmp_path: Path) -> None:
    srv = _start(tmp_path, "--host", "0.0.0.0")
    try:
        assert "warning: 0.0.0.0 is reachable from other machines and no token is set" in srv.stderr()
    finally:
        srv.stop()
    tok = "s3cret-token"
    srv = _start(tmp_path, "--host", "0.0.0.0", env={"REWARDLANG_SERVE_TOKEN": tok})
    try:
        assert "no token is set" not in srv.stderr()
        body = json.dumps({"rows": [{"prompt": "p", "completion": "c"}]}).encode()
        for headers, want in (({}, 401), ({"Authorization": "Bearer nope"}, 401),
                              ({"Authorization": f"Bearer {tok}"}, 200),
                              ({"Authorization": "Basic " + base64.b64encode(f"openrlhf:{tok}".encode()).decode()},
                               200),  # aiohttp's and requests' form of http://openrlhf:TOKEN@host:port/
                              ({"Authorization": "Basic " + base64.b64encode(b"openrlhf:nope").decode()}, 401)):
            for path, data in (("/score", body), ("/health", None), ("/metrics", None)):
                req = urllib.request.Request(srv.url + path, data=data, headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        st = r.status
                except urllib.error.HTTPError as e:
                    st = e.code
                    assert e.headers["WWW-Authenticate"] == 'Bearer realm="rewardlang"'
                assert st == want, (headers, path, st)
        # a refused client never gets its body read: 401 from the headers, the connection closed
        s = _connect(srv.port)
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        assert _response(s)[0] == 401 and _closed_by_server(s)
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_limits_out_of_range_are_plain_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the command in this process (the limits are checked before a server starts: a process of its own for each
    # would only add its start-up); a server that started anyway fails here instead of serving
    from typer.testing import CliRunner

    from rewardlang.cli.app import app
    from rewardlang.integrations import server

    def started(*a: object, **k: object) -> int:
        raise AssertionError("the server started with limits out of range")

    monkeypatch.setattr(server, "serve", started)
    for args, msg in ((["--max-connections", "100000"], "--max-connections 100000: must be between 1 and"),
                      (["--header-timeout", "0"], "--header-timeout must be a number of seconds > 0"),
                      (["--max-request-mb", "64", "--max-held-mb", "32"], "--max-held-mb at least as large"),
                      (["--token-file", str(tmp_path / "none")], "--token-file")):
        r = CliRunner().invoke(app, ["serve", TEXT, "--port", "0", *args])
        assert isinstance(r.exception, SystemExit), (args, r.exception)
        assert r.exit_code == 1 and msg in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_one_clients_bad_rows_never_change_anothers_results(tmp_path: Path) -> None:
    """Three clients' requests scored in one batch (it fires when all their rows are in: --max-batch is their
    count, the window a minute, so nothing here depends on timing): every hostile row is masked with its own
    reason, and the well-behaved client's results are exactly what its rows score alone, in this process."""
    from rewardlang.integrations.batching import SpecScorer

    good = [{"prompt": "p", "completion": "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x = 1</answer>"},
            {"prompt": "q", "completion": "a a a a a"},
            {"prompt": "q", "completion": "<reasoning>long enough reasoning</reasoning><answer>   </answer>"},
            {"prompt": "r", "completion": "x = 1"}]
    hostile = [{"prompt": "p"},  # a column missing
               {"prompt": "p", "completion": None}, {"prompt": "p", "completion": 5},
               {"prompt": "p", "completion": ["a"]}, {"prompt": "p", "completion": {"a": 1}},
               {"prompt": 7, "completion": "x"}, {"prompt": "p", "completion": "\ud800"},  # a lone surrogate
               {"prompt": "p", "completion": "\x00" * 1000 + "a a a a"},
               {"prompt": "p", "completion": "<reasoning>" * 20000}]
    alone = SpecScorer(TEXT).score_rows([dict(r) for r in good])
    n = len(hostile) + 1 + len(good)
    srv = _start(tmp_path, "--window-ms", "60000", "--max-batch", str(n))
    try:
        a = _connect(srv.port)
        a.sendall(_request("POST", "/score", json.dumps({"rows": hostile}).encode()))
        srv.wait_metrics(lambda m: m["pending_rows"] == len(hostile), "the hostile client's rows parked")
        c = _connect(srv.port)  # OpenRLHF: a query that is not its prompt's, and one hostile response
        c.sendall(_request("POST", "/get_reward", json.dumps(
            {"query": ["another prompt's text", "p" + "<answer>" * 5000], "prompts": ["p", "p"]}).encode()))
        srv.wait_metrics(lambda m: m["pending_rows"] == len(hostile) + 1, "the OpenRLHF client's row parked")
        b = _connect(srv.port)
        b.sendall(_request("POST", "/score", json.dumps({"rows": good}).encode()))
        st, body = _response(b)
        assert st == 200, body
        got = json.loads(body)["results"]
        assert got == [{**r, "error": None} for r in alone]
        st, body = _response(a)
        assert st == 200, body
        bad = json.loads(body)["results"]
        assert [r["rl_masked"] for r in bad] == [1.0] * 7 + [0.0, 0.0]
        assert [r["error"] for r in bad[:7]] == [
            "column `completion` missing (the spec's input `completion` reads it)",
            "column `completion` is null, but `completion` is `text` (declare `text?` to allow nulls)",
            "column `completion` expected text, got int", "column `completion` expected text, got list",
            "column `completion` expected text, got dict", "column `prompt` expected text, got int",
            "column `completion` is not valid UTF-8 text"]
        st, body = _response(c)
        assert st == 200, body
        out = json.loads(body)
        assert out["errors"][0].startswith("the query does not start with its prompt") and out["errors"][1] is None
        m = srv.metrics()
        assert m["batches"] == 1 and m["batch_size_max"] == n and m["infra_failures"] == 0
        assert m["bad_rows"] == 7 + 1  # the 7 above and the OpenRLHF sample that is not its prompt's
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_a_trickled_body_keeps_its_first_deadline(tmp_path: Path) -> None:
    """A body byte every 0.1 s never extends the body's deadline (set once, from the headers): 408 and closed
    long before the declared 600 bytes are sent; a client in good standing on another connection is answered."""
    srv = _start(tmp_path, "--body-timeout", "1")
    try:
        s = _connect(srv.port)
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 600\r\n\r\n")
        sent = 0
        try:
            for _ in range(600):
                s.sendall(b" ")
                sent += 1
                if sent == 3:
                    assert srv.get("/health")[0] == 200
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < 600
        st, msg = _response(s)
        assert st in (0, 408), msg  # the 408 is written before the close; a reset may beat its reading
        assert _closed_by_server(s)
        assert srv.metrics()["timeouts_body"] == 1
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_bodies_held_at_once_are_bounded_and_released(tmp_path: Path) -> None:
    """--max-held-mb bounds the bytes of every request being read or scored together: a body that would pass it
    is answered 503 at once (never held), the body being read is not disturbed, and once it is answered the bytes
    are free again."""
    srv = _start(tmp_path, "--max-request-mb", "1", "--max-held-mb", "1.5")
    try:
        row = {"prompt": "p", "completion": "x = 1 " * 60}
        first = json.dumps({"rows": [row] * 2400}).encode()  # ~0.94 MiB
        assert _MIB * 0.9 < len(first) < _MIB
        a = _connect(srv.port)
        a.sendall(_request("POST", "/score", first)[:-4096])  # all but its last 4 KiB: held, still being read
        srv.wait_metrics(lambda m: m["held_bytes"] >= len(first) - 4096 - 65536, "the first body held")
        second = json.dumps({"rows": [row] * 2000}).encode()  # ~0.78 MiB: within the request limit, not the sum
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/score", body=second)
        r = c.getresponse()
        assert r.status == 503 and b"--max-held-mb" in r.read() and r.getheader("Retry-After") == "1"
        c.close()
        a.sendall(first[-4096:])
        st, body = _response(a)
        assert st == 200 and len(json.loads(body)["results"]) == 2400
        m = srv.wait_metrics(lambda m: m["held_bytes"] == 0, "the bytes released")
        assert m["rejected_overloaded"] == 1
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/score", body=second)  # now it fits
        r = c.getresponse()
        assert r.status == 200 and len(json.loads(r.read())["results"]) == 2000
    finally:
        code, _ = srv.stop()
    assert code == 0


def test_a_body_of_tiny_json_values_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """4 MiB of `{},` is 1.4 million dicts (~100 MiB parsed, seconds of the event loop, before the rows are
    counted): charged 16 bytes per JSON value it is over --max-held-mb (8) alone, so 413 before it is parsed, and the
    server's peak memory does not grow by what its parse would hold. A body of rows of the same size is scored."""
    srv = _start(tmp_path, "--max-request-mb", "4", "--max-held-mb", "8")
    try:
        peak0 = _peak_rss_kib(srv.p.pid)
        blob = b'{"rows": [' + b"{}," * (4 * _MIB // 3 - 20) + b"{}]}"
        assert len(blob) < 4 * _MIB
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", "/score", body=blob)
        r = c.getresponse()
        msg = r.read()
        assert r.status == 413 and b"too many JSON values" in msg and b"--max-held-mb" in msg, msg
        c.close()
        grew = (_peak_rss_kib(srv.p.pid) - peak0) / 1024
        assert grew < 24, f"peak memory grew by {grew:.0f} MiB for a refused 4 MiB body of empty objects"
        rows = [{"prompt": "def f(x):\n", "completion": "```python\ndef f(x):\n    return [x, {x: x}]\n```\n" * 30}
                for _ in range(1500)]
        body = json.dumps({"rows": rows}).encode()
        assert 2 * _MIB < len(body) < 4 * _MIB
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", "/score", body=body)
        r = c.getresponse()
        assert r.status == 200 and len(json.loads(r.read())["results"]) == 1500
        assert srv.wait_metrics(lambda m: m["held_bytes"] == 0, "the bytes released")["rejected_too_large"] == 1
    finally:
        code, _ = srv.stop()
    assert code == 0


@contextlib.contextmanager
def _stopped(srv: Server) -> Iterator[None]:
    """While the server's process is stopped (SIGSTOP), what a test does lands in the kernel's queues all at once:
    the server sees it in one turn of its event loop when it goes on (SIGCONT)."""
    os.kill(srv.p.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(srv.p.pid, signal.SIGCONT)


def test_requests_sent_before_sigterm_on_connections_not_yet_started_are_answered(tmp_path: Path) -> None:
    """Clients that connected and sent their whole request just before SIGTERM, before the server's protocol for
    their connection had started, are answered (they were closed unanswered as idle connections, or answered 503,
    when uvicorn's shutdown came in the turns of the event loop between the accept and the first read)."""
    srv = _start(tmp_path, "--window-ms", "60000", "--shutdown-timeout", "60")
    row = json.dumps({"rows": [{"prompt": "p", "completion": "<think>x</think><answer>y</answer>"}]}).encode()
    with _stopped(srv):
        clients = [_connect(srv.port) for _ in range(4)]  # the kernel completes the handshakes: accepted later
        for c in clients:
            c.sendall(_request("POST", "/score", row))
        srv.p.send_signal(signal.SIGTERM)
        # uvicorn looks for the signal every 0.1 s: while the server is stopped that tick comes due, so the
        # shutdown starts in the very turns in which these connections are accepted
        time.sleep(0.3)
    code = srv.p.wait(STOP_BOUND)
    answers = [_response(c) for c in clients]
    assert code == 0, srv.stderr()
    assert [st for st, _ in answers] == [200] * 4, answers
    assert all(json.loads(b)["results"][0]["error"] is None for _, b in answers)


def test_a_client_that_hung_up_leaves_room_for_the_next(tmp_path: Path) -> None:
    """--max-connections 2: one request parked, one keep-alive client that hangs up in the same turn of the event
    loop as a new client connects. The new client is answered (a connection closing counted as open, and could
    not be dropped: the new one was refused 503 though the server had room)."""
    srv = _start(tmp_path, "--max-connections", "2", "--window-ms", "60000", "--shutdown-timeout", "60")
    row = json.dumps({"rows": [{"prompt": "p", "completion": "<think>x</think><answer>y</answer>"}]}).encode()
    parked = _connect(srv.port)
    parked.sendall(_request("POST", "/score", row))
    srv.wait_metrics(lambda m: m["pending_rows"] == 1, "the first request parked")
    keep = _connect(srv.port)
    keep.sendall(_request("GET", "/health"))
    assert _response(keep)[0] == 200
    with _stopped(srv):
        keep.close()  # its FIN is queued before the new connection: read first when the server goes on
        new = _connect(srv.port)
        new.sendall(_request("POST", "/score", row))
    # a refused client has its 503 at once; an accepted one is parked until SIGTERM scores it (no /metrics here: a
    # third connection to a server of two parked requests is refused)
    code, _ = srv.stop(bound=180)
    assert code == 0
    answers = [_response(parked), _response(new)]
    assert [st for st, _ in answers] == [200, 200], answers
