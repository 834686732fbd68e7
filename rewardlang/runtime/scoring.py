"""Scoring rows: the one path from JSON rows to scored records, below every command and adapter that scores.

A row is a dict of columns (a line of a JSONL file, a request's sample). :func:`score_rows` scores a list of rows as
one batch: their columns are read and checked (the spec's inputs, by column name), bad rows are failed or skipped
by policy, the advantage groups are read (the spec's own group column, or ``group_by``), and the result is a
:class:`Scored` whose :meth:`~Scored.records` are the input rows with their scores added (:func:`record`: one shape
for every writer). :func:`score_file` scores a JSONL file in batches that never split a group, with the same policy,
a check that each group's rows are contiguous, worker processes only when they repay their start, and the next
batch read while the workers score the last one.

Bad data is a :class:`ScoringError` carrying :class:`DataIssue` values (a stable code, the file, line, row and
column, a message and a hint), never a traceback; the caller prints ``render()``, as it prints spec errors:

- ``D001``: a value of a column is not what the spec's input declares, or a row lacks a column the spec reads (each
  such row named, even where every row of a batch lacks it);
- ``D002``: the rows of a group are not contiguous in a file (a batch would hold part of the group);
- ``D003``: a line is not a JSON object (or names a key twice: :mod:`rewardlang.jsonl`).

    >>> import rewardlang
    >>> prog = rewardlang.loads("input group: text\\ncomponent n in [0, 5] = len(completion)\\ncomponent g = len(group)")
    >>> scored = score_rows(prog, [{"group": "a", "completion": "ab"}, {"group": "a", "completion": "abcdefg"}])
    >>> [(r["reward"], r.get("errors")) for r in scored.records()]
    [(3.0, None), (None, {'n': 'value 7 outside the declared range [0, 5]'})]
    >>> for rows in ([{"group": "a", "completion": 3}], [{"completion": "ab"}]):
    ...     try:
    ...         score_rows(prog, rows, label="rows.jsonl")
    ...     except ScoringError as exc:
    ...         print(exc.render())
    error[D001]: rows.jsonl: row 0: column `completion` expected text, got int
    hint: fix the data, or pass --on-bad-row skip to skip (and count) bad rows
    error[D001]: rows.jsonl: row 0: column `group` missing: the spec's input `group` reads column `group`
    hint: fix the data, or read `group` from another column: `input group: text from "<column>"`
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from rewardlang.jsonl import iter_jsonl, parse_line
from rewardlang.outputs import OutputError, atomic_write, check_output, quiet_broken_pipe
from rewardlang.runtime.parallel import stop_tracker
# the program (and its result's records and data errors) is the room below: scoring reads and writes rows for it
from rewardlang.runtime.program import DataError, Pending, Program, ScoreResult, clean, record, records


__all__ = ["OUTPUT_KEYS", "DataError", "DataIssue", "ScoringError", "Scored", "Summary", "clean", "record", "records",
           "group_keys", "group_value", "GroupOrder", "score_rows", "score_file", "module_main",
           "check_group_column", "check_rows", "bad_rows_line", "pool_pays"]

#: keys a scored record adds to its row; an input column of the same name is replaced (and a warning says so)
OUTPUT_KEYS = ("reward", "components", "advantage", "errors", "masked", "spans")
#: seconds a worker pool costs before it scores anything (spawn, imports, compiled kernels), on a loaded 2-core VM
POOL_START_S = 1.5
#: the share of a core a first batch must have had for `score` to start workers (:func:`pool_pays`)
MIN_CORE_SHARE = 0.8
#: the least a worker's start is taken to cost (:func:`score_file` measures its own process's start)
MIN_POOL_START_S = 0.3
#: rows of `score`'s first batch, on which it decides whether to start workers
DECIDE_ROWS = 2048
#: the most rows of that batch that may repeat an earlier row far before them for workers to be started
#: (:func:`far_repeats`)
FAR_REPEATS_MAX = 0.05


@dataclass(frozen=True)
class DataIssue:
    """One problem with the data, located: ``code`` (D001-D003), ``message``, and where: the ``file`` (its label),
    the ``line`` in it, the ``row`` (0-based) and the data ``column``; ``hint`` says what to do. A row read from a
    file is named ``FILE:LINE`` (its 0-based index is not said beside it: it is one less than the line, and read as
    one); a row given in a list by its position (``rows: row 3``).

        >>> DataIssue("D003", "invalid JSON: Expecting value (column 1)", file="rows.jsonl", line=4).render()
        'error[D003]: rows.jsonl:4: invalid JSON: Expecting value (column 1)'
    """

    code: str
    message: str
    file: str | None = None
    line: int | None = None
    row: int | None = None
    column: str | None = None
    hint: str | None = None

    def render(self, severity: str = "error") -> str:
        where = ""
        if self.file is not None:  # FILE:LINE where the row has a line; a row of a list by its position
            where = self.file + (f":{self.line}" if self.line is not None else
                                 f": row {self.row}" if self.row is not None else "") + ": "
        return f"{severity}[{self.code}]: {where}{self.message}"


class ScoringError(Exception):
    """Bad data that stops a run: its :class:`DataIssue` values, rendered by :meth:`render` (``cause``: the
    program's :class:`DataError`, where the issues come from one)."""

    def __init__(self, issues: Sequence[DataIssue], cause: DataError | None = None) -> None:
        self.issues = list(issues)
        self.cause = cause
        super().__init__(self.render())

    def render(self, limit: int | None = None, hints: bool = True) -> str:
        """The issues' lines (the first ``limit``), then each distinct hint once."""
        lines = [i.render() for i in self.issues[:limit]]
        if limit is not None and len(self.issues) > limit:
            lines.append(f"... and {len(self.issues) - limit} more")
        if hints:
            lines += [f"hint: {h}" for h in dict.fromkeys(i.hint for i in self.issues if i.hint)]
        return "\n".join(lines)


# ---------------------------------------------------------------------- groups

def group_value(g: Any) -> Any:
    """A group column's value as a group id (a list or an object by its JSON, keys sorted)."""
    return json.dumps(g, sort_keys=True) if isinstance(g, (list, dict)) else g


def check_group_column(rows: Sequence[tuple[int, Mapping[str, Any]]], column: str, label: str, *,
                       numbered: bool = True, flag: str = "--group-by") -> None:
    """Raise :class:`ScoringError` (D001) when a row lacks ``column``, the column that groups rows (``--group-by``):
    a typo would otherwise make one group of every row (or a group of the rows that lack it), and every figure of
    the groups would be of the wrong groups. ``rows`` are ``(line, row)`` (``numbered``: lines of ``label``; else
    positions in a list). Every command that groups calls it: ``score``, ``pairs``, ``explain``, ``report``,
    ``audit``.

        >>> try:
        ...     check_group_column([(1, {"prompt": "a"}), (2, {"prompt": "b"})], "promt", "rows.jsonl")
        ... except ScoringError as exc:
        ...     print(exc.render())
        error[D001]: rows.jsonl:1: --group-by promt: no such column (no row has it)
        hint: the rows' columns: prompt
    """
    missing = [n for n, r in rows if column not in r]
    if not missing:
        return
    present = sorted(set().union(*(r.keys() for _, r in rows)) - {column})
    how = ("no row has it" if len(missing) == len(rows) else
           f"{len(missing)} of {len(rows)} rows lack it: a row without it cannot be grouped")
    raise ScoringError([DataIssue("D001", f"{flag} {column}: no such column ({how})", file=label,
                                  line=missing[0] if numbered else None, row=None if numbered else missing[0],
                                  column=column,
                                  hint=f"the rows' columns: {', '.join(present[:20])}" if present else None)])


def group_keys(prog: Program, group_by: str | None) -> list[tuple[str, str, bool]]:
    """(input name, column, main) of each key the advantage groups rows by; ``group_by`` replaces the main one."""
    adv = prog.spec["advantage"]
    if adv is None:
        return [("group", group_by, True)] if group_by else []
    main = adv["scope"][1] if adv["scope"][0] == "group" else None
    out = []
    for key in adv["group_keys"]:
        if key == main and group_by:
            out.append((key, group_by, True))
        else:
            inp = next((i for i in prog.inputs if i.name == key), None)
            out.append((key, inp.column if inp is not None else key, key == main))
    if group_by and main is None:
        out.append(("group", group_by, True))
    return out


class GroupOrder:
    """The D002 check of a stream of batches: a group whose rows come back after a later group's is an error (a
    batch holding part of a group would give it a wrong advantage)."""

    def __init__(self, keys: list[tuple[str, str, bool]], label: str) -> None:
        self.keys, self.label = keys, label
        self.seen: list[set[Any]] = [set() for _ in keys]

    def of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """The row's value of each group key."""
        return tuple(group_value(row.get(col, row.get(key))) for key, col, _ in self.keys)

    def add(self, j: int, values: list[Any]) -> None:
        """Key ``j``'s values of the next batch; :class:`ScoringError` (D002) when one was in an earlier batch."""
        here = set(values)
        again = here & self.seen[j]
        if again:
            g = next(v for v in values if v in again)
            col = self.keys[j][1]
            raise ScoringError([DataIssue("D002", f"rows of group {g!r} are not contiguous in {self.label}; sort it "
                                                  f"by `{col}`", column=col)])
        self.seen[j] |= here


# ---------------------------------------------------------------------- one batch

def columns_needed(prog: Program, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The columns to read: each used input's column (or its name), as present in the rows."""
    present: set[str] = set().union(*(r.keys() for r in rows)) if rows else set()
    out = []
    for i in prog.inputs:
        if i.used and (i.column in present or i.name in present):
            out.append(i.column if i.column in present else i.name)
    return sorted(set(out))


class _Run:
    """What scoring one input keeps between its batches: the policy, the group keys and their order, the bad rows
    skipped, the input columns already warned about."""

    def __init__(self, prog: Program, *, label: str, group_by: str | None, on_bad_row: str, step: int,
                 warn: Callable[[str], None] | None, order: bool = True, numbered: bool = True) -> None:
        if on_bad_row not in ("fail", "skip"):
            raise ValueError(f"on_bad_row is 'fail' or 'skip', not {on_bad_row!r}")
        self.prog, self.label, self.group_by, self.on_bad_row, self.step = prog, label, group_by, on_bad_row, step
        self.warn = warn if warn is not None else _stderr_line
        self.keys = group_keys(prog, group_by)
        # a group key that group_by replaces is not read when the per-sample phase does not need it
        self.skip = [k for k, _, main in self.keys if main and group_by and k not in prog.row_inputs]
        #: the columns of the inputs the per-sample phase reads (where rows that repeat are work done once)
        self.per_sample_columns = [i.column for i in prog.inputs if i.name in prog.row_inputs]
        self.order = GroupOrder(self.keys, label) if order else None
        self.numbered = numbered  # rows carry line numbers of a file (else: positions in a list)
        self.bad_rows: list[tuple[int, str]] = []
        self.warned: set[str] = set()
        self.rows_read = 0  # rows whose columns were read (a batch before this one had every column the spec reads)

    def missing_hint(self, whole: list[tuple[str, str]]) -> str:
        hint = "fix the data"
        prog = self.prog
        for c, _ in whole:
            inp = next((i for i in prog.inputs if c in (i.name, i.column)), None)
            if inp is None or inp.name == "completion":
                continue
            is_main_key = any(k == inp.name and main for k, _, main in self.keys)
            if is_main_key and inp.name in prog.row_inputs:
                hint += (f"; the spec reads `{inp.name}` beyond grouping (--group-by replaces only the group key), "
                         f"so add the column, or read it from another one: `input {inp.name}: {inp.type} from "
                         f'"<column>"`')
            elif is_main_key:
                hint += (f", or group by another column: --group-by <column>, or `input {inp.name}: {inp.type} "
                         f'from "<column>"` in the spec')
            else:
                hint += f', or read `{inp.name}` from another column: `input {inp.name}: {inp.type} from "<column>"`'
        return hint

    def missing(self, batch: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, str, str]]:
        """``(index in the batch, column, message)`` of each row that lacks a column the spec reads (an optional
        input's column may be absent: it is none). Said of each row that lacks it, however the rows are batched: a
        batch every row of which lacks it is not one problem of the batch but one of each of its rows."""
        out: list[tuple[int, str, str]] = []
        rows = [r for _, r in batch]
        present: set[str] | None = None
        for inp in self.prog.inputs:
            if not inp.used or inp.name in self.skip or (inp.nullable and inp.name != "completion"):
                continue
            key = inp.column
            if any(key not in r for r in rows):
                if present is None:
                    present = set().union(*(r.keys() for r in rows))
                # the column read is the input's column, or its name where no row has the column (columns_needed)
                key = inp.column if inp.column in present or inp.name not in present else inp.name
                why = f"missing: the spec's input `{inp.name}` reads column `{inp.column}`"
                out += [(i, key, why) for i, r in enumerate(rows) if key not in r]
        return sorted(out, key=lambda p: p[0])

    def columns(self, batch: list[tuple[int, dict[str, Any]]]
                ) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, list[Any]], dict[str, list[Any]]]:
        """The batch's validated columns (bad rows failed or skipped by the policy): (rows kept, columns, raw).

        Every problem is pinned on its row: a row that lacks a column the spec reads (:meth:`missing`), a value of
        the wrong type. ``fail``: a :class:`ScoringError` naming each bad row (``FILE:LINE``), in the rows' order;
        ``skip``: each bad row counted once in :attr:`bad_rows` (its problems joined), the others scored."""
        prog = self.prog
        lacking = self.missing(batch)
        problems = list(lacking)
        if lacking:
            out = {i for i, _, _ in lacking}
            keep = [i for i in range(len(batch)) if i not in out]
        else:
            keep = list(range(len(batch)))
        part = batch if not lacking else [batch[i] for i in keep]
        rows = [r for _, r in part]
        given = {k: [r.get(k) for r in rows] for k in columns_needed(prog, rows)}
        try:
            if rows:
                cols = prog.columns(len(rows), given, by="column", skip=self.skip)
                if not lacking:
                    self.rows_read += len(rows)
                    return batch, cols, given
        except DataError as exc:
            problems += [(keep[r], c, m) for r, c, m in exc.problems]
            problems.sort(key=lambda p: p[0])
        if self.on_bad_row == "fail":
            raise ScoringError(self._issues(batch, problems, lacking), DataError(problems)) from None
        why: dict[int, list[str]] = {}
        for r, c, m in problems:  # one bad row each, however many of its values are bad
            why.setdefault(r, []).append(f"column `{c}` {m}")
        self.bad_rows += [(batch[r][0], "; ".join(ms)) for r, ms in why.items()]
        batch = [b for i, b in enumerate(batch) if i not in why]
        if not batch:
            return [], {}, {}
        rows = [r for _, r in batch]
        given = {k: [r.get(k) for r in rows] for k in columns_needed(prog, rows)}
        try:  # only good rows are left
            return batch, prog.columns(len(rows), given, by="column", skip=self.skip), given
        except DataError as again:  # a problem the first pass could not pin on a row: every row is bad, counted
            self.bad_rows.extend((ln, f"the batch's columns: {again}") for ln, _ in batch)
            return [], {}, {}

    def _issues(self, batch: list[tuple[int, dict[str, Any]]], problems: list[tuple[int, str, str]],
                lacking: list[tuple[int, str, str]]) -> list[DataIssue]:
        """The D001 issues of ``problems`` (``(index in the batch, column, message)``), each row named."""
        skip_hint = "fix the data, or pass --on-bad-row skip to skip (and count) bad rows"
        hint_of: dict[str, str] = {}
        for c in dict.fromkeys(c for _, c, _ in lacking):
            hint = self.missing_hint([(c, "missing")])
            # a column only some rows lack: skipping them leaves the rest (one every row so far lacks: the spec's to
            # fix, or the data's)
            if self.rows_read or sum(1 for _, c2, _ in lacking if c2 == c) < len(batch):
                hint = skip_hint if hint == "fix the data" else f"{hint}; or pass --on-bad-row skip to skip them"
            hint_of[c] = hint
        lacked = set((r, c) for r, c, _ in lacking)
        issues = []
        for r, c, m in problems:
            where = batch[r][0]
            issues.append(DataIssue("D001", f"column `{c}` {m}", file=self.label,
                                    line=where if self.numbered else None, row=None if self.numbered else where,
                                    column=c, hint=hint_of[c] if (r, c) in lacked else skip_hint))
        return issues

    def groups(self, batch: list[tuple[int, dict[str, Any]]]) -> list[Any] | None:
        """The rows' ids of the main group key when ``group_by`` names it (else None: the program reads the spec's
        own group columns), after checking every key's order; every row must have the ``group_by`` column."""
        rows = [r for _, r in batch]
        group = None
        for j, (key, col, main) in enumerate(self.keys):
            if self.group_by and main:
                check_group_column(batch, col, self.label, numbered=self.numbered)
            if col not in rows[0] and key not in rows[0]:
                continue  # the program reports a group key it needs and lacks
            values = [group_value(r.get(col, r.get(key))) for r in rows]
            if main and self.group_by:
                group = values
            if self.order is not None:
                self.order.add(j, values)
        return group

    def clashes(self, row: dict[str, Any]) -> None:
        clash = [k for k in OUTPUT_KEYS if k in row and k not in self.warned]
        if clash:
            self.warned.update(clash)
            self.warn(f"warning: input column(s) {', '.join(f'`{k}`' for k in clash)} are replaced in the output "
                      "by the scores of the same name; rename them to keep them")

    def check(self, batch: list[tuple[int, dict[str, Any]]], group: Sequence[Any] | None = None) -> _Checked | None:
        """The batch's rows checked: its columns, bad rows failed or skipped, group ids, a warning for input columns
        the scores replace (None: no row left)."""
        if not batch:
            return None
        batch, cols, given = self.columns(batch)
        if not batch:
            return None
        rows = [r for _, r in batch]
        ids = self.groups(batch)
        self.clashes(rows[0])
        return _Checked(batch, cols, given, ids if group is None else group)

    def prepare(self, batch: list[tuple[int, dict[str, Any]]], *, workers: int | None = None,
                run_rows: int | None = None) -> _Batch | None:
        """Check the batch's rows and begin scoring it (on the worker processes, when it goes to them)."""
        c = self.check(batch)
        if c is None:
            return None
        pending = self.prog.begin(c.cols, len(c.rows), step=self.step, group=c.group, raw=c.raw, workers=workers,
                                  run_rows=run_rows)
        return _Batch(c.rows, pending)


@dataclass
class _Checked:
    rows: list[tuple[int, dict[str, Any]]]
    cols: dict[str, list[Any]]
    raw: dict[str, list[Any]]
    group: Sequence[Any] | None


@dataclass
class _Batch:
    rows: list[tuple[int, dict[str, Any]]]
    pending: Pending


def _stderr_line(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")


@dataclass
class Scored:
    """Rows scored together: ``rows`` (the rows kept, each with its line number or position), ``result`` (their
    :class:`~rewardlang.runtime.program.ScoreResult`, None when no row was kept) and ``bad_rows`` (``(line or
    position, reason)`` of each row skipped)."""

    rows: list[tuple[int, dict[str, Any]]]
    result: ScoreResult | None
    bad_rows: list[tuple[int, str]] = field(default_factory=list)

    @property
    def kept(self) -> list[int]:
        """The line numbers (or positions) of the rows scored."""
        return [n for n, _ in self.rows]

    def records(self) -> list[dict[str, Any]]:
        """Each row kept with its scores (:func:`record`) added; the scores replace input columns of their names."""
        if self.result is None:
            return []
        out = []
        for (_, row), scores in zip(self.rows, records(self.result)):
            rec = dict(row)
            rec.update(scores)
            out.append(rec)
        return out

    def jsonl(self) -> str:
        """:meth:`records` as JSON Lines (text, not ASCII-escaped)."""
        encode = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(r, ensure_ascii=False), built once
        return "".join([encode(r) + "\n" for r in self.records()])


def _numbered(rows: Iterable[Any], label: str, on_bad_row: str, bad: list[tuple[int, str]],
              before: Callable[[list[tuple[int, dict[str, Any]]]], Any] | None = None
              ) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """Rows as ``(number, row)``: ``(line, row, problem)`` triples (from :func:`rewardlang.jsonl.iter_jsonl`) keep
    their line numbers (a problem is D003, failed or skipped); plain dicts are numbered by position from 0.
    ``before``: called with the rows before a line that fails, to fail first on a bad value of theirs (the first
    bad row is the one named)."""
    out: list[tuple[int, dict[str, Any]]] = []
    numbered = False
    for i, item in enumerate(rows):
        if isinstance(item, dict):
            out.append((i, item))
            continue
        numbered = True
        lineno, row, problem = item
        if problem is not None:
            if on_bad_row == "fail":
                if before is not None and out:
                    before(out)
                raise ScoringError([DataIssue("D003", problem, file=label, line=lineno,
                                              hint="fix the line, or pass --on-bad-row skip to skip (and count) "
                                                   "bad rows")])
            bad.append((lineno, problem))
            continue
        out.append((lineno, row))
    return out, numbered


def score_rows(prog: Program, rows: Iterable[dict[str, Any] | tuple[int, dict[str, Any] | None, str | None]], *,
               step: int = 0, group_by: str | None = None, group: Sequence[Any] | None = None,
               on_bad_row: str = "fail", label: str = "<rows>", workers: int | None = None,
               warn: Callable[[str], None] | None = None, extra: Mapping[str, Any] | None = None) -> Scored:
    """Score ``rows`` as one batch (a group is whole when all its rows are here; their order does not matter).

    ``rows`` are dicts (numbered by position), or the ``(line, row, problem)`` triples of
    :func:`rewardlang.jsonl.iter_jsonl` (numbered by line; a bad line is D003). ``group_by`` names the column whose
    value groups rows for the advantage in place of the spec's group key; ``group`` gives the ids themselves.
    ``on_bad_row``: ``fail`` (:class:`ScoringError`) or ``skip`` (left out, in ``bad_rows``, one entry a row); a row
    that lacks a column the spec reads is a bad row like any other, whether or not other rows have it. ``workers``: cores for the per-sample phase (default: the program's). ``warn`` receives warnings
    (default: standard error). ``extra`` goes into the functions' ``Context.extra`` (``{"plan_only": True}``).
    """
    run = _Run(prog, label=label, group_by=group_by, on_bad_row=on_bad_row, step=step, warn=warn, order=False)
    run.numbered = True  # (the rows before a line that fails are lines)
    batch, run.numbered = _numbered(rows, label, on_bad_row, run.bad_rows, before=run.columns)
    c = run.check(batch, group)
    if c is None:
        return Scored([], None, run.bad_rows)
    res = prog.score_columns(c.cols, len(c.rows), step=step, group=c.group, raw=c.raw, workers=workers, extra=extra)
    return Scored(c.rows, res, run.bad_rows)


# ---------------------------------------------------------------------- a file

class Summary:
    """What a run scored, for its summary table: per component and for the total, how many values, their sum,
    sum of squares, minimum, maximum, masked and error counts; the rows, the bad rows skipped (``(line, reason)``),
    the infinite values written as null, the seconds per component and the sandbox's counters."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.n: dict[str, int] = {}
        self.sum: dict[str, float] = {}
        self.sq: dict[str, float] = {}
        self.min: dict[str, float] = {}
        self.max: dict[str, float] = {}
        self.masked: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        for k in names + ["total"]:  # an empty input still has a total row (of no values)
            self._column(k)
        self.rows = 0
        self.bad_rows: list[tuple[int, str]] = []
        self.nonfinite: dict[str, int] = {}  # infinite values per column, written as null
        self.elapsed = 0.0
        self.times: dict[str, float] = {}
        self.stats: dict[str, Any] = {}

    def _column(self, k: str) -> None:
        for d, v in ((self.n, 0), (self.sum, 0.0), (self.sq, 0.0), (self.min, math.inf), (self.max, -math.inf),
                     (self.masked, 0), (self.errors, 0)):
            d[k] = v  # type: ignore[index]

    def add(self, out: ScoreResult) -> None:
        self.rows += len(out)
        for k in self.names + ["total"]:
            if k not in self.n:
                self._column(k)
            v = out.total if k == "total" else out.components[k]
            inf = np.isinf(v)
            if inf.any():
                self.nonfinite[k] = self.nonfinite.get(k, 0) + int(inf.sum())
            ok = np.isfinite(v)
            x = v[ok]
            self.n[k] += int(ok.sum())
            self.sum[k] += float(x.sum())
            self.sq[k] += float((x * x).sum())
            if len(x):
                self.min[k] = min(self.min[k], float(x.min()))
                self.max[k] = max(self.max[k], float(x.max()))
            self.masked[k] += int((~ok).sum() - inf.sum())
            if k != "total":
                self.errors[k] += sum(1 for e in out.errors[k] if e is not None)

    def finish(self, elapsed: float, stats: dict[str, Any]) -> None:
        """The run's wall time, and from the program's counters each component's share of the scoring time."""
        self.elapsed = elapsed
        self.stats = dict(stats)
        self.times = {}
        for k, v in stats.items():
            if k.startswith("time:"):
                comps = k[5:].split(",")
                for c in comps:
                    self.times[c] = self.times.get(c, 0.0) + v / len(comps)


def check_rows(prog: Program, rows: Sequence[tuple[int, dict[str, Any]]], label: str) -> None:
    """Raise :class:`ScoringError` naming each bad value ``label:LINE`` as ``score`` does (``rows``: ``(line,
    row)``), scoring nothing: for a command that scores its rows in pieces of its own (``audit``: by step) and would
    otherwise name a row by its place in a piece.

        >>> import rewardlang
        >>> prog = rewardlang.loads("input n: number\\ncomponent c = n * 2")
        >>> try:
        ...     check_rows(prog, [(1, {"completion": "", "n": 1}), (3, {"completion": "", "n": "x"})], "r.jsonl")
        ... except ScoringError as exc:
        ...     print(exc.render(hints=False))
        error[D001]: r.jsonl:3: column `n` expected number, got str
    """
    if rows:
        _Run(prog, label=label, group_by=None, on_bad_row="fail", step=0, warn=lambda _: None,
             order=False).columns(list(rows))


def bad_rows_line(label: str, bad_rows: Sequence[tuple[int, str]], limit: int = 20) -> str:
    """The summary's line naming the rows skipped, ``FILE:LINE`` each, in the file's order.

        >>> bad_rows_line("rows.jsonl", [(5, "invalid JSON"), (2, "column `n` missing")])
        'skipped bad rows: rows.jsonl:2, rows.jsonl:5'
    """
    lines = sorted(n for n, _ in bad_rows)
    shown = ", ".join(f"{label}:{n}" for n in lines[:limit])
    return f"skipped bad rows: {shown}" + (f" … ({len(lines)} in all)" if len(lines) > limit else "")


def count_lines(path: str | os.PathLike[str]) -> int:
    """Lines in a file (newlines), counted in 1 MiB blocks."""
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def score_file(prog: Program, path: str | os.PathLike[str], out: IO[str], *, label: str | None = None,
               group_by: str | None = None, on_bad_row: str = "fail", step: int = 0, batch_size: int = 8192,
               workers: int = 0, progress: Callable[[int, int], None] | None = None,
               warn: Callable[[str], None] | None = None, ending: bool = False) -> Summary:
    """Score the JSONL file at ``path`` into ``out``, one record per row, in input order; returns the summary.

    Rows are scored ``batch_size`` at a time, a batch ending only where every group key changes, so a group is
    never split (its rows must be contiguous: D002). ``workers``: processes for the per-sample phase (0: chosen by
    the work, worker processes only when the rows left repay their start-up). With workers, a batch's records are
    written once the next batch has been read and handed out, so the workers score while this process parses and
    writes JSON. ``progress(lines read, lines in all)`` is called before the first batch and after each one. Bad data raises
    :class:`ScoringError` after writing the records of every batch before it; see :func:`score_rows` for the rest.
    ``ending``: the process exits after this call (the CLI's ``score`` when it is the whole process,
    :func:`rewardlang.outputs.whole_process`): multiprocessing's resource tracker, which a
    pool of workers started, is stopped with the pool, so that nothing outlives the run. It serves the whole
    process, so a library caller (whose process may use multiprocessing itself) leaves it running.
    """
    label = str(path) if label is None else label
    cores = os.cpu_count() or 1
    auto = workers == 0
    # chosen by the work (`auto`): one process until the first batch shows the rest would repay a pool's start.
    # Timed, not guessed from the functions' cost tags: repeated rows are scored once (within a batch, and across
    # batches through the caches), so a file of 16,000 heavy rows may hold 1,312 distinct ones, which a pool with
    # cold caches scores several times slower than this process (measured: 18.7 s against 5.6 s)
    use = 1 if auto else workers
    decided = not auto or cores < 2 or not prog.in_workers
    # the first batch is a probe of at most DECIDE_ROWS rows: a decision after a whole batch of 8,192 came too late
    # for a file of 13,120 (issue 38: its rows left could no longer repay the pool that would have saved 22 %)
    limit = batch_size if decided else min(batch_size, DECIDE_ROWS)
    # a worker's start is this process's own (imports, the program), capped at the figure for a loaded machine;
    # a library caller's process has run longer than its start: the cap
    start = min(POOL_START_S, max(MIN_POOL_START_S, time.process_time()))
    run = _Run(prog, label=label, group_by=group_by, on_bad_row=on_bad_row, step=step, warn=warn)
    summ = Summary([c.name for c in prog.components])
    summ.bad_rows = run.bad_rows
    total_lines = count_lines(path)
    if not auto and workers > 1 and total_lines >= prog.pool_min_rows:
        prog.start_pool(workers)  # the workers import and load while this process reads the first batch
    # a file long enough that the decision will likely be yes, on a machine with a core to spare, whose first rows do
    # not repeat far apart: the workers load while the probe is scored here (in this process either way), and are
    # stopped when the decision is no (their start wasted: ~0.5 s of CPU and ~0.2 s of wall time on a 2-core
    # machine, against ~0.4 s of wall time saved on 13,120 CodePO rows when it is yes)
    # (the share of far repeats is measured once: on the first rows here, else on the probe's rows after it)
    far: float | None = None
    early = not decided and total_lines >= max(4 * DECIDE_ROWS, 8 * prog.pool_min_rows) and _core_to_spare(cores)
    if early:
        far = far_repeats(_head(path, DECIDE_ROWS), run.per_sample_columns)
        early = far <= FAR_REPEATS_MAX
    if early:
        prog.start_pool(cores)
    t0 = time.perf_counter()
    in_flight: _Batch | None = None  # a batch on the workers, written once the next one has been read and handed out

    def emit(prepared: _Batch, helper: _Batch | None = None) -> ScoreResult:
        """Finish scoring a prepared batch (while waiting for the workers, this process scores chunks of
        ``helper``, the batch prepared after it) and write its rows."""
        res = prog.finish(prepared.pending, None if helper is None else helper.pending)
        summ.add(res)
        out.write(Scored(prepared.rows, res).jsonl())
        return res

    def flush(batch: list[tuple[int, dict[str, Any]]]) -> ScoreResult | None:
        """Score and write the batches up to this one; the result of the batch written last, if any."""
        nonlocal in_flight
        # the whole run's size: functions with one-off loads (Numba kernels) load them only where they repay
        prepared = run.prepare(batch, workers=use, run_rows=total_lines)
        res = None
        if in_flight is not None:
            done, in_flight = in_flight, None
            res = emit(done, prepared)
        if prepared is not None:
            if prepared.pending.batch is None:  # scored here: nothing to overlap
                res = emit(prepared)
            else:
                in_flight = prepared
        return res

    if progress is not None:
        progress(0, total_lines)
    try:
        batch: list[tuple[int, dict[str, Any]]] = []
        last: Any = None
        order = run.order
        assert order is not None
        for lineno, row, problem in iter_jsonl(path):
            if problem is not None:
                if on_bad_row == "fail" and batch:  # a bad value on a line before it is the first error
                    run.columns(batch)
                _numbered([(lineno, row, problem)], label, on_bad_row, run.bad_rows)  # D003: fails or counts
                continue
            g = order.of(row)
            # a batch ends only where every group key changes: a group is never split across batches
            if len(batch) >= limit and (last is None or all(a != b for a, b in zip(g, last))):
                w0, c0 = time.perf_counter(), time.process_time()
                res = flush(batch)
                if not decided and res is not None:
                    decided, limit = True, batch_size
                    pays = pool_pays(time.process_time() - c0, time.perf_counter() - w0, len(res),
                                     total_lines - lineno, cores, start)
                    if pays and far is None:
                        far = far_repeats([r for _, r in batch], run.per_sample_columns)
                    if pays and far is not None and far <= FAR_REPEATS_MAX:
                        use = cores
                        prog.start_pool(cores)  # the workers start in the background (or started early)
                    elif early:
                        prog.close()  # started early, not wanted: stopped before they take any rows
                if progress is not None:
                    progress(lineno, total_lines)
                batch = []
            batch.append((lineno, row))
            last = g
        flush(batch)
        flush([])
    except ScoringError:
        if in_flight is not None:  # the rows before the bad one are written, as a run without workers writes them
            done, in_flight = in_flight, None
            emit(done)
        raise
    finally:
        ran_pool = prog.pool_running
        prog.close()
        if ran_pool and ending:
            stop_tracker()  # the process ends here: its pool's resource tracker goes with it
    summ.finish(time.perf_counter() - t0, dict(prog.stats))
    return summ


def pool_pays(cpu: float, wall: float, rows: int, rows_left: int, cores: int, start: float = POOL_START_S) -> bool:
    """Whether `score`'s worker processes would repay their start, judged on a first batch of ``rows`` rows
    scored in this process in ``cpu`` seconds of CPU and ``wall`` seconds of wall time.

    The work is counted in CPU seconds, not wall seconds: on a machine whose cores other programs keep busy
    the wall time of a row grows with their load while its work does not, and a pool chosen on that figure
    (13,120 CodePO rows at load 8 on 2 cores: 3 s more CPU for the same wall time) only competed with them.
    For the same reason the pool needs the first batch to have had a core to itself (``cpu / wall`` at least
    :data:`MIN_CORE_SHARE`): a process that got less shared its core, so no core stood idle for a worker to use.

        >>> pool_pays(cpu=8.0, wall=8.5, rows=8192, rows_left=100_000, cores=2)  # heavy rows, a free core
        True
        >>> pool_pays(cpu=8.0, wall=40.0, rows=8192, rows_left=100_000, cores=2)  # every core busy
        False
        >>> pool_pays(cpu=5.0, wall=5.2, rows=8192, rows_left=4928, cores=2)  # too few rows left to repay it
        False

    ``start``: what a worker's start costs (:data:`POOL_START_S` unless measured: :func:`score_file` takes its own
    process's start, capped there).

        >>> pool_pays(cpu=0.45, wall=0.46, rows=2048, rows_left=11_072, cores=2, start=0.45)  # a quiet, fast machine
        True
    """
    if cores < 2 or rows <= 0 or wall <= 0:
        return False
    per_row = cpu / rows
    # the rows left would take this much less wall time on every core; worth twice the pool's start
    return cpu / wall >= MIN_CORE_SHARE and per_row * rows_left * (1 - 1 / cores) > 2 * start


def _core_to_spare(cores: int) -> bool:
    """Whether the machine's load over the last minute leaves a core free (False where it cannot be read)."""
    try:
        return os.getloadavg()[0] < cores - 0.5
    except OSError:
        return False


def _head(path: str | os.PathLike[str], n: int) -> list[dict[str, Any]]:
    """The first ``n`` readable rows of a JSONL file (a bad row is the scoring loop's to report)."""
    rows: list[dict[str, Any]] = []
    for _, row, problem in iter_jsonl(path):
        if problem is None:
            rows.append(row)
        if len(rows) >= n:
            break
    return rows


def far_repeats(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], near: int = 256) -> float:
    """The share of ``rows`` whose values of ``columns`` (what the per-sample phase reads) equal an earlier row's
    more than ``near`` rows before it. Such a row is a cache hit in this process and fresh work in a worker (each
    keeps its own caches): a file whose rows repeat far apart is scored faster without a pool, whatever its first
    rows cost (measured: 16,000 CodePO rows holding 1,312 distinct ones, 18.7 s with workers against 5.6 s).

        >>> far_repeats([{"c": "a"}, {"c": "b"}, {"c": "a"}, {"c": "b"}], ["c"], near=1)
        0.5
        >>> far_repeats([{"c": "a", "g": 1}, {"c": "a", "g": 2}], ["c"], near=1)  # a repeat next to it: near
        0.0
    """
    seen: dict[Any, int] = {}
    far = 0
    for k, row in enumerate(rows):
        values = tuple(row.get(c) for c in columns)
        key: Any = values
        try:
            hash(values)
        except TypeError:  # a list or object column: its JSON text
            key = json.dumps(values, sort_keys=True, default=str)
        j = seen.get(key)
        if j is not None and k - j > near:
            far += 1
        seen[key] = k
    return far / len(rows) if rows else 0.0


def parse_lines(data: bytes, start: int = 1) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """:func:`rewardlang.jsonl.iter_jsonl` of lines held in memory, numbered from ``start`` (a block of a file)."""
    for k, raw in enumerate(data.split(b"\n")):
        item = parse_line(raw, start + k)
        if item is not None:
            yield item


# ---------------------------------------------------------------------- a compiled module run as a script

def module_main(prog: Program, argv: Sequence[str] | None = None) -> int:
    """``python compiled.py``: score a JSONL file (or standard input) to JSONL on standard output (or a file).

    Each output row is the input row with ``reward``, ``components``, ``advantage`` (when the spec has one)
    and ``errors`` of its scored record (:func:`record`); none and non-finite values are ``null``. The whole input
    is one batch, so groups need not be contiguous. Returns the exit status: 0, or 1 with a message naming the
    line for unreadable input.
    """
    import argparse
    import contextlib

    ap = argparse.ArgumentParser(prog=f"python {prog.name}.py",
                                 description=f"Score a JSONL file with the compiled reward program `{prog.name}`.")
    ap.add_argument("-i", "--input", default="-", help="JSONL rows (default: standard input)")
    ap.add_argument("-o", "--output", default="-", help="JSONL output (default: standard output)")
    ap.add_argument("--group-by", default=None, help="column grouping rows for the advantage")
    ap.add_argument("--step", type=int, default=0, help="training step (for weight schedules)")
    args = ap.parse_args(argv)

    def bad(msg: str) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return 1

    try:
        src = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    except OSError as exc:
        return bad(f"{args.input}: {exc.strerror or exc}")
    rows: list[dict] = []
    lines: list[int] = []
    with src:
        for lineno, raw in enumerate(src, 1):  # read as every reader of rows reads them (rewardlang.jsonl)
            item = parse_line(raw, lineno)
            if item is None:
                continue
            _, row, problem = item
            if problem is not None:
                return bad(f"{args.input}:{lineno}: {problem}")
            rows.append(row)  # type: ignore[arg-type]
            lines.append(lineno)
    scored = Scored([], None)
    if rows:
        try:
            if args.group_by is not None:  # the row that lacks it, by its line (score's own check numbers by position)
                check_group_column(list(zip(lines, rows)), args.group_by, args.input)
            # (no warning about input columns the scores replace: the script's output is documented to do so)
            scored = score_rows(prog, rows, step=args.step, group_by=args.group_by, label=args.input,
                                warn=lambda _: None)
        except ScoringError as exc:
            return bad(str(exc.cause) if exc.cause is not None else exc.render(hints=False).split(": ", 1)[1])
    if args.output != "-":
        try:
            check_output(args.output, inputs={"input file": None if args.input == "-" else args.input})
        except OutputError as exc:
            return bad(str(exc))
    # the script's output: its rows with the documented keys of the scored record
    keys = ("reward", "components", "advantage", "errors")
    try:
        # -o: whole or not at all; standard output read by `head` may close early: that is the reader's choice
        with (atomic_write(args.output) if args.output != "-" else contextlib.nullcontext(sys.stdout)) as out:
            for i, (_, row) in enumerate(scored.rows):
                rec = record(scored.result, i)  # type: ignore[arg-type]
                line = dict(row)
                line.update({k: rec[k] for k in keys if k in rec})
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
            if out is sys.stdout:
                out.flush()
    except OutputError as exc:
        return bad(str(exc))
    except BrokenPipeError:  # `| head`: quiet, status 141, as a C tool killed by SIGPIPE
        try:
            quiet_broken_pipe()
        except SystemExit as exc:  # this function returns its status
            return int(exc.code or 0)
    return 0
