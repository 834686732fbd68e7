"""``rewardlang score ... --ray ADDRESS``: a large JSONL scored on a Ray cluster by a pool of actors.

The file is cut into the batches a local run scores (``--batch-size`` rows, ending only where every group key
changes, so a group is never split) and each batch (a *block*) goes to one of the actors, spread over the nodes,
each of which holds one compiled program and its sandbox slots and scores the block with
:func:`rewardlang.runtime.scoring.score_rows`, as a local run scores it. The records are written in input order,
so the output equals the local run's byte for byte, and a bad row is the local run's located
:class:`~rewardlang.runtime.scoring.DataIssue`. ``ADDRESS`` is ``local`` (start a cluster on this machine),
``auto`` (the running cluster), ``HOST:PORT`` (a cluster's head) or ``ray://host:port``.

A node lost mid-run (its raylet killed, its machine gone) takes its actors and their unfinished blocks with it:
:func:`drive` sends those blocks again, to actors on other nodes, and the run says in one line which blocks were
retried; the output is the same as without the loss. A block lost a second time stops the run with
:class:`BlockLost`, which names it (no output file: the CLI writes it whole or not at all).

Example (a local cluster of 2 CPUs)::

    rewardlang score specs/codepo.reward -i rows.jsonl -o scored.jsonl --ray local --workers 2
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from rewardlang.compiler import load_program
from rewardlang.jsonl import iter_jsonl
from rewardlang.runtime.parallel import warm_up
from rewardlang.runtime.scoring import DataIssue, GroupOrder, ScoringError, group_keys, parse_lines, score_rows

__all__ = ["BlockLost", "RayRun", "blocks", "drive", "score_on_ray", "span"]


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
    """A Ray actor: one compiled program (and its sandbox slots), scoring one block per call."""

    def __init__(self, spec: str, params: dict[str, Any], options: dict[str, Any]) -> None:
        self.prog = load_program(spec, params=params)
        self.prog.require_resources()
        self.options = options
        # what the functions load on first use (compiled kernels: ~0.5 s) is loaded once, now, as a local run's
        # worker processes load it: the actor is for large files
        warm_up(self.prog.spec["functions"])

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def score(self, part: dict[str, Any]) -> dict[str, str]:
        """The block's output lines, its located issues (JSON) and its warnings (JSON)."""
        said: list[str] = []
        try:
            # the block's lines keep their numbers in the input, so located errors name the input's lines;
            # one core per actor: Ray places one actor per CPU
            scored = score_rows(self.prog, parse_lines(bytes(part["data"]), int(part["start"])),
                                label=self.options["label"], group_by=self.options["group_by"],
                                on_bad_row=self.options["on_bad_row"], step=self.options["step"], workers=1,
                                warn=said.append)
            return {"out": scored.jsonl(), "issues": "[]", "warnings": json.dumps(said)}
        except ScoringError as exc:
            return {"out": "", "issues": json.dumps([asdict(i) for i in exc.issues]), "warnings": json.dumps(said)}


class BlockLost(RuntimeError):
    """A block whose actor was lost twice (its node or its worker process died, or the result went with it):
    the run stops and names it rather than retry without end."""

    def __init__(self, index: int, first: int, last: int, label: str, reason: str) -> None:
        self.index, self.first, self.last = index, first, last
        super().__init__(f"block {index} ({label}:{first}-{last}) was lost twice on Ray ({reason}); "
                         f"not retried again")


def span(part: dict[str, Any]) -> tuple[int, int]:
    """The first and last input line numbers of a block from :func:`blocks`.

    >>> span({"start": 5, "data": b"a\\nb\\nc"})
    (5, 7)
    """
    return int(part["start"]), int(part["start"]) + bytes(part["data"]).count(b"\n")


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean the work was lost with its process or node (not an error of the scoring itself,
    which is a ``RayTaskError`` and stops the run as it would locally)."""
    import ray.exceptions as rx

    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "NodeDiedError", "WorkerCrashedError",
             "ObjectLostError", "OwnerDiedError", "ObjectFetchTimedOutError", "ObjectReconstructionFailedError")
    return tuple(getattr(rx, n) for n in names if hasattr(rx, n))


def drive(parts: list[dict[str, Any]], spawn: Callable[[], Any], n_actors: int, emit: Callable[[int, Any], None],
          *, label: str = "input", depth: int = 2) -> list[int]:
    """Score ``parts`` on ``n_actors`` actors made by ``spawn()`` (each with a ``score`` remote method taking one
    part and a ``node`` one returning its node's id), ``depth`` blocks in flight per actor; ``emit(index,
    result)`` is called in block order as the results come.

    An actor whose call fails with one of Ray's lost-work errors (its node killed, its process dead, its result
    lost) is dropped, and its blocks go back to the front of the queue, each to an actor on another node where one
    is left (the lost node's other actors may not have failed yet). A block lost a second time raises
    :class:`BlockLost`, which names it. Returns the indices of the blocks retried, in the order they were lost."""
    import ray

    lost = _lost_errors()
    actors: dict[int, Any] = {}
    node: dict[int, str] = {}
    load: dict[int, int] = {}
    made = 0

    def start(k: int) -> None:
        nonlocal made
        new = {made + i: spawn() for i in range(k)}
        made += k
        probes = {a: h.node.remote() for a, h in new.items()}
        for a, ref in probes.items():  # also waits for the actors to be built (in parallel)
            try:
                node[a] = ray.get(ref)
            except lost as exc:
                if getattr(exc, "actor_init_failed", False):
                    raise  # the program does not load there: not a lost node
                continue
            actors[a], load[a] = new[a], 0

    start(max(1, n_actors))
    queue: deque[int] = deque(range(len(parts)))
    inflight: dict[Any, tuple[int, int]] = {}  # ref -> (actor, block)
    failed: dict[int, tuple[str, str]] = {}  # block -> (node, why) of its first loss
    retried: list[int] = []
    done: dict[int, Any] = {}
    next_out = 0

    def feed() -> None:
        while queue and actors:
            b = queue[0]
            free = [a for a in actors if load[a] < depth]
            if not free:
                return
            away = [a for a in free if b not in failed or node[a] != failed[b][0]]
            if not away and any(node[a] != failed[b][0] for a in actors):
                return  # wait for an actor on another node
            a = min(away or free, key=lambda k: load[k])  # the least busy
            queue.popleft()
            inflight[actors[a].score.remote(parts[b])] = (a, b)
            load[a] += 1

    feed()
    while inflight:
        ready, _ = ray.wait(list(inflight), num_returns=1)
        for ref in ready:
            a, b = inflight.pop(ref)
            try:
                rec = ray.get(ref)
            except lost as exc:
                reason = type(exc).__name__
                if b in failed:
                    first, last = span(parts[b])
                    raise BlockLost(b, first, last, label, f"{failed[b][1]}, then {reason}") from exc
                failed[b] = (node[a], reason)
                retried.append(b)
                queue.appendleft(b)
                actors.pop(a, None)  # its other blocks fail too, each lost once
                if not actors and (queue or inflight):
                    start(1)  # every actor lost: one more, wherever Ray can place it
                continue
            load[a] -= 1
            done[b] = rec
            while next_out in done:
                emit(next_out, done.pop(next_out))
                next_out += 1
        feed()
    if next_out < len(parts):  # no actor could be started
        first, last = span(parts[next_out])
        raise BlockLost(next_out, first, last, label, "no actor left to score it")
    return retried


@dataclass
class RayRun:
    """What a run on Ray did: the rows written, the actors, the batches, the wall time and the blocks retried
    after their actor was lost (``(index, first line, last line)``)."""

    rows: int
    actors: int
    batches: int
    seconds: float
    retried: list[tuple[int, int, int]] = field(default_factory=list)

    def line(self) -> str:
        return f"scored {self.rows} rows on Ray ({self.actors} actors, {self.batches} batches) in {self.seconds:.2f} s"

    def retry_line(self, label: str) -> str:
        """One line naming the blocks scored again after their node or actor was lost ('' when none was).

        >>> RayRun(10, 2, 2, 1.0, [(1, 6, 10)]).retry_line("rows.jsonl")
        'warning: 1 block retried on another actor after its node or actor was lost: 1 (rows.jsonl:6-10)'
        """
        if not self.retried:
            return ""
        names = ", ".join(f"{i} ({label}:{a}-{b})" for i, a, b in self.retried)
        s = "" if len(self.retried) == 1 else "s"
        return f"warning: {len(self.retried)} block{s} retried on another actor after its node or actor was lost: {names}"


def score_on_ray(spec: str | Path, params: dict[str, Any], prog: Any, input: Path, label: str, out: IO[str], *,
                 address: str, group_by: str | None, on_bad_row: str, step: int, batch_size: int, workers: int,
                 warn: Callable[[str], None]) -> RayRun:
    """Score ``input`` on Ray (see the module docstring) into ``out``; ``warn`` receives each warning once, as
    in a local run, and the line naming the blocks retried after a lost node. Raises :class:`ScoringError` where a
    local run would, after writing what it would have written, and :class:`BlockLost` for a block lost twice."""
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

        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "runtime_env": {"env_vars": env} if env else None}
        if address == "local":
            ray.init(num_cpus=workers or os.cpu_count() or 1, **kw)
        else:
            kw.pop("include_dashboard")  # a running cluster's own choice
            ray.init(address=address, **kw)
    try:
        parts = cut.result()  # ScoringError (D002: rows of a group apart)
        n_actors = max(1, min(workers or int(ray.cluster_resources().get("CPU", 1)), len(parts) or 1))
        options = {"label": label, "group_by": group_by, "on_bad_row": on_bad_row, "step": step}
        # one CPU each, spread over the nodes; never restarted by Ray: a lost actor's blocks are re-sent here
        remote = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")(_Scorer)
        rows = 0
        warned: set[str] = set()

        def emit(_: int, rec: dict[str, str]) -> None:
            nonlocal rows
            for w in json.loads(rec["warnings"]):  # each actor warns once per block; a local run warns once
                if w not in warned:
                    warned.add(w)
                    warn(w)
            issues = json.loads(rec["issues"])
            if issues:
                raise ScoringError([DataIssue(**i) for i in issues])
            out.write(rec["out"])
            rows += rec["out"].count("\n")

        retried = drive(parts, lambda: remote.remote(str(spec), params, options), n_actors, emit, label=label) \
            if parts else []
    finally:
        if started:
            ray.shutdown()
    run = RayRun(rows, n_actors, len(parts), time.perf_counter() - t0,
                 [(b, *span(parts[b])) for b in retried])
    if run.retried:
        warn(run.retry_line(label))
    return run
