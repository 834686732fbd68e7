"""Fixtures of the sandbox suite: a one-slot sandbox (so "the same slot" is well defined), a loopback
listener that records any connection, and host canary files."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from rewardlang.sandbox.config import SandboxConfig
from rewardlang.sandbox.runner import Sandbox


@pytest.fixture(scope="session")
def sb1() -> Iterator[Sandbox]:
    """A sandbox with one slot at the strongest level this machine offers."""
    sb = Sandbox(SandboxConfig(slots=1))
    assert sb.run("def f(x):\n    return x\n", ["assert f(1) == 1"]).outcome == "pass"  # slot started
    yield sb
    sb.close()


@dataclass
class Listener:
    port: int
    connections: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture(scope="session")
def listener() -> Iterator[Listener]:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    info = Listener(srv.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except (TimeoutError, OSError):
                continue
            info.connections.append(addr)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield info
    stop.set()
    t.join(2)
    srv.close()


@dataclass
class Canaries:
    token: str
    files: dict[str, bytes]
    secret_file: str
    secret: str
    created: list[str]

    def intact(self) -> bool:
        for path, data in self.files.items():
            try:
                with open(path, "rb") as fh:
                    if fh.read() != data:
                        return False
            except OSError:
                return False
        return True

    def none_created(self) -> bool:
        return not any(os.path.exists(p) for p in self.created)


@pytest.fixture(scope="session")
def canaries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Canaries]:
    """World-readable host files a program must not change or read, and paths it must not create."""
    token = secrets.token_hex(6)
    d = tmp_path_factory.mktemp("canary")
    os.chmod(d, 0o755)
    files = {}
    for path in (f"/tmp/rl-canary-{token}", f"/var/tmp/rl-canary-{token}", str(d / "canary.txt")):
        data = f"canary {token} {path}\n".encode()
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o666)  # even world-writable: only the sandbox stops a write
        files[path] = data
    secret = "s3cret-" + secrets.token_hex(8)
    secret_file = f"/tmp/rl-secret-{token}"
    with open(secret_file, "w") as fh:
        fh.write(secret)
    os.chmod(secret_file, 0o644)
    created = [f"/tmp/rl-created-{token}", f"/var/tmp/rl-created-{token}", f"/dev/shm/rl-created-{token}",
               str(d / f"created-{token}")]
    c = Canaries(token, files, secret_file, secret, created)
    yield c
    for p in list(files) + [secret_file] + created:
        try:
            os.unlink(p)
        except OSError:
            pass
