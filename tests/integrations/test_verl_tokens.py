"""The spec's per-token rewards in verl: hand-computed positions through verl's own code (its legacy reward-manager
registry and reward_fn call, its RewardLoopManager on a local Ray with our assemble_rm_scores, DataProto, and the
advantages of its trainer: GAE and GRPO), and parity with rewardlang's own PPO rewards (DenseRewards) on
specs/dense_ppo.reward. The first two tests need no verl and run in the default suite."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = str(ROOT / "rewardlang" / "integrations" / "verl.py")

# `bad`: -1 on each "x" (weight 0.5); `short`: no tokens clause, so its value goes on the last valid token; out of
# its range (4 characters or more) it masks the sample
SPEC = """\
component bad = count(completion, "x")
    spans matches(completion, /x/, value=-1)
    tokens spans
component short in [0, 1] = 1 if len(completion) < 4 else 2
bad.weight = 0.5
"""
# responses as single-character tokens, then EOS (a valid token: verl's attention mask covers it)
CHARS = [["a", "x", "b"], ["a", "b", "c", "d"], ["x", "x"]]
# hand-computed: "axb": -0.5 on "x", short=1 on EOS; "abcd": masked, 0 everywhere; "xx": -0.5, -0.5, 1 on EOS
WANT = [[0.0, -0.5, 0.0, 1.0, 0.0, 0.0], [0.0] * 6, [-0.5, -0.5, 1.0, 0.0, 0.0, 0.0]]
TOTALS = [1.5, 0.0, 2.0]  # the spec's totals: 1 + 0.5 * count("x"); the masked sample's score is 0.0
MASKED = [0.0, 1.0, 0.0]
P, R = 4, 6


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    from rewardlang.trainers.model import build_tokenizer

    return build_tokenizer(512)


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    p = tmp_path_factory.mktemp("spec") / "tok.reward"
    p.write_text(SPEC)
    return str(p)


def _ids(tok, chars: list[str]) -> list[int]:  # type: ignore[no-untyped-def]
    return tok.convert_tokens_to_ids(chars) + [tok.eos_token_id]


def test_scorer_places_match_hand_values_and_rewardlangs_dense_rewards(tok, spec: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    from rewardlang.integrations.batching import SpecScorer
    from rewardlang.integrations.verl_tokens import token_rewards
    from rewardlang.compiler import load_program
    from rewardlang.trainers.align import TokenAligner
    from rewardlang.trainers.dense import DenseRewards

    scorer = SpecScorer(spec)
    scorer.keep_places = True
    aligner = TokenAligner(tok)
    ids = [_ids(tok, c) for c in CHARS]
    aligned = [aligner.align(i) for i in ids]
    assert [t for t, _ in aligned] == ["axb", "abcd", "xx"]
    results = scorer.score_rows([{"completion": t} for t, _ in aligned])
    got = [token_rewards(r, e).tolist() for r, (_, e) in zip(results, aligned)]
    assert got == [w[:len(i)] for w, i in zip(WANT, ids)]
    assert [r["score"] for r in results] == TOTALS and [r["rl_masked"] for r in results] == MASKED
    # the same tensor rewardlang's own PPO trainer builds
    padded = torch.tensor([i + [tok.pad_token_id] * (R - len(i)) for i in ids])
    mask = torch.tensor([[1] * len(i) + [0] * (R - len(i)) for i in ids])
    dense = DenseRewards(load_program(spec), tok)(padded, mask, {})
    assert dense.rewards.tolist() == WANT


def test_without_keep_places_results_are_plain_dicts_and_a_sequence_spec_has_no_places(spec: str) -> None:
    from rewardlang.integrations.batching import Scored, SpecScorer
    from rewardlang.integrations.verl_tokens import TokenScore, token_rewards

    plain = SpecScorer(spec)
    assert type(plain.score_rows([{"completion": "ax"}])[0]) is dict
    seq = SpecScorer(str(ROOT / "specs" / "codepo_text.reward"))
    seq.keep_places = True
    r = seq.score_rows([{"prompt": "p", "completion": "```python\ndef f():\n    return 1\n```"}])[0]
    assert isinstance(r, Scored) and r.places is None and not seq.dense
    assert token_rewards(r, [3, 5, 9]).tolist() == [0.0, 0.0, r["score"]]
    s = TokenScore(1.5, [0.0, -0.5, 0.0, 1.0])
    assert s == 1.5 and isinstance(s, float) and s.tokens == (0.0, -0.5, 0.0, 1.0)
    # verl's agent loop (no reward model: each sample scored as its rollout ends) reads reward_score as a float:
    # `torch.tensor(scores, dtype=torch.float32)` onto the last token (agent_loop.py, _postprocess); importing that
    # module needs fastapi and cachetools, which the integration venv does not install, so the operation is here
    import torch

    assert torch.tensor([s, 2.0], dtype=torch.float32).tolist() == [1.5, 2.0]


# ---- through verl's code (scripts/test-integrations.sh) ----

def _data(tok, uids: list[str]):  # type: ignore[no-untyped-def]
    """A verl DataProto as the rollout leaves it: left-padded prompts, right-padded responses."""
    import torch
    from verl import DataProto

    prompts, responses, masks = [], [], []
    for chars in CHARS:
        p = tok.convert_tokens_to_ids(["p", "q"])
        r = _ids(tok, chars)
        prompts.append([tok.pad_token_id] * (P - len(p)) + p)
        responses.append(r + [tok.pad_token_id] * (R - len(r)))
        masks.append([0] * (P - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (R - len(r)))
    t = {"prompts": torch.tensor(prompts), "responses": torch.tensor(responses), "attention_mask": torch.tensor(masks)}
    t["input_ids"] = torch.cat([t["prompts"], t["responses"]], dim=1)
    n = len(CHARS)
    non = {"data_source": np.array(["toy"] * n, dtype=object),
           "reward_model": np.array([{"ground_truth": None, "style": "rule"}] * n, dtype=object),
           "extra_info": np.array([{} for _ in range(n)], dtype=object),
           "uid": np.array(uids, dtype=object)}
    return DataProto.from_dict(tensors=t, non_tensors=non)


def _advantages(data, scores):  # type: ignore[no-untyped-def]
    """verl's trainer step after the reward (ray_trainer.compute_advantage's two branches, called directly: the
    trainer module imports torchdata, which this CPU venv does not install): token_level_scores ->
    token_level_rewards (no KL in the reward) -> GAE (zero values, gamma = lam = 1) and GRPO outcome advantages."""
    import torch
    from verl.trainer.ppo import core_algos

    rewards = scores  # token_level_rewards = token_level_scores without use_kl_in_reward
    response_mask = data.batch["attention_mask"][:, -data.batch["responses"].size(1):]  # compute_response_mask
    _, returns = core_algos.compute_gae_advantage_return(
        token_level_rewards=rewards, values=torch.zeros_like(rewards), response_mask=response_mask, gamma=1.0,
        lam=1.0)
    grpo, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards, response_mask=response_mask, index=data.non_tensor_batch["uid"])
    return returns.tolist(), grpo.tolist()


def _check_advantages(returns, grpo) -> None:  # type: ignore[no-untyped-def]
    # GAE with zero values, gamma = lam = 1: each token's return is the sum of the rewards from it on
    assert returns[0] == pytest.approx([0.5, 0.5, 1.0, 1.0, 0.0, 0.0])
    assert returns[2] == pytest.approx([0.0, 0.5, 1.0, 0.0, 0.0, 0.0])
    assert returns[1] == pytest.approx([0.0] * 6)
    # GRPO, uids p0 (samples 0, 2) and p1 (sample 1 alone): sums 0.5 and 0.0 -> +-(0.25 / (0.5 / sqrt 2)) on the
    # valid tokens; a sample alone in its group gets 0
    a = 0.25 / (0.5 / math.sqrt(2))
    assert grpo[0] == pytest.approx([a] * 4 + [0.0] * 2, abs=1e-5)
    assert grpo[2] == pytest.approx([-a] * 3 + [0.0] * 3, abs=1e-5)
    assert grpo[1] == pytest.approx([0.0] * 6)


@pytest.mark.integration
@pytest.mark.slow
def test_legacy_manager_through_verls_registry_gives_the_token_reward_tensor(tok, spec: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import verl.workers.reward_manager as legacy  # imported first, as verl <= 0.6's trainer does
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    # verl imports the custom reward function's file; the file registers the manager in the legacy registry
    cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": MODULE, "name": "compute_score",
                                                                  "reward_kwargs": {"spec": spec}}}})
    compute_score = get_custom_reward_fn(cfg)
    cls = legacy.get_reward_manager_cls("rewardlang")
    assert issubclass(cls, legacy.abstract.AbstractRewardManager)
    # as verl 0.6's load_reward_manager builds it: the spec comes from the custom function's reward_kwargs (the
    # configuration wins over the environment)
    monkeypatch.setenv("REWARDLANG_SPEC", str(ROOT / "specs" / "quality_grpo.reward"))
    reward_fn = cls(tokenizer=tok, num_examine=0, compute_score=compute_score, reward_fn_key="data_source")
    data = _data(tok, ["p0", "p1", "p0"])
    out = reward_fn(data, return_dict=True)  # verl 0.6's compute_reward
    assert out["reward_tensor"].tolist() == WANT
    assert list(out["reward_extra_info"]) == ["score", "rl_masked", "rl_bad", "rl_short"]
    assert out["reward_extra_info"]["score"] == TOTALS and out["reward_extra_info"]["rl_masked"] == MASKED
    _check_advantages(*_advantages(data, out["reward_tensor"]))
    # per_token=false: the total on the last valid token, as verl's naive manager puts it
    seq = cls(tokenizer=tok, num_examine=0, compute_score=compute_score, per_token=False)
    assert seq(data).tolist() == [[0.0, 0.0, 0.0, 1.5, 0.0, 0.0], [0.0] * 6, [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]]
    with pytest.raises(TypeError, match="per_token must be true or false"):
        cls(tokenizer=tok, num_examine=0, compute_score=compute_score, per_token="no")


@pytest.mark.integration
@pytest.mark.slow
def test_reward_loop_places_token_rewards_through_assemble_rm_scores_on_local_ray(tok, spec: str,
                                                                                   tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import ray
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    tok.save_pretrained(tmp_path)
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(tmp_path), "tokenizer_path": str(tmp_path)}},
        "reward": {"num_workers": 2, "reward_model": {"enable": False, "enable_resource_pool": False},
                   "custom_reward_function": {"path": MODULE, "name": "compute_score",
                                              "reward_kwargs": {"spec": spec}},
                   "reward_manager": {"source": "importlib", "name": "RewardlangRewardManager",
                                      "module": {"path": MODULE}},
                   "sandbox_fusion": None},
    })
    data = _data(tok, ["p0", "p1", "p0"])
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        mgr = RewardLoopManager(cfg)
        out = mgr.compute_rm_score(data)  # 3 samples padded to 4, 2 RewardLoopWorker actors
        for w in mgr.reward_loop_workers:  # named actors: the next manager's take the same names
            ray.kill(w)
        cfg.reward.custom_reward_function.reward_kwargs.per_token = False
        seq = RewardLoopManager(cfg).compute_rm_score(data).batch["rm_scores"].tolist()
    finally:
        ray.shutdown()
    # per_token=false: the total on the last valid token (verl's own assemble rule)
    assert seq == [[0.0, 0.0, 0.0, 1.5, 0.0, 0.0], [0.0] * 6, [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]]
    assert out.batch["rm_scores"].tolist() == WANT
    assert out.non_tensor_batch["score"].tolist() == TOTALS
    assert out.non_tensor_batch["rl_masked"].tolist() == MASKED
    _check_advantages(*_advantages(data, out.batch["rm_scores"]))


@pytest.mark.integration
@pytest.mark.slow
def test_dense_ppo_through_the_legacy_manager_equals_rewardlangs_ppo_rewards(tok) -> None:  # type: ignore[no-untyped-def]
    """specs/dense_ppo.reward (lint, syntax, tests in the sandbox, dataflow; each with its `tokens` clause) on the
    six example completions: verl's reward tensor equals the one rewardlang's own PPO trainer trains on."""
    import torch
    from verl import DataProto

    from rewardlang.integrations.verl import __getattr__ as verl_attr
    from rewardlang.compiler import load_program
    from rewardlang.trainers.dense import DenseRewards

    dense_spec = str(ROOT / "specs" / "dense_ppo.reward")
    rows = [json.loads(x) for x in (ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()]
    Rl = 400
    resp, masks = [], []
    for r in rows:
        c = tok(r["completion"], add_special_tokens=False)["input_ids"][:Rl - 1] + [tok.eos_token_id]
        resp.append(c + [tok.pad_token_id] * (Rl - len(c)))
        masks.append([1] * len(c) + [0] * (Rl - len(c)))
    responses, rmask = torch.tensor(resp), torch.tensor(masks)
    prompts = torch.full((len(rows), 2), tok.pad_token_id)
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses,
                 "attention_mask": torch.cat([torch.zeros_like(prompts), rmask], dim=1),
                 "input_ids": torch.cat([prompts, responses], dim=1)},
        non_tensors={"data_source": np.array(["humaneval"] * len(rows), dtype=object),
                     "reward_model": np.array([{"ground_truth": {"tests": r["tests"], "reference": r["reference"]}}
                                               for r in rows], dtype=object),
                     "extra_info": np.array([{"entry_point": r["entry_point"]} for r in rows], dtype=object)})
    mgr = verl_attr("RewardlangBatchRewardManager")(tokenizer=tok, num_examine=0, spec=dense_spec)
    got = mgr(data, return_dict=True)
    ref = DenseRewards(load_program(dense_spec), tok)(responses, rmask, {
        "unit_tests": [r["tests"] for r in rows], "entry_point": [r["entry_point"] for r in rows],
        "reference": [r["reference"] for r in rows]})
    assert not ref.masked.any() and got["reward_extra_info"]["rl_masked"] == [0.0] * len(rows)
    assert torch.allclose(got["reward_tensor"], ref.rewards, atol=1e-6)
    # real per-token rewards (a sequence reward would be one non-zero token), nothing on padding
    assert all(int((got["reward_tensor"][i] != 0).sum()) > 10 for i in range(len(rows)))
    assert float(got["reward_tensor"][rmask == 0].abs().sum()) == 0.0
