"""ruff over a whole batch: one process, explicit rule selection, no configuration file consulted.

The command is ``ruff check --isolated --no-cache --no-fix --exit-zero --output-format json --select ...``
with ``--ignore-noqa`` unless ``respect_noqa`` (a policy must not be able to silence its own lint with
``# noqa``). ruff 0.17.5 is pinned: its rule set and its syntax-error report change across versions. In
0.17 a syntax error is a diagnostic with code ``invalid-syntax`` (older versions used ``E999``); it is
reported whatever the selection, and several may be reported for one file.

Findings are :class:`LintFinding` tuples with 1-based lines and 0-based *character* columns of the text
the tool saw; :class:`~rewardlang.runtime.tools.text.SourceText` maps them to offsets.

    >>> from rewardlang.runtime.tools.ruff import lint
    >>> res = lint(["import os\\n", "x = 1\\n"], select=["F"], timeout=10)
    >>> [[(f.code, f.line, f.col, f.end_col) for f in r.findings] for r in res]
    [[('F401', 1, 7, 9)], []]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple, Sequence

from rewardlang.runtime.tools.runner import (
    BatchTool, Completed, FileResult, file_name_for, resolve_command, run_batch,
)
from rewardlang.runtime.tools.text import SourceText

__all__ = ["LintFinding", "RuffTool", "lint", "ruff_command", "SYNTAX_ERROR_CODE", "DEFAULT_SELECT"]

#: ruff 0.17's code for a syntax error (E999 before 0.5)
SYNTAX_ERROR_CODE = "invalid-syntax"
#: ruff's own default selection, stated explicitly so it cannot drift with the version or a config file
DEFAULT_SELECT: tuple[str, ...] = ("E4", "E7", "E9", "F")


class LintFinding(NamedTuple):
    """One diagnostic of a linter, positions in the tool's text (1-based lines, 0-based char columns)."""

    code: str
    name: str
    message: str
    line: int
    col: int
    end_line: int
    end_col: int
    severity: str = ""


def ruff_command() -> list[str]:
    """The ruff executable: ``$REWARDLANG_TOOL_RUFF`` or the binary of the installed ``ruff`` package."""
    default: list[str]
    try:
        from ruff.__main__ import find_ruff_bin

        default = [find_ruff_bin()]
    except Exception:  # the package is missing: let the runner report an unusable tool
        default = ["ruff"]
    return resolve_command("ruff", default)


def severity_class(code: str) -> str:
    """A coarse class for a ruff code: ``syntax`` (the file does not parse), ``error`` (will fail at run
    time: undefined names, bad syntax constructs), ``warning`` (likely bugs) or ``style``.

        >>> [severity_class(c) for c in ("invalid-syntax", "F821", "F401", "E501")]
        ['syntax', 'error', 'warning', 'style']
    """
    if code == SYNTAX_ERROR_CODE or code == "E999":
        return "syntax"
    if code.startswith(("E9", "F82", "F63", "F7", "PLE")):
        return "error"
    if code.startswith(("F", "B", "S", "PLW", "E7", "E4")):
        return "warning"
    return "style"


class RuffTool(BatchTool):
    name = "ruff"
    startup_s = 10.0
    shards = 1

    def __init__(self, select: Sequence[str], ignore: Sequence[str] = (), line_length: int = 88,
                 target_version: str = "py311", respect_noqa: bool = False, workers: int = 2) -> None:
        self.select = list(select)
        self.ignore = list(ignore)
        self.line_length = line_length
        self.target_version = target_version
        self.respect_noqa = respect_noqa
        self.workers = workers

    def parallelism(self) -> int:
        return max(self.workers, 1)  # ruff checks files on all cores

    def argv(self, files: list[str], workdir: Path) -> list[str]:
        cmd = ruff_command() + [
            "check", "--isolated", "--no-cache", "--no-fix", "--exit-zero", "--no-preview",
            "--output-format", "json", "--line-length", str(self.line_length),
            "--target-version", self.target_version,
            "--select", ",".join(self.select) if self.select else "",
        ]
        if self.ignore:
            cmd += ["--ignore", ",".join(self.ignore)]
        if not self.respect_noqa:
            cmd.append("--ignore-noqa")
        return cmd + ["--", *files]

    def env(self, workdir: Path) -> dict[str, str]:
        env = super().env(workdir)
        env["RUFF_NO_CACHE"] = "true"
        env.pop("RUFF_CACHE_DIR", None)
        env["RAYON_NUM_THREADS"] = str(max(self.workers, 1))
        return env

    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        if run.returncode != 0:
            return {}, f"ruff exited with status {run.returncode}: {run.tail()}"
        diags = json.loads(run.stdout or "[]")
        out: dict[str, FileResult] = {}
        for d in diags:
            fname = Path(d.get("filename") or "").name
            res = out.setdefault(fname, FileResult())
            code = d.get("code") or SYNTAX_ERROR_CODE
            if code == "E902":  # the file could not be read: the tool failed on this sample
                res.error = f"ruff could not read the code: {d.get('message')}"
                continue
            loc = d.get("location") or {"row": 1, "column": 1}
            end = d.get("end_location") or loc
            res.findings.append(LintFinding(
                code=code, name=d.get("name") or code, message=d.get("message") or "",
                line=int(loc["row"]), col=int(loc["column"]) - 1,
                end_line=int(end["row"]), end_col=int(end["column"]) - 1, severity=severity_class(code),
            ))
        for res in out.values():
            res.findings.sort(key=lambda f: (f.line, f.col, f.end_line, f.end_col, f.code))
        return out, None


def lint(codes: Sequence[str], *, select: Sequence[str] = DEFAULT_SELECT, ignore: Sequence[str] = (),
         line_length: int = 88, target_version: str = "py311", respect_noqa: bool = False,
         timeout: float = 10.0, workers: int = 2, stats: Counter | None = None) -> list[FileResult]:
    """Lint every code string with one ruff process; one :class:`FileResult` per input (same order)."""
    srcs = [SourceText(c) for c in codes]
    names = [file_name_for(s.text) for s in srcs]
    tool = RuffTool(select, ignore, line_length, target_version, respect_noqa, workers)
    results = run_batch(tool, dict(zip(names, (s.text for s in srcs))), timeout=timeout, workers=workers,
                        stats=stats)
    return [results[n] for n in names]
