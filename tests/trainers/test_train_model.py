"""The tiny local policy: an offline tokenizer with a chat template, a seeded model, LoRA."""

from __future__ import annotations

import pytest
import torch

from rewardlang.trainers.config import ConfigError, TinyModelConfig, TrainConfig
from rewardlang.trainers.model import build_tiny_model, build_tokenizer, load_policy, lora_config


def test_tokenizer_round_trips_any_text_and_is_deterministic() -> None:
    tok = build_tokenizer(512)
    assert len(tok) == 512
    for text in ["def add(a, b):\n    return a + b\n", "naïve → ünïcödé ✓ 漢字", "<reasoning>x</reasoning>"]:
        assert tok.decode(tok(text)["input_ids"]) == text
    again = build_tokenizer(512)
    assert again.get_vocab() == tok.get_vocab()
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>" and tok.padding_side == "left"


def test_chat_template() -> None:
    tok = build_tokenizer(300)
    chat = [{"role": "user", "content": "Write f."}, {"role": "assistant", "content": "def f(): pass"}]
    assert tok.apply_chat_template(chat, tokenize=False) == "<|user|>Write f.\n<|assistant|>def f(): pass<|endoftext|>"
    prompt = tok.apply_chat_template(chat[:1], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|user|>Write f.\n<|assistant|>"


def test_vocab_too_small_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="vocab_size must be at least 261"):
        build_tokenizer(100)


def test_tiny_model_is_seeded_and_leaves_global_rng_alone() -> None:
    tok = build_tokenizer(300)
    cfg = TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_tiny_model(tok, cfg, seed=1)
    assert torch.equal(torch.rand(1), before)  # building the model did not consume the global generator
    b = build_tiny_model(tok, cfg, seed=1)
    c = build_tiny_model(tok, cfg, seed=2)
    w = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(a.state_dict()[w], b.state_dict()[w])
    assert not torch.equal(a.state_dict()[w], c.state_dict()[w])
    assert a.config.vocab_size == 300 and a.config.num_hidden_layers == 1
    ids = tok("def f(x):", return_tensors="pt")["input_ids"]
    out = a.generate(ids, max_new_tokens=5, do_sample=False)
    n = ids.shape[1]
    assert n < out.shape[1] <= n + 5 and torch.equal(out[0, :n], ids[0])


def test_load_policy_defaults_to_tiny_model() -> None:
    model, tok = load_policy(TrainConfig())
    assert model.dtype == torch.float32  # CPU: no mixed precision
    assert model.config.hidden_size == 64 and len(tok) == 512


def test_missing_model_path_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no download is attempted"):
        load_policy(TrainConfig(model=str(tmp_path / "no-such-model")))


def test_local_model_directory_loads(tmp_path) -> None:
    model, tok = load_policy(TrainConfig(tiny_model=TinyModelConfig(hidden_size=32, num_hidden_layers=1)))
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    loaded, loaded_tok = load_policy(TrainConfig(model=str(tmp_path / "m")))
    assert loaded_tok.get_vocab() == tok.get_vocab()
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k


def test_lora_config_applies() -> None:
    from peft import get_peft_model

    assert lora_config(TrainConfig()) is None
    lc = lora_config(TrainConfig(lora=True, lora_r=4, lora_alpha=8))
    assert (lc.r, lc.lora_alpha) == (4, 8)
    model, _ = load_policy(TrainConfig())
    peft_model = get_peft_model(model, lc)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in peft_model.parameters())
    assert 0 < trainable < total / 4
