"""Issue 25 major 10: a setting a trainer does not honour is an error naming the trainer (it used to be accepted,
recorded in config.json and ignored)."""

from __future__ import annotations

import os

import pytest

from rewardlang.trainers.config import ConfigError, resolve_config


@pytest.mark.parametrize("algo", ["ppo", "oorl"])
@pytest.mark.parametrize("key", ["warmup_steps", "epsilon", "loss_type"])
def test_trl_settings_are_refused_by_trainers_that_do_not_use_trl(algo: str, key: str) -> None:
    value = {"warmup_steps": 1000, "epsilon": 0.3, "loss_type": "grpo"}[key]
    with pytest.raises(ConfigError, match=rf"^--set: `{key}` is a setting of TRL's GRPOConfig, which the "
                                          rf"{algo} trainer does not use: it would be ignored"):
        resolve_config(spec_train={"algorithm": algo}, cli_sets={f"train.{key}": value})


def test_prm_takes_training_arguments_fields_and_refuses_grpo_ones() -> None:
    cfg, _ = resolve_config(spec_train={"algorithm": "prm"}, cli_sets={"warmup_steps": 10, "eval_steps": 2})
    assert cfg.trl == {"warmup_steps": 10, "eval_steps": 2}
    with pytest.raises(ConfigError, match=r"unknown train setting `epsilon`.*or fields of transformers' "
                                          r"TrainingArguments$"):
        resolve_config(spec_train={"algorithm": "prm"}, cli_sets={"epsilon": 0.3})


def test_gepo_names_the_class_it_checks_against() -> None:
    with pytest.raises(ConfigError, match=r"unknown train setting `loss_type`.*or fields of transformers' "
                                          r"TrainingArguments$"):
        resolve_config(spec_train={"algorithm": "gepo"}, cli_sets={"loss_type": "sigmoid"})
    with pytest.raises(ConfigError, match=r"or fields of TRL's DPOConfig$"):
        resolve_config(spec_train={"algorithm": "dpo"}, cli_sets={"no_such_key": 1})


@pytest.mark.parametrize(("algo", "key", "value", "readers"), [
    ("grpo", "preference_data", "pairs.jsonl", "dpo and gepo and oorl trainers"),
    ("ppo", "preference_data", "pairs.jsonl", "dpo and gepo and oorl trainers"),
    ("prm", "preference_data", "pairs.jsonl", "dpo and gepo and oorl trainers"),
    ("grpo", "cliprange", 0.3, "ppo and oorl trainers"),
    ("dpo", "ppo_epochs", 2, "ppo and oorl trainers"),
    ("gepo", "w_gepo", 0.5, "oorl trainer"),
    ("grpo", "gepo_lambda", 0.5, "gepo and oorl trainers"),
])
def test_a_rewardlang_setting_another_trainer_reads_is_refused(algo: str, key: str, value: object,
                                                              readers: str) -> None:
    with pytest.raises(ConfigError, match=rf"^--set: `{key}` is read by the {readers} only; the {algo} trainer "
                                          rf"would ignore it"):
        resolve_config(spec_train={"algorithm": algo}, cli_sets={f"train.{key}": value})
    # the trainers that read it take it
    cfg, _ = resolve_config(spec_train={"algorithm": readers.split()[0]}, cli_sets={f"train.{key}": value})
    assert getattr(cfg, key) == value


def test_a_specs_own_setting_for_its_algorithm_is_left_out_with_a_note_when_another_layer_changes_it(capsys) -> None:
    """`rewardlang train --spec specs/oorl.reward --set train.algorithm=gepo`: the spec's OORL-only settings are its
    settings for OORL, not the user's mistake: they fall back to their defaults, and stderr says so."""
    spec = {"algorithm": "oorl", "resample_tied": 4, "w_gepo": 0.5, "gepo_lambda": 2.0}
    cfg, sources = resolve_config(spec_train=spec, cli_sets={"train.algorithm": "gepo"})
    assert (cfg.resample_tied, cfg.w_gepo, cfg.gepo_lambda) == (0, 0.01, 2.0)   # GEPO reads gepo_lambda: kept
    assert sources["resample_tied"] == "default (the spec's is for ppo and oorl)"
    err = capsys.readouterr().err
    assert "note: the spec's `resample_tied = 4` is read by the ppo and oorl trainers only; not used with " \
           "`algorithm = gepo` (--set)" in err and "`w_gepo = 0.5` is read by the oorl trainer only" in err
    # a spec that names another algorithm's setting for its own algorithm is still an error: nothing replaced it
    with pytest.raises(ConfigError, match=r"^spec train section: `resample_tied` is read by the ppo and oorl "):
        resolve_config(spec_train={"algorithm": "grpo", "resample_tied": 4})


def test_negative_train_problems_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`train_problems` must be 0 \(every problem\) or positive \(got -3\)"):
        resolve_config(cli_sets={"train_problems": -3})


def test_every_shipped_spec_still_resolves() -> None:
    import glob
    import os

    import rewardlang

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    specs = sorted(glob.glob(os.path.join(root, "specs", "*.reward")))
    assert len(specs) >= 10
    for path in specs:
        resolve_config(rewardlang.load(path).train)


def test_an_unknown_params_key_in_a_config_file_is_named_as_coming_from_it(tmp_path) -> None:
    from typer.testing import CliRunner

    from rewardlang.trainers.cli import app

    spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_digits.reward")
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  max_steps: 1\nparams:\n  no_such_param: 2\n")
    res = CliRunner().invoke(app, ["train", "--spec", spec, "--model", "tiny", "--config", str(config), "--output",
                                   str(tmp_path / "run")])
    assert res.exit_code == 1, res.output
    assert f"config file {config}: `params:` sets `no_such_param`, which spec {spec} has no parameter" in res.output
    assert "--set" not in res.output and not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["train", "eval", "plot"])
def test_help_shows_flags_as_flags(command: str) -> None:
    """`--resume true` is rejected (a flag takes no value), so the help must not show flags as taking `<bool>`."""
    from typer.testing import CliRunner

    from rewardlang.trainers.cli import app

    res = CliRunner().invoke(app, [command, "--help"])
    assert res.exit_code == 0 and "<bool>" not in res.output
    if command == "train":
        assert "--resume " in res.output and "--lora / --no-lora" in res.output


def test_oorl_without_a_winners_rule_or_groups_fails_before_any_model_is_loaded(tmp_path, monkeypatch) -> None:
    import json

    import rewardlang.trainers.ppo as ppo
    from rewardlang.trainers.run import train

    def no_model(*args, **kwargs):  # the error must come first: loading a real model takes minutes on a CPU
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(ppo, "load_run_policy", no_model)
    spec = tmp_path / "s.reward"
    spec.write_text('spec s "no preference section"\ncomponent r in [0, 1] = 1 if len(completion) > 3 else 0\n'
                    'train { algorithm = "oorl" }\n', encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "p"}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"needs a `winners` rule in the spec's `preference \{ \}` section"):
        train(str(spec), flags={"dataset": str(data), "output_dir": str(tmp_path / "run")}, progress=False)
