"""``rewardlang plot RUN_DIR``: training curves from ``RUN_DIR/metrics.jsonl`` to a PNG (matplotlib, Agg backend).

One panel per metric group: the total reward (mean ± std), each component's mean reward, advantages, masked share,
KL and loss, completion length, the reward functions' share of the step time, tokens/s. The reward panels also
draw a moving average over :data:`SMOOTH` steps (single steps of a small group are noisy). When the run evaluated
held-out problems (``train.eval``, ``eval.json``), a last panel shows pass@1 before and after training. Panels whose
metrics the run did not log are left out. Does not import torch.

    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "metrics.jsonl"), "w") as fh:
    ...     for s in range(1, 6):
    ...         _ = fh.write(json.dumps({"step": s, "reward": s / 10, "reward_std": 0.1, "loss": 0.0}) + "\\n")
    >>> os.path.basename(plot_run(d))
    'curves.png'
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

__all__ = ["plot_run", "chosen_panels", "PANELS", "smooth", "SMOOTH", "audit_series", "audit_panel_data", "draw_audits", "plot_audits"]
#: window of the moving average drawn over the reward panels
SMOOTH = 5


def smooth(ys: list[float], window: int = SMOOTH) -> list[float]:
    """Trailing moving average (the first points average what there is so far).

    >>> smooth([0.0, 1.0, 2.0, 3.0], 2)
    [0.0, 0.5, 1.5, 2.5]
    """
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y
        if i >= window:
            total -= ys[i - window]
        out.append(total / min(i + 1, window))
    return out

#: (title, metric keys or key prefixes ending in "/"); the first panel also shades ``reward_std``
PANELS: list[tuple[str, list[str]]] = [
    ("reward (mean ± std)", ["reward"]),
    ("component rewards (mean)", ["rewards/"]),
    ("advantages", ["advantages/mean", "advantages/std", "advantages/abs_mean"]),
    ("masked share / zero-variance groups", ["masked/rate", "frac_reward_zero_std"]),
    ("KL and loss", ["kl", "loss"]),
    ("preference accuracy", ["pref/accuracy", "rewards/accuracies"]),
    ("preference margin, winner variance", ["pref/margin", "rewards/margins", "pref/winner_var"]),
    ("log-probs: chosen / rejected", ["logps/chosen", "logps/rejected", "logps/winners", "logps/losers"]),
    ("PPO: value loss, explained variance", ["loss/value", "value/explained_variance"]),
    ("PPO: clip fractions, approx. KL", ["clip_ratio/policy", "clip_ratio/value", "approx_kl"]),
    ("entropy", ["entropy"]),
    ("completion length", ["completions/mean_length"]),
    ("reward share of step time", ["time/reward_share"]),
    ("tokens / s", ["tokens_per_second"]),
    ("PRM: held-out step accuracy", ["eval_step_accuracy", "eval_majority_baseline"]),
]


def audit_series(run_dir: str, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reward and each audit of samples per audited step, on [0, 1] where their ranges are known (the run's
    ``audits.json``), and the alarms' steps; None for a run without audits of samples."""
    path = os.path.join(run_dir, "audits.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        meta = json.load(fh)
    alarms = []
    if os.path.exists(os.path.join(run_dir, "alarms.jsonl")):
        with open(os.path.join(run_dir, "alarms.jsonl"), encoding="utf-8") as fh:
            alarms = [json.loads(line) for line in fh if line.strip()]
    return audit_panel_data(records, meta, alarms)


def audit_panel_data(records: list[dict[str, Any]], meta: dict[str, Any], alarms: list[dict[str, Any]]
                     ) -> dict[str, Any] | None:
    """What :func:`draw_audits` draws, from records, the audits' description and the alarms."""
    def scale(v: float, rng: Any) -> float:
        return (v - rng[0]) / (rng[1] - rng[0]) if rng and rng[1] > rng[0] else v

    sampled = [a for a in meta.get("audits", []) if a["kind"] == "samples"]
    if not sampled:
        return None
    rr = meta.get("reward_range")
    lines: dict[str, tuple[list[int], list[float]]] = {}
    xs, ys = _series(records, "reward")
    lines["reward"] = (xs, [scale(y, rr) for y in ys])
    for a in sampled:
        ax_, ay = _series(records, f"audit/{a['name']}")
        lines[f"audit {a['name']}"] = (ax_, [scale(y, a.get("range")) for y in ay])
    if not any(lines[f"audit {a['name']}"][0] for a in sampled):
        return None
    scaled_all = rr is not None and all(a.get("range") for a in sampled)
    return {"lines": lines, "alarms": [(int(a["step"]), a["name"]) for a in alarms],
            "title": "reward vs audits" + (" (on [0, 1])" if scaled_all else "")}


def draw_audits(ax: Any, data: dict[str, Any]) -> None:
    """The reward and each audit per step on one axis; a dashed line at each alarm's step."""
    for name, (xs, ys) in data["lines"].items():
        ax.plot(xs, ys, marker="o" if name != "reward" else None, label=name,
                linewidth=2 if name == "reward" else 1.5)
    at: dict[int, list[str]] = {}
    for step, name in data["alarms"]:
        at.setdefault(step, []).append(name)
    for step, names in sorted(at.items()):
        ax.axvline(step, color="#c00000", linestyle="--", linewidth=1)
        ax.annotate("alarm: " + ", ".join(names), (step, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    color="#c00000", rotation=90, va="top", ha="right")
    ax.set_title(data["title"], fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _load(path: str) -> list[dict[str, Any]]:
    from rewardlang.trainers.metrics import read_metrics

    return [r for r in read_metrics(path) if "train_runtime" not in r]


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            xs.append(int(r["step"]))
            ys.append(float(v))
    return xs, ys


def chosen_panels(records: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The panels a run's records fill: ``(title, metric keys)`` for each panel with at least one logged value."""
    keys = sorted({k for r in records for k in r})
    panels = []
    for title, wanted in PANELS:
        chosen = [k for w in wanted for k in keys
                  if (k.startswith(w) and k.endswith("/mean") if w.endswith("/") else k == w)]
        if chosen and any(_series(records, k)[0] for k in chosen):
            panels.append((title, chosen))
    return panels


def _heldout_panel(ax: Any, evals: dict[str, Any]) -> None:
    """Held-out pass@1 and the spec's reward (when scored) before and after, as bars with their 95 % intervals."""
    names = [k for k in ("before", "after") if k in evals]
    figures = [("pass@1", lambda e: (e["pass@1"], e.get("pass@1_ci95")))]
    if all((evals[k].get("reward") or {}).get("mean") is not None for k in names):
        figures.append(("reward", lambda e: (e["reward"]["mean"], e["reward"].get("ci95"))))
    width = 0.8 / len(names)
    top = 1e-3
    for j, name in enumerate(names):
        xs, ys, lo, hi = [], [], [], []
        for i, (_, get) in enumerate(figures):
            y, ci = get(evals[name])
            xs.append(i + (j - (len(names) - 1) / 2) * width)
            ys.append(y)
            lo.append(max(0.0, y - ci[0]) if ci else 0.0)
            hi.append(max(0.0, ci[1] - y) if ci else 0.0)
            top = max(top, y + hi[-1])
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=name,
                      color=["#999999", "#2a7ab9"][j % 2])
        ax.bar_label(bars, fmt="%.3f", fontsize=8)
    ax.set_xticks(range(len(figures)), [f for f, _ in figures])
    ax.set_ylim(min(0.0, *(get(evals[n])[0] for n in names for _, get in figures)), top * 1.3)
    ax.legend(fontsize=8)
    ax.set_title("held-out problems, greedy: before / after (95% CI)", fontsize=10)


def plot_run(run_dir: str, out: str | None = None) -> str:
    """Render the run's curves; returns the PNG path (default ``RUN_DIR/curves.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{run_dir}: no metrics.jsonl (is it a `rewardlang train` run directory?)")
    records = _load(path)
    if not records:
        raise ValueError(f"{path}: no training records yet")
    panels = chosen_panels(records)
    audit_panel = audit_series(run_dir, records)
    evals = {}
    if os.path.exists(os.path.join(run_dir, "eval.json")):
        with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
        # before/after only (`change` holds the paired differences); each figure with its 95 % interval
        evals = {k: doc[k] for k in ("before", "after") if isinstance(doc.get(k), dict) and "pass@1" in doc[k]}
    cols = 2
    rows = math.ceil((len(panels) + bool(evals) + bool(audit_panel)) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.2 * rows), squeeze=False)
    for ax, (title, chosen) in zip(axes.flat, panels):
        for key in chosen:
            xs, ys = _series(records, key)
            label = key.removeprefix("rewards/").removesuffix("/mean") if key.startswith("rewards/") else key
            smoothed = title in (PANELS[0][0], PANELS[1][0]) and len(xs) > SMOOTH  # the reward panels
            line, = ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=label, alpha=0.45 if smoothed else 1.0)
            if smoothed:
                ax.plot(xs, smooth(ys), color=line.get_color(), linewidth=2)
            if key == "reward":
                sx, sd = _series(records, "reward_std")
                if sx == xs:
                    ax.fill_between(xs, [y - s for y, s in zip(ys, sd)], [y + s for y, s in zip(ys, sd)], alpha=0.2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(chosen) > 1:
            ax.legend(fontsize=8)
    if evals:
        ax = list(axes.flat)[len(panels)]
        _heldout_panel(ax, evals)
    if audit_panel:
        draw_audits(list(axes.flat)[len(panels) + bool(evals)], audit_panel)
    for ax in list(axes.flat)[len(panels) + bool(evals) + bool(audit_panel):]:
        ax.axis("off")
    fig.suptitle(os.path.basename(os.path.abspath(run_dir)))
    fig.tight_layout()
    out = out or os.path.join(run_dir, "curves.png")
    from rewardlang.outputs import atomic_path

    try:
        with atomic_path(out) as tmp:  # whole or not at all; the format is named: the temporary has no .png
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
    return out


def plot_audits(records: list[dict[str, Any]], meta: dict[str, Any], alarms: list[dict[str, Any]], out: str) -> str:
    """One panel of the reward vs each audit per step, alarms marked (``rewardlang audit --plot``); returns the
    path. ValueError when there is no audit of samples with a value to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = audit_panel_data(records, meta, alarms)
    if data is None:
        raise ValueError("no audit of samples has a value to plot (statistics are in the table)")
    fig, ax = plt.subplots(1, 1, figsize=(7, 4))
    draw_audits(ax, data)
    fig.tight_layout()
    from rewardlang.outputs import atomic_path

    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
    return out
