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



class _EchoModel:
    """Completes each prompt with its own last token, repeated: which completion belongs to which prompt shows."""

    training = False
    device = torch.device("cpu")

    def eval(self) -> None: ...

    def train(self, mode: bool = True) -> None: ...

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int,
                 num_return_sequences: int = 1, **_: object) -> torch.Tensor:
        last = input_ids[:, -1:].repeat(1, max_new_tokens)
        self.batches.append(input_ids.shape[0])
        return torch.cat([input_ids, last], dim=1).repeat_interleave(num_return_sequences, dim=0)

    batches: list[int] = []


def test_generate_batches_by_prompt_length_and_keeps_the_problems_order() -> None:
    """Held-out generation sends prompts shortest first (less padding, larger batches); each problem still gets
    its own completion back, in the problems' order, and progress counts problems done."""
    from rewardlang.trainers.evaluate import generate

    tok = build_tokenizer(512)
    tok.chat_template = None   # prompts shown plain: each ends with its own letter
    model = _EchoModel()
    model.batches = []
    problems = [{"prompt": "def f" + "x" * k + "(a): " + "abcde"[i]} for i, k in enumerate((9, 1, 5, 3, 7))]
    seen: list[int] = []
    out = generate(model, tok, problems, max_new_tokens=2, batch_size=2, on_problem=seen.append)  # type: ignore[arg-type]
    assert [c[0] for c in out] == [" a a", " b b", " c c", " d d", " e e"]
    assert model.batches == [2, 2, 1] and seen == [0, 1, 2, 3, 4]
    assert generate(model, tok, problems[::-1], max_new_tokens=2, batch_size=2) == out[::-1]  # type: ignore[arg-type]
    two = generate(model, tok, problems, n=2, temperature=0.5, max_new_tokens=1, batch_size=4)  # type: ignore[arg-type]
    assert two == [[" " + ch, " " + ch] for ch in "abcde"]


def test_generate_computes_the_shared_prefix_once_with_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompts that start with the same system prompt and worked example: the prefix's keys and values are computed
    once and every batch continues from a copy (padding after the prefix, hidden by the mask). Each row's logits at
    every generated step are those of plain left-padded batches (to float rounding), and so are the greedy answers,
    in batches of different prompt lengths."""
    from rewardlang.trainers import prefix as shared
    from rewardlang.trainers.data import render_prompt
    from rewardlang.trainers.evaluate import generate
    from rewardlang.trainers.prefix import continue_prefix, shared_prefix

    tok = build_tokenizer(512)
    tok.chat_template = None   # plain prompts: the random model's answers then depend on each prompt
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=64, num_hidden_layers=2), seed=3).eval()
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa"]
    problems = [{"prompt": "def f" + str(i) + "(a):\n    " + "return a + 1  # " * (1 + i % 4) + w}
                for i, w in enumerate(words)]
    system, few = "Answer with the whole function in one code block.", ["def one():", "def one():\n    return 1\n"]
    ids = [tok(render_prompt(p["prompt"], tok, False, system, None, few), add_special_tokens=False)["input_ids"]
           for p in problems]
    prefix = shared_prefix(ids)
    assert prefix >= shared.MIN_SHARED_PREFIX   # the fast path is the one tested
    assert len({len(x) for x in ids}) > 1          # rows of different lengths: padding between prefix and prompt

    gen = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=None,
               output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([ids[0][:prefix]]), use_cache=True).cache
        enc, batch_cache = continue_prefix(ids, prefix, cache, tok.pad_token_id, model.device)
        fast = model.generate(**enc, cache=batch_cache, **gen)
        texts = [render_prompt(p["prompt"], tok, False, system, None, few) for p in problems]
        plain_enc = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        plain = model.generate(**plain_enc, **gen)
    for a, b in zip(fast.scores, plain.scores, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert torch.equal(fast.sequences[:, enc["input_ids"].shape[1]:], plain.sequences[:, plain_enc["input_ids"].shape[1]:])
    # the rows' own tokens computed 2 rows at a time (sorted by length, as generate gives them), the groups' caches
    # widened to the batch and stacked: every step's logits are the plain batch's
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    monkeypatch.setattr(shared, "PREFILL_GROUP", 2)
    with torch.no_grad():
        genc, gcache = shared.prefill_rows(model, [ids[i] for i in order], prefix, cache, tok.pad_token_id, model.device)
        assert gcache.get_seq_length() == genc["input_ids"].shape[1] - 1   # only the last column is left to generate
        grouped_out = model.generate(**genc, cache=gcache, **gen)
    for a, b in zip(grouped_out.scores, plain.scores, strict=True):
        torch.testing.assert_close(a, b[order], rtol=1e-4, atol=1e-4)

    kw = dict(max_new_tokens=6, batch_size=3, system_prompt=system, few_shot=few)
    once = generate(model, tok, problems, **kw)  # type: ignore[arg-type]
    # one batch of all 7 rows whose own tokens are computed 2 rows at a time (groups of different widths, their
    # caches widened and stacked): the same answers
    monkeypatch.setattr(shared, "PREFILL_GROUP", 2)
    grouped = generate(model, tok, problems, **{**kw, "batch_size": 7})  # type: ignore[arg-type]
    monkeypatch.setattr(shared, "MIN_SHARED_PREFIX", 10**9)
    per_row = generate(model, tok, problems, **kw)  # type: ignore[arg-type]
    assert once == per_row and grouped == per_row
    # rows' logits differ from each other, so rows mixed up between prompts would have failed the comparison above
    assert not torch.allclose(plain.scores[0][0], plain.scores[0][1])
