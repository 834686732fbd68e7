"""``rewardlang explain``: one row's breakdown.

For every component: its value (after the range/on_error policy), how it was derived (each named `let` and
function call beneath it with its value for this row: tags found, markers counted per pattern, thresholds
crossed), and the spans it produced, highlighted in the completion.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rewardlang.runtime.columns import Col
from rewardlang.runtime.kernels import Pattern
from rewardlang.runtime.scoring import ScoringError, score_rows

__all__ = ["explain_row", "derivation"]


def _show(v: Any, limit: int = 70) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, str):
        s = repr(v)
        return s if len(s) <= limit else s[: limit - 4] + "…" + s[-1]
    if isinstance(v, list):
        s = "[" + ", ".join(_show(x, 20) for x in v[:6]) + (", …" if len(v) > 6 else "") + f"] ({len(v)} items)"
        return s
    return repr(v)


def _cell(col: Any) -> tuple[Any, str | None]:
    if not isinstance(col, Col):
        return col, None
    err = col.err[0] if col.err is not None else None
    if err is not None:
        return None, str(err)
    if col.none is not None and col.none[0]:
        return None, None
    v = col.v[0]
    if isinstance(v, np.floating):
        v = float(v)
    return v, None


def derivation(prog: Any, cols: dict[str, list[Any]], step: int = 0) -> dict[str, Any]:
    """The traced intermediate values of one validated row, keyed by the generated program's variable names."""
    trace: dict[str, Any] = {}
    prog.row_phase({k: v for k, v in cols.items() if k in prog.row_inputs}, 1, step, trace)
    return trace


def explain_row(prog: Any, row: dict[str, Any], step: int = 0, group_rows: list[dict[str, Any]] | None = None,
                index: int = 0, group: list[Any] | None = None) -> None:
    """Print one row's breakdown. ``group_rows`` (holding the row at ``index``) are the rows of its advantage
    group, scored together as ``rewardlang score`` does (:func:`rewardlang.runtime.scoring.score_rows`), so the
    advantage is the row's real one; ``group`` gives their group ids when they come from ``--group-by`` (else the
    spec's own group column is read). Bad values raise :class:`rewardlang.runtime.scoring.ScoringError`."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    batch = group_rows if group_rows else [row]
    if not group_rows:
        index = 0
    out_all = score_rows(prog, batch, step=step, group=group).result
    out = _one(out_all, index)
    n_group = len(batch)
    given = {k: [v] for k, v in row.items()}
    cols = prog.columns(1, given, by="column")
    trace = derivation(prog, cols, step)  # the same row again, traced (scoring above applied the policies)
    completion = cols["completion"][0] if "completion" in cols else None

    t = Table(title=f"spec {prog.name}: total reward {_show(_nan(out.total[0]))}")
    for col in ("component", "value", "weight", "range", "note"):
        t.add_column(col)
    for c in prog.components:
        v = _nan(out.components[c.name][0])
        note = out.errors[c.name][0] or ""
        if out.masked[c.name][0]:
            note = ("masked: " + note) if note else "masked (none)"
        elif note and c.on_error_given:
            note = f"on_error {c.on_error}: {note}"
        t.add_row(c.name, _show(v), f"{out.weights[c.name]:.6g}",
                  f"[{c.range[0]:g}, {c.range[1]:g}]" if c.range else "", note)
    if out.advantages is not None:
        t.caption = (f"advantage: {_show(_nan(out.advantages[0]))} "
                     f"(its group: {n_group} row{'s' if n_group != 1 else ''} of the input)")
    console.print(t)
    if prog.audits:
        console.print(audit_table(prog, row, step))

    # derivation: every named value and call line of the generated rows() for this row
    console.print("\n[bold]derivation[/bold] (generated program, this row)")
    lines = prog.python_source.split("def rows(", 1)[1].split("\n    if trace is not None", 1)[0].splitlines()[2:]
    highlights: list[tuple[int, int, str]] = []
    for line in lines:
        m = re.match(r"\s+(\w+) = (.*)$", line)
        if not m:
            continue
        var, expr = m.groups()
        v, err = _cell(trace.get(var))
        label = _describe(expr, prog)
        shown = f"error: {err}" if err else _show(v)
        console.print(f"  {var:<12} {label:<46} → {shown}", highlight=False, markup=False, soft_wrap=True)
        col = trace.get(var)
        if isinstance(col, Col) and col.off is not None and col.off[0] >= 0 and isinstance(v, str) and v:
            highlights.append((int(col.off[0]), int(col.off[0]) + len(v), var))
        if "_function('count')" in _fn_of(expr, prog) and isinstance(completion, str):
            for pat in _count_patterns(expr, prog):
                hits = [(mm.start(), mm.end()) for mm in pat.regex.finditer(completion)]
                if hits:
                    console.print(f"               {pat!r}: {len(hits)} match(es)", highlight=False, markup=False)
                    highlights.extend((a, b, repr(pat)) for a, b in hits)

    # spans of components, and the regions found above, in the completion
    span_rows = [(s.start, s.end, f"{name}: {s.label} ({s.value:g})") for name, per in out.spans.items()
                 for s in per[0] if s.start >= 0]
    if isinstance(completion, str):
        console.print("\n[bold]completion[/bold] (underlined: extracted text and pattern matches; "
                      "red: component spans)")
        text = Text(completion)
        for a, b, _ in highlights:
            text.stylize("underline", a, b)
        for a, b, _ in span_rows:
            text.stylize("bold red", a, b)
        console.print(text)
    if span_rows:
        console.print("\n[bold]spans[/bold]")
        for a, b, label in span_rows:
            console.print(f"  [{a}, {b}) {label}: {completion[a:b]!r}", highlight=False, markup=False)


def audit_table(prog: Any, row: dict[str, Any], step: int = 0) -> Any:
    """The spec's audits for one row (a rich Table): each audit of samples with its value, and each statistic of the
    run named as such. Audits are not part of the reward; a row without a column an audit reads says so."""
    from rich.table import Table

    t = Table(title="audits (scored on the policy's samples while it trains; never part of the reward)")
    for col in ("audit", "value", "range", "when", "note"):
        t.add_column(col)
    values: Any = None
    note = ""
    ap = prog.audit_program
    if ap is not None:
        try:
            values = score_rows(ap, [row], step=step).result
        except ScoringError as exc:
            note = "not scored: " + "; ".join(i.message for i in exc.issues)
    for a in prog.audits:
        when = f"every {a.every} step{'s' if a.every != 1 else ''}"
        if a.kind == "statistic":
            t.add_row(a.name, "", "", when, f"a statistic of the run: {a.text}")
            continue
        if values is None:
            t.add_row(a.name, "", "", when, note)
            continue
        v = _nan(values.components[a.name][0])
        why = values.errors[a.name][0] or ""
        if values.masked[a.name][0]:
            why = ("masked: " + why) if why else "masked (none)"
        t.add_row(a.name, _show(v), f"[{a.range[0]:g}, {a.range[1]:g}]" if a.range else "", when, why)
    return t


class _Row:
    """One row of a ScoreResult, shaped like a result of one row (index 0)."""

    def __init__(self, res: Any, i: int) -> None:
        self.total = res.total[i:i + 1]
        self.components = {k: v[i:i + 1] for k, v in res.components.items()}
        self.errors = {k: v[i:i + 1] for k, v in res.errors.items()}
        self.masked = {k: v[i:i + 1] for k, v in res.masked.items()}
        self.weights = res.weights
        self.spans = {k: v[i:i + 1] for k, v in res.spans.items()}
        self.advantages = None if res.advantages is None else res.advantages[i:i + 1]


def _one(res: Any, i: int) -> Any:
    return _Row(res, i)


def _nan(x: float) -> float | None:
    return None if x != x else float(x)


def _fn_of(expr: str, prog: Any) -> str:
    m = re.match(r"K\.call\(ctx, (_f\d+),", expr)
    if not m:
        return ""
    for line in prog.python_source.splitlines():
        if line.startswith(m.group(1) + " = "):
            return line
    return ""


def _count_patterns(expr: str, prog: Any) -> list[Any]:
    m = re.match(r"K\.call\(ctx, _f\d+, (_L\d+),", expr)
    if not m:
        return []
    layout = getattr(prog.module, m.group(1), ())
    out = []
    for tag, val in layout:
        if tag == "vs":
            out.extend(Pattern(*v) for v in val if isinstance(v, tuple) and len(v) == 3)
    return out


#: the widest call shown in a derivation line; a longer one is cut between arguments
LABEL_WIDTH = 72


def _static_text(v: Any) -> str:
    """A constant argument as the spec writes it: "text", /regex/flags, 3, true."""
    if isinstance(v, tuple) and len(v) == 3 and v[0] in ("regex", "literal"):
        return f"/{v[1]}/{v[2]}" if v[0] == "regex" else _text_lit(v[1])
    if isinstance(v, str):
        return _text_lit(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if v is None:
        return "none"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_static_text(x) for x in v) + "]"
    return repr(v)


def _text_lit(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def _call_label(name: str, args: list[str], width: int = LABEL_WIDTH) -> str:
    """``name(a, b, ...)``, cut between arguments (never inside one) with `…` when wider than ``width``;
    the first argument is always shown whole."""
    shown: list[str] = []
    for i, a in enumerate(args):
        trial = f"{name}(" + ", ".join(shown + [a]) + (", …)" if i < len(args) - 1 else ")")
        if shown and len(trial) > width:
            return f"{name}(" + ", ".join(shown) + ", …)"
        shown.append(a)
    return f"{name}(" + ", ".join(shown) + ")"


def _describe(expr: str, prog: Any) -> str:
    m = re.match(r"K\.call\(ctx, (_f\d+), (_L\d+), \((.*?)\), (_P\d+|None), ", expr)
    if m:
        fn = _fn_of(expr, prog)
        name = re.search(r"_function\('([^']+)'\)", fn)
        dynamic = [re.sub(r"I\['(\w+)'\]", r"\1", d.strip()) for d in m.group(3).split(",") if d.strip()]
        args: list[str] = []
        for tag, *val in getattr(prog.module, m.group(2), ()):
            if tag == "d":
                args.append(dynamic[val[0]] if val[0] < len(dynamic) else "?")
            elif tag == "s":
                args.append(_static_text(val[0]))
            elif tag == "vs":
                args.extend(_static_text(x) for x in val[0])
            elif tag == "vd":  # pragma: no cover - variadic per-sample arguments
                args.extend(dynamic[j] for j in val[0] if j < len(dynamic))
        opts = getattr(prog.module, m.group(4), None) if m.group(4) != "None" else None
        if opts is not None and hasattr(opts, "model_fields_set"):
            for k in sorted(opts.model_fields_set):
                args.append(f"{k}={_static_text(getattr(opts, k))}")
        return _call_label(name.group(1) if name else "?", args)
    m = re.match(r"K\.step_fn\((_T\d+), (.*)\)$", expr)
    if m:
        arms = getattr(prog.module, m.group(1), ())
        return "step(" + m.group(2).split(",")[0] + ", " + ", ".join(f"{op} {b:g}" for op, b in arms) + ", else)"
    text = re.sub(r"K\.(\w+)\(", r"\1(", expr)
    if len(text) <= LABEL_WIDTH:
        return text
    cut = max(text.rfind(", ", 0, LABEL_WIDTH - 2), text.rfind(" ", 0, LABEL_WIDTH - 2))
    return (text[:cut] if cut > 0 else text[:LABEL_WIDTH - 2]).rstrip(",") + " …"
