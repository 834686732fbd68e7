"""The spec in a user's own TRL script (issue 13 items 3 and 19): SpecGRPOTrainer with the user's GRPOConfig and
model honours masking and the spec's advantage; the plain reward functions honour masking and warn about what
they cannot honour; TRL's per-row "All reward functions returned None" warning and the resume's tied-weights
"missing keys" message are gone."""

from __future__ import annotations

import importlib.util
import logging
import os
import warnings

import numpy as np
import pytest
import torch

import rewardlang
from rewardlang.trainers.config import TinyModelConfig
from rewardlang.trainers.grpo import SpecGRPOTrainer, missing_after_tying
from rewardlang.trainers.model import build_tiny_model, build_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example():
    spec = importlib.util.spec_from_file_location("trl_spec_trainer", os.path.join(ROOT, "examples",
                                                                                   "trl_spec_trainer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plain_functions_mask_the_total_and_warn_once_about_what_they_drop() -> None:
    prog = rewardlang.loads("component a in [0, 3] = len(completion)\ncomponent b = 1\n"
                            "advantage over group(prompt) = center\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        funcs, weights = prog.as_trl_reward_funcs()
        prog.as_trl_reward_funcs()
    msgs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(msgs) == 1 and "declares an advantage pipeline" in msgs[0] and "SpecGRPOTrainer" in msgs[0]
    # "abcd" is out of a's range: the spec masks its total, so no function may give TRL a value to sum
    got = [f(prompts=["p", "p"], completions=["ab", "abcd"]) for f in funcs]
    assert got == [[2.0, None], [1.0, None]] and weights == [1.0, 1.0]
    with warnings.catch_warnings(record=True) as caught:  # nothing to warn about: no advantage, no spans
        warnings.simplefilter("always")
        rewardlang.loads("component b = 1").as_trl_reward_funcs()
    assert not [w for w in caught if issubclass(w.category, UserWarning)]
    spans = rewardlang.loads("component c in [0, 1] = 1 spans matches(completion, /x/, value=-1)")
    with pytest.warns(UserWarning, match="declares spans"):
        spans.as_trl_reward_funcs()


def test_trls_all_none_warning_is_silenced_only_inside_the_spec_trainer(caplog) -> None:
    from rewardlang.trainers import grpo

    log = logging.getLogger("trl.trainer.grpo_trainer")
    msg = "All reward functions returned None for the following kwargs:\n{'completion': 'x' * 500}"
    with caplog.at_level(logging.WARNING, logger=log.name):
        log.warning(msg)                       # another trainer: TRL's warning stands
        grpo._MASKED_NOTICE.active += 1
        try:
            log.warning(msg)                   # inside SpecGRPOTrainer's scoring: counted in masked/count instead
            log.warning("something else")      # other warnings pass
        finally:
            grpo._MASKED_NOTICE.active -= 1
    assert [r.getMessage().split("\n")[0] for r in caplog.records] == [
        "All reward functions returned None for the following kwargs:", "something else"]


def test_tied_lm_head_missing_from_a_checkpoint_is_not_reported(tmp_path) -> None:
    from safetensors.torch import load_file

    model = build_tiny_model(build_tokenizer(300), TinyModelConfig())
    model.save_pretrained(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    fresh = build_tiny_model(build_tokenizer(300), TinyModelConfig(), seed=1)
    result = fresh.load_state_dict(state, strict=False)
    assert "lm_head.weight" in result.missing_keys           # what the resume reported
    assert missing_after_tying(fresh, result.missing_keys) == []
    assert torch.equal(fresh.lm_head.weight, model.lm_head.weight)  # and it is the restored embedding
    del state["model.norm.weight"]
    result = fresh.load_state_dict(state, strict=False)
    assert missing_after_tying(fresh, result.missing_keys) == ["model.norm.weight"]   # a real gap is still reported


@pytest.mark.slow
def test_the_documented_trl_script_does_not_train_on_masked_totals(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        trainer = _example().main(str(tmp_path), max_steps=2)
    assert isinstance(trainer, SpecGRPOTrainer)
    batch = trainer.last_batch
    total, adv, groups = batch["total"], batch["advantages"], batch["groups"]
    masked = np.isnan(total)
    assert masked.any() and not masked.all(), total      # some completions run past 30 characters
    assert np.all(adv[masked] == 0)                       # masked: no advantage, not a reward of 0
    for g in np.unique(groups):                           # the spec's pipeline over the unmasked rows
        rows = (groups == g) & ~masked
        if rows.sum() >= 2:
            r = total[rows]
            np.testing.assert_allclose(adv[rows], (r - r.mean()) / (r.std(ddof=1) + 1e-4), atol=1e-5)
    assert not [r for r in caplog.records if "All reward functions returned None" in r.getMessage()]
