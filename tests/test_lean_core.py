"""The core runs without the training stack: with torch, transformers, trl, accelerate, peft, matplotlib and gguf
made unimportable, check/score/explain/serve's app work, and the commands that need the stack say which extra to
install (exit 1, no traceback). The same in a clean virtualenv with `pip install .` only: tests/integrations/
test_lean_venv.py (scripts/test-integrations.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STACK = ("torch", "transformers", "trl", "accelerate", "peft", "matplotlib", "gguf")
# each package is made unimportable (a None entry in sys.modules: import raises, find_spec says missing)
PRELUDE = f"import sys\nfor m in {STACK!r}:\n    sys.modules[m] = None\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))


IMPORTS = ("rewardlang", "rewardlang.cli", "rewardlang.runtime.program", "rewardlang.integrations.verl",
           "rewardlang.integrations.openrlhf", "rewardlang.integrations.server", "rewardlang.integrations.ray_score")

# One process with the stack made unimportable runs the imports, then every command below, one after another (the
# tool helpers a command starts serve the next, as in one user's session): each command's exit status, stdout and
# stderr are caught at the file descriptors, so what it prints, and what its helpers print, is its own.
DRIVER = """
import json, os, tempfile, traceback
for m in %(imports)r:
    __import__(m)
print(json.dumps({"imports": "ok"}), flush=True)
from rewardlang.cli import main
out = {}
for key, args in %(commands)r:
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    sys.stdout.flush(); sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    os.dup2(files[0].fileno(), 1); os.dup2(files[1].fileno(), 2)
    sys.argv = ["rewardlang", *args]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(saved[0], 1); os.dup2(saved[1], 2)
    for fd in saved:
        os.close(fd)
    got = []
    for f in files:
        f.seek(0)
        got.append(f.read().decode(errors="replace"))
    out[key] = {"returncode": code, "stdout": got[0], "stderr": got[1]}
print(json.dumps(out))
"""

SPEC = "specs/quality_grpo.reward"
NEEDS_STACK = (("train", "--spec", "specs/quality_grpo.reward"), ("eval", "--model", "tiny"), ("plot", "x"),
               ("explain", "specs/dense_ppo.reward", "-i", "examples/code_samples.jsonl", "--tokens"))


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The imports and every command of the tests below, in one process without the training stack."""
    out = tmp_path_factory.mktemp("lean") / "scored.jsonl"
    commands = [("check", ["check", SPEC]),
                ("score", ["score", SPEC, "-i", "examples/code_samples.jsonl", "-o", str(out), "--no-summary"]),
                ("explain", ["explain", SPEC, "-i", "examples/code_samples.jsonl", "--row", "0"]),
                *((" ".join(a), list(a)) for a in NEEDS_STACK)]
    r = _run(DRIVER % {"imports": IMPORTS, "commands": commands})
    assert r.returncode == 0, r.stderr
    first, rest = r.stdout.strip().splitlines()[-2:]
    return {**json.loads(first), **json.loads(rest), "scored": out}


def test_imports_need_no_training_stack(lean: dict) -> None:
    assert lean["imports"] == "ok"


def test_check_score_explain_without_the_stack(lean: dict) -> None:
    assert lean["check"]["returncode"] == 0, lean["check"]
    r = lean["score"]
    assert r["returncode"] == 0, r["stderr"]
    rows = [json.loads(x) for x in lean["scored"].read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["reward"] == 0.9746877660183311
    r = lean["explain"]
    assert r["returncode"] == 0 and "correct" in r["stdout"], r["stderr"]


def test_commands_that_need_the_stack_name_the_extra(lean: dict) -> None:
    for args in NEEDS_STACK:
        r = lean[" ".join(args)]
        assert r["returncode"] == 1, (args, r["stderr"])
        assert 'pip install "rewardlang[train]"' in r["stderr"] and "Traceback" not in r["stderr"], (args, r["stderr"])
        assert "missing: torch, transformers, trl, accelerate, peft, matplotlib, gguf" in r["stderr"]


def test_commands_that_need_no_model_import_no_torch(tmp_path: Path) -> None:
    # With the training stack installed (nothing blocked): `import rewardlang` and every command that needs no
    # model, run one after another in one process, leave torch & co. out of sys.modules (an optional import behind
    # `try: import torch` would pass the test above but fail here).
    out = tmp_path / "o"
    commands = [["--help"], ["check", "specs/quality_grpo.reward"], ["fmt", "--check", "specs/codepo.reward"],
                ["compile", "specs/codepo_text.reward", "-o", f"{out}.py"], ["functions"],
                ["score", "specs/codepo_text.reward", "-i", "examples/completions.jsonl", "-o", f"{out}.jsonl"],
                ["explain", "specs/codepo_text.reward", "-i", "examples/completions.jsonl", "--row", "1"],
                ["report", "specs/codepo_text.reward", "-i", "examples/completions.jsonl", "--format", "json",
                 "-o", f"{out}.json"],
                ["audit", "specs/quality_grpo.reward", "-i", "examples/audit_rollouts.jsonl", "--no-probes",
                 "-o", f"{out}-audit.json"],
                ["train", "--help"], ["eval", "--help"], ["plot", "--help"]]
    code = (
        "import sys\nimport rewardlang\nfrom rewardlang.cli import main\n"
        "from rewardlang.integrations.server import make_app\n"
        "make_app('specs/codepo_text.reward')\n"
        f"for args in {commands!r}:\n"
        "    sys.argv = ['rewardlang', *args]\n"
        "    try:\n        main()\n    except SystemExit as e:\n"
        "        print(args[0], 'exit', e.code, file=sys.stderr)\n"
        f"print(sorted(m for m in {STACK!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT,
                       check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    exits = [line.split() for line in r.stderr.splitlines() if " exit " in line]
    # every command ran to its end (audit's exit 1 is its alarm, fmt --check's a file it would reformat: not failures)
    assert [e[0] for e in exits] == [c[0] for c in commands], r.stderr
    assert all(e[2] in ("0", "None") for e in exits if e[0] not in ("audit", "fmt")), exits
    assert out.with_suffix(".jsonl").stat().st_size > 0 and out.with_suffix(".json").stat().st_size > 0
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-2000:]
