"""``rewardlang score ... --ray ADDRESS``: a large JSONL scored through Ray Data by a pool of actors.

The file is cut into the batches a local run scores (``--batch-size`` rows, ending only where every group key
changes, so a group is never split) and each batch goes to one of the actors, each of which holds one compiled
program and its sandbox slots and scores the batch with :func:`rewardlang.runtime.scoring.score_rows`, as a local
run scores it. The records come back in input order, so the output equals the local run's byte for byte, and a bad
row is the local run's located :class:`~rewardlang.runtime.scoring.DataIssue`. ``ADDRESS`` is ``local`` (start a
cluster on this machine), ``auto`` (the running cluster) or ``ray://host:port``.

Example (a local cluster of 2 CPUs)::

    rewardlang score specs/codepo.reward -i rows.jsonl -o scored.jsonl --ray local --workers 2
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from rewardlang.compiler import load_program
from rewardlang.jsonl import iter_jsonl
from rewardlang.runtime.parallel import warm_up
from rewardlang.runtime.scoring import DataIssue, GroupOrder, ScoringError, group_keys, parse_lines, score_rows

__all__ = ["RayRun", "blocks", "score_on_ray"]


def blocks(prog: Any, input: Path, label: str, *, group_by: str | None, batch_size: int
           ) -> list[dict[str, Any]]:
    """The local run's batches as ``{"start": first line number, "data": raw lines}`` (bad lines included: the
    actor reports or skips them as a local run does). Rows of a group that come back in a later batch are a
    :class:`ScoringError` (D002) here, as in a local run."""
    order = GroupOrder(group_keys(prog, group_by), label)
    out: list[dict[str, Any]] = []
    raw = input.read_bytes().split(b"\n")
    cur: list[int] = []  # line numbers of this block
    here: list[dict[Any, None]] = [{} for _ in order.keys]  # each key's values in this block, in order
    good = 0
    last: Any = None

    def close() -> None:
        nonlocal cur, here, good
        if not cur:
            return
        for j, values in enumerate(here):
            order.add(j, list(values))
        out.append({"start": cur[0], "data": b"\n".join(raw[cur[0] - 1:cur[-1]])})
        cur, here, good = [], [{} for _ in order.keys], 0

    for lineno, row, problem in iter_jsonl(input):
        if problem is None:
            g = order.of(row)
            if good >= batch_size and (last is None or all(a != b for a, b in zip(g, last))):
                close()
            for j, v in enumerate(g):
                here[j][v] = None
            last = g
            good += 1
        cur.append(lineno)
    close()
    return out


class _Scorer:
    """A Ray Data actor: one compiled program (and its sandbox slots), scoring one batch per call."""

    def __init__(self, spec: str, params: dict[str, Any], options: dict[str, Any]) -> None:
        self.prog = load_program(spec, params=params)
        self.prog.require_resources()
        self.options = options
        # what the functions load on first use (compiled kernels: ~0.5 s) is loaded once, now, as a local run's
        # worker processes load it: the actor is for large files, and it starts while the driver is still handing
        # out the first batches
        warm_up(self.prog.spec["functions"])

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        outs, issues, warnings = [], [], []
        for start, data in zip(batch["start"], batch["data"]):
            said: list[str] = []
            try:
                # the block's lines keep their numbers in the input, so located errors name the input's lines;
                # one core per actor: Ray runs one actor per CPU
                scored = score_rows(self.prog, parse_lines(bytes(data), int(start)), label=self.options["label"],
                                    group_by=self.options["group_by"], on_bad_row=self.options["on_bad_row"],
                                    step=self.options["step"], workers=1, warn=said.append)
                outs.append(scored.jsonl())
                issues.append("[]")
            except ScoringError as exc:
                outs.append("")
                issues.append(json.dumps([asdict(i) for i in exc.issues]))
            warnings.append(json.dumps(said))
        # plain strings: what travels through Ray Data's blocks (Arrow) unchanged
        return {"out": outs, "issues": issues, "warnings": warnings}


@dataclass
class RayRun:
    """What a run on Ray did: the rows written, the actors, the batches and the wall time."""

    rows: int
    actors: int
    batches: int
    seconds: float

    def line(self) -> str:
        return f"scored {self.rows} rows on Ray ({self.actors} actors, {self.batches} batches) in {self.seconds:.2f} s"


def score_on_ray(spec: str | Path, params: dict[str, Any], prog: Any, input: Path, label: str, out: IO[str], *,
                 address: str, group_by: str | None, on_bad_row: str, step: int, batch_size: int, workers: int,
                 warn: Callable[[str], None]) -> RayRun:
    """Score ``input`` on Ray (see the module docstring) into ``out``; ``warn`` receives each warning once, as
    in a local run. Raises :class:`ScoringError` where a local run would, after writing what it would have
    written."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    # the file is cut into batches (every line parsed for its group keys) while Ray starts: the cluster's start is
    # mostly waiting for its processes, so the two overlap
    cutter = ThreadPoolExecutor(1, thread_name_prefix="rewardlang-blocks")
    cut = cutter.submit(blocks, prog, input, label, group_by=group_by, batch_size=batch_size)
    cutter.shutdown(wait=False)
    import ray

    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    started = not ray.is_initialized()
    if started:
        import logging

        logging.getLogger("ray.data").setLevel(logging.WARNING)
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "runtime_env": {"env_vars": env} if env else None}
        if address == "local":
            ray.init(num_cpus=workers or os.cpu_count() or 1, **kw)
        else:
            ray.init(address=address, **kw)
    try:
        parts = cut.result()  # ScoringError (D002: rows of a group apart)
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # the output is in input order
        ctx.enable_progress_bars = False
        n_actors = max(1, min(workers or int(ray.cluster_resources().get("CPU", 1)), len(parts) or 1))
        options = {"label": label, "group_by": group_by, "on_bad_row": on_bad_row, "step": step}
        ds = ray.data.from_items(parts, override_num_blocks=max(1, len(parts)))
        ds = ds.map_batches(_Scorer, batch_size=1, num_cpus=1, concurrency=n_actors, max_restarts=0,
                            fn_constructor_kwargs={"spec": str(spec), "params": params, "options": options})
        rows = 0
        warned: set[str] = set()
        for rec in ds.iter_rows():
            for w in json.loads(rec["warnings"]):  # each actor warns once per batch; a local run warns once
                if w not in warned:
                    warned.add(w)
                    warn(w)
            issues = json.loads(rec["issues"])
            if issues:
                raise ScoringError([DataIssue(**i) for i in issues])
            out.write(rec["out"])
            rows += rec["out"].count("\n")
    finally:
        if started:
            ray.shutdown()
    return RayRun(rows, n_actors, len(parts), time.perf_counter() - t0)
