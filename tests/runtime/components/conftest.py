"""Shared fixtures for the component tests."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

# A real tool behind a wrapper: an input file containing CRASH_ME makes the run crash, HANG_ME makes it hang.
_WRAPPER = textwrap.dedent("""
    import os, sys, time
    REAL = {real}
    for f in (a for a in sys.argv[1:] if a.endswith(".py")):
        text = open(f, encoding="utf-8").read()
        if "CRASH_ME" in text:
            print("Traceback (most recent call last):\\nRuntimeError: wrapped tool crashed", file=sys.stderr)
            sys.exit(70)
        if "HANG_ME" in text:
            if os.environ.get("HANG_MARKS"):   # says which run hangs (its session: this process)
                open(os.path.join(os.environ["HANG_MARKS"], str(os.getpid())), "w").close()
            time.sleep(120)
    os.execv(REAL[0], REAL + sys.argv[1:])
""")


@pytest.fixture
def tool_wrapper(tmp_path: Path) -> Callable[[list[str]], str]:
    """``tool_wrapper(real_command)`` → a shell command line for ``REWARDLANG_TOOL_<NAME>``."""

    def make(real: list[str]) -> str:
        script = tmp_path / "wrapper.py"
        script.write_text(_WRAPPER.format(real=json.dumps(real)))
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"

    return make
