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

ROOT = Path(__file__).resolve().parents[1]
STACK = ("torch", "transformers", "trl", "accelerate", "peft", "matplotlib", "gguf")
# each package is made unimportable (a None entry in sys.modules: import raises, find_spec says missing)
PRELUDE = f"import sys\nfor m in {STACK!r}:\n    sys.modules[m] = None\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return _run(f"sys.argv = ['rewardlang', *{list(args)!r}]\nfrom rewardlang.cli import main\nmain()")


def test_imports_need_no_training_stack() -> None:
    r = _run("import rewardlang, rewardlang.cli, rewardlang.runtime.program, rewardlang.integrations.verl, "
             "rewardlang.integrations.openrlhf, rewardlang.integrations.server, rewardlang.integrations.ray_score\n"
             "print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_check_score_explain_without_the_stack(tmp_path: Path) -> None:
    spec = "specs/quality_grpo.reward"
    assert _cli("check", spec).returncode == 0
    out = tmp_path / "scored.jsonl"
    r = _cli("score", spec, "-i", "examples/code_samples.jsonl", "-o", str(out), "--no-summary")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["reward"] == 0.9746877660183311
    r = _cli("explain", spec, "-i", "examples/code_samples.jsonl", "--row", "0")
    assert r.returncode == 0 and "correct" in r.stdout, r.stderr


def test_commands_that_need_the_stack_name_the_extra() -> None:
    for args in (["train", "--spec", "specs/quality_grpo.reward"], ["eval", "--model", "tiny"], ["plot", "x"],
                 ["explain", "specs/dense_ppo.reward", "-i", "examples/code_samples.jsonl", "--tokens"]):
        r = _cli(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert 'pip install "rewardlang[train]"' in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert "missing: torch, transformers, trl, accelerate, peft, matplotlib, gguf" in r.stderr


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
