"""``rewardlang serve``: a reward server (starlette + uvicorn) that batches concurrent requests.

Endpoints:

- ``POST /`` and ``POST /get_reward``: OpenRLHF's remote reward protocol, ``{"query": [...], "prompts": [...],
  "labels": [...]}`` -> ``{"rewards", "scores", "extra_logs"}`` (as :func:`rewardlang.integrations.openrlhf.
  reward_func`: scalars for one sample, which is what OpenRLHF 0.11 sends and reads, lists for several).
- ``POST /score``: ``{"rows": [{column: value, ...}, ...]}`` -> ``{"results": [{"score", "rl_masked",
  "rl_<component>"..., "error"}, ...]}``, the rows of ``rewardlang score``'s input; ``error`` says why a masked row
  is masked (``column `tests` missing ...``, ``component `correct`: ...``), null for the others. The OpenRLHF
  answer carries the same beside its keys as ``errors``. Every mask is logged too, with the client.
- ``GET /health``: ``{"status": "ok", "spec", "sandbox_level"}``; ``GET /metrics``: requests, rows, batch sizes,
  mean latency, masked rows, bad rows, infrastructure failures, rejected requests, rows waiting, sandbox level,
  and what the guards below did (connections open, refused and dropped, timeouts, requests too large).

Requests that arrive within ``window_s`` are scored as one batch (up to ``max_batch`` rows) through one compiled
program and one sandbox pool. More than ``max_pending`` waiting rows: the request is answered 503 ``overloaded`` at
once. A malformed request is answered 400 (bad JSON, with its line and column) or 422 (a field, named).

The server's clients cannot take it down (:class:`ServerLimits`, docs/scale.md "Limits"): a request body larger
than ``max_request_bytes`` is answered 413 before it is held whole (from its ``Content-Length``, or counted as a
chunked body arrives); the bodies held at once are bounded (``max_held_bytes``: beyond, 503; a body that alone
would pass it is 413), each charged its bytes and ``VALUE_COST`` per JSON value it holds (counted as it arrives,
before it is parsed: tiny values take far more memory parsed than their bytes); a request's headers
must arrive within ``header_timeout`` s of the connection opening (or of its previous answer), its body within
``body_timeout`` s of its headers (else 408 and the connection is closed); at most ``max_connections`` connections
are open (below the file-descriptor limit): a new one beyond drops the longest-idle connection that is not being
answered, or is refused with 503 when every one is; a client that goes away before its rows are scored takes them
out of the queue. With a ``token`` every request must carry it (``Authorization: Bearer TOKEN``, or HTTP basic
auth with TOKEN as the password, which aiohttp and requests send for ``http://user:TOKEN@host/``), else 401.
SIGTERM or Ctrl-C: the connections waiting in the listening socket's backlog are accepted and the requests they
already sent are read, then no new connection is accepted, connections whose request is not complete are closed,
every request being scored is answered within ``shutdown_timeout`` s (after that, 503), then the server exits.
A connection closing with nothing left to write (its client hung up) does not count against ``max_connections``.

Example (the app without a socket; ``rewardlang serve SPEC --port P`` runs it under uvicorn)::

    >>> from rewardlang.integrations.server import make_app
    >>> app = make_app("specs/codepo_text.reward")
    >>> [r.path for r in app.routes]
    ['/', '/get_reward', '/score', '/health', '/metrics']
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import math
import os
import select
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rewardlang.integrations.batching import (
    MASK_KEY,
    Batcher,
    Overloaded,
    SpecScorer,
    log_masks,
)
from rewardlang.integrations.openrlhf import merge_masked, read_samples, to_openrlhf

__all__ = [
    "TOKEN_ENV",
    "ServerLimits",
    "default_max_connections",
    "fd_reserve",
    "is_loopback",
    "make_app",
    "read_token",
    "serve",
]

log = logging.getLogger("rewardlang.integrations")

#: the environment variable ``rewardlang serve`` reads its shared token from (``--token-file`` is the other way)
TOKEN_ENV = "REWARDLANG_SERVE_TOKEN"

_MIB = 1 << 20
#: bytes charged against ``max_held_bytes`` for each JSON value of a body beyond its own bytes (a value counted as
#: a ``,`` ``:`` ``[`` or ``{`` byte as the body arrives, inside strings too, so never fewer than it holds). Parsed,
#: a value costs far more than its bytes where values are tiny: 16 MiB of ``{},`` was 5.6 million dicts and
#: 388 MiB, parsed for seconds on the event loop before its rows were counted. Charged so, what a parsed body
#: holds stays within ~3.5x of its charge (empty dicts 2x, `{"a":[]}` 3.4x, short strings 2.8x), and prose or code
#: (one such byte in 14 or more) is charged about twice its bytes
VALUE_COST = 16
def fd_reserve(cpus: int | None = None) -> int:
    """File descriptors kept free of connections for the scoring itself: the sandbox's slots and their pipes, the
    analysers' runs, logs (35 at most were open while ``quality_grpo`` scored 4 concurrent requests on 2 cores):
    64, and 8 more per core (a slot per core)."""
    return 64 + 8 * (cpus if cpus is not None else (os.cpu_count() or 1))


def default_max_connections(fd_limit: int | None = None, cpus: int | None = None) -> int:
    """Open connections allowed by default: 1024, or fewer when the file-descriptor limit (``RLIMIT_NOFILE``'s
    soft value) leaves less than that beside :func:`fd_reserve`.

    >>> default_max_connections(256, cpus=2), default_max_connections(65536, cpus=64)
    (176, 1024)
    """
    if fd_limit is None:
        fd_limit = _fd_limit()
    return max(8, min(1024, fd_limit - fd_reserve(cpus)))


def _fd_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return soft if soft != resource.RLIM_INFINITY and soft > 0 else 1 << 20
    except (ImportError, OSError, ValueError):
        return 1024


@dataclass(frozen=True)
class ServerLimits:
    """What one client may hold of the server (docs/scale.md, "Limits"); every field has a CLI option.

    >>> ServerLimits().max_request_bytes // (1 << 20), ServerLimits().header_timeout
    (16, 10.0)
    """

    #: a request body larger than this is answered 413 (``--max-request-mb``)
    max_request_bytes: int = 16 * _MIB
    #: request bytes held at once, over every request being read or scored, each body charged its bytes and
    #: ``VALUE_COST`` per JSON value; beyond, 503, and 413 for a body that alone is beyond (``--max-held-mb``)
    max_held_bytes: int = 64 * _MIB
    #: open connections (``--max-connections``); None: :func:`default_max_connections`
    max_connections: int | None = None
    #: a request's line and headers together (h11's limit; beyond, 400)
    max_header_bytes: int = 16 * 1024
    #: seconds for a request's headers, from the connection's start or its previous answer (``--header-timeout``)
    header_timeout: float = 10.0
    #: seconds for a request's body, from its headers; also the longest a client may leave its answer unread
    #: while the server has more to write (``--body-timeout``)
    body_timeout: float = 30.0
    #: seconds an idle keep-alive connection stays open (uvicorn's ``timeout_keep_alive``)
    keep_alive: float = 5.0
    #: seconds that requests being scored get to be answered after SIGTERM (``--shutdown-timeout``)
    shutdown_timeout: float = 5.0

    def check(self, fd_limit: int | None = None) -> ServerLimits:
        """These limits with ``max_connections`` filled in; ValueError naming the option that is out of range."""
        if self.max_request_bytes < 1 or self.max_held_bytes < self.max_request_bytes:
            raise ValueError("--max-request-mb must be > 0 and --max-held-mb at least as large")
        for name, v in (("--header-timeout", self.header_timeout), ("--body-timeout", self.body_timeout),
                        ("--shutdown-timeout", self.shutdown_timeout)):
            if not v > 0 or math.isnan(v):
                raise ValueError(f"{name} must be a number of seconds > 0, not {v}")
        lim = fd_limit if fd_limit is not None else _fd_limit()
        most = max(8, lim - fd_reserve())
        n = self.max_connections
        if n is None:
            n = default_max_connections(lim)
        elif n < 1 or n > most:
            raise ValueError(f"--max-connections {n}: must be between 1 and {most} (the file-descriptor limit is "
                             f"{lim}, and {fd_reserve()} stay free for the scoring; raise `ulimit -n` for more)")
        return ServerLimits(self.max_request_bytes, self.max_held_bytes, n, self.max_header_bytes,
                            self.header_timeout, self.body_timeout, self.keep_alive, self.shutdown_timeout)


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (only this machine can connect).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, True, False, True)
    """
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    try:
        return bool(infos) and all(ipaddress.ip_address(str(ai[4][0]).split("%")[0]).is_loopback for ai in infos)
    except ValueError:
        return False


def read_token(token_file: str | None = None) -> str | None:
    """The shared token: the first line of ``token_file``, else ``$REWARDLANG_SERVE_TOKEN``, else None.
    ValueError for a file that cannot be read or a token that is empty."""
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                tok = f.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--token-file {token_file}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
        if not tok:
            raise ValueError(f"--token-file {token_file}: the first line is empty")
        return tok
    tok = os.environ.get(TOKEN_ENV)
    if tok is None:
        return None
    if not tok.strip():
        raise ValueError(f"{TOKEN_ENV} is set but empty")
    return tok.strip()


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.close = close  # the request's body was not read whole: the connection cannot serve another


class _Gone(Exception):
    """The client went away (or was dropped) before its request was read."""


class _Guard:
    """What the server counts and bounds across connections (shared by the listening socket, the protocol and the
    app): the request bytes held, the open connections and which of them a new one may replace."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.held = 0  # request bytes held (being read, parsed or scored)
        self.counts: Counter = Counter()
        self.connections: set[Any] = set()  # the protocol instances whose connection is open
        self.accepting = 0  # sockets accepted whose protocol has not started yet
        self.stopping = False  # SIGTERM: no connection is accepted any more

    def hold(self, n: int) -> bool:
        if self.held + n > self.limits.max_held_bytes:
            return False
        self.held += n
        return True

    def release(self, n: int) -> None:
        self.held -= n

    def full(self) -> bool:
        """Whether a new connection would be one too many. A connection whose transport is closing with nothing
        left to write is on its way out (its socket is closed at the next turn of the event loop) and is not
        counted: a client that has just hung up never makes a server that has room refuse the next one (with
        ``--max-connections 8``, seven requests parked and the eighth client's FIN read in the same turn as a new
        connection, the new one was answered 503). One still writing its last answer counts: its descriptor stays
        open until the client reads it."""
        limit = self.limits.max_connections
        assert limit is not None
        n = len(self.connections) + self.accepting
        if n < limit:
            return False
        leaving = sum(1 for c in self.connections
                      if c.transport is not None and c.transport.is_closing() and not c.transport.get_write_buffer_size())
        return n - leaving >= limit

    def drop_one(self) -> bool:
        """Drop the connection that has waited longest in the earliest phase (idle, then headers, then body);
        never one whose request is being answered. False when every connection is being answered."""
        best: Any = None
        best_key: tuple[int, float] | None = None
        for c in self.connections:
            ph = c.phase()
            if ph == _BUSY or c.transport is None or c.transport.is_closing():
                continue
            key = (ph, c.since)
            if best_key is None or key < best_key:
                best, best_key = c, key
        if best is None:
            return False
        self.counts["connections_dropped"] += 1
        best.drop()
        return True


class _PacedSocket(socket.socket):
    """The listening socket. asyncio accepts up to its backlog (2048) connections in one go before any of their
    protocols start, which ran the process out of file descriptors under a burst of connections whatever a
    protocol did next; this socket accepts at most ``PACE`` per turn of the event loop, and refuses a connection
    beyond :attr:`ServerLimits.max_connections` right here (a 503, the socket closed at once) unless an open
    connection that is not being answered can make way for it."""

    PACE = 16
    guard: _Guard | None = None
    _budget = PACE

    def accept(self) -> tuple[socket.socket, Any]:
        guard = self.guard
        if guard is None:
            return super().accept()
        if guard.stopping:
            raise BlockingIOError(errno.EAGAIN, "the server is shutting down: nothing more is accepted")
        while True:
            if self._budget <= 0:
                raise BlockingIOError(errno.EAGAIN, "the rest waits for the next turn of the event loop")
            if self._budget == self.PACE:
                asyncio.get_running_loop().call_soon(self._refill)
            self._budget -= 1
            conn, addr = super().accept()
            if not guard.full() or guard.drop_one():
                guard.accepting += 1
                return conn, addr
            guard.counts["connections_refused"] += 1
            try:
                conn.setblocking(False)
                conn.send(_canned(503, "Service Unavailable", "too many connections: every one is being answered "
                                  f"(limit {guard.limits.max_connections}); retry", retry=True))
            except OSError:
                pass
            conn.close()

    def _refill(self) -> None:
        self._budget = self.PACE


#: turns of the event loop in which SIGTERM accepts at most what waits in the listening socket's backlog
#: (:attr:`_PacedSocket.PACE` connections a turn: 4,096 in all, twice the backlog asyncio asks for)
_SHUTDOWN_TURNS = 256


def _readable(sock: socket.socket) -> bool:
    """Whether a listening socket has connections waiting to be accepted (a poll that does not wait)."""
    try:
        if hasattr(select, "poll"):  # any descriptor number (select() stops at 1024)
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):  # closed already
        return False


def _canned(status: int, reason: str, message: str, retry: bool = False) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, written by the protocol itself (no app involved)."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            + ("retry-after: 1\r\n" if retry else "") + "connection: close\r\n\r\n")
    return head.encode() + body


# phases of a connection, in the order in which a full server drops them (longest in the phase first)
_IDLE, _HEADERS, _BODY, _BUSY = 0, 1, 2, 3


#: environment variable choosing the server's HTTP parser: ``auto`` (default: httptools' compiled parser where it
#: is installed, as ``pip install rewardlang`` installs it) or ``h11`` (uvicorn's pure-Python parser)
HTTP_ENV = "REWARDLANG_SERVER_HTTP"


def http_parser() -> str:
    """The HTTP parser ``serve`` runs: ``httptools`` where it is installed and :data:`HTTP_ENV` does not ask for
    ``h11``, else ``h11``. The compiled parser costs the server a fraction of h11's CPU per request (issue 38:
    with one row per request, h11's pure-Python parsing was most of the ~2.8 ms of CPU each request cost); every
    guard of :class:`ServerLimits` holds on both (the server's tests run on each). The event loop stays
    asyncio's own: uvloop accepts connections in libuv, past :class:`_PacedSocket`'s accept, which bounds the
    connections a burst can open (issue 32)."""
    import importlib.util

    choice = os.environ.get(HTTP_ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", "h11"):
        raise ValueError(f"{HTTP_ENV}={choice!r}: auto or h11")
    return "httptools" if choice == "auto" and importlib.util.find_spec("httptools") is not None else "h11"


def _protocol_class(guard: _Guard, parser: str = "h11") -> type:
    """uvicorn's protocol for ``parser`` (``h11`` or ``httptools``) with the deadlines of :class:`ServerLimits`
    and the phase that decides which connection makes way for a new one (:class:`_PacedSocket` bounds their
    number).

    uvicorn itself bounds the headers' size (h11) and closes idle keep-alive connections, but it has no deadline
    for a request's headers or body (its keep-alive timer is cancelled by the first byte that arrives, and is
    armed only after a first answer) nor for a client that does not read its answer, and accepts connections until
    the process runs out of file descriptors; ``limit_concurrency`` answers 503 only to a complete request. This
    subclass adds the deadlines, through uvicorn's ``http=`` protocol-class option. The size of a request's line
    and headers is counted here, whole or in pieces, whichever parser reads them (httptools has no such bound)."""
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    limits = guard.limits
    assert limits.max_connections is not None

    class GuardedProtocol(Base):  # type: ignore[misc,valid-type]
        _timer: asyncio.TimerHandle | None = None
        _timer_kind: str | None = None
        since = 0.0  # when the connection entered its phase (the oldest is dropped first)
        _got_bytes = False  # bytes of the next request arrived (its headers are on their way)
        _write_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0  # bytes of the next request's line and headers so far
        _tail = b""  # the last bytes read, in case the blank line ending the headers is split between reads

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            guard.accepting = max(0, guard.accepting - 1)
            super().connection_made(transport)
            guard.connections.add(self)
            guard.counts["connections_accepted"] += 1
            self.since = time.monotonic()
            self._rearm()

        def phase(self) -> int:
            c = self.cycle
            if c is None or c.response_complete:
                return _HEADERS if self._got_bytes else _IDLE
            return _BODY if c.more_body else _BUSY

        def drop(self) -> None:
            self._abort()

        def _abort(self, response: bytes | None = None) -> None:
            self._cancel_timer()
            guard.connections.discard(self)  # at once: the new connection takes its place now
            if response is not None:
                with contextlib.suppress(Exception):  # a write on a dying socket: the abort below is what matters
                    self.transport.write(response)
            self.transport.abort()

        def _cancel_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._timer_kind = None, None

        def _rearm(self) -> None:
            """Keep the deadline of the current phase: headers (from idle), body (from the headers), none while
            the request is being answered. A phase's deadline is set once, so trickling bytes never extends it."""
            if self.transport is None or self.transport.is_closing():
                return
            ph = self.phase()
            kind = "header" if ph in (_IDLE, _HEADERS) else "body" if ph == _BODY else None
            if kind == self._timer_kind:
                return
            self._cancel_timer()
            self.since = time.monotonic()
            if kind is not None:
                wait = limits.header_timeout if kind == "header" else limits.body_timeout
                self._timer = self.loop.call_later(wait, self._expired, kind)
                self._timer_kind = kind

        def _expired(self, kind: str) -> None:
            self._timer, self._timer_kind = None, None
            if self.transport.is_closing():
                return
            guard.counts[f"timeouts_{kind}"] += 1
            if kind == "header" and not self._got_bytes:
                self._abort()  # an idle connection: nothing to answer
                return
            what = "headers" if kind == "header" else "body"
            wait = limits.header_timeout if kind == "header" else limits.body_timeout
            self._abort(_canned(408, "Request Timeout", f"the request's {what} did not arrive within {wait:g} s "
                                f"(--{kind}-timeout)"))

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self._got_bytes = True
                # h11 bounds only headers that arrive in pieces (its buffer of an incomplete event); headers that
                # arrive whole in one read are counted here, up to the blank line that ends them
                probe = self._tail + data
                end = probe.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
                self._tail = probe[-3:] if end < 0 else b""
                if self._head_bytes > limits.max_header_bytes:
                    guard.counts["rejected_too_large"] += 1
                    self._abort(_canned(431, "Request Header Fields Too Large", "the request's line and headers "
                                        f"are over {limits.max_header_bytes} bytes"))
                    return
            super().data_received(data)
            self._rearm()

        def send_400_response(self, msg: str) -> None:
            conn = getattr(self, "conn", None)   # h11's connection (httptools' parser has no such limit)
            if conn is not None and len(conn.trailing_data[0]) > limits.max_header_bytes:  # h11's limit, in pieces
                guard.counts["rejected_too_large"] += 1
                self._abort(_canned(431, "Request Header Fields Too Large", "the request's line and headers are "
                                    f"over {limits.max_header_bytes} bytes"))
                return
            super().send_400_response(msg)

        def on_response_complete(self) -> None:
            self._got_bytes = False
            self._head_bytes, self._tail = 0, b""
            self._cancel_timer()  # the next request's headers get their own deadline, from now
            super().on_response_complete()
            self._rearm()

        def connection_lost(self, exc: Exception | None) -> None:
            guard.connections.discard(self)
            self._cancel_timer()
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            # the client does not read its answers (the transport's buffer is full): it gets as long as a body
            # would, then the connection is dropped (else it would be held, being answered, for ever)
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(limits.body_timeout, self._unread)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None

        def _unread(self) -> None:
            self._write_timer = None
            guard.counts["timeouts_write"] += 1
            self._abort()

        def shutdown(self) -> None:
            """SIGTERM: a request not yet read whole is dropped now; one being answered finishes (uvicorn)."""
            if self.phase() in (_HEADERS, _BODY):
                self._abort()
            else:
                super().shutdown()

    return GuardedProtocol


def _authorized(headers: Any, token: str) -> bool:
    """``Authorization: Bearer TOKEN``, or basic auth whose password is TOKEN (compared in constant time)."""
    value = headers.get("authorization", "")
    scheme, _, cred = value.partition(" ")
    scheme, cred = scheme.lower(), cred.strip()
    given = None
    if scheme == "bearer":
        given = cred
    elif scheme == "basic":
        try:
            given = base64.b64decode(cred, validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _list_field(data: dict, name: str, of: type | None = None) -> list:
    if name not in data:
        raise _BadRequest(422, f"field `{name}` is missing")
    v = data[name]
    if not isinstance(v, list):
        raise _BadRequest(422, f"field `{name}` must be a list, not {type(v).__name__}")
    if of is not None:
        for i, x in enumerate(v):
            if not isinstance(x, of):
                raise _BadRequest(422, f"field `{name}`[{i}] must be {of.__name__}, not {type(x).__name__}")
    return v


def make_app(spec: str, *, program: Any = None, window_s: float = 0.02, max_batch: int = 512,
             max_pending: int = 8192, limits: ServerLimits | None = None, token: str | None = None,
             guard: _Guard | None = None) -> Any:
    """The ASGI app for ``spec`` (an already loaded ``program`` may be given); its batcher starts with the app's
    lifespan and is drained at shutdown. ``limits`` bound a request's size and the bytes held; with ``token``, a
    request without it is answered 401 (see the module docstring)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    limits = (limits or ServerLimits()).check()
    guard = guard or _Guard(limits)
    state: dict[str, Any] = {}

    def batcher() -> Batcher:
        if "batcher" not in state:
            scorer = SpecScorer(spec, program=program)
            scorer.log_masks = False  # logged per request below, with the client and the request's own row numbers
            state["batcher"] = Batcher(scorer, window_s=window_s, max_batch=max_batch, max_pending=max_pending)
        return state["batcher"]

    def reasons(request: Request, results: list[dict]) -> list[str | None]:
        """Each result's mask reason (None where it is not masked), every mask logged with the client."""
        why = [(getattr(r, "reason", None) or "masked") if r.get(MASK_KEY) else None for r in results]
        if any(why):
            client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
            log_masks(log, f"a request from {client} ({request.method} {request.url.path})", results)
        return why

    def error(status: int, message: str, close: bool = False) -> JSONResponse:
        headers = {"Retry-After": "1"} if status == 503 else {}
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="rewardlang"'
        if close:
            headers["Connection"] = "close"  # h11 then closes the connection after this answer
        return JSONResponse({"error": message}, status_code=status, headers=headers or None)

    def check_token(request: Request) -> None:
        if token is not None and not _authorized(request.headers, token):
            guard.counts["rejected_unauthorized"] += 1
            k = guard.counts["rejected_unauthorized"]
            if k in (1, 10, 100) or k % 1000 == 0:
                client = request.client.host if request.client else "?"
                log.warning("rewardlang: %d request(s) without the server's token refused (401), the last from %s",
                            k, client)
            raise _BadRequest(401, "this server needs its token: `Authorization: Bearer TOKEN` (or basic auth "
                                   "with the token as the password)", close=True)

    async def drain(receive: Any) -> None:
        """Read what is left of a refused body without keeping it (so that a client that sends its whole body
        before it reads, as most do, reads the answer instead of a reset); the body deadline still applies."""
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise _Gone()
            if not msg.get("more_body", False):
                return

    async def read_json(request: Request) -> tuple[Any, int]:
        """The body as JSON and the bytes held for it (released by the caller once the request is answered)."""
        check_token(request)
        receive = request.receive
        declared = request.headers.get("content-length")
        expect = request.headers.get("expect", "").lower() == "100-continue"
        if declared is not None and declared.isdigit() and int(declared) > limits.max_request_bytes:
            guard.counts["rejected_too_large"] += 1
            if not expect:  # the client is sending the body now: read it to the end without keeping it
                await drain(receive)
            raise _BadRequest(413, f"the body is {int(declared)} bytes; the limit is {limits.max_request_bytes} "
                                   "(--max-request-mb): send fewer rows per request", close=True)
        chunks: list[bytes] = []
        size = 0  # the body's bytes
        held = 0  # what they are charged against --max-held-mb: the bytes and VALUE_COST per JSON value
        try:
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    raise _Gone()
                chunk = msg.get("body", b"")
                more = msg.get("more_body", False)
                if chunk:
                    if size + len(chunk) > limits.max_request_bytes:
                        guard.counts["rejected_too_large"] += 1
                        if more:
                            await drain(receive)
                        raise _BadRequest(413, f"the body is over {limits.max_request_bytes} bytes, the limit "
                                               "(--max-request-mb): send fewer rows per request", close=True)
                    cost = len(chunk) + VALUE_COST * (chunk.count(b",") + chunk.count(b":") + chunk.count(b"[")
                                                      + chunk.count(b"{"))
                    if held + cost > limits.max_held_bytes:  # this request alone: it can never be held
                        guard.counts["rejected_too_large"] += 1
                        if more:
                            await drain(receive)
                        raise _BadRequest(413, f"the body holds too many JSON values: with {VALUE_COST} bytes "
                                               "for each, it is over --max-held-mb "
                                               f"({limits.max_held_bytes} bytes): send fewer rows per request",
                                          close=True)
                    if not guard.hold(cost):
                        guard.counts["rejected_overloaded_bytes"] += 1
                        raise _BadRequest(503, f"overloaded: {guard.held} bytes of requests are held (limit "
                                               f"{limits.max_held_bytes}, --max-held-mb)", close=more)
                    held += cost
                    size += len(chunk)
                    chunks.append(chunk)
                if not more:
                    break
            raw = b"".join(chunks)
            chunks.clear()
            try:
                data = json.loads(raw)
            except UnicodeDecodeError as exc:
                raise _BadRequest(400, f"the body is not UTF-8: {exc}")
            except json.JSONDecodeError as exc:
                raise _BadRequest(400, f"the body is not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}")
            except RecursionError:
                raise _BadRequest(400, "the body is not JSON this server reads: nested too deeply")
            if not isinstance(data, dict):
                raise _BadRequest(422, f"the body must be a JSON object, not {type(data).__name__}")
        except BaseException:
            guard.release(held)
            raise
        return data, held

    async def until_gone(receive: Any) -> None:
        """Returns when the client goes away (uvicorn answers ``http.disconnect`` then)."""
        while (await receive())["type"] != "http.disconnect":
            pass

    async def scored(request: Request, b: Batcher, rows: list[dict]) -> list[dict]:
        """The rows' results; rows whose client leaves before they are scored are taken out of the queue."""
        if not rows:
            return []
        if len(rows) > b.max_pending:
            raise _BadRequest(413, f"{len(rows)} rows in one request; at most {b.max_pending} (--max-pending) "
                                   "can wait: send fewer rows per request")
        waiter = asyncio.wrap_future(b.submit(rows))
        gone = asyncio.ensure_future(until_gone(request.receive))
        try:
            done, _ = await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # SIGTERM's grace period is over: answer that, never a 500
            waiter.cancel()
            guard.counts["shutdown_unfinished"] += 1
            raise _BadRequest(503, "the server is shutting down: retry on another server", close=True)
        finally:
            gone.cancel()
        if waiter not in done:
            waiter.cancel()  # the batcher skips rows whose future is cancelled before it takes them
            guard.counts["requests_abandoned"] += 1
            raise _Gone()
        return waiter.result()

    def project(b: Batcher, rows: list[dict]) -> list[dict]:
        """Only the columns the spec reads are kept while the rows wait (the rest of a body is freed now)."""
        if "columns" not in state:
            state["columns"] = {i.column for i in b.scorer.inputs} | {i.name for i in b.scorer.inputs}
        keep = state["columns"]
        return [{k: v for k, v in r.items() if k in keep} if isinstance(r, dict) else r for r in rows]

    async def openrlhf(request: Request) -> Response:
        held = 0
        try:
            data, held = await read_json(request)
            queries = _list_field(data, "query", str)
            prompts = _list_field(data, "prompts", str)
            labels = _list_field(data, "labels") if "labels" in data else [None] * len(queries)
            if not (len(queries) == len(prompts) == len(labels)):
                raise _BadRequest(422, f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels: "
                                       "one of each per sample")
            b = batcher()
            try:
                rows, unreadable = read_samples(b.scorer, queries, prompts, labels)
            except ValueError as exc:
                raise _BadRequest(422, str(exc))
            del data, queries, prompts, labels
            good = project(b, [r for r in rows if r is not None])
            results = merge_masked(b.scorer, rows, await scored(request, b, good), unreadable)
        except _BadRequest as exc:
            return error(exc.status, str(exc), exc.close)
        except Overloaded as exc:
            return error(503, str(exc))
        except _Gone:
            return Response(status_code=499)  # nobody reads it: the connection is gone
        finally:
            guard.release(held)
        out = to_openrlhf(results, scalar=True)
        why = reasons(request, results)
        # beside OpenRLHF's keys (it reads only those): why each masked sample is masked, None for the others
        out["errors"] = why[0] if len(why) == 1 else why
        return JSONResponse(out)

    async def score(request: Request) -> Response:
        held = 0
        try:
            data, held = await read_json(request)
            rows = _list_field(data, "rows", dict)
            del data
            b = batcher()
            results = await scored(request, b, project(b, rows))
        except _BadRequest as exc:
            return error(exc.status, str(exc), exc.close)
        except Overloaded as exc:
            return error(503, str(exc))
        except _Gone:
            return Response(status_code=499)
        finally:
            guard.release(held)
        why = reasons(request, results)
        return JSONResponse({"results": [{**r, "error": w} for r, w in zip(results, why)]})

    async def health(request: Request) -> Response:
        try:
            check_token(request)
        except _BadRequest as exc:
            return error(exc.status, str(exc))
        b = batcher()
        return JSONResponse({"status": "ok", "spec": spec, "sandbox_level": b.scorer.sandbox_level()})

    async def metrics(request: Request) -> Response:
        try:
            check_token(request)
        except _BadRequest as exc:
            return error(exc.status, str(exc))
        b = batcher()
        st = b.scorer.stats
        sizes = sorted(b.batch_sizes.elements())
        c = guard.counts
        return JSONResponse({
            "requests": b.requests, "rejected_overloaded": b.rejected + c["rejected_overloaded_bytes"],
            "rows": st["rows"], "batches": st["batches"],
            "batch_size_mean": (sum(sizes) / len(sizes)) if sizes else 0.0,
            "batch_size_max": sizes[-1] if sizes else 0,
            "latency_mean_s": b.latency_sum / b.latency_n if b.latency_n else 0.0,
            "scoring_seconds": b.scoring_s,
            "masked_rows": st["masked"] + st["bad_rows"], "bad_rows": st["bad_rows"],
            "infra_failures": st["infra_failures"], "pending_rows": b.pending,
            "sandbox_level": b.scorer.sandbox_level(),
            "sandbox_executions": st["sandbox.executions"],
            # programs the sandbox ended at their CPU or idle-wall limit (their own outcome), and analyser runs
            # that ran out of their CPU budget on a sample (its own outcome); a machine too loaded to decide
            # is an infrastructure failure instead (counted above)
            "sandbox_timeouts": st["sandbox.timeouts"],
            "tool_timeouts": sum(v for k, v in st.items() if k.startswith("tool.") and k.endswith(".timeouts")),
            "http_parser": state.get("http_parser", "none"),
            "connections_open": state.get("connections", lambda: 0)(),
            "connections_limit": limits.max_connections,
            "connections_refused": c["connections_refused"], "connections_dropped": c["connections_dropped"],
            "timeouts_header": c["timeouts_header"], "timeouts_body": c["timeouts_body"],
            "timeouts_write": c["timeouts_write"],
            "rejected_too_large": c["rejected_too_large"], "rejected_unauthorized": c["rejected_unauthorized"],
            "requests_abandoned": c["requests_abandoned"], "held_bytes": guard.held,
        })

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return error(getattr(exc, "status_code", 404), f"{request.method} {request.url.path}: "
                     "POST / or /get_reward (OpenRLHF), POST /score (rows), GET /health, GET /metrics")

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Any):  # type: ignore[no-untyped-def]
        batcher()  # compile and start now, not at the first request
        yield
        b = state.pop("batcher")
        # every request still being answered had its grace period (uvicorn's graceful shutdown, which answered
        # the ones left 503): the batch being scored gets one more second, else it is left to the process's end
        await asyncio.get_running_loop().run_in_executor(None, b.close, 1.0)
        if b.running:
            state["still_scoring"] = True
        else:
            b.scorer.close()

    routes = [Route("/", openrlhf, methods=["POST"]), Route("/get_reward", openrlhf, methods=["POST"]),
              Route("/score", score, methods=["POST"]), Route("/health", health, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})
    app.state.rewardlang = state  # serve() tells the app how many connections are open
    app.state.guard = guard
    return app


def serve(spec: str, *, host: str = "127.0.0.1", port: int = 8000, program: Any = None, window_s: float = 0.02,
          max_batch: int = 512, max_pending: int = 8192, limits: ServerLimits | None = None,
          token: str | None = None) -> int:
    """Run the server until SIGTERM/Ctrl-C; returns the exit code (1 when the address cannot be bound or a limit
    is out of range)."""
    import uvicorn

    try:
        limits = (limits or ServerLimits()).check()
        parser = http_parser()
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    try:
        plain = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except (OSError, OverflowError) as exc:  # in use, not an address here, a port outside 0-65535
        sys.stderr.write(f"error: cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}\n")
        return 1
    guard = _Guard(limits)
    sock = _PacedSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
    sock.guard = guard
    app = make_app(spec, program=program, window_s=window_s, max_batch=max_batch, max_pending=max_pending,
                   limits=limits, token=token, guard=guard)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"rewardlang: serving {spec} on http://{shown}:{bound} (POST / or /get_reward, POST /score, "
                     "GET /health, GET /metrics)\n")
    if token is None and not is_loopback(host):
        sys.stderr.write(f"warning: {host} is reachable from other machines and no token is set: anyone who can "
                         "reach this port can run programs in this server's sandbox and fill its queue; set "
                         f"{TOKEN_ENV} or --token-file (docs/scale.md)\n")
    sys.stderr.flush()

    class _Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # A client whose connection the kernel completed before SIGTERM is answered, never reset unread: the
            # connections still in the listening socket's backlog are accepted (a full server answers them 503),
            # their protocols start and the requests they already sent are read, before uvicorn closes the
            # listening socket (which resets what is left in the backlog) and the connections that have sent
            # nothing. These are turns of the event loop, not a wait: a request already in a socket's buffer is
            # read in the turn after its protocol starts. (A client accepted in the turn before SIGTERM, its
            # request complete in the buffer, was closed unanswered as an idle connection; one still in the
            # backlog was reset.)
            for _ in range(_SHUTDOWN_TURNS):
                if not guard.accepting and not _readable(sock):
                    break
                await asyncio.sleep(0)
            guard.stopping = True
            for _ in range(3):  # the last protocols' readers are added, their sockets polled, their bytes read
                await asyncio.sleep(0)
            # the batcher stops waiting for its window: what it holds, and what the requests being read add, is
            # scored now, within the grace period (it is closed after them, in the app's lifespan)
            b = app.state.rewardlang.get("batcher")
            if b is not None:
                b.drain()
            await super().shutdown(sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises the signal once it has shut down; a requested stop that answered every accepted
            # request is a success (exit 0), not an interrupted command (130/143)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, loop="asyncio",
                            http=_protocol_class(guard, parser), h11_max_incomplete_event_size=limits.max_header_bytes,
                            timeout_keep_alive=max(1, round(limits.keep_alive)),
                            timeout_graceful_shutdown=max(1, round(limits.shutdown_timeout)))
    # uvicorn logs the requests it cancels at the end of the grace period; the stop line below says it once
    logging.getLogger("uvicorn.error").addFilter(lambda r: "timeout graceful shutdown" not in r.getMessage())
    server = _Server(config)
    app.state.rewardlang["connections"] = lambda: len(guard.connections)
    app.state.rewardlang["http_parser"] = parser
    server.run(sockets=[sock])
    late = guard.counts["shutdown_unfinished"]
    sys.stderr.write("rewardlang: stopped (every accepted request was answered" + (
        f"; {late} still being scored after --shutdown-timeout were answered 503" if late else "") + ")\n")
    if app.state.rewardlang.get("still_scoring"):
        # a batch is still being judged (programs running to their time limits): the process ends now rather
        # than when they do; the sandbox's processes die with it (they are started to die with their parent) and
        # the analysers' helpers end at their socket's end of file
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(0)
    return 0
