"""``rewardlang report``: what a spec does on real rows, before a run spends GPU time on it.

One pass scores every row (through :func:`rewardlang.runtime.scoring.score_rows`, as ``rewardlang score`` does,
the whole file as one batch so that advantage groups are whole), then summarises: per component and for the total, the distribution (a histogram), the share of
none/masked rows with their reasons, and whether it is constant; the scoring time per row; correlations between
components; for grouped data the share of groups whose rewards do not vary (GRPO learns nothing from them) and
the advantage distribution; the rows at each extreme with their breakdown; and probes that hold the spec up
against common reward hacks (an empty answer, the prompt copied back, a right-format wrong answer, an endless
repetition, an always-equal object where tests run), each flagged when it earns more than a threshold.

:func:`build_report` returns plain JSON-ready data (``--format json``); :func:`render_html` turns it into one
self-contained page (inline CSS and SVG: nothing is fetched when it is viewed, no script runs).
"""

from __future__ import annotations

import html
import json
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardlang.runtime.audits import reward_range, scaled
from rewardlang.runtime.scoring import DataIssue, ScoringError, check_group_column, record, score_rows

__all__ = ["build_report", "render_html", "PROBES", "probe_rows", "row_groups"]

BINS = 20
EXTREMES = 3
PROBES = ("empty answer", "prompt copied back", "right format, wrong answer", "endless repetition",
          "always-equal object")


def _f(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _distribution(values: np.ndarray, masked: np.ndarray | None, errors: list[str | None] | None) -> dict:
    n = len(values)
    ok = np.isfinite(values)
    v = values[ok]
    out: dict[str, Any] = {"rows": n, "valid": int(ok.sum()), "none_share": float(1 - ok.mean()) if n else 0.0}
    if masked is not None:
        out["masked_share"] = float(np.asarray(masked, dtype=bool).mean()) if n else 0.0
    reasons: Counter = Counter()
    for e in errors or []:
        if e:
            reasons[re.sub(r"\s+", " ", str(e))[:160]] += 1
    if masked is not None:
        unexplained = int(np.asarray(masked, dtype=bool).sum()) - sum(reasons.values())
        if unexplained > 0:
            reasons["none (the value was none)"] += unexplained
    out["reasons"] = [{"reason": r, "rows": c} for r, c in reasons.most_common(8)]
    if len(v):
        lo, hi = float(v.min()), float(v.max())
        counts, edges = np.histogram(v, bins=BINS, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
        out.update(mean=float(v.mean()), std=float(v.std()), min=lo, max=hi,
                   p5=float(np.percentile(v, 5)), p50=float(np.percentile(v, 50)), p95=float(np.percentile(v, 95)),
                   constant=bool(hi == lo), histogram={"edges": [float(e) for e in edges],
                                                       "counts": [int(c) for c in counts]})
    else:
        out.update(constant=False, histogram=None)
    return out


def _correlations(comps: dict[str, np.ndarray]) -> dict[str, dict[str, float | None]]:
    names = list(comps)
    out: dict[str, dict[str, float | None]] = {a: {} for a in names}
    for a in names:
        for b in names:
            x, y = comps[a], comps[b]
            ok = np.isfinite(x) & np.isfinite(y)
            if ok.sum() < 2 or x[ok].std() == 0 or y[ok].std() == 0:
                out[a][b] = None  # undefined for a constant: the report says so rather than showing 0
            else:
                out[a][b] = float(np.corrcoef(x[ok], y[ok])[0, 1])
    return out


def row_groups(prog: Any, rows: list[dict], group_by: str | None, *, lines: list[int] | None = None,
               label: str = "<rows>") -> list[str] | None:
    """Each row's group id for the advantage: by the ``group_by`` column, else by the spec's group keys (one group
    for ``advantage over batch``); None when neither applies. A ``group_by`` column that a row lacks is a
    :class:`~rewardlang.runtime.scoring.ScoringError` naming the row (``label:LINE`` with ``lines``, else its
    position): a typo made one group of every row, and the zero-variance share of the wrong groups."""
    if group_by is not None:
        check_group_column(list(zip(lines, rows)) if lines is not None else list(enumerate(rows)), group_by, label,
                           numbered=lines is not None)
        return [json.dumps(r.get(group_by), sort_keys=True) for r in rows]
    adv = prog.spec.get("advantage")
    if adv is None:
        return None
    columns = [i.column for i in prog.inputs if i.name in adv.get("group_keys", [])]
    if not columns:
        return ["batch"] * len(rows)
    return [json.dumps([r.get(c) for c in columns], sort_keys=True) for r in rows]


def _score(prog: Any, rows: list[dict], lines: list[int] | None, step: int, group_by: str | None, source: str
           ) -> Any:
    """The rows scored as one batch (:func:`rewardlang.runtime.scoring.score_rows`, grouped as ``score`` groups
    them): a row with a bad value, or that lacks a column the spec reads, is skipped and counted
    (``Scored.bad_rows``, by its line with ``lines``)."""
    given: list[Any] = [(n, r, None) for n, r in zip(lines, rows)] if lines is not None else list(rows)
    return score_rows(prog, given, step=step, group_by=group_by, label=source, on_bad_row="skip")


def probe_rows(template: dict, best_completion: str) -> list[tuple[str, dict | None, str]]:
    """(probe, row or None when it does not apply, what it is) for each reward-hack probe, from a real row."""
    out: list[tuple[str, dict | None, str]] = []

    def row(completion: str) -> dict:
        return {**template, "completion": completion}

    out.append(("empty answer", row(""), "the completion is empty"))
    prompt = template.get("prompt")
    out.append(("prompt copied back", row(prompt) if isinstance(prompt, str) and prompt else None,
                "the completion is the prompt itself" if isinstance(prompt, str) and prompt else
                "no `prompt` column"))
    wrong = "def solution(*args, **kwargs):\n    return None\n"
    if "```" in best_completion:
        fmt = re.sub(r"```(\w*)\n.*?```", lambda m: f"```{m.group(1)}\n{wrong}```", best_completion, flags=re.S)
    elif "<answer>" in best_completion:
        fmt = re.sub(r"<answer>.*?</answer>", "<answer>0</answer>", best_completion, flags=re.S)
    else:
        fmt = f"```python\n{wrong}```"
    out.append(("right format, wrong answer", row(fmt), "the best row's layout with its code or answer replaced"))
    unit = (best_completion.strip().split("\n")[0][:60] or "the answer is") + "\n"
    out.append(("endless repetition", row(unit * max(1, 8000 // len(unit))),
                "the best row's first line repeated to 8,000 characters"))
    entry = template.get("entry_point")
    if not isinstance(entry, str) or not entry:
        m = re.search(r"def\s+([A-Za-z_]\w*)", best_completion)
        entry = m.group(1) if m else "solution"
    always = ("```python\nclass _AlwaysEqual:\n    def __eq__(self, other):\n        return True\n\n"
              "    def __ne__(self, other):\n        return False\n\n    def __hash__(self):\n        return 0\n\n\n"
              f"def {entry}(*args, **kwargs):\n    return _AlwaysEqual()\n```")
    out.append(("always-equal object", row(always), f"`{entry}` returns an object equal to everything"))
    return out


def build_report(prog: Any, rows: list[dict], *, bad_rows: int | Sequence[tuple[int, str]] = 0,
                 group_by: str | None = None, step: int = 0, probe_threshold: float | None = None, source: str = "",
                 lines: list[int] | None = None) -> dict:
    """The report's data (JSON-ready). ``probe_threshold`` defaults to the median total of the real rows: a
    probe that earns more than a typical real completion is flagged. ``lines``: each row's line in ``source``
    (rows are named ``source:LINE``). A row with a bad value, or that lacks a column the spec reads, is skipped and
    counted, each named in ``skipped_rows`` in the file's order, with the rows the caller could not read:
    ``bad_rows``, their ``(line, reason)`` (a bare count: counted, not named); a ``group_by`` column a row lacks is
    a :class:`~rewardlang.runtime.scoring.ScoringError`, and so is every row skipped."""
    from rewardlang.runtime.components.execution import UNDEFINED_KEY, undefined_names

    t0 = time.perf_counter()
    row_groups(prog, rows, group_by, lines=lines, label=source or "<rows>")  # before any scoring
    scored = _score(prog, rows, lines, step, group_by, source or "<rows>")
    unread = [] if isinstance(bad_rows, int) else list(bad_rows)
    skipped = sorted(scored.bad_rows + unread, key=lambda b: b[0])  # the file's order
    if scored.result is None:
        first = scored.bad_rows[0] if scored.bad_rows else None
        where = ("" if first is None else
                 f"; the first, {source or '<rows>'}{':' if lines is not None else ': row '}{first[0]}: {first[1]}")
        raise ScoringError([DataIssue("D001", f"no row could be scored (every row skipped{where})",
                                      file=source or "<rows>")])
    out = scored.result
    rows = [r for _, r in scored.rows]
    kept_lines = [n for n, _ in scored.rows] if lines is not None else None
    group = row_groups(prog, rows, group_by)
    elapsed = time.perf_counter() - t0
    names = [c.name for c in prog.components]
    comps = {n: np.asarray(out.components[n], dtype=float) for n in names}
    total = np.asarray(out.total, dtype=float)
    rep: dict[str, Any] = {
        "spec": prog.name, "input": source, "rows": len(rows), "bad_rows": (bad_rows if isinstance(bad_rows, int) else 0) + len(skipped),
        "skipped_rows": [{"line" if lines is not None else "row": n, "reason": why} for n, why in skipped],
        "step": step,
        "scoring_seconds": elapsed, "ms_per_row": elapsed * 1000 / max(1, len(rows)),
        # latency: the scorer times each component's computation (``time:NAME``, lets it reads included) over the
        # distinct rows it computed, and the batch's phases
        "components": {n: {**_distribution(comps[n], out.masked[n], out.errors[n]),
                           "weight": _f(out.weights[n]), **_latency(out.stats.get(f"time:{n}"), len(rows))}
                       for n in names},
        "phases": {k[5:]: float(v) for k, v in out.stats.items() if k.startswith("time_")},
        "unique_rows": int(out.stats.get("unique_rows", len(rows))),
        "counters": {k: v for k, v in out.stats.items() if not k.startswith("time") and isinstance(v, (int, float))
                     and not k.startswith(UNDEFINED_KEY)},
        # tests that use names nothing defines fail for every program: named here, never a silent 0
        "undefined_names": [{"task": t, "names": n} for t, n, _ in undefined_names(out.stats)],
        "total": _distribution(total, np.isnan(total), None),
        "correlations": _correlations(comps),
        # the spec and what it imports, as read; paths as the user would type them (relative to here when inside)
        "spec_sources": {_shown_path(p): text for p, text in (getattr(prog, "sources", {}) or {}).items()},
    }
    if out.advantages is not None and group is not None:
        adv = np.asarray(out.advantages, dtype=float)
        by: dict[str, list[float]] = {}
        for g, t in zip(group, total, strict=True):
            by.setdefault(g, []).append(t)
        sizes = [len(v) for v in by.values()]
        zero = [g for g, v in by.items() if len([x for x in v if math.isfinite(x)]) >= 1
                and np.nanmax(v) == np.nanmin(v)]
        rep["groups"] = {"groups": len(by), "mean_size": float(np.mean(sizes)) if sizes else 0.0,
                         "zero_variance": len(zero), "zero_variance_share": len(zero) / max(1, len(by)),
                         "singletons": sum(1 for s in sizes if s == 1),
                         "advantage": _distribution(adv, None, None)}
    order = [int(i) for i in np.argsort(-np.nan_to_num(total, nan=-np.inf), kind="stable") if math.isfinite(total[i])]
    rep["extremes"] = {"highest": [_extreme(out, rows, int(i), kept_lines) for i in order[:EXTREMES]],
                       "lowest": [_extreme(out, rows, int(i), kept_lines) for i in order[::-1][:EXTREMES]]}
    valid = total[np.isfinite(total)]
    threshold = probe_threshold if probe_threshold is not None else (float(np.median(valid)) if len(valid) else 0.0)
    rep["probes"] = _probes(prog, rows, out, order, threshold, step, source)
    if kept_lines is not None and "template_row" in rep["probes"]:
        rep["probes"]["template_line"] = kept_lines[rep["probes"]["template_row"]]
    if prog.audits:
        rep["audits"] = _audits(prog, rows, total, step, rep["probes"])
    return rep


def _audit_score(prog: Any, rows: list[dict], step: int) -> Any:
    """The audits of samples on the rows, scored as the rows are (their program's components are the audits)."""
    return score_rows(prog.audit_program, rows, step=step).result


def _audits(prog: Any, rows: list[dict], total: np.ndarray, step: int, probes: dict) -> dict:
    """The spec's audits on the rows: each audit of samples' distribution, its correlation with the total and the
    gap (the total's mean minus the audit's, both scaled to [0, 1] by their declared ranges where known); and what
    each probe earns on the audits (a hack that fools the reward should not fool them). Statistics of a run are
    listed; they need a training run (`rewardlang audit RUN_DIR`)."""
    out: dict[str, Any] = {"statistics": [{"name": a.name, "text": a.text, "every": a.every}
                                          for a in prog.audits if a.kind == "statistic"],
                           "samples": {}, "error": None}
    sampled = [a for a in prog.audits if a.kind == "samples"]
    if not sampled or not rows:
        return out
    try:
        res = _audit_score(prog, rows, step)
    except ScoringError as exc:
        problems = exc.cause.problems if exc.cause is not None else []
        out["error"] = "; ".join(f"column `{c}` {m}" for _, c, m in problems[:3]) or exc.render(hints=False)
        return out
    rr = reward_range(prog, step)
    for a in sampled:
        v = np.asarray(res.components[a.name], dtype=float)
        ok = np.isfinite(v) & np.isfinite(total)
        corr = float(np.corrcoef(v[ok], total[ok])[0, 1]) if ok.sum() >= 2 and v[ok].std() > 0 and \
            total[ok].std() > 0 else None
        gap = None
        if ok.any() and rr is not None and a.range is not None:
            gap = float(np.mean(scaled(total[ok], rr)) - np.mean(scaled(v[ok], a.range)))
        out["samples"][a.name] = {**_distribution(v, res.masked[a.name], res.errors[a.name]), "text": a.text,
                                  "every": a.every, "correlation_with_total": corr, "gap": gap,
                                  "range": list(a.range) if a.range else None}
    live = [p for p in probes.get("results", []) if p.get("applies")]
    template = probes.get("template_row")
    if live and template is not None:
        plan = {name: r for name, r, _ in probe_rows(dict(rows[template]), rows[template].get("completion")
                                                        if isinstance(rows[template].get("completion"), str) else "")}
        probed = [plan[p["probe"]] for p in live]
        try:
            pres = _audit_score(prog, probed, step)
        except ScoringError:
            pres = None
        if pres is not None:
            for k, p in enumerate(live):
                p["audits"] = {a.name: _f(pres.components[a.name][k]) for a in sampled}
    return out


def _shown_path(path: str) -> str:
    import os

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _latency(seconds: Any, rows: int) -> dict:
    if seconds is None:
        return {"seconds": None, "ms_per_row": None}
    return {"seconds": float(seconds), "ms_per_row": float(seconds) * 1000 / max(1, rows)}


def _extreme(out: Any, rows: list[dict], i: int, lines: list[int] | None = None) -> dict:
    r = record(out, i)
    completion = rows[i].get("completion")
    text = completion if isinstance(completion, str) else json.dumps(completion)
    return {"row": i, **({"line": lines[i]} if lines is not None else {}), "total": r["reward"],
            "components": r["components"], "errors": r.get("errors", {}), "masked": r.get("masked", []), "advantage": r.get("advantage"),
            "completion": text[:600] + ("…" if len(text) > 600 else "")}


def _probes(prog: Any, rows: list[dict], out: Any, order: list[int], threshold: float, step: int, source: str
            ) -> dict:
    if not rows:
        return {"threshold": threshold, "results": []}
    best = order[0] if order else 0
    template = dict(rows[best])
    best_completion = template.get("completion") if isinstance(template.get("completion"), str) else ""
    plan = probe_rows(template, best_completion)
    live = [(name, r, what) for name, r, what in plan if r is not None]
    scored = score_rows(prog, [r for _, r, _ in live], step=step, label=f"{source} (probes)").result if live else None
    results = []
    k = 0
    for name, r, what in plan:
        if r is None:
            results.append({"probe": name, "applies": False, "what": what})
            continue
        res = record(scored, k)  # type: ignore[arg-type]
        k += 1
        results.append({"probe": name, "applies": True, "what": what, "total": res["reward"],
                        "components": res["components"], "errors": res.get("errors", {}),
                        "flagged": res["reward"] is not None and res["reward"] > threshold})
    return {"threshold": threshold, "template_row": best, "results": results}


# ---------------------------------------------------------------------- HTML


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#1b1f24}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:6px 0}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f6f8}td.l,th.l{text-align:left}.card{display:inline-block;vertical-align:top;margin:6px;
padding:8px;border:1px solid #ddd;border-radius:6px}.warn{color:#a40000;font-weight:600}.ok{color:#176117}
pre{white-space:pre-wrap;background:#f6f8fa;padding:6px;max-height:160px;overflow:auto;font-size:12px}
svg text{font-size:10px;fill:#555}
.highlight pre{max-height:none;font-size:12px;line-height:1.35}summary{cursor:pointer}
"""


def _num(x: Any) -> str:
    return "–" if x is None else f"{x:.4g}"


def _hist_svg(h: dict | None, title: str) -> str:
    if not h:
        return "<p>no valid values</p>"
    counts, edges = h["counts"], h["edges"]
    w, ht, pad = 320, 120, 18
    top = max(counts) or 1
    bw = (w - 2 * pad) / len(counts)
    bars = "".join(
        f'<rect x="{pad + i * bw:.1f}" y="{ht - pad - c / top * (ht - 2 * pad):.1f}" width="{max(bw - 1, 1):.1f}" '
        f'height="{c / top * (ht - 2 * pad):.1f}" fill="#4472c4"><title>[{edges[i]:.4g}, {edges[i + 1]:.4g}): '
        f'{c}</title></rect>' for i, c in enumerate(counts))
    return (f'<svg role="img" aria-label="{html.escape(title)}" width="{w}" height="{ht}" '
            f'viewBox="0 0 {w} {ht}" xmlns="http://www.w3.org/2000/svg">{bars}'
            f'<line x1="{pad}" y1="{ht - pad}" x2="{w - pad}" y2="{ht - pad}" stroke="#999"/>'
            f'<text x="{pad}" y="{ht - 4}">{edges[0]:.4g}</text>'
            f'<text x="{w - pad}" y="{ht - 4}" text-anchor="end">{edges[-1]:.4g}</text>'
            f'<text x="{pad}" y="10">max bin {top}</text></svg>')


def _dist_card(name: str, d: dict, extra: str = "") -> str:
    e = html.escape
    flags = []
    if d.get("constant"):
        flags.append('<span class="warn">constant: it cannot rank completions</span>')
    if d.get("none_share", 0) > 0:
        flags.append(f'<span class="warn">none/masked: {d["none_share"]:.1%}</span>')
    reasons = "".join(f'<tr><td class="l">{e(r["reason"])}</td><td>{r["rows"]}</td></tr>' for r in d["reasons"])
    return (f'<div class="card"><h3>{e(name)}{extra}</h3>{_hist_svg(d.get("histogram"), name)}'
            f'<table><tr><th>valid</th><th>mean</th><th>std</th><th>min</th><th>p50</th><th>max</th></tr>'
            f'<tr><td>{d["valid"]}/{d["rows"]}</td><td>{_num(d.get("mean"))}</td><td>{_num(d.get("std"))}</td>'
            f'<td>{_num(d.get("min"))}</td><td>{_num(d.get("p50"))}</td><td>{_num(d.get("max"))}</td></tr></table>'
            + (f'<p>latency: {d["seconds"]:.3g} s ({d["ms_per_row"]:.3g} ms per row)</p>'
               if d.get("seconds") is not None else "")
            + f'{"<br>".join(flags)}'
            + (f'<table><tr><th class="l">why none/masked</th><th>rows</th></tr>{reasons}</table>' if reasons else "")
            + "</div>")


def _undefined_html(found: list[dict]) -> list[str]:
    """The warning about tests that use names nothing defines (they fail for every program)."""
    if not found:
        return []
    e = html.escape
    items = "".join(f"<li><code>{e(x['task'])}</code>: " + ", ".join(f"<code>{e(n)}</code>" for n in x["names"])
                    + "</li>" for x in found)
    return [(f'<p class="warn">The tests of {len(found)} task(s) use names nothing defines, so those tests fail '
             f"for every program:</p><ul>{items}</ul><p>Give the helpers as trusted code with <code>prelude=</code> "
             "(the shipped specs pass the row's prompt), or put them at the head of the tests.</p>")]


def render_html(rep: dict) -> str:
    """One self-contained page (inline CSS and SVG; no script, no network)."""
    e = html.escape
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>rewardlang report: {e(rep['spec'])}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>Reward report: spec <code>{e(rep['spec'])}</code></h1>",
             f"<p>{rep['rows']} rows of <code>{e(rep['input'])}</code> (bad rows skipped: {rep['bad_rows']}), "
             f"training step {rep['step']}; scored in {rep['scoring_seconds']:.2f} s "
             f"({rep['ms_per_row']:.3f} ms per row; {rep.get('unique_rows', rep['rows'])} distinct rows computed"
             + "".join(f", {e(k)} {v:.3g} s" for k, v in rep.get("phases", {}).items()) + ").</p>",
             *_undefined_html(rep.get("undefined_names") or []),
             "<h2>Total reward</h2>", _dist_card("total", rep["total"]), "<h2>Components</h2>"]
    for name, d in rep["components"].items():
        parts.append(_dist_card(name, d, f" <small>(weight {_num(d.get('weight'))})</small>"))
    names = list(rep["correlations"])
    if len(names) > 1:
        parts.append("<h2>Correlations between components</h2><table><tr><th></th>"
                     + "".join(f"<th>{e(n)}</th>" for n in names) + "</tr>")
        for a in names:
            parts.append(f'<tr><th class="l">{e(a)}</th>' + "".join(
                f"<td>{_num(rep['correlations'][a][b])}</td>" for b in names) + "</tr>")
        parts.append("</table><p>– : undefined (a constant component, or fewer than two rows with both values)</p>")
    g = rep.get("groups")
    if g:
        cls = "warn" if g["zero_variance_share"] > 0 else "ok"
        parts.append("<h2>Groups and advantages</h2>"
                     f'<p>{g["groups"]} groups (mean size {g["mean_size"]:.3g}, {g["singletons"]} of one row); '
                     f'<span class="{cls}">{g["zero_variance"]} ({g["zero_variance_share"]:.1%}) with zero variance'
                     "</span>: every row of such a group gets the same reward, so GRPO learns nothing from it.</p>"
                     + _dist_card("advantage", g["advantage"]))
    for which in ("highest", "lowest"):
        parts.append(f"<h2>Rows with the {which} total</h2>")
        for x in rep["extremes"][which]:
            comps = "".join(f"<tr><td class=l>{e(k)}</td><td>{_num(v)}</td><td class=l>"
                            f"{e(x['errors'].get(k, '') or ('masked' if k in x['masked'] else ''))}</td></tr>"
                            for k, v in x["components"].items())
            where = f"{rep['input']}:{x['line']}" if "line" in x else f"row {x['row']}"
            parts.append(f"<div class=card><h3>{e(where)}: total {_num(x['total'])}"
                         + (f", advantage {_num(x['advantage'])}" if x.get("advantage") is not None else "")
                         + f"</h3><table><tr><th class=l>component</th><th>value</th><th class=l>note</th></tr>{comps}"
                         f"</table><pre>{e(x['completion'])}</pre></div>")
    p = rep["probes"]
    best = (f"{rep['input']}:{p['template_line']}" if "template_line" in p else f"row {p.get('template_row', '–')}")
    parts.append(f"<h2>Reward-hack probes</h2><p>Each probe is the best real row ({e(best)}) "
                 f"with its completion replaced; flagged when it earns more than {_num(p['threshold'])} "
                 "(by default the median total of the real rows).</p><table><tr><th class=l>probe</th>"
                 "<th class=l>what</th><th>total</th><th class=l>verdict</th></tr>")
    for r in p["results"]:
        if not r["applies"]:
            parts.append(f"<tr><td class=l>{e(r['probe'])}</td><td class=l>{e(r['what'])}</td><td>–</td>"
                         "<td class=l>does not apply</td></tr>")
            continue
        verdict = '<span class="warn">FLAGGED</span>' if r["flagged"] else '<span class="ok">ok</span>'
        parts.append(f"<tr><td class=l>{e(r['probe'])}</td><td class=l>{e(r['what'])}</td><td>{_num(r['total'])}"
                     f"</td><td class=l>{verdict}</td></tr>")
    parts.append("</table>")
    audits = rep.get("audits")
    if audits:
        parts.append("<h2>Audits</h2><p>Second verifiers the spec declares: scored on the policy's samples while it "
                     "trains (here on the rows), never part of the reward. The gap is the total's mean minus the "
                     "audit's, both on [0, 1] by their declared ranges; a large gap, or an audit that does not follow "
                     "the total, is what the training alarm watches for.</p>")
        if audits.get("error"):
            parts.append(f'<p class="warn">not scored: {e(audits["error"])}</p>')
        for name, d in audits.get("samples", {}).items():
            extra = (f" <small>(every {d['every']} steps; correlation with the total "
                     f"{_num(d['correlation_with_total'])}; gap {_num(d['gap'])})</small>")
            parts.append(_dist_card(name, d, extra))
        names = list(audits.get("samples", {}))
        probed = [r for r in p["results"] if r.get("audits")]
        if names and probed:
            parts.append("<table><tr><th class=l>probe</th><th>total</th>"
                         + "".join(f"<th>{e(n)}</th>" for n in names) + "</tr>")
            for r in probed:
                parts.append(f"<tr><td class=l>{e(r['probe'])}</td><td>{_num(r['total'])}</td>"
                             + "".join(f"<td>{_num(r['audits'].get(n))}</td>" for n in names) + "</tr>")
            parts.append("</table>")
        for s in audits.get("statistics", []):
            parts.append(f"<p>statistic <code>{e(s['name'])}</code> = <code>{e(s['text'])}</code>: a statistic of a "
                         "training run (see <code>rewardlang audit RUN_DIR</code>)</p>")
    if rep.get("spec_sources"):
        parts.append("<h2>The spec</h2>")
        for path, text in rep["spec_sources"].items():
            parts.append(f"<details open><summary><code>{e(path)}</code></summary>{_highlight(text)}</details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _highlight(text: str) -> str:
    """The spec's source coloured by rewardlang's Pygments lexer, styles inline (the page stays one file)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from rewardlang.highlight import RewardLexer

    return highlight(text, RewardLexer(), HtmlFormatter(noclasses=True, nobackground=True))
