"""``rewardlang ir-groups``: GEPO groups of LLVM IR from C functions with harnesses (the functions themselves:
``rewardlang data cfuncs``, :func:`rewardlang.datasets.cli.write_cfuncs`)."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import typer

__all__ = ["ir_groups", "verify_robot"]


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def ir_groups(input: Path = typer.Option(..., "-i", "--input", help="JSONL rows {id, source, harness}: C source "
                                                                     "defining a function, a C main testing it"),
              output: Path = typer.Option(..., "-o", "--output", help="the groups file to write (JSONL: id, "
                                                                       "prompt, winners, losers)"),
              losers: int = typer.Option(4, "--losers", min=1, help="execution-verified losers per group"),
              max_tries: int = typer.Option(40, "--max-tries", min=1, help="mutants tried per group at most"),
              seed: int = typer.Option(0, "--seed", help="seed of the mutant draw"),
              workers: int = typer.Option(0, "--workers", min=0, help="sandbox slots (0: one per core)"),
              timeout: float = typer.Option(1.0, "--timeout", min=0.1, help="CPU seconds per harness run; a "
                                                                            "mutant over it hangs: discarded"),
              progress: bool = typer.Option(True, "--progress/--no-progress", help="a progress bar on a terminal "
                                                                                   "(minutes for the whole corpus)"),
              ) -> None:
    """GEPO groups of LLVM IR: winners are `clang -S -emit-llvm` of each source at -O0/-O1/-O2/-O3/-Os/-Oz,
    normalised and de-duplicated, each passing the harness; losers are IR mutants the harness shows to behave
    differently. Survivors and hanging mutants are discarded and counted. Every compile and run happens in the
    sandbox, at the level scoring uses (none available: refused)."""
    from rewardlang.datasets.irgroups import build_groups, clang_problem
    from rewardlang.datasets.sandboxed import NoSandbox, open_sandbox
    from rewardlang.jsonl import iter_jsonl
    from rewardlang.outputs import OutputError, atomic_write, check_output
    from rewardlang.progress import progress_bar

    try:
        check_output(output, inputs={"input file": input})
    except OutputError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    if not input.is_file():
        _err(f"error: -i {input}: no such file")
        raise typer.Exit(1)
    problem = clang_problem()
    if problem is not None:
        _err(f"error: {problem}")
        raise typer.Exit(1)
    rows, bad = [], []
    for lineno, row, problem in iter_jsonl(input):
        if problem is not None:
            bad.append(f"{input}:{lineno}: {problem}")
            continue
        missing = [k for k in ("id", "source", "harness") if not isinstance(row.get(k), str) or not row[k].strip()]
        if missing:
            bad.append(f"{input}:{lineno}: " + ", ".join(f"`{k}`" for k in missing) + " must be non-empty strings")
            continue
        rows.append(row)
    if bad:
        for b in bad[:20]:
            _err(f"error: {b}")
        _err(f"error: {len(bad)} bad row(s) in {input}; nothing written")
        raise typer.Exit(1)
    try:  # every compile and run happens in the sandbox: refuse before anything is written when none can be had
        sandbox = open_sandbox("ir-groups", slots=workers or None)
    except NoSandbox as exc:
        _err(f"error: {exc}")
        raise typer.Exit(1)
    t0 = time.perf_counter()
    failed: list[str] = []
    n_groups = 0
    tried: Counter = Counter()
    killed: Counter = Counter()
    tot = Counter()
    with sandbox, atomic_write(output) as fh, \
            progress_bar(len(rows), "ir-groups", enabled=progress, unit="functions") as advance:
        for res in build_groups(rows, sandbox=sandbox, losers=losers, seed=seed, max_tries=max_tries,
                                cpu_s=timeout):
            advance(1)
            tried.update(res.tried)
            killed.update(res.killed)
            tot.update(levels=res.levels, distinct=res.distinct, winners_failed=res.winners_failed,
                       survived=res.survived, timeouts=res.timeouts, invalid=res.invalid, infra=res.infra)
            if res.group is None:
                failed.append(f"{res.id}: {res.error}")
                continue
            n_groups += 1
            tot.update(winners=len(res.group["winners"]), losers=len(res.group["losers"]))
            fh.write(json.dumps(res.group, ensure_ascii=False) + "\n")
    dt = time.perf_counter() - t0
    for f in failed:
        _err(f"skipped {f}")
    n = len(rows)
    _err(f"wrote {n_groups} group(s) of {n} function(s) to {output} in {dt:.1f} s "
         f"({dt / max(n, 1):.2f} s per function); {len(failed)} skipped; every compile and run in the sandbox "
         f"(level {sandbox.level})" + (f"; {tot['infra']} skipped for a sandbox failure" if tot["infra"] else ""))
    if n:
        _err(f"winners: {tot['distinct'] / n:.2f} distinct of {tot['levels'] / n:.0f} levels on average, "
             f"{tot['winners_failed']} failing their harness (dropped); {tot['winners']} kept")
    ops = ", ".join(f"{op} {killed[op]}/{tried[op]}" for op in sorted(tried))
    _err(f"mutants: {sum(tried.values())} tried, {sum(killed.values())} kept as losers (killed), "
         f"{tot['survived']} survived, {tot['timeouts']} hung, {tot['invalid']} did not assemble "
         f"(discarded); killed/tried per operator: {ops or '-'}")
    if n_groups == 0:
        raise typer.Exit(1)


def verify_robot(data: list[dict]) -> list[str]:
    """``rewardlang data robot --verify``: each task whose canonical program does not succeed on every world, as
    ``"TASK: the canonical program gives LABEL (why)"``. The programs run in the sandbox scoring uses; where no
    level can be had, :class:`~rewardlang.datasets.sandboxed.NoSandbox` is raised before any runs (a masked run is
    never a verified task)."""
    from rewardlang.datasets.sandboxed import require_sandbox
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.components.robot import robot_outcome_label

    require_sandbox("data robot --verify")
    res = robot_outcome_label.fn([r["canonical"] for r in data], [r["task"] for r in data], params=None,
                                 ctx=Context())
    out = []
    for r, v, d in zip(data, res.values, res.details):
        if v is None:   # masked: the sandbox failed, not the task: said as such, never as the task's failure
            why = d.get("infra", d) if isinstance(d, dict) else d
            out.append(f"{r['task_id']}: {NOT_RUN} (an infrastructure failure, not the task's: {why}); run it again")
        elif v != "success":
            out.append(f"{r['task_id']}: the canonical program gives {v} ({d})")
    return out


NOT_RUN = "not verified: the sandbox could not run its canonical program"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(typer.run(ir_groups))
