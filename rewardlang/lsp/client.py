"""A minimal Language Server Protocol client over stdio (standard library only), for tests and benchmarks.

It starts ``rewardlang lsp`` (or any command), frames JSON-RPC messages with ``Content-Length`` headers as
the protocol says, answers the server's own requests with ``null``, and keeps every notification, so a test
sees exactly what an editor would.

    >>> with LspClient() as c:                                   # doctest: +SKIP
    ...     c.initialize("/work/specs")
    ...     c.open("/work/specs/dense_ppo.reward")
    ...     c.diagnostics("/work/specs/dense_ppo.reward")
    []
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["LspClient", "LspError", "uri_of"]


class LspError(Exception):
    """An error response from the server."""


def uri_of(path: str | Path) -> str:
    return Path(path).resolve().as_uri()


class LspClient:
    """One server process; requests block until their response (or ``timeout``, a guard against a hung server)."""

    def __init__(self, command: list[str] | None = None, timeout: float = 120.0, env: dict | None = None,
                 cwd: str | Path | None = None) -> None:
        self.command = command or [sys.executable, "-m", "rewardlang", "lsp"]
        self.timeout = timeout
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=cwd)
        self._next = 0
        self._cond = threading.Condition()
        self._responses: dict[int, dict] = {}
        self.notifications: list[dict] = []
        self.stderr: list[str] = []
        self.versions: dict[str, int] = {}
        self.capabilities: dict[str, Any] = {}
        self.marks: dict[str, int] = {}  # per document: how many notifications had come when it last changed
        self._closed = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    # ---- transport
    def _send(self, msg: dict) -> None:
        body = json.dumps(msg).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self._cond:
                        self._closed = True
                        self._cond.notify_all()
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            msg = json.loads(out.read(length).decode("utf-8"))
            if "id" in msg and "method" in msg:  # a request from the server (registerCapability, progress, ...)
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                continue
            with self._cond:
                if "id" in msg:
                    self._responses[msg["id"]] = msg
                else:
                    self.notifications.append(msg)
                self._cond.notify_all()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def _wait(self, pred: Any, timeout: float | None) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while True:
                got = pred()
                if got is not None:
                    return got
                if self._closed:
                    raise LspError("the server exited: " + "".join(self.stderr[-20:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no answer from the language server")
                self._cond.wait(left)

    def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        self._next += 1
        rid = self._next
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        msg = self._wait(lambda: self._responses.pop(rid, None), timeout)
        if "error" in msg:
            raise LspError(f"{method}: {msg['error']}")
        return msg.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # ---- the protocol's conversation
    def initialize(self, root: str | Path) -> dict:
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": uri_of(root),
                                             "capabilities": {"textDocument": {"hover": {"contentFormat": [
                                                 "markdown", "plaintext"]}}}})
        self.capabilities = result["capabilities"]  # what the server said it does (the semantic tokens' legend)
        self.notify("initialized", {})
        return result

    def open(self, path: str | Path, text: str | None = None) -> str:
        uri = uri_of(path)
        if text is None:
            text = Path(path).read_text(encoding="utf-8")
        self.versions[uri] = 1
        self._mark(uri)
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "reward", "version": 1,
                                                              "text": text}})
        return uri

    def change(self, path: str | Path, text: str, range: dict | None = None) -> int:
        """Replace the whole text (or ``range`` of it); returns the document's new version."""
        uri = uri_of(path)
        self.versions[uri] = self.versions.get(uri, 0) + 1
        self._mark(uri)
        change: dict = {"text": text}
        if range is not None:
            change["range"] = range
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": self.versions[uri]},
                                               "contentChanges": [change]})
        return self.versions[uri]

    def _mark(self, uri: str) -> None:
        with self._cond:
            self.marks[uri] = len(self.notifications)

    def diagnostics(self, path: str | Path, version: int | None = None, timeout: float | None = None,
                    after: int | None = None) -> list[dict]:
        """The diagnostics the server published for ``path`` (for ``version``, when given), waiting for them.
        Notifications received before the document's last open or change are skipped (a re-opened document
        counts its versions from 1 again), or before index ``after`` when it is given."""
        uri = uri_of(path)
        want = self.versions.get(uri) if version is None else version
        if after is None:
            after = self.marks.get(uri, 0)

        def find() -> list[dict] | None:
            for n in reversed(self.notifications[after:]):
                p = n.get("params") or {}
                if n.get("method") == "textDocument/publishDiagnostics" and p.get("uri") == uri and \
                        (want is None or p.get("version") in (want, None)):
                    return p["diagnostics"]
            return None

        return self._wait(find, timeout)

    def at(self, method: str, path: str | Path, line: int, character: int, **extra: Any) -> Any:
        return self.request(method, {"textDocument": {"uri": uri_of(path)},
                                     "position": {"line": line, "character": character}, **extra})

    def shutdown(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("shutdown", None, timeout=30)
                self.notify("exit", None)
                self.proc.wait(timeout=30)
            except (LspError, TimeoutError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "LspClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
