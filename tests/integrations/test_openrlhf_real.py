"""The OpenRLHF adapters through OpenRLHF's own reward code (openrlhf 0.11.2 installed --no-deps by
scripts/test-integrations.sh): SingleTurnAgentExecutor loads the module file given as --reward.remote_url and calls
reward_func; with a URL it posts to `rewardlang serve` with its own aiohttp client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_server import (  # the same server helpers (this directory is on sys.path)
    _start,
    _stop,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "quality_grpo.reward")
MODULE = str(ROOT / "rewardlang" / "integrations" / "openrlhf.py")


def _samples() -> tuple[list[str], list[str], list[str], list[float | None]]:
    from rewardlang.compiler import load_program

    rows = [json.loads(x) for x in (ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()]
    prog = load_program(SPEC)
    res = prog.score([r["completion"] for r in rows], tests=[r["tests"] for r in rows],
                     entry_point=[r["entry_point"] for r in rows], prompt=[r["prompt"] for r in rows])
    prog.close()
    queries = [r["prompt"] + r["completion"] + "<|im_end|>" for r in rows]  # decoded with the special tokens
    labels = [json.dumps({"tests": r["tests"], "entry_point": r["entry_point"]}) for r in rows]
    return queries, [r["prompt"] for r in rows], labels, [res.record(i)["reward"] for i in range(len(rows))]


def _check(infos: list[dict], want: list[float | None]) -> None:
    import torch

    for info, w in zip(infos, want):
        assert info["extra_logs"]["rl_masked"] == (1.0 if w is None else 0.0)
        assert info["rewards"] == pytest.approx(0.0 if w is None else w)
        # what samples_generator does with them: one scalar per sample
        assert torch.tensor([info["rewards"]]).shape == (1,)
        assert list(info["extra_logs"]) == ["rl_masked", "rl_format", "rl_correct", "rl_quality"]


def test_reward_func_through_openrlhfs_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    monkeypatch.setenv("REWARDLANG_SPEC", SPEC)
    ex = SingleTurnAgentExecutor(remote_rm_url=MODULE)  # imports the file, takes its reward_func
    queries, prompts, labels, want = _samples()

    async def run():  # as execute() does after each generation: one sample per call, concurrently
        return await asyncio.gather(*(ex._fetch_rewards_via_func([q], [p], [lab])
                                      for q, p, lab in zip(queries, prompts, labels)))

    infos = [x[0] for x in asyncio.run(run())]
    _check(infos, want)


def test_serve_through_openrlhfs_http_client() -> None:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    p, url = _start()
    try:
        ex = SingleTurnAgentExecutor(remote_rm_url=url + "/get_reward")
        queries, prompts, labels, want = _samples()

        async def run():
            return await asyncio.gather(*(ex._fetch_rewards_via_http([q], [pr], [lab])
                                          for q, pr, lab in zip(queries, prompts, labels)))

        infos = [x[0] for x in asyncio.run(run())]
        _check(infos, want)
    finally:
        assert _stop(p) == 0
