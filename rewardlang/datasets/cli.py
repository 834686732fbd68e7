"""``rewardlang data humaneval --lang L -o FILE`` and ``rewardlang data translate --source S --target T -o FILE``:
the rows as JSONL, written atomically (complete or absent), and a report of what was skipped on standard error.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "go.jsonl")
    >>> report = write_humaneval("go", path)
    >>> report.splitlines()[0].startswith(f"wrote 145 go rows to {path} (19 problems skipped")
    True
    >>> sum(1 for _ in open(path))
    145
"""

from __future__ import annotations

import json
import os
from typing import Any

from rewardlang.outputs import atomic_write, check_output

__all__ = ["write_humaneval", "write_translate"]


def _write(rows: list[dict[str, Any]], path: str) -> None:
    with atomic_write(path) as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_humaneval(language: str, path: str | os.PathLike[str], skipped_report: str | None = None, *,
                    plus: bool = False, per_problem: int | None = None, seed: int = 0,
                    progress: Any = None) -> str:
    """Write one language's rows; the report (the skip reasons with counts) is returned as text, and written as
    JSON to ``skipped_report`` when given. Raises ``ValueError`` for an unknown language.

    ``plus``: generate the hidden tests too (:mod:`rewardlang.datasets.plus`: mutated inputs, the canonical solution
    run in the sandbox as the oracle) and write them as each row's ``plus_tests``, in the format of its ``tests``;
    the report gives the counts (problems covered, extra inputs per problem, what was dropped and why)."""
    from rewardlang.datasets.multilang import build

    check_output(path)
    if skipped_report:
        check_output(skipped_report)
    b = build(language)
    plus_lines: list[str] = []
    plus_json: dict[str, Any] | None = None
    if plus:
        from rewardlang.datasets.plus import DEFAULT_PER_PROBLEM, build_plus, plus_for_language, python_plus_tests

        wanted = sorted(int(r["task_id"].split("/")[1]) for r in b.rows)
        pb = build_plus(wanted, per_problem=per_problem or DEFAULT_PER_PROBLEM, seed=seed, progress=progress)
        by_task = pb.by_task()
        rendered = not_rendered = 0
        for r in b.rows:
            p = by_task.get(r["task_id"])
            if p is None or not p.covered:
                continue
            if language == "python":
                r["plus_tests"] = python_plus_tests(p)
                rendered += len(p.inputs)
            else:
                text, lost = plus_for_language(p, language)
                not_rendered += lost
                if text is not None:
                    r["plus_tests"] = text
                    rendered += len(json.loads(text)["cases"])
        with_plus = sum("plus_tests" in r for r in b.rows)
        plus_lines = pb.report_lines()
        plus_lines.insert(1, f"  {with_plus} of {len(b.rows)} {language} rows have plus_tests: {rendered} extra "
                             f"cases, {rendered / max(1, with_plus):.1f} per row"
                             + (f" ({not_rendered} the target cannot render)" if not_rendered else ""))
        plus_json = {**pb.report_json(), "rows_with_plus": with_plus, "extra_cases": rendered}
    _write(b.rows, os.fspath(path))
    lines = [(f"wrote {len(b.rows)} {language} rows to ... ({len(b.skipped)} problems skipped, "
              f"{b.dropped_cases} cases dropped)")]
    for reason, n in b.reasons().most_common():
        lines.append(f"  skipped {n:3d}: {reason}")
    lines += plus_lines
    if skipped_report:
        with atomic_write(skipped_report) as fh:
            json.dump({"language": language, "rows": len(b.rows), "dropped_cases": b.dropped_cases,
                       "skipped": [{"task_id": t, "reason": r} for t, r in b.skipped],
                       **({"plus": plus_json} if plus_json is not None else {})}, fh, indent=1)
            fh.write("\n")
    return "\n".join(lines).replace("...", os.fspath(path), 1)


def write_translate(source: str, target: str, path: str | os.PathLike[str], split: str = "all") -> str:
    """Write translation rows (see :func:`rewardlang.datasets.translate.translation_rows`); returns the report."""
    from rewardlang.datasets.translate import translation_rows

    check_output(path)
    rows = translation_rows(source, target, split)
    _write(rows, os.fspath(path))
    n_held = sum(r["split"] == "heldout" for r in rows)
    return (f"wrote {len(rows)} {source} -> {target} rows ({len(rows) - n_held} train, {n_held} held out) "
            f"to {os.fspath(path)}")
