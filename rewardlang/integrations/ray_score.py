"""``rewardlang score ... --ray ADDRESS``: a large JSONL scored through Ray Data by a pool of actors.

The file is cut into the batches a local run scores (``--batch-size`` rows, ending only where every group key
changes, so a group is never split) and each batch goes to one of the actors, each of which holds one compiled
program and its sandbox slots and scores the batch exactly as ``rewardlang score`` does in one process. The lines
come back in input order, so the output equals the local run's byte for byte. ``ADDRESS`` is ``local`` (start a
cluster on this machine), ``auto`` (the running cluster) or ``ray://host:port``.

Example (a local cluster of 2 CPUs)::

    rewardlang score specs/codepo.reward -i rows.jsonl -o scored.jsonl --ray local --workers 2
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["blocks", "score_on_ray"]


class RayScoreError(Exception):
    """A batch failed the way a local run fails (a located data error): the message is already written."""


def blocks(prog: Any, input: Path, label: str, *, group_by: str | None, batch_size: int
           ) -> list[dict[str, Any]]:
    """The local run's batches as ``{"start": first line number, "text": raw lines}`` (bad lines included: the
    actor reports or skips them as a local run does). Rows of a group that come back later are a D002 error here."""
    import json

    from rewardlang.cli.common import _err
    from rewardlang.cli.score import _group_json, _group_keys
    from rewardlang.jsonl import iter_jsonl

    keys = _group_keys(prog, group_by)
    seen: list[set[Any]] = [set() for _ in keys]
    out: list[dict[str, Any]] = []
    raw = input.read_bytes().split(b"\n")
    cur: list[int] = []  # line numbers of this block
    here: list[set[Any]] = [set() for _ in keys]
    good = 0
    last: Any = None

    def close() -> None:
        nonlocal cur, here, good
        if not cur:
            return
        for j in range(len(keys)):
            again = here[j] & seen[j]
            if again:
                _err(f"error[D002]: rows of group {next(iter(again))!r} are not contiguous in {label}; sort it by "
                     f"`{keys[j][1]}`")
                raise RayScoreError
            seen[j] |= here[j]
        out.append({"start": cur[0], "text": b"\n".join(raw[cur[0] - 1:cur[-1]]).decode("utf-8", "surrogateescape")})
        cur, here, good = [], [set() for _ in keys], 0

    for lineno, row, problem in iter_jsonl(input):
        if problem is None:
            g = tuple(_group_json(row.get(col, row.get(key))) for key, col, _ in keys)
            if good >= batch_size and (last is None or all(a != b for a, b in zip(g, last))):
                close()
            for j, v in enumerate(g):
                here[j].add(v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))
            last = g
            good += 1
        cur.append(lineno)
    close()
    return out


class _Scorer:
    """A Ray Data actor: one compiled program (and its sandbox slots), scoring one batch per call."""

    def __init__(self, spec: str, sets: list[str] | None, options: dict[str, Any]) -> None:
        from rewardlang.cli.common import _load

        self.prog = _load(Path(spec), sets, scoring=True)
        self.prog.workers = 1  # one core per actor: Ray runs one actor per CPU
        self.options = options
        # what the functions load on first use (compiled kernels: ~0.5 s) is loaded once, now, as a local run's
        # worker processes load it (rewardlang.runtime.parallel): the actor is for large files, and it starts while
        # the driver is still handing out the first batches
        from rewardlang.runtime import registry

        impls = registry.load_all()
        for warm in dict.fromkeys(impls[f].warm for f in self.prog.spec["functions"]):
            if warm is not None:
                warm()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import typer

        from rewardlang.cli.score import _score_file

        outs, errs, codes = [], [], []
        for start, text in zip(batch["start"], batch["text"]):
            # the block sits at its own line numbers, so located errors name the input's lines
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8",
                                             errors="surrogateescape") as f:
                f.write("\n" * (int(start) - 1) + text + "\n")
                path = f.name
            buf, err = io.StringIO(), io.StringIO()
            old = sys.stderr
            sys.stderr = err
            code = 0
            try:
                _score_file(self.prog, Path(path), self.options["label"], buf, group_by=self.options["group_by"],
                            on_bad_row=self.options["on_bad_row"], step=self.options["step"],
                            batch_size=1 << 60, workers=1, progress=False, summary=False)
            except typer.Exit as exc:
                code = int(exc.exit_code or 1)
            finally:
                sys.stderr = old
                os.unlink(path)
            outs.append(buf.getvalue())
            errs.append(err.getvalue())
            codes.append(code)
        return {"out": outs, "err": errs, "code": codes}


def score_on_ray(spec: Path, sets: list[str] | None, prog: Any, input: Path, label: str, out_f: Any, *,
                 address: str, group_by: str | None, on_bad_row: str, step: int, batch_size: int, workers: int,
                 summary: bool) -> None:
    """Score ``input`` on Ray (see the module docstring); raises :class:`RayScoreError` after writing a located
    message when a batch fails as a local run would."""
    from concurrent.futures import ThreadPoolExecutor

    from rewardlang.cli.common import _err

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
        parts = cut.result()  # RayScoreError (rows of a group apart) after its located message
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # the output is in input order
        ctx.enable_progress_bars = False
        n_actors = max(1, min(workers or int(ray.cluster_resources().get("CPU", 1)), len(parts) or 1))
        options = {"label": label, "group_by": group_by, "on_bad_row": on_bad_row, "step": step}
        ds = ray.data.from_items(parts, override_num_blocks=max(1, len(parts)))
        ds = ds.map_batches(_Scorer, batch_size=1, num_cpus=1, concurrency=n_actors, max_restarts=0,
                            fn_constructor_kwargs={"spec": str(spec), "sets": sets, "options": options})
        rows = 0
        for rec in ds.iter_rows():
            if rec["code"]:
                sys.stderr.write(rec["err"])
                raise RayScoreError
            if rec["err"]:
                sys.stderr.write(rec["err"])
            out_f.write(rec["out"])
            rows += rec["out"].count("\n")
    finally:
        if started:
            ray.shutdown()
    if summary:
        _err(f"scored {rows} rows on Ray ({n_actors} actors, {len(parts)} batches) in "
             f"{time.perf_counter() - t0:.2f} s")
