"""pylint over a whole batch: ``--jobs=1`` processes over parts of the batch, an explicit message list, no user config.

Parts, not pylint's own ``--jobs`` pool: on the 985 distinct HumanEval programs of ``benchmarks/corpus.py``
one ``--jobs=2`` process took 9.8 s and one ``--jobs=1`` process 3.2 s (2 cores); a part per core only when the
batch has at least 64 files per part (a run's set-up costs more than it saves below that).

Isolation: ``--rcfile`` points at an empty file written into the run's own directory (so no ``pylintrc``,
``setup.cfg``, ``pyproject.toml`` or ``~/.pylintrc`` is read), ``PYLINTHOME`` is that directory (stats and
crash reports stay there), ``--persistent=n``, and messages are ``--disable=all --enable=<list>``.
Messages that compare files with each other (``duplicate-code``, ``cyclic-import``) are always disabled:
in a batch they would compare one sample with another.

Pragmas: unless ``respect_pragmas``, every ``pylint:`` in the text becomes ``pylint;`` (same length) before
linting, so ``# pylint: disable=...`` cannot hide a finding from a reward (also in string literals, where it
changes nothing pylint reports on).

Columns in pylint's report are UTF-8 byte offsets; they are converted to characters here. A per-file fatal
message (``astroid-error``, ``parse-error``, ``fatal``) is a per-sample error; ``syntax-error`` (E0001) is a
normal finding.

    >>> from rewardlang.runtime.tools.pylint import lint
    >>> res = lint(["import os\\n"], enable=["unused-import"], timeout=30)
    >>> [(f.code, f.name, f.line, f.col, f.end_col) for f in res[0].findings]
    [('W0611', 'unused-import', 1, 0, 9)]
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from rewardlang.runtime.tools.ruff import LintFinding
from rewardlang.runtime.tools.runner import (
    BatchTool, Completed, FileResult, file_name_for, resolve_command, run_batch,
)
from rewardlang.runtime.tools.text import SourceText

__all__ = ["PylintTool", "lint", "plan", "neutralize_pragmas", "CROSS_FILE_MESSAGES", "DEFAULT_ENABLE"]

#: messages computed across files: always off, a sample must not be judged against another one
CROSS_FILE_MESSAGES = ("duplicate-code", "cyclic-import")
#: default selection of the ``pylint`` reward function: errors and warnings
DEFAULT_ENABLE: tuple[str, ...] = ("E", "W")
#: fatal messages that mean pylint failed on the file (not a property of the code)
FAILURE_SYMBOLS = frozenset({"astroid-error", "parse-error", "fatal", "method-check-failed", "config-parse-error"})
_PRAGMA = re.compile(r"\bpylint:")
_TYPE_TO_LETTER = {"convention": "C", "refactor": "R", "warning": "W", "error": "E", "fatal": "F", "info": "I"}


def neutralize_pragmas(text: str) -> str:
    """Make ``# pylint: ...`` pragmas inert without changing any offset.

        >>> neutralize_pragmas("import os  # pylint: disable=unused-import")
        'import os  # pylint; disable=unused-import'
    """
    return _PRAGMA.sub("pylint;", text)


def pylint_command() -> list[str]:
    """``$REWARDLANG_TOOL_PYLINT`` or ``python -m pylint`` with this interpreter."""
    return resolve_command("pylint", [sys.executable, "-m", "pylint"])


class PylintTool(BatchTool):
    name = "pylint"
    startup_s = 30.0
    shards = 1

    def __init__(self, enable: Sequence[str], disable: Sequence[str] = (), jobs: int = 2,
                 texts: dict[str, SourceText] | None = None) -> None:
        self.enable = list(enable)
        self.disable = list(disable)
        self.jobs = max(int(jobs), 1)
        #: processes over parts of the batch (each ``--jobs=1``)
        self.shards = self.jobs
        #: the sources by file name, for converting byte columns to characters
        self.texts = texts or {}

    def prepare(self, workdir: Path) -> None:
        (workdir / "empty-pylintrc").write_text("", encoding="utf-8")
        (workdir / ".pylint-home").mkdir(exist_ok=True)

    def env(self, workdir: Path) -> dict[str, str]:
        env = super().env(workdir)
        env["PYLINTHOME"] = str(workdir / ".pylint-home")
        env.pop("PYLINTRC", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def argv(self, files: list[str], workdir: Path) -> list[str]:
        disable = ",".join([*self.disable, *CROSS_FILE_MESSAGES])
        return pylint_command() + [
            f"--rcfile={workdir / 'empty-pylintrc'}", "--output-format=json2", "--persistent=n", "--score=n",
            "--reports=n", "--jobs=1", "--disable=all", f"--enable={','.join(self.enable)}",
            f"--disable={disable}", "--", *files,
        ]

    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        # pylint's exit status is a bit field of the message categories seen; 32 is a usage error.
        rc = run.returncode
        if rc is None or rc < 0 or rc >= 32:
            return {}, f"pylint exited with status {rc}: {run.tail()}"
        report = json.loads(run.stdout)
        out: dict[str, FileResult] = {}
        for m in report["messages"]:
            fname = Path(m.get("path") or m.get("absolutePath") or "").name
            res = out.setdefault(fname, FileResult())
            symbol = m.get("symbol") or ""
            if symbol in FAILURE_SYMBOLS:
                msg = (m.get("message") or "").split(". Please open an issue")[0]
                res.error = f"pylint failed on this code ({symbol}): {msg}"
                continue
            src = self.texts.get(fname)
            line = int(m.get("line") or 1)
            col = int(m.get("column") or 0)
            end_line = m.get("endLine")
            end_col = m.get("endColumn")
            if src is not None:
                col = src.char_col(line, col)
                if end_line is not None and end_col is not None:
                    end_col = src.char_col(int(end_line), int(end_col))
            if end_line is None or end_col is None:
                end_line, end_col = line, None
            letter = _TYPE_TO_LETTER.get(m.get("type") or "", "W")
            res.findings.append(LintFinding(
                code=m.get("messageId") or symbol, name=symbol, message=m.get("message") or "", line=line,
                col=col, end_line=int(end_line), end_col=-1 if end_col is None else int(end_col), severity=letter,
            ))
        for res in out.values():
            res.findings.sort(key=lambda f: (f.line, f.col, f.end_line, f.end_col, f.code))
        return out, None


def lint(codes: Sequence[str], *, enable: Sequence[str] = DEFAULT_ENABLE, disable: Sequence[str] = (),
         respect_pragmas: bool = False, timeout: float = 30.0, workers: int = 2,
         stats: Counter | None = None) -> list[FileResult]:
    """Lint every code string (one pylint run per part of the batch); one :class:`FileResult` per input (same order).

    Findings are :class:`~rewardlang.runtime.tools.ruff.LintFinding` with character columns; ``end_col``
    is ``-1`` when pylint gives no end (the finding then covers the rest of its line). ``severity`` is the
    message category letter (C, R, W, E, F, I).
    """
    tool, sources, names = plan(codes, enable=enable, disable=disable, respect_pragmas=respect_pragmas,
                                workers=workers)
    results = run_batch(tool, sources, timeout=timeout, workers=workers, stats=stats)
    return [results[n] for n in names]


def plan(codes: Sequence[str], *, enable: Sequence[str] = DEFAULT_ENABLE, disable: Sequence[str] = (),
         respect_pragmas: bool = False, workers: int = 2) -> tuple[PylintTool, dict[str, str], list[str]]:
    """What :func:`lint` runs: the tool, its files ``{name: text}``, and each code's file name (same order)."""
    srcs = [SourceText(c) for c in codes]
    texts = [s.text if respect_pragmas else neutralize_pragmas(s.text) for s in srcs]
    names = [file_name_for(t) for t in texts]
    parts = max(1, min(int(workers), len(set(names)) // 64))
    tool = PylintTool(enable, disable, jobs=parts, texts=dict(zip(names, srcs)))
    return tool, dict(zip(names, texts)), names
