"""Issue 25 majors 3, 5 and 6: one prompt format (text, or a chat of {"role", "content"} messages) accepted by every
trainer, and anything else in a dataset or a preference file named by file:line, field and expected type before
any model loads and before a run directory is made."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.trainers.cli import app
from rewardlang.trainers.data import DataError
from rewardlang.trainers.run import train

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pref_toy import SPEC, write_data

HERE = os.path.dirname(os.path.abspath(__file__))
TOY = os.path.join(HERE, "toy_digits.reward")
DENSE = os.path.join(HERE, "toy_dense.reward")


def _jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


PAIR = {"prompt": "Task 1\n", "chosen": "return x", "rejected": "pass"}
GROUP = {"prompt": "Task 1\n", "winners": ["return x"], "losers": ["pass"]}
BAD_PAIRS = [
    ({"rejected": 5}, r"`rejected` must be text \(a completion\), got a number 5"),
    ({"chosen": ["return x"]}, r'`chosen` must be text \(a completion\), got a list \["return x"\]'),
    ({"prompt": 7}, r'`prompt`: expected text or a chat \(a list of \{"role", "content"\} messages\), got a number 7'),
    ({"prompt": [{"role": "user"}]}, r"`prompt`: message 1 of the chat is not a"),
]
BAD_GROUPS = [
    ({"winners": "abc"}, r'`winners` must be a list of texts \(completions\), got text "abc"'),
    ({"winners": [1]}, r"`winners` must be a list of texts \(completions\), got an item a number 1"),
    ({"losers": None}, r"`losers` must be a list of texts \(completions\), got null"),
    ({"prompt": 7}, r"`prompt`: expected text or a chat"),
]


@pytest.mark.parametrize(("algo", "bad", "message"),
                         [("dpo", b, m) for b, m in BAD_PAIRS] + [("gepo", b, m) for b, m in BAD_GROUPS]
                         + [("oorl", b, m) for b, m in BAD_GROUPS[:2]])
def test_a_preference_file_with_wrong_types_is_named_before_anything_is_made(tmp_path: Path, algo: str, bad: dict,
                                                                              message: str) -> None:
    spec = tmp_path / "pref.reward"
    spec.write_text(SPEC)
    good = PAIR if algo == "dpo" else GROUP
    data = _jsonl(tmp_path / "prefs.jsonl", [good, good, {**good, **bad}, good])
    out = tmp_path / "run"
    with pytest.raises(DataError, match=rf"^preference data {data}:3: {message}"):
        train(str(spec), sets={"train.algorithm": algo, "train.preference_data": data},
              flags={"output_dir": str(out)}, progress=False)
    assert not out.exists()  # nothing made: no half-made run directory


@pytest.mark.parametrize("algo", ["grpo", "ppo", "gepo", "dpo"])
@pytest.mark.parametrize(("prompt", "message"), [
    (5, "got a number 5"), (["a", "b"], ('message 1 of the chat is not a {"role": text, "content": text} object '
                                          '(got text "a")')), ([], "got an empty chat")])
def test_a_dataset_prompt_that_is_neither_text_nor_a_chat_is_named_before_the_model(tmp_path: Path, algo: str,
                                                                                    prompt: object,
                                                                                    message: str) -> None:
    spec = tmp_path / "pref.reward"
    spec.write_text(SPEC)
    data = _jsonl(tmp_path / "d.jsonl", [{"prompt": "Task 0"}, {"prompt": prompt}])
    out = tmp_path / "run"
    with pytest.raises(DataError) as err:
        train(str(spec), sets={"train.algorithm": algo}, flags={"output_dir": str(out), "dataset": data},
              progress=False)
    assert str(err.value) == f"dataset {data}:2: `prompt`: " + (
        message if message.startswith("message") else
        'expected text or a chat (a list of {"role", "content"} messages), ' + message)
    assert not (out / "initial_model").exists()
    as_json = tmp_path / "d.json"  # a .json list is located by its row
    as_json.write_text(json.dumps([{"prompt": "Task 0"}, {"prompt": prompt}]))
    with pytest.raises(DataError, match=rf"^dataset {as_json}:row 2: `prompt`: "):
        train(str(spec), sets={"train.algorithm": algo}, flags={"output_dir": str(out), "dataset": str(as_json)},
              progress=False)


def test_the_cli_says_it_plainly(tmp_path: Path) -> None:
    spec = tmp_path / "pref.reward"
    spec.write_text(SPEC)
    data = _jsonl(tmp_path / "prefs.jsonl", [PAIR, {**PAIR, "rejected": 5}])
    result = CliRunner().invoke(app, ["train", "--spec", str(spec), "--model", "tiny", "--output",
                                      str(tmp_path / "run"), "--set", "train.algorithm=dpo", "--set",
                                      f"train.preference_data={data}"])
    assert result.exit_code == 1
    assert f"preference data {data}:2: `rejected` must be text" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


def _chat(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer with code."}, {"role": "user", "content": prompt}]


@pytest.fixture()
def chat_data(tmp_path: Path) -> dict[str, Path]:
    """The toy preference data with every prompt a chat, mined by `rewardlang pairs` as a user would."""
    data = write_data(tmp_path, train=range(4), held_out=range(4, 5))
    import rewardlang
    from rewardlang.runtime.preference import mine_file

    raw = [json.loads(line) for line in data["train_raw"].read_text().splitlines()]
    chat_raw = _jsonl(tmp_path / "chat_raw.jsonl", [{**r, "prompt": _chat(r["prompt"])} for r in raw])
    prog = rewardlang.load(str(data["spec"]))
    mine_file(prog, chat_raw, str(tmp_path / "chat_pairs.jsonl"))
    mine_file(prog, chat_raw, str(tmp_path / "chat_groups.jsonl"), groups=True)
    first = json.loads((tmp_path / "chat_pairs.jsonl").read_text().splitlines()[0])
    assert first["prompt"] == _chat("Task 0\n")  # pairs keeps the chat
    return {**data, "chat_pairs": tmp_path / "chat_pairs.jsonl", "chat_groups": tmp_path / "chat_groups.jsonl",
            "chat_prompts": Path(_jsonl(tmp_path / "chat_prompts.jsonl",
                                        [{"prompt": _chat(f"Task {k}\n")} for k in range(4)]))}


@pytest.mark.parametrize(("algo", "source"), [
    ("dpo", "chat_pairs"),
    pytest.param("gepo", "chat_groups", marks=pytest.mark.slow),
    pytest.param("oorl", "chat_groups", marks=pytest.mark.slow),
    pytest.param("gepo", "chat_prompts", marks=pytest.mark.slow),  # online: sampled from chat prompts
])
def test_chat_prompts_from_pairs_train_everywhere(chat_data: dict, tmp_path: Path, algo: str, source: str) -> None:
    sets: dict[str, object] = {"train.algorithm": algo, "train.max_steps": 2, "train.prompts_per_step": 2,
                               "train.save_steps": 2, "train.max_completion_length": 8}
    flags: dict[str, object] = {"output_dir": str(tmp_path / "run"), "seed": 0}
    if source == "chat_prompts":
        flags["dataset"] = str(chat_data[source])
    else:
        sets["train.preference_data"] = str(chat_data[source])
        if algo == "oorl":
            flags["dataset"] = str(chat_data["chat_prompts"])
    res = train(str(chat_data["spec"]), sets=sets, flags=flags, progress=False)
    assert res.global_step == 2
    losses = [json.loads(line).get("loss") for line in Path(res.metrics_path).read_text().splitlines()]
    assert any(isinstance(v, (int, float)) for v in losses)


@pytest.mark.slow  # the resume of a preference run: test_resume_faults covers resuming in the default run
@pytest.mark.parametrize("algo", ["dpo", "gepo"])
def test_a_resumed_preference_run_reports_no_missing_tied_key(chat_data: dict, tmp_path: Path, algo: str) -> None:
    """Resuming DPO/GEPO printed "missing keys ['lm_head.weight']" (the tied alias); docs/training.md says it does
    not happen: every Trainer-based trainer restores the alias by tying."""
    import subprocess

    base = [sys.executable, "-m", "rewardlang.trainers.cli", "train", "--spec", str(chat_data["spec"]), "--model",
            "tiny", "--output", str(tmp_path / "run"), "--no-progress", "--set", f"train.algorithm={algo}",
            "--set", "train.save_steps=1", "--set", "train.prompts_per_step=2", "--set",
            f"train.preference_data={chat_data['train_pairs' if algo == 'dpo' else 'train_groups']}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    first = subprocess.run([*base, "--max-steps", "1"], env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr[-2000:]
    again = subprocess.run([*base, "--max-steps", "2", "--resume"], env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 steps" in again.stdout
    assert "missing" not in (again.stdout + again.stderr).lower(), again.stderr[-2000:]
