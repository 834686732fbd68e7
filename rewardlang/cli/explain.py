"""Commands that look into a spec on rows: ``explain`` (one row, derived) and ``report`` (a pre-flight report)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer

from rewardlang.cli.common import _err, _load, _need_train_stack, _not_a_source
from rewardlang.jsonl import iter_jsonl


def explain(spec: Path = typer.Argument(..., help="spec file"),
            input: Path = typer.Option(..., "--input", "-i", help="JSONL file"),
            row: int = typer.Option(0, "--row", help="row to explain (0-based; line = row + 1)"),
            group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                                             "advantages (as for `score`)"),
            set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE"),
            step: int = typer.Option(0, "--step", help="training step"),
            tokens: bool = typer.Option(False, "--tokens", help="print each token with every component's per-token "
                                                                "value (the spec's `tokens` clauses)"),
            tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="with --tokens: a tokenizer.json or a "
                                                    "local model directory (default: the tiny model's)")) -> None:
    """Explain one row: each component's value, how it was derived, and its spans in the completion.

    The row's advantage is computed with the rows of its group (read from the input, as `score` groups them)."""
    from rewardlang.explain import explain_row

    if tokenizer is not None and not tokens:  # an option that does not apply is refused, never dropped
        _err("error: --tokenizer applies only with --tokens (the per-token table)")
        raise typer.Exit(1)
    if group_by is not None and tokens:  # the per-token table shows the row's own values: no advantage, no group
        _err("error: --group-by does not apply with --tokens (the per-token table has no advantage)")
        raise typer.Exit(1)
    prog = _load(spec, set_, scoring=True)
    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    found = None
    rows: list[dict] = []  # every readable row: the target's group is among them
    lines: list[int] = []
    for i, (lineno, r, problem) in enumerate(iter_jsonl(input)):
        if i == row:
            if problem is not None:
                _err(f"error[D003]: {input}:{lineno}: {problem}")
                raise typer.Exit(1)
            found = r
            index = len(rows)
        if r is not None:
            rows.append(r)
            lines.append(lineno)
    if found is None:
        _err(f"error: {input} has no row {row}")
        raise typer.Exit(1)
    from rewardlang.runtime.scoring import DataError, DataIssue, ScoringError, check_group_column

    if group_by is not None:  # a typo is said, as score, pairs and report say it: never one group of every row
        try:
            check_group_column(list(zip(lines, rows)), group_by, str(input))
        except ScoringError as exc:
            _err(exc.render())
            raise typer.Exit(1)
    group_rows, at, group = _group_of(prog, rows, index, group_by, input)

    try:
        if tokens:
            _explain_tokens(prog, found, step, tokenizer)
        else:
            explain_row(prog, found, step=step, group_rows=group_rows, index=at, group=group)
    except (ScoringError, DataError) as exc:
        issues = exc.issues if isinstance(exc, ScoringError) else [
            DataIssue("D001", f"column `{c}` {m}", row=r, column=c) for r, c, m in exc.problems]
        line_of = {id(r): n for r, n in zip(rows, lines)}  # a row of the group, by its line in the file
        for issue in issues:  # the problem may be the row asked for, or another row of its group
            at_row = group_rows[issue.row] if issue.row is not None and 0 <= issue.row < len(group_rows) else None
            where = (f"{input}:{line_of[id(at_row)]}" if at_row is not None and id(at_row) in line_of else
                     f"{input}: --row {row} or a row of its group")
            _err(f"error[{issue.code}]: {where}: {issue.message}")
        raise typer.Exit(1)


def _explain_tokens(prog: Any, row: dict, step: int, tokenizer_path: str | None) -> None:
    """`explain --tokens`: one line per token, its text and each component's value on it, then the total."""
    _need_train_stack("`explain --tokens` (a tokenizer)")
    from rewardlang.trainers.dense import load_tokenizer, token_table

    try:
        tok = load_tokenizer(tokenizer_path)
    except (OSError, ValueError) as exc:
        _err(f"error: cannot load the tokenizer {tokenizer_path}: {exc}")
        raise typer.Exit(1)
    pieces, names, values, total = token_table(prog, row, tok, step)
    _say_if_masked(prog, row, step)
    # each column as wide as its name or its widest value (-0.01094 is 8 characters), two spaces between columns
    cols = [(n, [f"{v:.4g}" for v in values[n]]) for n in names] + [("reward", [f"{v:.4g}" for v in total])]
    widths = [max([len(head)] + [len(x) for x in cells]) for head, cells in cols]
    typer.echo(f"{'#':>4}  {'token':<16}" + "".join(f"  {head:>{w}}" for (head, _), w in zip(cols, widths)))
    for t, piece in enumerate(pieces):
        cells = "".join(f"  {c[t]:>{w}}" for (_, c), w in zip(cols, widths))
        typer.echo(f"{t:>4}  {repr(piece)[1:-1][:16]:<16}{cells}")
    typer.echo(f"sum of per-token rewards: {sum(total):.6g}")


def _say_if_masked(prog: Any, row: dict, step: int) -> None:
    """`explain --tokens` of a masked row: its table is all zeros because a trainer leaves the row out, not because
    it earned 0; say so, and why (each masked component with its error)."""
    from rewardlang.runtime.program import chat_to_text

    text = chat_to_text(row.get("completion", ""), "assistant")
    res = prog.score([text], step=step, **{k: [v] for k, v in row.items() if k not in ("completion", "completions")})
    if not math.isnan(float(res.total[0])):
        return
    why = []
    for name in res.masked:
        if res.masked[name][0]:
            infra = name in res.infra and bool(res.infra[name][0])
            error = (res.errors.get(name) or [None])[0]
            why.append(f"`{name}` ({'infrastructure failure: ' if infra else ''}{error or 'no value'})")
    typer.echo(f"this row is masked: {', '.join(why) or 'its total is not a number'}; a trainer leaves it out (it "
               "earns no reward, not 0), so every token below shows 0")


def _group_of(prog: Any, rows: list[dict], index: int, group_by: str | None, input: Path
              ) -> tuple[list[dict], int, list[Any] | None]:
    """The rows of the advantage group of ``rows[index]`` (every row with its group value, the batch for
    `advantage over batch`), the row's position among them, and their group ids when ``--group-by`` gave them."""
    adv = prog.spec.get("advantage")
    if adv is None:
        return [rows[index]], 0, None
    if group_by is not None:
        key = lambda r: json.dumps(r.get(group_by), sort_keys=True)  # noqa: E731
        want = key(rows[index])
        members = [i for i, r in enumerate(rows) if key(r) == want]
        return [rows[i] for i in members], members.index(index), [want] * len(members)
    columns = [i.column for i in prog.inputs if i.name in adv.get("group_keys", [])]
    if not columns:  # over the whole batch: every row of the input
        return rows, index, None
    key = lambda r: json.dumps([r.get(c) for c in columns], sort_keys=True)  # noqa: E731
    want = key(rows[index])
    members = [i for i, r in enumerate(rows) if key(r) == want]
    return [rows[i] for i in members], members.index(index), None


def report(spec: Path = typer.Argument(..., help="spec file"),
           input: Path = typer.Option(..., "--input", "-i", help="JSONL file of rows (as for `score`)"),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="write the report here (default: "
                                                                             "standard output)"),
           format: str = typer.Option("html", "--format", help="html (one self-contained page) or json"),
           group_by: Optional[str] = typer.Option(None, "--group-by", help="column whose value groups rows for "
                                                                            "advantages (as for `score`)"),
           step: int = typer.Option(0, "--step", help="training step"),
           probe_threshold: Optional[float] = typer.Option(None, "--probe-threshold", help="flag a reward-hack "
                                                           "probe earning more than this (default: the median "
                                                           "total of the rows)"),
           set_: Optional[list[str]] = typer.Option(None, "--set", help="override a parameter: NAME=VALUE")) -> None:
    """A pre-flight report of a spec on real rows: distributions, none/masked shares and reasons, correlations,
    zero-variance groups, extremes with their breakdown, and reward-hack probes."""
    from rewardlang.report import build_report, render_html
    from rewardlang.runtime.scoring import ScoringError

    if format not in ("html", "json"):
        _err(f"error: --format {format}: use html or json")
        raise typer.Exit(1)
    from rewardlang import outputs

    if output is not None:  # checked before any work; never the input or the spec itself
        outputs.check_output(output, inputs={"input file": input, "spec": spec})
    prog = _load(spec, set_)
    if output is not None:
        _not_a_source(output, prog)  # nor a file the spec imports
    if not input.exists():
        _err(f"error: {input}: no such file")
        raise typer.Exit(1)
    rows, lines, unread = [], [], []
    for lineno, r, problem in iter_jsonl(input):
        if problem is not None:
            unread.append((lineno, problem))  # D003: named in `skipped_rows` with the bad values, in the file's order
        else:
            rows.append(r)
            lines.append(lineno)
    d003 = {n for n, _ in unread}

    def said(skipped: list[tuple[int, str]]) -> None:
        for n, why in skipped:
            _err(f"warning[{'D003' if n in d003 else 'D001'}]: {input}:{n}: {why} (skipped)")

    if not rows:
        said(unread)
        _err(f"error: {input} has no rows")
        raise typer.Exit(1)
    try:
        rep = build_report(prog, rows, bad_rows=unread, group_by=group_by, step=step,
                           probe_threshold=probe_threshold, source=str(input), lines=lines)
    except ScoringError as exc:
        said(unread)
        _err(exc.render())
        raise typer.Exit(1)
    said([(s["line"], s["reason"]) for s in rep["skipped_rows"]])  # counted in the report; said here too
    text = json.dumps(rep, indent=1) + "\n" if format == "json" else render_html(rep)
    from rewardlang.runtime.components.execution import undefined_names_lines

    for line in undefined_names_lines(found=[(x["task"], x["names"]) for x in rep["undefined_names"]]):
        _err(line)
    if output is None:
        typer.echo(text, nl=False)
    else:
        outputs.write_text(output, text)  # whole or absent
        flagged = [p["probe"] for p in rep["probes"]["results"] if p.get("flagged")]
        skipped = f", {rep['bad_rows']} bad rows skipped" if rep["bad_rows"] else ""
        _err(f"wrote {output} ({rep['rows']} rows{skipped}" + (f"; flagged probes: {', '.join(flagged)}" if flagged else "")
             + ")")
