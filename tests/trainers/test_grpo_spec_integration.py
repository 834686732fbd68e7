"""The spec meets the trainer: dataset columns, error messages, masking, spans, the full CLI run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import rewardlang
from rewardlang.trainers.data import DataError, build_dataset, check_columns, load_rows
from rewardlang.trainers.grpo import SpecRewardSet, token_char_ends, train
from rewardlang.trainers.metrics import RewardClock, read_metrics
from rewardlang.trainers.model import build_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODEPO = os.path.join(ROOT, "specs", "codepo_text.reward")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

READS_TARGET = '''spec reads_target "rewards completions that contain the row's target"
input completion: text
input target: text from "answer"
input hint: text?
component hit in [0, 1] = 1 if contains(completion, target) else 0
component hinted in [0, 1] = 0 if hint == none else 1
'''


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardlang", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT)


# ---------------------------------------------------------------- dataset columns


def test_missing_column_names_column_input_file_and_available(tmp_path) -> None:
    prog = rewardlang.loads(READS_TARGET)
    data = _jsonl(tmp_path / "d.jsonl", [{"prompt": "p", "target": "x"}])
    rows, source = load_rows(data)
    with pytest.raises(DataError) as err:
        check_columns(prog, rows, source)
    msg = str(err.value)
    assert f"dataset {data}" in msg and "input `target: text` reads column `answer`" in msg
    assert "Available columns: prompt, target" in msg and "reads_target" in msg


def test_partially_missing_and_null_columns(tmp_path) -> None:
    prog = rewardlang.loads(READS_TARGET)
    rows = [{"prompt": "p", "answer": "x"}, {"prompt": "q"}]
    with pytest.raises(DataError, match=r"is missing from 1 of 2 rows \(first: row 2\)"):
        check_columns(prog, rows, "dataset d.jsonl")
    with pytest.raises(DataError, match=r"is not nullable, but column `answer` is null in 1 rows \(first: row 1\)"):
        check_columns(prog, [{"prompt": "p", "answer": None}], "dataset d.jsonl")
    with pytest.raises(DataError, match="has no `prompt` column"):
        check_columns(prog, [{"question": "p", "answer": "x"}], "dataset d.jsonl")
    with pytest.raises(DataError, match="column `completions` clashes"):
        check_columns(prog, [{"prompt": "p", "answer": "x", "completions": 1}], "dataset d.jsonl")


def test_dataset_formats_and_errors(tmp_path) -> None:
    good = tmp_path / "d.json"
    good.write_text(json.dumps([{"prompt": "p", "answer": "a"}]))
    assert load_rows(str(good))[0] == [{"prompt": "p", "answer": "a"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p"}\n{"prompt": \n')
    with pytest.raises(DataError, match=r"dataset .*bad.jsonl:2: invalid JSON"):
        load_rows(str(bad))
    bad.write_text('{"prompt": "p"}\n[1]\n')  # a line that is no object is named too
    with pytest.raises(DataError, match=r"bad.jsonl:2: expected a JSON object, got array"):
        load_rows(str(bad))
    (tmp_path / "x.csv").write_text("prompt\np\n")
    with pytest.raises(DataError, match="unsupported format"):
        load_rows(str(tmp_path / "x.csv"))
    with pytest.raises(DataError, match="file not found"):
        load_rows(str(tmp_path / "none.jsonl"))


def test_columns_reach_the_reward_under_their_spec_names(tmp_path) -> None:
    """Build the dataset as the trainer does, then call the reward functions the way TRL does (column kwargs)."""
    prog = rewardlang.loads(READS_TARGET)
    rows = [{"prompt": "p1", "answer": "foo", "other": 1}, {"prompt": "p2", "answer": "bar", "hint": "h"}]
    columns = check_columns(prog, rows, "rows")
    assert columns == ["prompt", "answer", "hint"]  # the nullable `hint` may be absent from a row
    ds, summary = build_dataset(rows, columns, build_tokenizer(300))
    assert summary == {"rows": 2, "available_rows": 2, "dropped_long_prompts": 0, "format": "chat", "columns": columns}
    assert ds[0]["prompt"] == [{"role": "user", "content": "p1"}] and ds[1]["hint"] == "h" and ds[0]["hint"] is None
    rewards = SpecRewardSet(prog, RewardClock())
    kwargs = {k: [r[k] for r in ds] for k in ds.column_names if k != "prompt"}
    completions = [[{"role": "assistant", "content": "has foo"}], [{"role": "assistant", "content": "has foo too"}]]
    got = rewards.functions[0](prompts=[r["prompt"] for r in ds], completions=completions, completion_ids=[[], []],
                               trainer_state=None, **kwargs)
    assert got == [1.0, 0.0]  # row 2's target is "bar"
    hinted = rewards.functions[1](prompts=[r["prompt"] for r in ds], completions=completions, completion_ids=[[], []],
                                  trainer_state=None, **kwargs)
    assert hinted == [0.0, 1.0]


def test_long_prompts_are_dropped_not_truncated() -> None:
    tok = build_tokenizer(300)
    rows = [{"prompt": "short"}, {"prompt": "a much longer prompt " * 20}]
    ds, summary = build_dataset(rows, ["prompt"], tok, prompt_format="text", max_prompt_length=20)
    assert ds["prompt"] == ["short"] and summary["dropped_long_prompts"] == 1


# ---------------------------------------------------------------- the CLI's error paths


@pytest.mark.slow
def test_cli_errors_are_one_clean_message(tmp_path) -> None:
    bad_spec = tmp_path / "bad.reward"
    bad_spec.write_text("spec bad\ninput completion: text\ncomponent c in [0, 1] = nope(completion)\n")
    r = _cli("train", "--spec", str(bad_spec))
    assert r.returncode == 1 and f"{bad_spec}:3" in r.stderr and "Traceback" not in r.stderr

    spec = tmp_path / "t.reward"
    spec.write_text(READS_TARGET)
    data = _jsonl(tmp_path / "d.jsonl", [{"prompt": "p", "target": "x"}])
    r = _cli("train", "--spec", str(spec), "--dataset", data, "--output", str(tmp_path / "run"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "reads column `answer`" in r.stderr and "Available columns: prompt, target" in r.stderr
    assert not os.path.exists(tmp_path / "run" / "checkpoint-1")  # failed before training

    small = _jsonl(tmp_path / "small.jsonl", [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}])
    r = _cli("train", "--spec", CODEPO, "--dataset", small, "--set", "train.prompts_per_step=4")
    assert r.returncode == 1 and "3 prompts, but each step needs 4" in r.stderr

    r = _cli("train", "--spec", CODEPO, "--set", "train.num_generation=3")
    assert r.returncode == 1 and "unknown train setting `num_generation`" in r.stderr
    assert "`num_generations`" in r.stderr
    cfg = tmp_path / "c.yaml"
    cfg.write_text("batch_size: 7\n")
    r = _cli("train", "--spec", CODEPO, "--config", str(cfg))
    assert r.returncode == 1 and "must be a multiple of `num_generations` (4, spec train section)" in r.stderr


# ---------------------------------------------------------------- masking and spans inside training

MASKING = '''spec masking "long completions break the declared range and are masked"
input completion: text
input prompt: text
component short in [0, 1] = len(completion) / 30
component digits in [0, 1] = count(completion, /[0-9]/) / max(len(completion), 1)
'''

SPANS = '''spec spans "digits are penalised where they occur"
input completion: text
input prompt: text
component nodigit in [0, 1] = 1 - min(count(completion, /[0-9]/), 1) spans matches(completion, /[0-9]/, value=-0.5)
component lengthy in [0, 1] = 1 if len(completion) > 20 else 0
advantage over group(prompt) = (reward - mean) / (std(ddof=1) + 1e-4)
'''


def _train_inline(tmp_path, source: str, **sets) -> object:
    spec = tmp_path / "s.reward"
    spec.write_text(source)
    data = _jsonl(tmp_path / "d.jsonl", [{"prompt": f"Task {i}"} for i in range(8)])
    base = {"train.max_steps": 2, "train.max_completion_length": 12, "train.prompts_per_step": 4}
    return train(str(spec), sets={**base, **sets}, flags={"dataset": data, "output_dir": str(tmp_path / "run")},
                 progress=False)


@pytest.mark.slow
def test_masked_samples_are_counted_and_get_no_advantage(tmp_path) -> None:
    result = _train_inline(tmp_path, MASKING)
    batch = result.trainer.last_batch
    total, comps, adv = batch["total"], batch["rewards_per_func"], batch["advantages"]
    masked = np.isnan(total)
    assert 0 < masked.sum() < len(total), total  # some completions run past 30 characters, some do not
    assert np.array_equal(masked, np.isnan(comps[:, 0]))  # masked exactly where `short` is out of range
    assert not np.isnan(comps[:, 1]).any()  # the other component still has its values (for metrics)
    assert np.all(adv[masked] == 0)
    last = [r for r in read_metrics(result.metrics_path) if "reward" in r][-1]
    assert last["masked/rate"] == pytest.approx(masked.mean())
    assert last["masked/count"] == masked.sum()
    assert last["masked/short"] == pytest.approx(masked.mean()) and last["masked/digits"] == 0
    # TRL's group baseline excluded the masked completions instead of scoring them 0
    checked = 0
    for g in np.unique(batch["groups"]):
        rows = (batch["groups"] == g) & ~masked
        if rows.sum() >= 2:
            r = total[rows]
            np.testing.assert_allclose(adv[rows], (r - r.mean()) / (r.std(ddof=1) + 1e-4), atol=1e-5)
            checked += 1
    assert checked > 0


@pytest.mark.slow
def test_spans_become_per_token_advantages_in_the_loss(tmp_path) -> None:
    result = _train_inline(tmp_path, SPANS, **{"train.max_steps": 1, "train.seed": 1})
    trainer = result.trainer
    inputs = trainer._buffered_inputs[0]
    adv, ids, mask = inputs["advantages"], inputs["completion_ids"], inputs["completion_mask"]
    assert adv.dim() == 2 and adv.shape == ids.shape
    tok = trainer.processing_class
    seq_advs, with_digits = [], 0
    for row in range(ids.shape[0]):
        toks = ids[row][mask[row].bool()].tolist()
        text = tok.decode(toks, skip_special_tokens=True)
        ends = token_char_ends(tok, toks)
        starts = [0, *ends[:-1]]
        digit_count = [sum(c.isdigit() for c in text[a:b]) for a, b in zip(starts, ends)]
        base = [float(adv[row, t]) for t, n in enumerate(digit_count) if n == 0]
        seq = base[0] if base else float(adv[row, 0]) + 0.5 * digit_count[0]
        seq_advs.append(seq)
        for t, n in enumerate(digit_count):
            # one span per digit character, -0.5 each, on every token that overlaps it
            assert float(adv[row, t]) == pytest.approx(seq - 0.5 * n, abs=1e-5), (text, t)
        with_digits += any(digit_count)
        assert torch.all(adv[row][len(toks):] == 0)
    assert with_digits > 0  # some completion had digits, so spans were exercised
    np.testing.assert_allclose(sorted(seq_advs), sorted(trainer.last_batch["advantages"]), atol=1e-5)
    last = [r for r in read_metrics(result.metrics_path) if "reward" in r][-1]
    assert 0 < last["spans/token_share"] < 1


# ---------------------------------------------------------------- the default run, as a user would start it


@pytest.mark.slow
def test_default_codepo_text_run_writes_a_complete_run_directory(tmp_path) -> None:
    out = tmp_path / "run"
    r = _cli("train", "--spec", CODEPO, "--output", str(out), "--max-steps", "20", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"run directory: {out} (20 steps" in r.stdout
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["spec"]["name"] == "codepo_text"
    assert cfg["spec"]["source_hash"] == rewardlang.load(CODEPO).source_hash
    assert cfg["train"]["num_generations"] == 4 and cfg["sources"]["num_generations"] == "spec train section"
    assert cfg["train"]["max_steps"] == 20 and cfg["sources"]["max_steps"] == "command line"
    assert cfg["train"]["max_grad_norm"] == 1.0 and cfg["sources"]["max_grad_norm"] == "spec train section"
    assert cfg["train"]["trl"] == {} and cfg["grpo_args"]["max_grad_norm"] == 1.0 and cfg["grpo_args"]["beta"] == 0.04
    assert {"torch", "trl", "transformers", "rewardlang"} <= set(cfg["versions"])

    records = [x for x in read_metrics(str(out / "metrics.jsonl")) if "reward" in x]
    assert [x["step"] for x in records] == list(range(1, 21))
    keys = {"reward", "reward_std", "rewards/format/mean", "rewards/reason/mean", "rewards/rep/mean", "kl", "loss",
            "frac_reward_zero_std", "masked/rate", "advantages/mean", "advantages/std", "completions/mean_length",
            "time/step", "time/reward", "time/reward_share", "tokens_per_second", "learning_rate"}
    assert keys <= set(records[-1])
    assert all(0 <= x["time/reward_share"] < 1 for x in records)
    assert all(x["masked/rate"] == 0 for x in records)
    for step in (10, 20):
        assert (out / f"checkpoint-{step}" / "trainer_state.json").exists()
        assert (out / f"checkpoint-{step}" / "optimizer.pt").exists()
        assert (out / f"checkpoint-{step}" / "rng_state.pth").exists()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out / "final", local_files_only=True)
    tok = AutoTokenizer.from_pretrained(out / "final", local_files_only=True)
    assert model.config.num_hidden_layers == 2 and len(tok) == 512

    r = _cli("plot", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "curves.png").stat().st_size > 10_000


@pytest.mark.slow
def test_lora_run_trains_and_saves_only_the_adapter(tmp_path) -> None:
    toy = os.path.join(ROOT, "tests", "trainers", "toy_digits.reward")
    data = _jsonl(tmp_path / "d.jsonl", [{"prompt": f"Task {i}"} for i in range(8)])
    result = train(toy, sets={"train.max_steps": 3, "train.beta": 0.1, "train.lora_r": 4},
                   flags={"dataset": data, "output_dir": str(tmp_path / "run"), "lora": True}, progress=False)
    final = tmp_path / "run" / "final"
    assert (final / "adapter_config.json").exists() and (final / "adapter_model.safetensors").exists()
    assert not (final / "model.safetensors").exists()
    assert json.loads((final / "adapter_config.json").read_text())["r"] == 4
    from safetensors.torch import load_file

    adapter = load_file(final / "adapter_model.safetensors")
    assert adapter and all("lora_" in k for k in adapter)
    # the LoRA B matrices start at zero; training moved them
    assert any(v.abs().sum() > 0 for k, v in adapter.items() if "lora_B" in k)
    records = [r for r in read_metrics(result.metrics_path) if "reward" in r]
    # beta > 0 with LoRA: the reference is the base model with the adapter disabled
    assert all(r["kl"] is not None and r["kl"] >= 0 for r in records) and records[-1]["kl"] > 0


def test_default_run_directory_is_named_after_the_spec(tmp_path, monkeypatch) -> None:
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.run import run_dir_for as _run_dir

    monkeypatch.chdir(tmp_path)
    name = _run_dir(TrainConfig(), "codepo_text", resume=False)
    assert name.startswith(os.path.join("runs", "codepo_text-")) and len(name) == len("runs/codepo_text-") + 15
    assert _run_dir(TrainConfig(output_dir="x/y"), "codepo_text", resume=False) == "x/y"
