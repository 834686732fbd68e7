"""The integration run cannot pass having run none of its tests: with REWARDLANG_INTEGRATION=1, a selection that
deselects every integration test (pyproject's -m 'not slow', which scripts/test-integrations.sh overrides with
-m "") is a usage error, not a green run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1].parent


def _collect(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, REWARDLANG_INTEGRATION="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", *args,
                           "tests/integrations/test_verl_tokens.py"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300, check=False)


@pytest.mark.slow
def test_deselecting_every_integration_test_fails_the_run() -> None:
    r = _collect()  # pyproject's addopts: -m 'not slow'
    assert r.returncode == 4, r.stdout + r.stderr
    assert "all 3 integration tests were deselected" in r.stdout + r.stderr
    ok = _collect("-m", "")
    assert ok.returncode == 0 and "5 tests collected" in ok.stdout, ok.stdout + ok.stderr
