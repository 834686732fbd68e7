"""Latency of `rewardlang lsp` as an editor sees it, through the protocol (a client process over stdio).

    python benchmarks/bench_lsp.py [--rounds 30]

Diagnostics: the time from sending a ``didChange`` of ``specs/dense_ppo.reward`` (alternately introducing and
fixing a misspelt name, so each change really re-checks) to receiving its ``publishDiagnostics`` (target 200 ms).
Completion: the round trip of a ``completion`` request inside a `let` (target 50 ms). Medians and the 90th
percentile over the rounds, after one warm-up round (the first check imports the registry's modules).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardlang.lsp.client import LspClient  # noqa: E402

SPEC = ROOT / "specs" / "dense_ppo.reward"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    text = SPEC.read_text(encoding="utf-8")
    broken = text.replace("let src = code or", "let src = cod or")
    lines = text.split("\n")
    row = next(i for i, l in enumerate(lines) if l.startswith("let pass_rate = "))
    with LspClient() as c:
        c.initialize(ROOT)
        c.open(SPEC)
        c.diagnostics(SPEC)
        diag_ms, comp_ms = [], []
        for i in range(args.rounds + 1):
            new = broken if i % 2 == 0 else text
            t0 = time.perf_counter()
            v = c.change(SPEC, new)
            d = c.diagnostics(SPEC, version=v)
            t1 = time.perf_counter()
            assert (len(d) == 1) == (new is broken), d
            t2 = time.perf_counter()
            items = c.at("textDocument/completion", SPEC, row, len("let pass_rate = "))["items"]
            t3 = time.perf_counter()
            assert any(x["label"] == "tests_pass_rate" for x in items)
            if i:  # round 0 warms up
                diag_ms.append((t1 - t0) * 1000)
                comp_ms.append((t3 - t2) * 1000)
    print(f"diagnostics after a change ({SPEC.name}): median {statistics.median(diag_ms):.1f} ms, "
          f"p90 {_pct(diag_ms, 0.9):.1f} ms (target 200 ms)")
    print(f"completion ({len(items)} items): median {statistics.median(comp_ms):.1f} ms, "
          f"p90 {_pct(comp_ms, 0.9):.1f} ms (target 50 ms)")


if __name__ == "__main__":
    main()
