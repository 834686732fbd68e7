"""Every command's outputs in this tree against another checkout of rewardlang, byte for byte.

    python scripts/same_outputs.py /path/to/other/checkout [--this /path/to/a/checkout] [--only score,explain]

Issue 33 moved code between files and rooms and must leave every command's stdout, stderr, exit status and output
files as they were. This runs one fixed set of commands (``CASES``: help pages, check/compile/fmt of the shipped
specs, score with every bad-row path, explain, report, pairs, the compiled module run as a script, a closed pipe,
the training commands' refusals) in each tree, each side with its own code (``PYTHONPATH``), its own compile
cache and the same scratch folder, then compares stdout, stderr, the exit status and every file the command wrote.
The tree's own path is written ``<TREE>`` in both before comparing, and timings (the score summary's time and time
shares, the report's seconds) are masked (``MASKS``). A case that differs is run once more in the
other tree: when the other tree does not repeat itself, the case is reported as varying run to run, not as a
difference. Exit status 0 when every case is identical (or only varies run to run), 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RL = f"{sys.executable} -m rewardlang"
S = "specs/codepo_text.reward"

#: rows with every kind of bad data (D001: a non-JSON line, a missing column, a wrong type; D002: a group apart)
DATA = {
    "mixed.jsonl": '{"prompt":"a","completion":3}\n{"prompt":"a","completion":"ok"}\nnot json\n'
                   '{"prompt":"b","completion":"zz","reward":5}\n{"prompt":"b"}\n\n'
                   '{"prompt":"c","completion":"<answer>```python\\nx = 1\\n```</answer>"}\n',
    "noncontig.jsonl": '{"prompt":"a","completion":"x"}\n{"prompt":"b","completion":"y"}\n'
                       '{"prompt":"a","completion":"z"}\n',
    "nocolumn.jsonl": '{"text":"a"}\n{"text":"b"}\n',
    "bad.reward": 'spec bad "errors"\ninput completion: text\nreward = nosuch(completion) + 1\n'
                  'component c = len(completion) > "x"\n',
    "unformatted.reward": 'spec u "x"\ninput completion:text\ncomponent n=len(completion)   # length\n'
                          'reward=0.5*n\n',
}

#: name -> shell command, run in the tree's root; $W is the scratch folder (outputs), $D the data above
CASES: dict[str, str] = {
    "help": f"{RL} --help",
    "noargs": RL,
    "unknown-command": f"{RL} nosuch",
    "help-narrow": f"COLUMNS=60 {RL} --help",
    "help-wide": f"COLUMNS=200 {RL} --help",
    **{f"help-{c}": f"{RL} {c} --help" for c in (
        "check", "compile", "score", "serve", "pairs", "explain", "fmt", "report", "audit", "lsp", "functions", "doctor",
        "prm-data", "data", "ir-groups", "train", "plot", "eval")},
    "check-shipped": f"{RL} check specs/*.reward",
    "check-errors": f"{RL} check $D/bad.reward",
    "check-missing": f"{RL} check $D/nosuch.reward",
    "compile-stdout": f"{RL} compile {S}",
    "compile-file": f"{RL} compile specs/codepo.reward -o $W/codepo.py",
    "compile-errors": f"{RL} compile $D/bad.reward -o $W/bad.py",
    "fmt-check": f"{RL} fmt --check specs/*.reward $D/unformatted.reward",
    "fmt-in-place": f"cp $D/unformatted.reward $W/u.reward && {RL} fmt $W/u.reward",
    "functions": f"{RL} functions",
    "score": f"{RL} score specs/codepo.reward -i examples/code_samples.jsonl",
    "score-workers1-out": f"{RL} score {S} -i examples/completions.jsonl --workers 1 -o $W/s.jsonl",
    "score-stdin": f"cat examples/completions.jsonl | {RL} score {S} -i - --no-summary",
    "score-group-by": f"{RL} score {S} -i examples/completions.jsonl --group-by prompt_id --no-summary",
    "score-batch1": f"{RL} score {S} -i examples/completions.jsonl --batch-size 1 --no-summary",
    "score-set-step": f"{RL} score {S} -i examples/completions.jsonl --step 3 --no-summary",
    "score-bad-fail": f"{RL} score {S} -i $D/mixed.jsonl -o $W/mixed.jsonl",
    "score-bad-skip": f"{RL} score {S} -i $D/mixed.jsonl --on-bad-row skip -o $W/mixed.jsonl",
    "score-bad-skip-batch1": f"{RL} score {S} -i $D/mixed.jsonl --on-bad-row skip --batch-size 1 --workers 1",
    "score-bad-policy": f"{RL} score {S} -i examples/completions.jsonl --on-bad-row maybe",
    "score-d002": f"{RL} score {S} -i $D/noncontig.jsonl --batch-size 1 --no-summary",
    "score-no-column": f"{RL} score {S} -i $D/nocolumn.jsonl --no-summary",
    "score-group-by-missing": f"{RL} score {S} -i examples/completions.jsonl --group-by nosuch --no-summary",
    "score-missing-input": f"{RL} score {S} -i $D/nosuch.jsonl",
    "score-closed-pipe": f"{RL} score {S} -i examples/completions.jsonl --no-summary | head -c 40; "
                         "echo; echo status=${PIPESTATUS[0]}",
    "score-quality": f"{RL} score specs/quality_grpo.reward -i examples/code_samples.jsonl --no-progress",
    "explain": f"{RL} explain specs/codepo.reward -i examples/code_samples.jsonl --row 1",
    "explain-group": f"{RL} explain {S} -i examples/completions.jsonl --row 3 --group-by prompt_id",
    "explain-bad-row": f"{RL} explain {S} -i $D/mixed.jsonl --row 0",
    "explain-row-out-of-range": f"{RL} explain {S} -i examples/completions.jsonl --row 99",
    "report-json": f"{RL} report {S} -i examples/completions.jsonl --format json",
    "report-bad-rows": f"{RL} report {S} -i $D/mixed.jsonl --format json -o $W/report.json",
    "pairs": f"{RL} pairs specs/dpo_tests.reward -i examples/completions.jsonl -o $W/pairs.jsonl",
    "compiled-script": f"{RL} compile {S} -o $W/c.py && {sys.executable} $W/c.py -i examples/completions.jsonl "
                       "--group-by prompt_id; echo status=$?; "
                       f"{sys.executable} $W/c.py -i $D/mixed.jsonl; echo status=$?; "
                       f"head -2 $D/mixed.jsonl | {sys.executable} $W/c.py; echo status=$?",
    "audit": f"{RL} audit specs/quality_grpo.reward -i examples/audit_rollouts.jsonl --no-probes -o $W/audit.json",
    "audit-bad-rows": f"sed -e '2s/\"completion\": \"/\"completion\": 3, \"x\": \"/' examples/audit_rollouts.jsonl "
                      f"> $W/r.jsonl && {RL} audit specs/quality_grpo.reward -i $W/r.jsonl --no-probes",
    "train-missing-spec": f"{RL} train --spec $D/nosuch.reward",
    "train-bad-option": f"{RL} train --spec {S} --nosuch",
    "train-bad-spec": f"{RL} train --spec $D/bad.reward",
    "eval-bad-language": f"{RL} eval --lang klingon",
    "plot-missing": f"{RL} plot $D/nosuch",
    "data-unknown": f"{RL} data nosuch -o $W/x.jsonl",
}


#: what differs from run to run in the same tree, masked in every output before comparing: the score summary's
#: time and its components' time shares, the report's timings (seconds, ms per row, the phases' seconds)
BAR = "\u2502".encode()  # the table's column rule
MASKS = [(rb"rows scored in [\d.]+ s", rb"rows scored in <T> s"),
         (BAR + rb" +\d+% +" + BAR + rb"$", BAR + rb" <P>% " + BAR),
         (rb'"(seconds|ms_per_row|scoring_seconds)": [-+0-9.eE]+', rb'"\1": <T>'),
         (rb'"phases": \{[^{}]*\}', rb'"phases": <T>')]


def run_case(tree: Path, command: str, work: Path, data: Path, cache: Path) -> dict[str, bytes]:
    """stdout, stderr, the exit status and each file written under ``work``, with the tree's path as <TREE>."""
    for folder in (work, data):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    for name, text in DATA.items():  # afresh for each case: a command may change its input (fmt does)
        (data / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(tree), "REWARDLANG_CACHE_DIR": str(cache), "W": str(work),
           "D": str(data), "COLUMNS": os.environ.get("COLUMNS", "100"), "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True, timeout=900, check=False)
    out = {"stdout": r.stdout, "stderr": r.stderr, "status": str(r.returncode).encode()}
    for p in sorted(work.rglob("*")):
        if p.is_file():
            out[f"file {p.relative_to(work)}"] = p.read_bytes()
    tree_b = str(tree).encode()
    out = {k: v.replace(tree_b, b"<TREE>") for k, v in out.items()}
    for pattern, repl in MASKS:
        out = {k: re.sub(pattern, repl, v, flags=re.MULTILINE) for k, v in out.items()}
    return out


def diff(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    lines = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if x is None or y is None:
            lines.append(f"  {key}: only in {'this' if x is None else 'other'}")
            continue
        d = difflib.unified_diff(x.decode(errors="replace").splitlines(), y.decode(errors="replace").splitlines(),
                                 "other", "this", lineterm="", n=1)
        lines.append(f"  {key}:")
        lines.extend("    " + s for s in list(d)[:40])
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("other", type=Path, help="the other checkout (its root directory)")
    ap.add_argument("--this", type=Path, default=ROOT, help="the tree compared (default: this script's)")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    a = ap.parse_args()
    other, this = a.other.resolve(), a.this.resolve()
    names = [n for n in a.only.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    def commit(tree: Path) -> str:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False).stdout.strip() or "?"

    print(f"this: {this} ({commit(this)}); other: {other} ({commit(other)}); {len(names)} cases; load "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    same, varying, differ = [], [], []
    with tempfile.TemporaryDirectory(prefix="rewardlang-same-") as tmp:
        base = Path(tmp)
        data = base / "data"
        caches = {"other": base / "cache-other", "this": base / "cache-this"}
        for name in names:
            got_other = run_case(other, CASES[name], base / "work", data, caches["other"])
            got_this = run_case(this, CASES[name], base / "work", data, caches["this"])
            if got_other == got_this:
                same.append(name)
                print(f"same     {name}", flush=True)
                continue
            again = run_case(other, CASES[name], base / "work", data, caches["other"])
            if again != got_other:
                varying.append(name)
                print(f"varies   {name} (the other tree differs from itself run to run)", flush=True)
                continue
            differ.append(name)
            print(f"DIFFERS  {name}", flush=True)
            print("\n".join(diff(got_other, got_this)), flush=True)
    print(f"{len(same)} identical, {len(varying)} varying run to run, {len(differ)} different"
          + (f": {', '.join(differ)}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
