"""The in-Python analyzers of the quality score (radon, vulture, the AST checks) as one batched tool.

They run in a child process (``python -m rewardlang.runtime.tools.pyanalyzers``), ``shards`` of them over
parts of the batch, so that they are time-bounded and a crash cannot take the trainer down. Each file
gets its own budget of CPU time (``ITIMER_PROF``: a stop or a loaded machine never runs it out); the process prints one JSON line per file as soon as it is done, so
after a hard failure (a segfault, the outer deadline) the finished files are kept and only the rest is
retried by :func:`~rewardlang.runtime.tools.runner.run_batch`.

Vulture is run on every file separately through its Python API: its command line analyses all files as
one program (a function defined in one sample and called in another would not be "unused"), which would
make a sample's result depend on the rest of the batch. Like the command line, it also scans the
whitelists vulture ships for the modules a file imports (so ``import sys`` alone is not "unused").
``# noqa`` comments are ignored unless ``respect_noqa``.

Per file and analyzer, the result is ``{"findings": [...], "meta": {...}}`` or ``{"error": "..."}``:

- ``radon``: every block of ``radon.complexity.cc_visit`` (functions, methods, classes; closures inside
  their function, as radon's CLI lists them) with ``complexity`` and ``rank``; ``meta.loc`` (radon raw).
- ``vulture``: every unused-code item at any confidence, with ``confidence`` and ``typ``.
- ``exception_handling``, ``data_structure``, ``resource_use``, ``string_concat``: see
  :mod:`~rewardlang.runtime.tools.astchecks`.

Columns are characters. Selection by rank or confidence is left to the caller.

    >>> from rewardlang.runtime.tools.pyanalyzers import analyze
    >>> res = analyze(["import os\\n"], ["vulture"], timeout=30)
    >>> [(f["typ"], f["name"], f["confidence"]) for f in res[0]["vulture"].findings]
    [('import', 'os', 90)]
"""

from __future__ import annotations

import argparse
import ast
import json
import pkgutil
import signal
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

from rewardlang.runtime.tools.runner import (
    BatchTool, Completed, FileResult, file_name_for, resolve_command, run_batch,
)
from rewardlang.runtime.tools.text import SourceText

__all__ = ["PyAnalyzersTool", "analyze", "finish", "plan", "NAMES"]

NAMES = ("radon", "vulture", "exception_handling", "data_structure", "resource_use", "string_concat")


def pyanalyzers_command() -> list[str]:
    """``$REWARDLANG_TOOL_PYANALYZERS`` or this module run with this interpreter."""
    return resolve_command("pyanalyzers", [sys.executable, "-m", "rewardlang.runtime.tools.pyanalyzers"])


class PyAnalyzersTool(BatchTool):
    name = "pyanalyzers"
    startup_s = 20.0

    def __init__(self, analyzers: Sequence[str], timeout: float, workers: int = 2, respect_noqa: bool = False) -> None:
        self.analyzers = list(analyzers)
        self.timeout = timeout
        self.shards = max(int(workers), 1)
        self.respect_noqa = respect_noqa

    def argv(self, files: list[str], workdir: Path) -> list[str]:
        cmd = pyanalyzers_command() + ["--analyzers", ",".join(self.analyzers), "--timeout", repr(self.timeout)]
        if self.respect_noqa:
            cmd.append("--respect-noqa")
        return cmd + ["--", *files]

    def env(self, workdir: Path) -> dict[str, str]:
        env = super().env(workdir)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        out: dict[str, FileResult] = {}
        done = False
        for line in run.stdout.splitlines():
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # the last line of a killed process may be cut
                continue
            if rec.get("done"):
                done = True
                continue
            out[rec["file"]] = FileResult(findings=[rec["results"]])
        if done and run.returncode == 0:
            return out, None
        return out, f"pyanalyzers exited with status {run.returncode}: {run.tail()}"


def analyze(codes: Sequence[str], analyzers: Sequence[str], *, timeout: float = 30.0, workers: int = 2,
            respect_noqa: bool = False, stats: Counter | None = None) -> list[dict[str, FileResult]]:
    """Run ``analyzers`` over every code string; per input, ``{analyzer: FileResult}``.

    A per-file failure of the whole child (timeout, crash) is an error of every analyzer for that file.
    """
    tool, sources, names = plan(codes, analyzers, timeout=timeout, workers=workers, respect_noqa=respect_noqa)
    results = run_batch(tool, sources, timeout=timeout, workers=workers, stats=stats)
    return finish(results, names, analyzers)


def plan(codes: Sequence[str], analyzers: Sequence[str], *, timeout: float = 30.0, workers: int = 2,
         respect_noqa: bool = False) -> tuple[PyAnalyzersTool, dict[str, str], list[str]]:
    """What :func:`analyze` runs: the tool, its files ``{name: text}``, and each code's file name (same
    order); :func:`finish` reads its results."""
    srcs = [SourceText(c) for c in codes]
    names = [file_name_for(s.text) for s in srcs]
    # a process per core only from 64 files per process: below that its start costs more than it saves
    tool = PyAnalyzersTool(analyzers, timeout, max(1, min(int(workers), len(set(names)) // 64)), respect_noqa)
    return tool, dict(zip(names, (s.text for s in srcs))), names


def finish(results: dict[str, FileResult], names: Sequence[str], analyzers: Sequence[str]
           ) -> list[dict[str, FileResult]]:
    """Per file of ``names``, ``{analyzer: FileResult}`` from the tool's results (what :func:`analyze`
    returns)."""
    out: list[dict[str, FileResult]] = []
    for n in names:
        r = results[n]
        per: dict[str, FileResult] = {}
        if not r.ok or not r.findings:
            for a in analyzers:
                per[a] = FileResult(error=r.error or "pyanalyzers returned nothing", infra=r.infra)
        else:
            rec = r.findings[0]
            for a in analyzers:
                item = rec.get(a)
                if item is None:
                    per[a] = FileResult(error=f"{a} returned nothing")
                elif "error" in item:
                    per[a] = FileResult(error=item["error"])
                else:
                    per[a] = FileResult(findings=item["findings"], meta=item.get("meta") or {})
        out.append(per)
    return out


# ------------------------------------------------------------------------------ the child process
class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that analyzers' ``except Exception`` cannot swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _chars(src: SourceText, f: dict[str, Any]) -> dict[str, Any]:
    f["col"] = src.char_col(f["line"], f.get("col") or 0)
    if f.get("end_col") is not None:
        f["end_col"] = src.char_col(f.get("end_line") or f["line"], f["end_col"])
    return f


def _run_radon(text: str, tree: ast.AST, src: SourceText) -> dict[str, Any]:
    from radon.complexity import cc_rank, cc_visit_ast
    from radon.raw import analyze as raw_analyze

    blocks = []
    for b in cc_visit_ast(tree):
        kind = "class" if type(b).__name__ == "Class" else ("method" if getattr(b, "is_method", False) else "function")
        blocks.append(_chars(src, {
            "name": b.name, "type": kind, "complexity": int(b.complexity), "rank": cc_rank(b.complexity),
            "line": b.lineno, "col": b.col_offset, "end_line": b.endline, "end_col": None,
        }))
    return {"findings": blocks, "meta": {"loc": int(raw_analyze(text).loc)}}


def _run_vulture(text: str, name: str, respect_noqa: bool) -> dict[str, Any]:
    import contextlib
    import io

    import vulture
    import vulture.noqa

    if not respect_noqa:
        vulture.noqa.parse_noqa = lambda code: defaultdict(set)
    v = vulture.Vulture(verbose=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        v.scan(text, filename=name)
        if v.exit_code not in (0, None) and err.getvalue():
            return {"error": f"vulture could not analyse this code: {err.getvalue().strip()[:300]}"}
        # As vulture's command line does (Vulture.scavenge): scan the whitelists vulture ships for the
        # modules the file imports (e.g. ``sys``), which mark some of their names as used.
        for module in sorted({item.name for item in v.defined_imports}):
            wl = Path("whitelists") / f"{module}_whitelist.py"
            try:
                data = pkgutil.get_data("vulture", str(wl))
            except OSError:
                continue
            if data:
                v.scan(data.decode("utf-8"), filename=wl)
    items = []
    for it in v.get_unused_code(min_confidence=0):
        if Path(it.filename).name != name:  # never report inside vulture's own whitelists
            continue
        items.append({
            "typ": it.typ, "name": str(it.name), "confidence": int(it.confidence), "message": it.message,
            "line": it.first_lineno, "col": 0, "end_line": it.last_lineno, "end_col": None,
        })
    return {"findings": items}


def _analyze_file(path: Path, analyzers: Sequence[str], respect_noqa: bool) -> dict[str, Any]:
    from rewardlang.runtime.tools import astchecks

    text = path.read_text(encoding="utf-8")
    src = SourceText(text)
    results: dict[str, Any] = {}
    try:
        tree = ast.parse(text, filename=path.name)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        msg = f"not parseable Python: {type(exc).__name__}: {exc}"
        return {a: {"error": msg} for a in analyzers}
    for a in analyzers:
        try:
            if a == "radon":
                results[a] = _run_radon(text, tree, src)
            elif a == "vulture":
                results[a] = _run_vulture(text, path.name, respect_noqa)
            else:
                results[a] = {"findings": [_chars(src, f) for f in astchecks.ANALYZERS[a](tree)]}
        except RecursionError:
            results[a] = {"error": f"{a} failed on this code: nesting too deep (RecursionError)"}
        except MemoryError:
            results[a] = {"error": f"{a} failed on this code: out of memory"}
        except Exception as exc:  # an analyzer bug on one sample fails that sample, loudly
            results[a] = {"error": f"{a} crashed on this code: {type(exc).__name__}: {exc}"}
    return results


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyanalyzers")
    parser.add_argument("--analyzers", required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--respect-noqa", action="store_true")
    parser.add_argument("files", nargs="*")
    return parser


#: built once where the module is imported (the warm helper's runs only parse their arguments)
_PARSER = _parser()


def main(argv: Sequence[str] | None = None) -> int:
    args = _PARSER.parse_args(argv)
    analyzers = [a for a in args.analyzers.split(",") if a]
    unknown = set(analyzers) - set(NAMES)
    if unknown:
        print(f"unknown analyzers: {sorted(unknown)}", file=sys.stderr)
        return 2
    # Deeply nested (but parseable) code needs more than the default 1000 frames in the visitors.
    sys.setrecursionlimit(20_000)
    # a file's budget is of this process's CPU time, not of the wall clock: a stop from outside or a loaded
    # machine must not turn into a file's timeout, which the quality score takes as the code's own failure (issue
    # 38: a 40 s stop of a server scored two clean programs' quality 0). The run's outer deadline still bounds a
    # run that uses no CPU (runner.Bound: then an infrastructure failure)
    signal.signal(signal.SIGPROF, _on_alarm)
    for f in args.files:
        try:
            signal.setitimer(signal.ITIMER_PROF, max(args.timeout, 0.001))
            try:
                res = _analyze_file(Path(f), analyzers, args.respect_noqa)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        except _Timeout:
            res = {a: {"error": f"timed out after {args.timeout:g}s of CPU"} for a in analyzers}
        sys.stdout.write(json.dumps({"file": Path(f).name, "results": res}) + "\n")
        sys.stdout.flush()
    sys.stdout.write('{"done": true}\n')
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
