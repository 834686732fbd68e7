"""Run configuration: layer precedence, provenance, validation, files, the saved resolved config."""

from __future__ import annotations

import json

import pytest

from rewardlang.trainers.config import (
    ConfigError,
    TrainConfig,
    load_config_file,
    parse_set,
    resolve_config,
    save_resolved,
)


def test_layers_override_in_order_and_record_their_source(tmp_path) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("learning_rate: 0.002\nmax_steps: 7\nwarmup_steps: 3\n")
    file_train, file_params = load_config_file(str(cfg_file))
    cfg, sources = resolve_config(
        spec_train={"algorithm": "grpo", "num_generations": 3, "learning_rate": 5e-5, "max_steps": 100},
        file_train=file_train,
        cli_sets={"train.max_steps": 9},
        cli_flags={"seed": 4, "model": None},
        file_name=str(cfg_file),
    )
    assert (cfg.num_generations, cfg.learning_rate, cfg.max_steps, cfg.seed) == (3, 0.002, 9, 4)
    assert cfg.model is None  # a flag left unset does not override
    assert cfg.trl == {"warmup_steps": 3}
    assert sources["num_generations"] == "spec train section"
    assert sources["learning_rate"] == f"config file {cfg_file}"
    assert sources["max_steps"] == "--set"
    assert sources["seed"] == "command line"
    assert "temperature" not in sources  # defaults are not attributed to a layer
    assert file_params == {}


def test_batch_size_holds_whole_prompt_groups() -> None:
    cfg, _ = resolve_config({"num_generations": 3})
    assert cfg.batch_size == 2 * 3
    cfg, _ = resolve_config({"num_generations": 3, "prompts_per_step": 4})
    assert cfg.batch_size == 12
    with pytest.raises(ConfigError, match=r"`batch_size` \(8 x 1 accumulation steps\) must be a multiple of "
                                          r"`num_generations` \(3, spec train section\)"):
        resolve_config({"num_generations": 3}, cli_sets={"batch_size": 8})
    cfg, _ = resolve_config({"num_generations": 4}, cli_sets={"batch_size": 2, "gradient_accumulation_steps": 2})
    assert cfg.batch_size == 2  # a group may span micro-steps (and processes)


def test_unknown_key_names_its_layer_and_a_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_config({"num_generation": 4})
    assert "spec train section" in str(err.value)
    assert "`num_generations`" in str(err.value)
    with pytest.raises(ConfigError, match=r"--set: unknown train setting `lerning_rate`.*`learning_rate`"):
        resolve_config(cli_sets={"train.lerning_rate": 1e-3})


def test_trl_owned_fields_point_to_ours() -> None:
    with pytest.raises(ConfigError, match="set `batch_size` instead of `per_device_train_batch_size`"):
        resolve_config({"per_device_train_batch_size": 8})


def test_values_are_type_checked() -> None:
    with pytest.raises(ConfigError, match="`max_steps` must be an integer, got 'many'"):
        resolve_config(cli_sets={"max_steps": "many"})
    with pytest.raises(ConfigError, match=r"`algorithm` must be one of grpo, ppo.*; got 'sac'"):
        resolve_config({"algorithm": "sac"})
    with pytest.raises(ConfigError, match="`num_generations` must be at least 2"):
        resolve_config({"num_generations": 1})
    with pytest.raises(ConfigError, match="`learning_rate` cannot be negative"):
        resolve_config({"learning_rate": -1e-3})
    cfg, _ = resolve_config({"learning_rate": 1}, cli_sets={"max_steps": 5.0})
    assert isinstance(cfg.learning_rate, float) and cfg.max_steps == 5


def test_tiny_model_keys() -> None:
    cfg, sources = resolve_config({"tiny_model": {"hidden_size": 32}},
                                  cli_sets={"train.tiny_model.num_hidden_layers": 1})
    assert (cfg.tiny_model.hidden_size, cfg.tiny_model.num_hidden_layers) == (32, 1)
    assert sources["tiny_model.num_hidden_layers"] == "--set"
    with pytest.raises(ConfigError, match="unknown tiny-model setting `hidden`"):
        resolve_config(cli_sets={"tiny_model.hidden": 3})


def test_parse_set() -> None:
    assert parse_set(["train.max_steps=5", "a.weight=0.5", "flag=true", "mods=[q_proj, v_proj]", "s=abc"]) == {
        "train.max_steps": 5, "a.weight": 0.5, "flag": True, "mods": ["q_proj", "v_proj"], "s": "abc"}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set(["max_steps"])


def test_config_file_sections_and_errors(tmp_path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"train": {"max_steps": 3}, "params": {"acc.weight": 2.0}}))
    assert load_config_file(str(f)) == ({"max_steps": 3}, {"acc.weight": 2.0})
    f.write_text(json.dumps({"train": {}, "max_steps": 3}))
    with pytest.raises(ConfigError, match="no other top-level keys"):
        load_config_file(str(f))
    f.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config_file(str(f))
    bad = tmp_path / "c.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=f"config file {bad}: cannot parse"):
        load_config_file(str(bad))
    with pytest.raises(ConfigError, match="not found"):
        load_config_file(str(tmp_path / "nope.yaml"))


def test_saved_config_has_hash_params_versions(tmp_path) -> None:
    cfg, sources = resolve_config({"max_steps": 3})
    cfg.spec = "specs/x.reward"
    doc = save_resolved(str(tmp_path / "run" / "config.json"), cfg, sources, spec_name="x", spec_hash="ab" * 32,
                        params={"acc.weight": 2.0})
    on_disk = json.loads((tmp_path / "run" / "config.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert on_disk["spec"] == {"path": "specs/x.reward", "name": "x", "source_hash": "ab" * 32,
                               "params": {"acc.weight": 2.0}}
    assert on_disk["train"]["max_steps"] == 3 and on_disk["sources"] == {"max_steps": "spec train section"}
    assert {"torch", "trl", "transformers", "python"} <= set(on_disk["versions"])
    assert TrainConfig().to_dict()["tiny_model"]["hidden_size"] == 64
