"""Batched, time-bounded runs of external analysis tools, with per-sample failure isolation.

One call of :func:`run_batch` analyses a whole batch of code strings: every distinct string becomes a file
in a fresh temporary directory and the tool runs once over all of them (or over ``shards`` parts at the
same time, to use every core for tools that are single-threaded). The tool's report is mapped back to the
files.

Failures are never turned into "no findings":

- the tool's executable is missing, or a tiny known-good probe file fails too: the tool is broken for the
  whole batch, every sample gets ``infra=True`` (masked and counted by the runtime, never scored);
- the run times out or crashes but the probe passes: the batch is split in halves, both halves are rerun
  at the same time, and so on until the sample responsible is alone; it gets a per-sample error (timeout
  or crash) and every other sample its real result; a run the machine held back (see below) is rerun the
  same way, and a sample alone still held back is masked (``infra=True``), never its failure;
- a per-file failure the tool reports itself (an internal error on one file) is a per-sample error.

Time bounds: a run over ``k`` files may take ``startup_s + timeout * ceil(k / parallelism)`` seconds, where
``timeout`` is the per-sample budget (the component's ``timeout``). The whole call, isolation included, is
bounded by three times the budget of the first run (times three more where the machine holds the runs back);
samples still unresolved then are marked infra.
The process group of a run that exceeds its deadline is killed. A deadline is of the run's own CPU
(:class:`~rewardlang.runtime.tools.command.Bound`): a run the machine held back (other jobs, a stop from
outside) goes on past it until it has used that much CPU, or up to three times it in real time; a run killed
there under its budget of CPU is an infrastructure failure (its samples masked and counted, never bisected
into a sample's timeout).

Which executable runs a tool can be overridden with an environment variable
``REWARDLANG_TOOL_<NAME>`` (a shell-quoted command line), e.g. ``REWARDLANG_TOOL_PYLINT="python3.12 -m
pylint"``; the startup allowance with ``REWARDLANG_TOOL_STARTUP_S``. The default commands of pylint, bandit
and the in-Python analysers run in a warm helper process (:mod:`~rewardlang.runtime.tools.warm`:
a forked child per run, same deadlines and kills; ``REWARDLANG_TOOL_WARM=0``: a fresh interpreter each time).

    >>> import sys
    >>> from rewardlang.runtime.tools.runner import run_command
    >>> r = run_command([sys.executable, "-c", "print('hi')"], timeout=30)
    >>> (r.returncode, r.stdout.strip(), r.timed_out)
    (0, 'hi', False)
"""

from __future__ import annotations

import hashlib
import math
import os
import shlex
import shutil
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rewardlang.runtime.tools.command import OVERRUN, Completed, run_command, tool_environ
from rewardlang.runtime.tools.warm import run_warm, run_warm_many

__all__ = [
    "Completed", "FileResult", "BatchTool", "run_command", "run_batch", "run_together", "resolve_command",
    "file_name_for", "startup_allowance",
]

#: environment variable prefix for overriding a tool's command line
ENV_PREFIX = "REWARDLANG_TOOL_"
#: small, valid Python every tool must analyse without failing (the health probe)
PROBE_SOURCE = "VALUE = 1\n"


@dataclass
class FileResult:
    """What one tool found in one file: findings, or a per-sample error, or an infrastructure failure."""

    findings: list[Any] = field(default_factory=list)
    error: str | None = None
    infra: bool = False
    #: tool-specific facts about the file that are not findings (e.g. radon's line count)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


def resolve_command(name: str, default: Sequence[str]) -> list[str]:
    """The command line that runs tool ``name``: ``$REWARDLANG_TOOL_<NAME>`` when set, else ``default``."""
    env = os.environ.get(ENV_PREFIX + name.upper())
    if env:
        return shlex.split(env)
    return list(default)


def startup_allowance(default: float) -> float:
    """Seconds a tool run may take on top of the per-sample budgets (interpreter start, imports)."""
    env = os.environ.get(ENV_PREFIX + "STARTUP_S")
    if env:
        try:
            return max(float(env), 0.0)
        except ValueError:
            pass
    return default


def _launch(argv: Sequence[str], *, timeout: float, cwd: Path, env: dict[str, str], stats: Counter) -> Completed:
    """One tool run: in the warm helper when the command is one of its tools (no interpreter start, no
    re-import; :mod:`~rewardlang.runtime.tools.warm`), else a fresh process."""
    run = run_warm(argv, timeout=timeout, cwd=cwd, env=env, stats=stats)
    return run if run is not None else run_command(argv, timeout=timeout, cwd=cwd, env=env)


def file_name_for(text: str, suffix: str = ".py") -> str:
    """A file name derived from the content only, so results never depend on the rest of the batch.

    It is a valid, snake_case module name no sample can plausibly import.

        >>> file_name_for("x = 1\\n")
        'm_e139f73e34322031189110afc1.py'
    """
    digest = hashlib.sha1(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:26]
    return f"m_{digest}{suffix}"


class BatchTool(ABC):
    """One external tool run over many files at once. Subclasses build the command and read the report."""

    #: registry name (``REWARDLANG_TOOL_<NAME>`` overrides the command)
    name: str = ""
    #: seconds allowed for starting the tool, on top of the per-file budgets
    startup_s: float = 20.0
    #: processes started at the same time over parts of the batch (single-threaded tools use > 1)
    shards: int = 1

    def parallelism(self) -> int:
        """How many files the tool analyses at the same time within one run."""
        return 1

    @abstractmethod
    def argv(self, files: list[str], workdir: Path) -> list[str]:
        """The command line that analyses ``files`` (names relative to ``workdir``, the cwd)."""

    @abstractmethod
    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        """Results for the files this run settled, and a description when the run as a whole failed.

        When the second item is None, files missing from the dict had no findings. Otherwise they are
        unresolved and will be retried in isolation.
        """

    def prepare(self, workdir: Path) -> None:  # noqa: B027 - optional hook
        """Write configuration files into ``workdir`` before the first run (isolation from user config)."""

    def env(self, workdir: Path) -> dict[str, str]:
        """The environment of the tool process: this one's, without what would make its verdict depend on the
        host (:func:`tool_environ`)."""
        return tool_environ()


@dataclass
class _Batch:
    tool: BatchTool
    workdir: Path
    timeout: float
    stats: Counter
    budget_end: float = float("inf")
    probe_ok: bool | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    probe_lock: threading.Lock = field(default_factory=threading.Lock)

    def deadline(self, n_files: int) -> float:
        par = max(self.tool.parallelism(), 1)
        return startup_allowance(self.tool.startup_s) + self.timeout * math.ceil(n_files / par)

    def run(self, files: list[str]) -> tuple[dict[str, FileResult], str | None, str]:
        """Run once over ``files``: (settled results, failure, kind) with kind "" (ok or a sample's
        failure), "missing" (no executable), "budget" (the call's time budget ran out first) or "starved" (the
        machine held the run back: :class:`~rewardlang.runtime.tools.command.Bound`)."""
        limit = self.deadline(len(files))
        remaining = self.budget_end - time.monotonic()
        exhausted = f"{self.tool.name}: time budget exhausted while isolating a failing sample; not analysed"
        if remaining <= 0:
            return {}, exhausted, "budget"
        cut = remaining < limit
        run = _launch(self.tool.argv(files, self.workdir), timeout=min(limit, remaining), cwd=self.workdir,
                      env=self.tool.env(self.workdir), stats=self.stats)
        return self.settle(run, files, limit, cut)

    def settle(self, run: Completed, files: list[str], limit: float, cut: bool = False
               ) -> tuple[dict[str, FileResult], str | None, str]:
        """What :meth:`run` returns, from the run over ``files`` that ended as ``run`` (its deadline ``limit``;
        ``cut``: shortened by the call's time budget)."""
        exhausted = f"{self.tool.name}: time budget exhausted while isolating a failing sample; not analysed"
        with self.lock:
            self.stats[f"tool.{self.tool.name}.runs"] += 1
        if run.missing:
            return {}, f"{self.tool.name} could not be started ({run.stderr})", "missing"
        if run.starved:
            # killed at its real-time backstop under its budget of CPU: the machine's doing (a stop, other
            # jobs), never the sample's: its samples are masked and counted, never given the worst value
            with self.lock:
                self.stats[f"tool.{self.tool.name}.starved"] += 1
            return {}, (f"{self.tool.name}: the machine gave the run too little CPU to finish in {run.elapsed:.0f} s "
                        "(an infrastructure failure, not the sample's)"), "starved"
        if run.timed_out:
            results, _ = self._safe_interpret(run, files)
            if cut:
                return results, exhausted, "budget"
            with self.lock:
                self.stats[f"tool.{self.tool.name}.timeouts"] += 1
            return results, f"{self.tool.name} timed out after {limit:.1f}s", ""
        results, failure = self._safe_interpret(run, files)
        if failure is None:
            for f in files:
                results.setdefault(f, FileResult())
        else:
            with self.lock:
                self.stats[f"tool.{self.tool.name}.crashes"] += 1
        return results, failure, ""

    def _safe_interpret(self, run: Completed, files: list[str]) -> tuple[dict[str, FileResult], str | None]:
        try:
            results, failure = self.tool.interpret(run, files, self.workdir)
        except Exception as exc:  # an unreadable report is a crash of the run, not a clean result
            return {}, f"{self.tool.name} report could not be read ({type(exc).__name__}: {exc}); {run.tail()}"
        if run.timed_out and failure is None:
            failure = "timed out"
        wanted = set(files)
        return {k: v for k, v in results.items() if k in wanted}, failure

    def probe(self) -> bool:
        """Does the tool analyse a trivial valid file? Decides between a broken tool and a bad sample."""
        with self.probe_lock:  # one probe per batch, whichever thread asks first
            if self.probe_ok is None:
                self.probe_ok = self._probe()
                with self.lock:
                    self.stats[f"tool.{self.tool.name}.probes"] += 1
            return self.probe_ok

    def _probe(self) -> bool:
        pdir = Path(tempfile.mkdtemp(prefix="rewardlang-probe-", dir=_temp_roots()[0]))
        try:
            self.tool.prepare(pdir)
            name = file_name_for(PROBE_SOURCE)
            (pdir / name).write_text(PROBE_SOURCE, encoding="utf-8")
            limit = startup_allowance(self.tool.startup_s) + self.timeout
            run = _launch(self.tool.argv([name], pdir), timeout=limit, cwd=pdir, env=self.tool.env(pdir),
                          stats=self.stats)
            if run.missing or run.timed_out:
                return False
            try:
                res, failure = self.tool.interpret(run, [name], pdir)
            except Exception:
                return False
            return failure is None and all(r.ok for r in res.values())
        finally:
            shutil.rmtree(pdir, ignore_errors=True)


def _split(items: list[str], parts: int) -> list[list[str]]:
    parts = max(1, min(parts, len(items)))
    size = math.ceil(len(items) / parts)
    return [items[i:i + size] for i in range(0, len(items), size)]


def _temp_roots() -> list[str | None]:
    """Where batch directories go: ``$REWARDLANG_TOOL_TMPDIR``, else ``/dev/shm`` (a RAM disk: creating
    hundreds of small files there is ~40x faster than on an overlay file system), else the default."""
    env = os.environ.get(ENV_PREFIX + "TMPDIR")
    if env:
        return [env]
    roots: list[str | None] = []
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        roots.append("/dev/shm")
    return [*roots, None]


def _fill(tool: BatchTool, workdir: Path, sources: dict[str, str]) -> None:
    """The tool's configuration and every source, written into ``workdir`` (an analyser's scratch directory)."""
    tool.prepare(workdir)
    for name, text in sources.items():
        with open(workdir / name, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)


def _write_sources(tool: BatchTool, sources: dict[str, str]) -> Path:
    """A fresh directory holding every source (and the tool's configuration)."""
    roots = _temp_roots()
    for k, root in enumerate(roots):
        workdir = Path(root or tempfile.gettempdir()) / "missing"
        try:
            workdir = Path(tempfile.mkdtemp(prefix=f"rewardlang-{tool.name}-", dir=root))
            _fill(tool, workdir, sources)
            return workdir
        except OSError:  # e.g. a small /dev/shm is full: try the next place
            shutil.rmtree(workdir, ignore_errors=True)
            if k == len(roots) - 1:
                raise
    raise RuntimeError("unreachable")


def run_together(jobs: Sequence[tuple[BatchTool, dict[str, str]]], *, timeout: float,
                 stats: Counter | None = None) -> list[dict[str, FileResult]] | None:
    """Each ``(tool, {file name: text})`` of ``jobs`` as one run over all its files, every run one after the
    other in one process of the warm helper (one fork instead of one per tool: a small batch's analysis costs
    less than the fork and exit of the helper; issue 38). Each tool runs in a directory of its own with exactly
    the files and command line of :func:`run_batch`'s first run, so what it reports is what that run reports.

    Returns one ``{file name: FileResult}`` per job, or None when the runs cannot go together (a tool that is
    not one of the helper's, the helpers off) or when any of them did not end cleanly (a timeout, a crash, an
    unreadable report, no helper): the caller then runs them apart with :func:`run_batch`, which isolates
    whichever file was the cause. Nothing is cached from a run that is thrown away.
    """
    stats = stats if stats is not None else Counter()
    if not jobs or any(tool.shards != 1 or not sources for tool, sources in jobs):
        return None
    root = Path(tempfile.mkdtemp(prefix="rewardlang-tools-", dir=_temp_roots()[0]))
    try:
        batches, argvs, envs, names = [], [], [], []
        for tool, sources in jobs:
            workdir = root / tool.name
            workdir.mkdir()
            _fill(tool, workdir, sources)
            batch = _Batch(tool, workdir, max(float(timeout), 0.01), stats)
            files = sorted(sources)
            batches.append(batch)
            names.append(files)
            argvs.append(tool.argv(files, workdir))
            envs.append(tool.env(workdir))
        limit = max(b.deadline(len(f)) for b, f in zip(batches, names))
        runs = run_warm_many(argvs, timeout=limit, cwds=[b.workdir for b in batches], envs=envs, stats=stats)
        if runs is None:
            return None
        stats["tool.together.runs"] += 1
        out = []
        for batch, files, run in zip(batches, names, runs):
            if run.missing or run.timed_out or run.returncode is None:
                stats["tool.together.apart"] += 1
                return None
            results, failure, _ = batch.settle(run, files, limit)
            if failure is not None:
                stats["tool.together.apart"] += 1
                return None
            out.append(results)
        return out
    except OSError:  # e.g. a full /dev/shm: run_batch finds another place
        return None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_batch(tool: BatchTool, sources: dict[str, str], *, timeout: float, workers: int = 2,
              stats: Counter | None = None) -> dict[str, FileResult]:
    """Analyse every ``{file name: text}`` of ``sources`` with ``tool``; one :class:`FileResult` per name.

    ``timeout`` is the per-sample budget in seconds; ``workers`` the cores to use at once.
    """
    stats = stats if stats is not None else Counter()
    if not sources:
        return {}
    workdir = _write_sources(tool, sources)
    out: dict[str, FileResult] = {}
    try:
        batch = _Batch(tool, workdir, max(float(timeout), 0.01), stats)
        names = sorted(sources)
        pending = _split(names, tool.shards)
        # three runs' worth, each of which the machine may stretch to OVERRUN x its deadline (Bound)
        batch.budget_end = time.monotonic() + 3 * OVERRUN * batch.deadline(
            math.ceil(len(names) / max(len(pending), 1)))
        with ThreadPoolExecutor(max_workers=max(workers, len(pending), 1)) as pool:
            while pending:
                runs = list(pool.map(batch.run, pending))
                nxt: list[list[str]] = []
                for group, (results, failure, kind) in zip(pending, runs):
                    out.update(results)
                    if failure is None:
                        continue
                    unresolved = [f for f in group if f not in results]
                    if not unresolved:
                        continue
                    if kind == "budget":
                        stats[f"tool.{tool.name}.budget_exhausted"] += len(unresolved)
                        for f in unresolved:
                            out[f] = FileResult(error=failure, infra=True)
                    elif kind == "missing" or not batch.probe():
                        msg = failure if kind == "missing" else \
                            f"{tool.name} is broken (a trivial probe file fails too): {failure}"
                        for f in unresolved:
                            out[f] = FileResult(error=msg, infra=True)
                    elif len(unresolved) == 1:
                        # a sample alone that the machine held back (a stop, other jobs): masked, not its failure
                        out[unresolved[0]] = FileResult(error=failure, infra=kind == "starved")
                        stats[f"tool.{tool.name}.{'starved_samples' if kind == 'starved' else 'sample_failures'}"] += 1
                    else:
                        stats[f"tool.{tool.name}.bisections"] += 1
                        nxt.extend(_split(unresolved, 2))
                pending = nxt
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return out
