"""The Ray driver's retry of lost blocks (``ray_score.drive``) against real Ray actors on a local cluster: an actor
whose process dies mid-block (as when its node is killed) has its blocks scored by another, the output complete and
in order, the retry named; a block lost twice is an error that names it; an error of the scoring itself is not
retried. The two-node run with a killed raylet is ``test_ray_score.py::test_a_lost_node``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from rewardlang.integrations.ray_score import BlockLost, drive, span  # noqa: E402

PARTS = [{"start": 1 + 3 * i, "data": f"a{i}\nb{i}\nc{i}".encode()} for i in range(12)]


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _actor(marker: Path, die_on: int, how: str) -> Any:
    """An actor that echoes a block, and on the block starting at ``die_on`` exits its process (``once``: only
    the first time any actor sees it; ``always``), or raises (``raise``)."""

    class Echo:
        def node(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def score(self, part: dict[str, Any]) -> dict[str, str]:
            if part["start"] == die_on:
                if how == "raise":
                    raise ValueError(f"bad block at {die_on}")
                if how == "always" or not marker.exists():
                    marker.write_text("died")
                    os._exit(1)  # the worker process is gone, as with its node
            return {"out": bytes(part["data"]).decode() + "\n", "pid": str(os.getpid())}

    return ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(Echo)


def test_a_dead_actor_s_blocks_are_scored_by_another(cluster: Any, tmp_path: Path) -> None:
    remote = _actor(tmp_path / "m", die_on=PARTS[4]["start"], how="once")
    got: list[tuple[int, dict[str, str]]] = []
    retried = drive(PARTS, lambda: remote.remote(), 2, lambda i, r: got.append((i, r)), label="rows.jsonl")
    assert [i for i, _ in got] == list(range(12))
    assert "".join(r["out"] for _, r in got) == "".join(bytes(p["data"]).decode() + "\n" for p in PARTS)
    assert 4 in retried and len(retried) <= 2  # block 4 and what else its actor had in flight
    assert (tmp_path / "m").read_text() == "died"
    # the retried blocks were scored by the surviving process, which scored the last block too
    pids = dict(got)
    assert {pids[b]["pid"] for b in retried} == {pids[11]["pid"]}
    assert len({r["pid"] for _, r in got}) <= 2


def test_a_block_lost_twice_is_an_error_that_names_it(cluster: Any, tmp_path: Path) -> None:
    remote = _actor(tmp_path / "m", die_on=PARTS[7]["start"], how="always")
    got: list[int] = []
    with pytest.raises(BlockLost) as err:
        drive(PARTS, lambda: remote.remote(), 2, lambda i, r: got.append(i), label="rows.jsonl")
    first, last = span(PARTS[7])
    assert (err.value.index, err.value.first, err.value.last) == (7, first, last) == (7, 22, 24)
    assert "block 7 (rows.jsonl:22-24) was lost twice" in str(err.value)
    assert got == list(range(7))  # everything before it was emitted, in order, nothing after


def test_an_error_of_the_scoring_is_not_retried(cluster: Any, tmp_path: Path) -> None:
    remote = _actor(tmp_path / "m", die_on=PARTS[2]["start"], how="raise")
    with pytest.raises(ValueError, match="bad block at 7"):
        drive(PARTS, lambda: remote.remote(), 2, lambda i, r: None)
    assert not (tmp_path / "m").exists()
