"""The verl adapters through verl's own code (verl 0.9.1 installed --no-deps by scripts/test-integrations.sh):
its reward-function loader and naive manager, and its RewardLoopManager with our manager on a local Ray cluster."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "quality_grpo.reward")
MODULE = str(ROOT / "rewardlang" / "integrations" / "verl.py")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from rewardlang.trainers.model import build_tokenizer

    d = tmp_path_factory.mktemp("tok")
    build_tokenizer(512).save_pretrained(d)
    return str(d)


def _config(tokenizer_dir: str, manager: bool, workers: int = 2):  # type: ignore[no-untyped-def]
    from omegaconf import OmegaConf

    rm = ({"source": "importlib", "name": "RewardlangRewardManager", "module": {"path": MODULE}} if manager
          else {"source": "register", "name": "naive", "module": {"path": None}})
    return OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": tokenizer_dir, "tokenizer_path": tokenizer_dir}},
        "reward": {"num_workers": workers, "reward_model": {"enable": False, "enable_resource_pool": False},
                   "custom_reward_function": {"path": MODULE, "name": "compute_score",
                                              "reward_kwargs": {"spec": SPEC}},
                   "reward_manager": rm, "sandbox_fusion": None},
    })


def _rows() -> list[dict]:
    rows = [json.loads(x) for x in (ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()]
    return rows


def _batch(tok, rows: list[dict]):  # type: ignore[no-untyped-def]
    """A verl DataProto as the rollout leaves it: left-padded prompts, right-padded responses, the reward columns."""
    import torch
    from verl import DataProto

    P, R = 64, 400
    prompts, responses, masks = [], [], []
    for r in rows:
        p = tok(r["prompt"][-200:], add_special_tokens=False)["input_ids"][-P:]
        c = tok(r["completion"], add_special_tokens=False)["input_ids"][:R - 1] + [tok.eos_token_id]
        prompts.append([tok.pad_token_id] * (P - len(p)) + p)
        responses.append(c + [tok.pad_token_id] * (R - len(c)))
        masks.append([0] * (P - len(p)) + [1] * len(p) + [1] * len(c) + [0] * (R - len(c)))
    tensors = {"prompts": torch.tensor(prompts), "responses": torch.tensor(responses),
               "attention_mask": torch.tensor(masks)}
    tensors["input_ids"] = torch.cat([tensors["prompts"], tensors["responses"]], dim=1)
    non = {"data_source": np.array(["humaneval"] * len(rows), dtype=object),
           "reward_model": np.array([{"ground_truth": r["tests"], "style": "rule"} for r in rows], dtype=object),
           "extra_info": np.array([{"entry_point": r["entry_point"], "prompt": r["prompt"]} for r in rows],
                                  dtype=object)}
    return DataProto.from_dict(tensors=tensors, non_tensors=non)


def _expected(tok, rows: list[dict]) -> list[dict]:  # type: ignore[no-untyped-def]
    """What rewardlang scores for the decoded completions (the text verl hands over)."""
    from rewardlang.compiler import load_program

    texts = [tok.decode(tok(r["completion"], add_special_tokens=False)["input_ids"][:399], skip_special_tokens=True)
             for r in rows]
    prog = load_program(SPEC)
    res = prog.score(texts, tests=[r["tests"] for r in rows], entry_point=[r["entry_point"] for r in rows],
                     prompt=[r["prompt"] for r in rows])
    prog.close()
    return [res.record(i) for i in range(len(rows))]


def test_compute_score_through_verls_loader_and_naive_manager(tokenizer_dir: str) -> None:
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = _config(tokenizer_dir, manager=False)
    fn = get_custom_reward_fn(cfg)  # verl's loader: the module file, the name, reward_kwargs merged in
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    mgr = NaiveRewardManager(cfg, tok, fn)
    rows = _rows()
    data = _batch(tok, rows)

    async def all_rows():  # as RewardLoopWorker.compute_score_batch: one task per sample, concurrently
        return await asyncio.gather(*(mgr.run_single(data[i:i + 1]) for i in range(len(data))))

    outs = mgr.loop.run_until_complete(all_rows())
    want = _expected(tok, rows)
    keys = list(outs[0]["reward_extra_info"])
    assert keys == ["score", "rl_masked", "rl_format", "rl_correct", "rl_quality"]
    for o, w in zip(outs, want):
        assert list(o["reward_extra_info"]) == keys and np.isfinite(o["reward_score"])
        assert o["reward_score"] == pytest.approx(0.0 if w["reward"] is None else w["reward"])
    assert any(o["reward_score"] > 0.9 for o in outs)


def test_batched_manager_in_verls_reward_loop_on_local_ray(tokenizer_dir: str) -> None:
    import ray
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    rows = _rows() * 4  # 24 samples, 12 per worker
    data = _batch(tok, rows)
    want = _expected(tok, rows)
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        out = RewardLoopManager(_config(tokenizer_dir, manager=True)).compute_rm_score(data)
    finally:
        ray.shutdown()
    scores = out.batch["rm_scores"]
    assert tuple(scores.shape) == tuple(data.batch["responses"].shape)
    assert out.meta_info["reward_extra_keys"] == ["score", "rl_masked", "rl_format", "rl_correct", "rl_quality"]
    totals = scores.sum(-1).tolist()
    for t, w, m in zip(totals, want, out.non_tensor_batch["rl_masked"]):
        assert t == pytest.approx(0.0 if w["reward"] is None else w["reward"], abs=1e-6)
        assert m == (1.0 if w["reward"] is None else 0.0)
    # the scalar sits on each response's last valid token, as verl's GRPO/GAE expect
    last = data.batch["attention_mask"][:, 64:].sum(-1) - 1
    assert all(scores[i].nonzero().flatten().tolist() in ([], [int(last[i])]) for i in range(len(rows)))
