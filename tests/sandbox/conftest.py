"""Fixtures of the sandbox suite: a one-slot sandbox (so "the same slot" is well defined), and host canary
files (the loopback listener is the root conftest's)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

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
