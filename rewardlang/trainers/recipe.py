"""What every algorithm's recipe shares around its loop: the spec and configuration loaded once (:func:`load_layers`),
the run directory, resume checks, the trainer's arguments, the end of a run and its result.

Each algorithm module (``grpo``, ``ppo``, ...) imports these; :mod:`rewardlang.trainers.run` dispatches to the
algorithm a run names and re-exports them, so nothing here imports an algorithm module.

    >>> from rewardlang.trainers.config import TrainConfig
    >>> run_dir_for(TrainConfig(output_dir="runs/x"), "codepo_text", resume=False)
    'runs/x'
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from rewardlang.trainers.audit import AuditGuard
from rewardlang.trainers.config import ALGORITHMS, ConfigError, TrainConfig, load_config_file, save_resolved

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["RunResult", "run_dir_for", "save_initial_policy", "last_checkpoint", "checkpoint_damage", "check_resume",
           "RESUME_MAY_CHANGE", "algorithm_of", "Layers", "load_layers", "model_named", "open_run", "config_name", "trainer_args",
           "load_run_policy", "record_config", "args_record", "finish_run", "missing_after_tying", "TiedResume"]


@dataclass
class RunResult:
    """Where a run wrote its outputs, and how far it got."""

    run_dir: str
    final_dir: str
    metrics_path: str
    global_step: int
    config: TrainConfig
    trainer: Any = field(default=None, repr=False)


def missing_after_tying(model: Any, missing: Sequence[str]) -> list[str]:
    """The missing keys of a loaded checkpoint that are not tied parameters.

    A model with tied weights (``tie_word_embeddings``: ``lm_head.weight`` is the embedding matrix) saves the
    shared tensor once, so loading reports the alias as missing although it is restored by tying. Aliases are
    found by identity of the parameters, whatever the architecture or wrapper (PEFT) names them.

    >>> from rewardlang.trainers.config import TinyModelConfig
    >>> from rewardlang.trainers.model import build_tiny_model, build_tokenizer
    >>> model = build_tiny_model(build_tokenizer(300), TinyModelConfig())
    >>> missing_after_tying(model, ["lm_head.weight", "model.norm.weight"])
    ['model.norm.weight']
    """
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    tied = {n for group in names.values() if len(group) > 1 for n in group}
    return [k for k in missing if k not in tied]


class TiedResume:
    """A ``transformers.Trainer`` mixin: resuming a model with tied weights reports no missing key for the tied
    alias. Every trainer built on ``Trainer`` (GRPO, DPO, GEPO and online DPO, PRM) takes it first in its bases.

    Resuming a tied-embedding model (the tiny model, SmolLM2) reported "missing keys ['lm_head.weight']": the
    checkpoint stores the shared tensor once. Tied aliases are restored by tying; any other missing key is still
    reported."""

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        if not hasattr(load_result, "_replace"):  # not torch's (missing_keys, unexpected_keys) tuple
            return super()._issue_warnings_after_load(load_result)  # type: ignore[misc]
        missing = missing_after_tying(self.model, load_result.missing_keys)  # type: ignore[attr-defined]
        if len(missing) != len(load_result.missing_keys):
            self.model.tie_weights()  # type: ignore[attr-defined]
        return super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))  # type: ignore[misc]


def run_dir_for(cfg: TrainConfig, spec_name: str, resume: bool) -> str:
    """The run directory; the same on every process of a distributed run (the main process picks the name)."""
    if cfg.output_dir:
        return cfg.output_dir
    if resume:
        raise ConfigError("--resume needs --output RUN_DIR (the run to continue)")
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    name = [os.path.join("runs", f"{spec_name}-{time.strftime('%Y%m%d-%H%M%S')}")]
    state = PartialState()
    if state.num_processes > 1:
        broadcast_object_list(name, from_process=0)
    return name[0]


def save_initial_policy(model: Any, tokenizer: Any, path: str) -> None:
    """Write the freshly built tiny policy to ``path`` and point its config there.

    A reference model is built by loading ``model.config._name_or_path`` again; the tiny model exists only in
    memory, so it gets a real path: the run's ``initial_model/`` (also handy to compare with).
    """
    from accelerate import PartialState

    state = PartialState()
    if state.is_main_process and not os.path.exists(os.path.join(path, "config.json")):
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    state.wait_for_everyone()
    model.config._name_or_path = path


def load_run_policy(cfg: TrainConfig, run_dir: str) -> tuple[Any, Any]:
    """The policy and tokenizer of a run: torch's CPU threads set first (``train.torch_threads``; 1 for the tiny model
    on CPU, whose matrices gain nothing from threads), and the tiny model saved as the run's ``initial_model/``
    (:func:`save_initial_policy`)."""
    import torch

    from rewardlang.trainers.model import load_policy, run_policy

    if cfg.torch_threads or (cfg.model is None and not torch.cuda.is_available()):
        torch.set_num_threads(cfg.torch_threads or 1)
    model, tokenizer = load_policy(cfg)
    # the tiny model exists only in memory: saved, so that the reference model (beta > 0) can be loaded; so does
    # another run's policy (`--model RUN_DIR`: a LoRA adapter merged into its base) when a reference is loaded
    # (beta > 0 without LoRA; with LoRA the reference is this model with the adapter disabled)
    if cfg.model is None or (run_policy(cfg.model) is not None and cfg.beta > 0 and not cfg.lora):
        save_initial_policy(model, tokenizer, os.path.join(run_dir, "initial_model"))
    return model, tokenizer


def last_checkpoint(run_dir: str) -> str | None:
    """The newest complete ``checkpoint-N`` of a run (None if there is none).

    ``trainer_state.json`` is written last, so a checkpoint without a readable one was cut off (a killed run) and
    is skipped.
    """
    found = _checkpoints(run_dir)
    return found[-1] if found else None


def _checkpoints(run_dir: str) -> list[str]:
    """The complete ``checkpoint-N`` directories of a run, oldest first (see :func:`last_checkpoint`)."""
    found = []
    for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
        step = name.removeprefix("checkpoint-")
        state = os.path.join(run_dir, name, "trainer_state.json")
        if name.startswith("checkpoint-") and step.isdigit() and os.path.exists(state):
            try:
                with open(state, encoding="utf-8") as fh:
                    json.load(fh)
            except (OSError, ValueError):
                continue
            found.append((int(step), os.path.join(run_dir, name)))
    return [path for _, path in sorted(found)]


def checkpoint_damage(path: str) -> str | None:
    """What is wrong with checkpoint directory ``path`` (None when every file reads whole).

    Read without loading any tensor: a ``.safetensors`` file must be as long as its header says, a torch file
    (``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth``, ``training_args.bin``, accelerate's ``*.bin``/``*.pkl``)
    is a zip archive whose every member's CRC-32 must match, and a ``.json`` file must parse. A cut file (a kill or a
    full disk while the checkpoint was copied) fails one of these; a flipped byte inside a safetensors tensor does
    not (the format has no checksum).

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp(); _ = open(os.path.join(d, "trainer_state.json"), "w").write('{"global_step": 3')
        >>> print(checkpoint_damage(d))
        trainer_state.json is not valid JSON (Expecting ',' delimiter: line 1 column 18 (char 17))
    """
    import struct
    import zipfile

    for root, _, files in sorted(os.walk(path)):
        for name in sorted(files):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            try:
                size = os.path.getsize(full)
                if name.endswith(".safetensors"):
                    with open(full, "rb") as fh:
                        head = fh.read(8)
                        if len(head) < 8:
                            return f"{rel} is cut short ({size} bytes; no header)"
                        (n,) = struct.unpack("<Q", head)
                        if n > size - 8:
                            return f"{rel} is cut short ({size} bytes; its header alone needs {n + 8})"
                        header = json.loads(fh.read(n))
                    end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
                              default=0)
                    if size != 8 + n + end:
                        return f"{rel} is cut short or damaged ({size} bytes; its header says {8 + n + end})"
                elif name.endswith((".pt", ".pth", ".bin", ".pkl")):
                    if not zipfile.is_zipfile(full):
                        return f"{rel} is cut short or damaged (not a readable torch archive, {size} bytes)"
                    with zipfile.ZipFile(full) as zf:
                        bad = zf.testzip()
                    if bad is not None:
                        return f"{rel} is damaged (member {bad} fails its CRC check)"
                elif name.endswith(".json"):
                    with open(full, encoding="utf-8") as fh:
                        json.load(fh)
            except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile, EOFError) as exc:
                kind = "not valid JSON" if name.endswith(".json") else "unreadable"
                return f"{rel} is {kind} ({exc})"
    return None


#: settings that do not change the trajectory of the steps already taken; a resumed run may change them
RESUME_MAY_CHANGE = {"max_steps", "save_steps", "save_total_limit", "logging_steps", "progress", "report_to",
                     "output_dir", "stop_after_masked_steps", "stop_on_alarm"}


def check_resume(run_dir: str, prog: "Program", cfg: TrainConfig) -> str:
    """The checkpoint to resume ``run_dir`` from; ConfigError when the spec or a trajectory setting changed."""
    if not os.path.isdir(run_dir):
        raise ConfigError(f"--resume: run directory {run_dir} does not exist")
    ckpt = last_checkpoint(run_dir)
    if ckpt is None:
        raise ConfigError(f"--resume: no complete checkpoint-* directory in {run_dir} (checkpoints are written "
                          f"every `save_steps` steps)")
    damage = checkpoint_damage(ckpt)
    if damage is not None:
        whole = [c for c in _checkpoints(run_dir) if c != ckpt and checkpoint_damage(c) is None]
        way = (f"the newest whole checkpoint is {whole[-1]}: move the damaged one aside (mv {ckpt} {ckpt}.damaged) "
               f"and run --resume again to continue from there" if whole else
               "no earlier checkpoint is whole: start a fresh run (another --output)")
        raise ConfigError(f"--resume: checkpoint {ckpt} is damaged: {damage}; {way}")
    saved_path = os.path.join(run_dir, "config.json")
    if os.path.exists(saved_path):
        with open(saved_path, encoding="utf-8") as fh:
            saved = json.load(fh)
        if saved.get("spec", {}).get("source_hash") not in (None, prog.source_hash):
            raise ConfigError(f"--resume: the spec changed since {run_dir} was started (source hash "
                              f"{saved['spec']['source_hash'][:12]} then, {prog.source_hash[:12]} now); "
                              f"start a new run")
        then, now = saved.get("train", {}), cfg.to_dict()
        changed = sorted(k for k in now if k not in RESUME_MAY_CHANGE and k in then and then[k] != now[k])
        if changed:
            shown = ", ".join(f"{k} ({then[k]!r} then, {now[k]!r} now)" for k in changed)
            raise ConfigError(f"--resume: settings differ from {saved_path}: {shown}. Resume with the same settings "
                              f"(only {', '.join(sorted(RESUME_MAY_CHANGE))} may change), or start a new run")
    return ckpt


def load_spec(spec: str, config_file: str | None, file_params: Mapping[str, Any], sets: Mapping[str, Any]
              ) -> tuple[Program, dict[str, Any]]:
    """The spec with its parameters: a config file's ``params:``, then ``--set`` items that are not ``train.*``.
    A parameter the spec does not have is named with the layer it came from (the compiler knows only "--set")."""
    import rewardlang
    from rewardlang.diagnostics import SpecError

    cli = {k: v for k, v in sets.items() if not k.startswith("train.")}
    params = {**file_params, **cli}
    try:
        return rewardlang.load(spec, params=params or None), params
    except SpecError as exc:
        for d in exc.diagnostics:
            key = d.message.split(" ", 2)[1].rstrip(":") if d.code == "E602" else None
            if key is not None and key in file_params and key not in cli:
                hint = f" ({d.hint})" if d.hint else ""
                raise ConfigError(f"config file {config_file}: `params:` sets `{key}`, which spec {spec} has no "
                                  f"parameter for{hint}") from None
        raise


@dataclass
class Layers:
    """A run's inputs, read once (:func:`load_layers`) and handed to its algorithm: the compiled spec, the resolved
    configuration and where each setting came from, the spec's parameters, and the algorithm the layers name. It
    unpacks as ``prog, cfg, sources, params``."""

    prog: "Program"
    cfg: TrainConfig
    sources: dict[str, str]
    params: dict[str, Any]
    algorithm: str = "grpo"

    def __iter__(self) -> Iterator[Any]:
        return iter((self.prog, self.cfg, self.sources, self.params))


def model_named(spec_train: Mapping[str, Any], file_train: Mapping[str, Any], sets: Mapping[str, Any]) -> bool:
    """Whether a layer below the command line names the model: the spec's ``train`` section, the config file's
    ``train:`` or ``--set train.model``.

        >>> model_named({}, {"model": "./m"}, {}), model_named({}, {}, {"train.model": "tiny"}), model_named({}, {}, {})
        (True, True, False)
    """
    return "train.model" in sets or "model" in file_train or "model" in spec_train


def load_layers(spec: str, config_file: str | None, sets: Mapping[str, Any] | None,
                flags: Mapping[str, Any] | None, *, default_model: str | None = None,
                require_resources: bool = False) -> Layers:
    """The first steps of every run, done once: the config file read, the spec compiled with its parameters (a
    config file's ``params:`` first, then ``--set`` items that are not ``train.*``), with ``require_resources`` a
    spec whose model is missing refused (E603), then the algorithm and the configuration resolved: defaults < spec
    ``train`` section < config file < ``--set train.*`` < flags. ``default_model`` is the model when no layer names
    one (the command line's default).
    """
    from rewardlang.trainers.config import resolve_config

    file_train, file_params = load_config_file(config_file) if config_file else ({}, {})
    sets = dict(sets or {})
    prog, params = load_spec(spec, config_file, file_params, sets)
    if require_resources:
        # a spec whose model is missing (a PRM checkpoint) is refused before any model loads: it would mask every
        # sample, and the run would "train" on nothing with loss 0
        prog.require_resources()
    train_sets = {k: v for k, v in sets.items() if k.startswith("train.")}
    flags = dict(flags or {})
    if default_model is not None and flags.get("model") is None and not model_named(prog.train, file_train, sets):
        flags["model"] = default_model
    algorithm = algorithm_of(prog.train, file_train, train_sets, flags)
    cfg, sources = resolve_config(prog.train, file_train, train_sets, {**flags, "spec": spec}, file_name=config_file)
    return Layers(prog, cfg, sources, params, algorithm)


#: the files a run writes in its directory (besides checkpoints, ``final/`` and ``initial_model/``)
RUN_FILES = ("config.json", "metrics.jsonl", "README.md", "eval.json", "eval-before.jsonl", "eval-after.jsonl",
             "train-problems.json", "curves.png")


def open_run(prog: "Program", cfg: TrainConfig, resume: bool) -> tuple[str, str | None]:
    """``(run_dir, checkpoint to resume from or None)``; sets ``cfg.output_dir``. A fresh run refuses a directory
    that already holds one (its metrics would be mixed), a resumed one checks that nothing changed."""
    from rewardlang.outputs import OutputError, check_outputs, set_interrupt_note

    run_dir = run_dir_for(cfg, prog.name, resume)
    cfg.output_dir = run_dir
    # the files a run writes in its directory: none of them may be what the run reads (the spec, a file it
    # imports, the dataset), through a symlink or a hard link either
    inputs: dict[str, Any] = {"spec file": [f for f in getattr(prog, "sources", {}) if os.path.isfile(f)]}
    if cfg.dataset and os.path.isfile(cfg.dataset):
        inputs["dataset"] = cfg.dataset
    try:  # before the model loads: a run directory under a file, or on a read-only mount, is said at once
        check_outputs({}, dirs={"--output": run_dir}, inputs=inputs, dir_files={"--output": RUN_FILES})
    except OutputError as exc:
        raise ConfigError(str(exc)) from None
    checkpoint = check_resume(run_dir, prog, cfg) if resume else None
    if not resume and (last_checkpoint(run_dir) or os.path.exists(os.path.join(run_dir, "metrics.jsonl"))):
        raise ConfigError(f"{run_dir} already holds a run; continue it with --resume, or choose another --output")
    set_interrupt_note(lambda: where_to_resume(run_dir))  # said on Ctrl-C, SIGTERM or a full disk
    # every trainer logs through a JsonlMetricsCallback on this file: it stops the run when every sample of
    # `stop_after_masked_steps` consecutive steps is masked (metrics.MaskedRunGuard)
    from rewardlang.trainers.metrics import MaskedRunGuard

    MaskedRunGuard.register(os.path.join(run_dir, "metrics.jsonl"), prog, cfg.stop_after_masked_steps)
    # and the spec's audits: their alarm reads the same records (trainers/audit.py)
    AuditGuard.register(os.path.join(run_dir, "metrics.jsonl"), prog, run_dir, cfg.stop_on_alarm)
    return run_dir, checkpoint


def resume_command(run_dir: str, argv: Sequence[str] | None = None) -> str:
    """The command that continues this run: the command line as given, with ``--output RUN_DIR`` and ``--resume``.

    >>> resume_command("runs/x", ["rewardlang", "train", "--spec", "s.reward", "--max-steps", "4"])
    'rewardlang train --spec s.reward --max-steps 4 --output runs/x --resume'
    """
    import shlex

    args = list(sys.argv if argv is None else argv)[1:]
    if not any(a == "--output" or a.startswith("--output=") for a in args):
        args += ["--output", run_dir]
    if "--resume" not in args:
        args.append("--resume")
    if "train" not in args:
        args.insert(0, "train")
    return shlex.join(["rewardlang", *args])


def where_to_resume(run_dir: str) -> str:
    """What a stopped run keeps, in one line: its last complete checkpoint and the command that continues it."""
    ckpt = last_checkpoint(run_dir)
    if ckpt is None:
        return (f"run directory {run_dir} has no checkpoint yet (one is written every train.save_steps steps); "
                "nothing to resume")
    step = os.path.basename(ckpt).removeprefix("checkpoint-")
    return f"last checkpoint: step {step} ({ckpt}); continue with: {resume_command(run_dir)}"


def config_name(checkpoint: str | None) -> str:
    """``config.json`` describes the run as started; a resume adds ``config.resume-<step>.json`` beside it."""
    return f"config.resume-{os.path.basename(checkpoint).split('-')[-1]}.json" if checkpoint else "config.json"


def trainer_args(args_class: type, cfg: TrainConfig, run_dir: str, *, batch_size: int, what: str,
                 **specific: Any) -> Any:
    """``args_class`` (transformers' ``TrainingArguments`` or a TRL subclass such as ``GRPOConfig``) for a resolved
    configuration: the keys every trainer sets the same way (run directory, seeds, length, batch, optimiser schedule,
    logging, checkpoints, precision, reporting), then the algorithm's own ``specific`` keys, then the ``cfg.trl``
    pass-through entries. A value the class rejects is a ConfigError naming ``what`` ("GRPO", "DPO", ...)."""
    import importlib.util

    import torch

    from rewardlang.trainers.model import resolve_dtype

    dtype = resolve_dtype(cfg.dtype)
    report_to: Any = cfg.report_to
    if report_to == "auto":
        report_to = ["tensorboard"] if importlib.util.find_spec("tensorboard") else []
    kwargs: dict[str, Any] = dict(
        output_dir=run_dir, seed=cfg.seed, data_seed=cfg.seed, max_steps=cfg.max_steps,
        per_device_train_batch_size=batch_size, gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate, max_grad_norm=cfg.max_grad_norm, lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,  # transformers reads a value below 1 as a share of the steps
        logging_steps=cfg.logging_steps, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=report_to, disable_tqdm=True,
        bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, use_cpu=not torch.cuda.is_available(),
        # activation checkpointing only pays off on large models; the tiny CPU model is faster without it
        gradient_checkpointing=cfg.model is not None,
    )
    kwargs.update(specific)
    kwargs.update(cfg.trl)
    try:
        return args_class(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid {what} settings: {exc}") from None


def args_record(args: Any) -> dict[str, Any]:
    """A Trainer arguments object's plain settings, for ``config.json``."""
    return {k: v for k, v in args.to_dict().items() if isinstance(v, (int, float, str, bool, list, type(None)))}


def record_config(trainer: Any, run_dir: str, checkpoint: str | None, prog: "Program", cfg: TrainConfig,
                  sources: Mapping[str, str], params: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
    """On the main process, ``config.json`` (the run as started; a resume adds ``config.resume-<step>.json``
    beside it): the resolved settings and their sources, the spec, ``extra`` and where the run resumed from."""
    if trainer.accelerator.is_main_process:
        save_resolved(os.path.join(run_dir, config_name(checkpoint)), cfg, sources, spec_name=prog.name,
                      spec_hash=prog.source_hash, params=params,
                      extra={**extra, "resumed_from": checkpoint, "processes": trainer.accelerator.num_processes})


def _evaluate_policy(trainer: Any, tokenizer: Any, when: str, heldout: Sequence[dict[str, Any]], cfg: TrainConfig,
                     run_dir: str, progress: bool, program: "Program | None" = None) -> None:
    """``train.eval`` with the trainer's current policy (pass@1, and the run's spec's reward when ``program`` is
    given): every process takes part in unwrapping it (ZeRO-3 gathers the parameters), the main one evaluates. A
    model holding a policy and a critic (PPO's) is evaluated on its ``policy``."""
    if not heldout:
        return
    from trl.models.utils import unwrap_model_for_generation

    from rewardlang.trainers import report

    acc = trainer.accelerator
    with unwrap_model_for_generation(trainer.model, acc, gather_deepspeed3_params=True) as model:
        report.evaluate_stage(when, getattr(model, "policy", model), tokenizer, heldout, cfg, run_dir,
                              main=acc.is_main_process, progress=progress, program=program)
    acc.wait_for_everyone()


def finish_run(trainer: Any, tokenizer: Any, cfg: TrainConfig, run_dir: str, checkpoint: str | None,
               heldout: Sequence[dict[str, Any]], *, progress: bool | None, save: Any = None,
               program: "Program | None" = None) -> RunResult:
    """What every trainer does around its loop: the held-out evaluation before (not again on a resume; pass@1, and
    the reward of ``program``, the run's spec, with bootstrap intervals), ``trainer.train``, the final policy saved
    to ``RUN_DIR/final`` (``save``, default ``trainer.save_model``; the adapter only, with LoRA), the evaluation
    after (and the paired change), the run's README and plot, and the result.

    Every process leaves together: a worker that exits while the main one still writes can abort at exit (SIGABRT,
    "terminate called without an active exception"), and torchrun then fails the finished run."""
    from rewardlang.trainers import report

    show = cfg.progress if progress is None else progress
    _evaluate_policy(trainer, tokenizer, "before", heldout, cfg, run_dir, show, program)
    trainer.train(resume_from_checkpoint=checkpoint)
    final_dir = os.path.join(run_dir, "final")
    (save or trainer.save_model)(final_dir)
    _evaluate_policy(trainer, tokenizer, "after", heldout, cfg, run_dir, show, program)
    if trainer.accelerator.is_main_process:
        report.write_run_readme(run_dir)
    trainer.accelerator.wait_for_everyone()
    guard = AuditGuard.for_path(os.path.join(run_dir, "metrics.jsonl"))
    if guard is not None:  # train.stop_on_alarm: the run stopped at an alarm (its checkpoint is saved)
        guard.raise_if_stopped()
    return RunResult(run_dir=run_dir, final_dir=final_dir, metrics_path=os.path.join(run_dir, "metrics.jsonl"),
                     global_step=trainer.state.global_step, config=cfg, trainer=trainer)


def algorithm_of(spec_train: Mapping[str, Any], file_train: Mapping[str, Any], sets: Mapping[str, Any],
                 flags: Mapping[str, Any]) -> str:
    """The algorithm a run uses, by the same layering as every other setting (later wins)."""
    algo = "grpo"
    for layer in (spec_train, file_train, {k.removeprefix("train."): v for k, v in sets.items()}, flags):
        if layer.get("algorithm") is not None:
            algo = str(layer["algorithm"])
    if algo not in ALGORITHMS:
        raise ConfigError(f"train.algorithm: unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
    return algo
