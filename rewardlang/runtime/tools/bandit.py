"""bandit over a whole batch: ``shards`` processes over parts of the batch (bandit is single-threaded).

``bandit -f json -q --ignore-nosec <files>``: no configuration file is read (none is passed with ``-c``
and no directory is scanned, so no ``.bandit`` file is looked up), every test and severity is reported,
and ``# nosec`` comments do not hide findings. Files bandit could not analyse are listed in its report's
``errors``: they are per-sample errors. Columns are UTF-8 byte offsets, converted to characters here.

    >>> from rewardlang.runtime.tools.bandit import scan
    >>> res = scan(["assert x\\n"], timeout=30)
    >>> [(f["test_id"], f["issue_severity"], f["cwe"], f["line"], f["col"]) for f in res[0].findings]
    [('B101', 'LOW', 'CWE-703', 1, 0)]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from rewardlang.runtime.tools.runner import (
    BatchTool, Completed, FileResult, file_name_for, resolve_command, run_batch,
)
from rewardlang.runtime.tools.text import SourceText

__all__ = ["BanditTool", "plan", "scan"]


def bandit_command() -> list[str]:
    """``$REWARDLANG_TOOL_BANDIT`` or ``python -m bandit`` with this interpreter."""
    return resolve_command("bandit", [sys.executable, "-m", "bandit"])


class BanditTool(BatchTool):
    name = "bandit"
    startup_s = 20.0

    def __init__(self, workers: int = 2, texts: dict[str, SourceText] | None = None) -> None:
        self.shards = max(int(workers), 1)
        self.texts = texts or {}

    def argv(self, files: list[str], workdir: Path) -> list[str]:
        return bandit_command() + ["-f", "json", "-q", "--ignore-nosec", "--", *files]

    def interpret(self, run: Completed, files: list[str], workdir: Path) -> tuple[dict[str, FileResult], str | None]:
        # 0: no issue, 1: issues found; anything else (or no JSON) is a failure of the run.
        if run.returncode not in (0, 1):
            return {}, f"bandit exited with status {run.returncode}: {run.tail()}"
        report = json.loads(run.stdout)
        out: dict[str, FileResult] = {}
        for err in report.get("errors", []):
            fname = Path(err.get("filename") or "").name
            out.setdefault(fname, FileResult()).error = f"bandit could not analyse this code: {err.get('reason')}"
        for r in report.get("results", []):
            fname = Path(r.get("filename") or "").name
            res = out.setdefault(fname, FileResult())
            line = int(r.get("line_number") or 1)
            col = int(r.get("col_offset") or 0)
            end_col = r.get("end_col_offset")
            line_range = r.get("line_range") or [line]
            end_line = int(line_range[-1]) if line_range else line
            src = self.texts.get(fname)
            if src is not None:
                col = src.char_col(line, col)
                if end_col is not None:
                    end_col = src.char_col(end_line, int(end_col))
            cwe = r.get("issue_cwe") or {}
            finding: dict[str, Any] = {
                "test_id": r.get("test_id") or "", "test_name": r.get("test_name") or "",
                "issue_severity": (r.get("issue_severity") or "MEDIUM").upper(),
                "issue_confidence": (r.get("issue_confidence") or "").upper(),
                "message": r.get("issue_text") or "", "line": line, "col": col,
                "end_line": end_line, "end_col": None if end_col is None else int(end_col),
                "cwe": f"CWE-{cwe['id']}" if cwe.get("id") else None,
            }
            res.findings.append(finding)
        for res in out.values():
            res.findings.sort(key=lambda f: (f["line"], f["col"], f["test_id"]))
        return out, None


def scan(codes: Sequence[str], *, timeout: float = 30.0, workers: int = 2,
         stats: Counter | None = None) -> list[FileResult]:
    """Run bandit over every code string; one :class:`FileResult` (findings are dicts) per input."""
    tool, sources, names = plan(codes, workers=workers)
    results = run_batch(tool, sources, timeout=timeout, workers=workers, stats=stats)
    return [results[n] for n in names]


def plan(codes: Sequence[str], *, workers: int = 2) -> tuple[BanditTool, dict[str, str], list[str]]:
    """What :func:`scan` runs: the tool, its files ``{name: text}``, and each code's file name (same order)."""
    srcs = [SourceText(c) for c in codes]
    names = [file_name_for(s.text) for s in srcs]
    # a process per core only from 64 files per process: below that its start costs more than it saves
    tool = BanditTool(max(1, min(int(workers), len(set(names)) // 64)), texts=dict(zip(names, srcs)))
    return tool, dict(zip(names, (s.text for s in srcs))), names
