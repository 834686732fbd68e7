"""``rewardlang check SPEC --data ROWS.jsonl``: the spec against real rows before scoring, running no program.

Every row is read as ``score`` reads it (bad lines and bad values named ``FILE:LINE``), and the spec's per-sample
phase runs with ``plan_only`` set: the functions that run tests read and plan every row's tests (the test format,
what runs where, the names the tests use) and run nothing; every other function that would run a program, a tool
or a model (those that keep to the calling process) is skipped; the text functions compute as when scoring, so
the tests, entry points and preludes the test functions receive are exactly those scoring would give them. A file
without a ``completion`` column (a problem file) gets a placeholder completion (a Python block holding ``pass``),
so the test functions are reached.

What it finds: tests that use names nothing defines (they fail for every program: the helpers HumanEval's tests
take from the prompt, when no ``prelude=`` gives them), tests that cannot be read, and data errors. The first two
make ``check`` fail (exit 1), as an example that fails does.

    >>> import json, tempfile, rewardlang
    >>> prog = rewardlang.loads('input tests: text\\ninput entry_point: text\\n'
    ...     'component c in [0, 1] = tests_pass_rate(code_block(completion) or "", tests, entry_point)')
    >>> path = tempfile.mktemp(suffix=".jsonl")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write(json.dumps({"tests": "def check(candidate):\\n    assert poly(candidate(1)) == 1\\n",
    ...                              "entry_point": "f"}) + "\\n")
    >>> rep = check_data(prog, path)
    >>> rep.rows, rep.planned, rep.undefined
    (1, 1, [('f', ['poly'])])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DataCheck", "check_data"]

#: what a row without a completion is checked with: a code block, so the specs' `code_block(...)` finds one
PLACEHOLDER = "```python\npass\n```"


@dataclass
class DataCheck:
    """What :func:`check_data` found."""

    path: str
    rows: int = 0
    #: ``(line, why)``, in the file's order: lines that are not JSON objects (D003, their lines in
    #: :attr:`unreadable_lines`), and rows whose values the spec cannot take or that lack a column it reads (D001)
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    unreadable_lines: set[int] = field(default_factory=set)
    #: distinct test suites read (per batch)
    planned: int = 0
    #: ``(task, names)``: tests that use names nothing defines
    undefined: list[tuple[str, list[str]]] = field(default_factory=list)
    #: ``(task, why)``: tests that cannot be read
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    #: the run's counters (the tasks whose tests assert nothing are warned about from them)
    stats: dict[str, Any] = field(default_factory=dict)
    #: a column no row of the file has (``(column, why)``): nothing could be checked (a column only some rows lack:
    #: those rows are bad rows)
    missing: list[tuple[str, str]] = field(default_factory=list)
    placeholder: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.undefined or self.unreadable or self.missing or self.bad_rows)

    def lines(self) -> list[tuple[str, str]]:
        """``(stream, text)`` lines for the command: ``out`` the summary, ``err`` the findings."""
        from rewardlang.runtime.components.execution import asserts_nothing_lines, undefined_names_lines

        out: list[tuple[str, str]] = []
        for col, why in self.missing:
            out.append(("err", f"error[D001]: {self.path}: column `{col}` {why}"))
        for line, why in sorted(self.bad_rows, key=lambda b: b[0])[:20]:  # the codes `score` gives them
            code = "D003" if line in self.unreadable_lines else "D001"
            out.append(("err", f"error[{code}]: {self.path}:{line}: {why}"))
        if len(self.bad_rows) > 20:
            out.append(("err", f"... and {len(self.bad_rows) - 20} more bad row(s)"))
        for task, why in self.unreadable[:20]:
            out.append(("err", f"error: {self.path}: the tests of `{task}` cannot be read: {why}"))
        out += [("err", line) for line in undefined_names_lines(found=self.undefined, level="error")]
        out += [("err", line) for line in asserts_nothing_lines(self.stats)]
        what = "no completion column: a placeholder completion was used; " if self.placeholder else ""
        out.append(("out", (f"data {self.path}: {self.rows} row(s), {len(self.bad_rows)} bad; {what}"
                            f"{self.planned} test suite(s) read, {len(self.undefined)} using names nothing defines, "
                            f"{len(self.unreadable)} unreadable; no program was run")))
        return out


def check_data(prog: Any, path: str, *, batch_size: int = 2048) -> DataCheck:
    """Check ``prog`` against the JSONL rows of ``path`` without running any program (see the module docstring)."""
    from rewardlang.jsonl import iter_jsonl
    from rewardlang.runtime.components.execution import (
        UNDEFINED_KEY,
        UNREADABLE_KEY,
        undefined_names,
    )
    from rewardlang.runtime.scoring import ScoringError, score_rows

    rep = DataCheck(str(path))
    stats0 = {k: v for k, v in prog.stats.items()}
    # the columns of the whole file first (a second read): whether it is a problem file (no row has a completion),
    # and which columns no row has, are the file's, not a batch's (a batch of rows that lack a column is those rows'
    # problem when other rows have it)
    present: set[str] = set()
    for _, row, problem in iter_jsonl(path):
        if problem is None:
            present.update(row)  # type: ignore[arg-type]
    rep.placeholder = "completion" not in present
    for inp in prog.inputs:
        if (inp.used and inp.name != "completion" and not inp.nullable and inp.column not in present
                and inp.name not in present):
            rep.missing.append((inp.column, f"missing: the spec's input `{inp.name}` reads column `{inp.column}` "
                                            "(no row has it)"))

    def run(batch: list[tuple[int, dict]]) -> None:
        if not batch or rep.missing:  # a column no row has: nothing can be checked
            return
        if rep.placeholder:
            batch = [(ln, dict(r, completion=PLACEHOLDER)) for ln, r in batch]
        # read and scored as `rewardlang score` scores them (plan_only: no program runs); a row that lacks a column
        # another row has is a bad row, named
        try:
            scored = score_rows(prog, [(ln, r, None) for ln, r in batch], on_bad_row="skip", label=str(path),
                                warn=lambda _: None, extra={"plan_only": True})
        except ScoringError as exc:  # not pinned on a row (skip pins every bad value on its row): each row named
            why = "; ".join(i.message for i in exc.issues)
            rep.bad_rows.extend((ln, why) for ln, _ in batch)
            return
        rep.bad_rows += scored.bad_rows
        rep.rows += len(scored.rows)

    batch: list[tuple[int, dict]] = []
    for lineno, row, problem in iter_jsonl(path):
        if problem is not None:
            rep.bad_rows.append((lineno, problem))
            rep.unreadable_lines.add(lineno)
            continue
        batch.append((lineno, row))
        if len(batch) >= batch_size:
            run(batch)
            batch = []
    run(batch)
    rep.bad_rows.sort(key=lambda b: b[0])
    new = {k: v - stats0.get(k, 0) for k, v in prog.stats.items() if isinstance(v, (int, float))}
    rep.planned = int(new.get("tests.planned", 0))
    rep.stats = new
    rep.undefined = [(t, n) for t, n, _ in undefined_names({k: v for k, v in new.items()
                                                             if k.startswith(UNDEFINED_KEY) and v})]
    rep.unreadable = sorted({tuple(k.split("\x1f", 2)[1:]) for k, v in new.items()  # type: ignore[misc]
                             if k.startswith(UNREADABLE_KEY + "\x1f") and v})
    return rep
