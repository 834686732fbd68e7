"""`pip install rewardlang` (this checkout, no extras) into a clean virtualenv (no system site-packages): the
training stack is absent, and check, score and explain run on every shipped spec that needs no model; the one that
needs a model (a PRM checkpoint) is refused with E603 naming the extra. The venv is kept in
$REWARDLANG_CORE_VENV (scripts/test-integrations.sh) so pip's wheel cache makes reruns quick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NEEDS_MODEL = {"prlcoder.reward"}  # prm_score: a trained PRM checkpoint (docs/prm.md)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = Path(os.environ.get("REWARDLANG_CORE_VENV") or tmp_path_factory.mktemp("core") / "venv")
    if not (d / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(d)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(d / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--force-reinstall",
                    "--no-deps", str(ROOT)], check=True, env=env)
    subprocess.run([str(d / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(ROOT)], check=True,
                   env=env)
    return d


def _run(venv: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(venv / "bin" / "rewardlang"), *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env, check=False)


def test_core_venv_has_no_training_stack(venv: Path) -> None:
    code = ("import importlib.util as u; print([m for m in ('torch','transformers','trl','accelerate','peft') "
            "if u.find_spec(m)])")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code],
                       capture_output=True, text=True, check=True, cwd="/")
    assert r.stdout.strip() == "[]"


def test_every_spec_without_a_model_runs(venv: Path, tmp_path: Path) -> None:
    samples = ROOT / "examples" / "code_samples.jsonl"
    robot = tmp_path / "robot.jsonl"
    assert _run(venv, "data", "robot", "-o", str(robot)).returncode == 0
    rows = [json.loads(x) for x in robot.read_text().splitlines()]
    with open(robot, "w") as f:
        f.writelines(json.dumps({**r, "completion": f"```python\n{r['canonical']}\n```"}) + "\n" for r in rows[:8])
    constructs = tmp_path / "constructs.jsonl"  # the columns constructs.reward reads besides the sample file's
    with open(constructs, "w") as f:
        for line in samples.read_text().splitlines():
            r = json.loads(line)
            f.write(json.dumps({**r, "task_id": r["prompt_id"], "verified": True, "difficulty": 1}) + "\n")
    translate = tmp_path / "translate.jsonl"  # oorl.reward: translation problems (language, tests, entry_point)
    assert _run(venv, "data", "translate", "--target", "cpp", "--split", "heldout", "-o", str(translate)).returncode == 0
    rows = [json.loads(x) for x in translate.read_text().splitlines()][:4]
    with open(translate, "w") as f:  # the declarations alone: they compile, and no test passes
        f.writelines(json.dumps({**r, "completion": f"```cpp\n{r['declaration']}\n```"}) + "\n" for r in rows)
    specs = sorted(p.name for p in (ROOT / "specs").glob("*.reward"))
    assert len(specs) >= 11
    for name in specs:
        spec = f"specs/{name}"
        data = (robot if "robot" in name else constructs if name == "constructs.reward"
                else translate if name == "oorl.reward" else samples)
        extra: list[str] = []
        assert _run(venv, "check", spec).returncode == 0, name
        r = _run(venv, "score", spec, "-i", str(data), "-o", str(tmp_path / f"{name}.jsonl"), *extra)
        if name in NEEDS_MODEL:
            assert r.returncode == 1 and "E603" in r.stderr and 'pip install "rewardlang[train]"' in r.stderr, r.stderr
            continue
        assert r.returncode == 0, (name, r.stderr)
        out = [json.loads(x) for x in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert len(out) == len(data.read_text().splitlines()) and all("components" in o for o in out)
        r = _run(venv, "explain", spec, "-i", str(data), "--row", "0", *extra)
        assert r.returncode == 0, (name, r.stderr)
    r = _run(venv, "train", "--spec", "specs/quality_grpo.reward")
    assert r.returncode == 1 and 'pip install "rewardlang[train]"' in r.stderr
