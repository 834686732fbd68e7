"""Translation problems (issue 21 item 1): a source program (the Python prompt and canonical solution, or a C++
reference solution) to translate into a target language, judged by the target's translated HumanEval tests.

The prompt holds an instruction, the source program in a fenced block, and the target's declaration (the target
prompt of :mod:`.multilang`: headers or imports, the docstring as a comment, the declaration and its opening); it
ends where the answer starts. The answer is one fenced block in the target language holding one source unit that
defines the function: the declaration's text up to the opening brace, then the body, closing what it opened (for
Java the method and the class). The row's ``tests`` are the target row's: the sandbox appends the harness to the
extracted unit.

The held-out split is by problem (a hash of the task id, about one problem in five), the same for every pair of
languages, so a held-out problem is never seen in training in any language.

    >>> rows = translation_rows("python", "cpp")
    >>> row = rows[0]
    >>> row["task_id"], row["language"], row["source_language"], row["split"]
    ('HumanEval/0', 'cpp', 'python', 'train')
    >>> print(row["prompt"].splitlines()[0])
    Translate the following Python function into C++.
    >>> row["prompt"].endswith("### C++ translation\\n")
    True
    >>> sorted({r["split"] for r in rows}), split_of("HumanEval/0") == split_of("HumanEval/0")
    (['heldout', 'train'], True)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rewardlang.datasets.multilang import load_humaneval

__all__ = ["FENCES", "NAMES", "SOURCES", "SPLITS", "TARGETS", "split_of", "translation_rows"]

#: display names and the fence tag a completion's block carries
NAMES = {"python": "Python", "c": "C", "cpp": "C++", "java": "Java", "js": "JavaScript", "php": "PHP",
         "sh": "Bash", "go": "Go"}
FENCES = {"python": "python", "c": "c", "cpp": "cpp", "java": "java", "js": "javascript", "php": "php",
          "sh": "bash", "go": "go"}
SPLITS = ("all", "train", "heldout")
#: targets and sources a translation row can have (C++ sources come from reference solutions)
TARGETS = ("c", "cpp", "java", "js", "php", "sh", "go")
SOURCES = ("python", "cpp")
_HELDOUT_PER_100 = 20


def split_of(task_id: str) -> str:
    """``heldout`` for about one problem in five (a SHA-256 of the task id), else ``train``; never changes."""
    h = int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big")
    return "heldout" if h % 100 < _HELDOUT_PER_100 else "train"


def _default_references() -> Path:
    return Path(__file__).resolve().parents[2] / "tests" / "datasets" / "references"


def _sources(source: str, references: str | Path | None) -> dict[str, str]:
    """task id -> the source program."""
    if source == "python":
        return {r["task_id"]: r["prompt"] + r["canonical_solution"] for r in load_humaneval("python")}
    ref_dir = Path(references) if references is not None else _default_references()
    d = ref_dir / source
    if not d.is_dir():
        raise ValueError(f"no {NAMES[source]} reference solutions at {d} (give the references directory)")
    prompts = {r["task_id"]: r["prompt"] for r in load_humaneval(source)}
    out = {}
    for f in sorted(d.glob("HumanEval_*.cpp")):
        tid = "HumanEval/" + f.stem.split("_", 1)[1]
        if tid in prompts:
            out[tid] = prompts[tid] + f.read_text(encoding="utf-8")
    return out


def _prompt(source: str, target: str, program: str, declaration: str) -> str:
    s, t = NAMES[source], NAMES[target]
    closing = " and the class" if target == "java" else ""
    return (
        f"Translate the following {s} function into {t}.\n"
        f"Answer with one ```{FENCES[target]} block holding one complete {t} source unit: start with the {t} "
        f"declaration below exactly as given, then write the body and close the function{closing}. "
        f"Do not write a main function or tests.\n\n"
        f"### {s} source\n```{FENCES[source]}\n{program.rstrip()}\n```\n\n"
        f"### {t} declaration\n```{FENCES[target]}\n{declaration.rstrip()}\n```\n\n"
        f"### {t} translation\n"
    )


def translation_rows(source: str = "python", target: str = "cpp", split: str = "all",
                     references: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows ``task_id, prompt, tests, entry_point, language (the target), source_language, split`` plus
    ``declaration`` (the target prompt the answer starts with) and ``source_program``.

    ``source`` is ``python`` or ``cpp`` (C++ rows exist where a C++ reference solution does: ``references``,
    default tests/datasets/references of a source checkout)."""
    from rewardlang.sandbox.languages import canonical_language

    # the one resolver of language names (``C++``, ``javascript``, ``golang``); an unknown name stays as given
    source, target = canonical_language(source) or source, canonical_language(target) or target
    if source not in SOURCES:
        raise ValueError(f"unknown source language {source!r}; choose one of {', '.join(SOURCES)}")
    if target not in TARGETS:
        raise ValueError(f"unknown target language {target!r}; choose one of {', '.join(TARGETS)}")
    if source == target:
        raise ValueError("the source and target languages are the same")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    programs = _sources(source, references)
    rows = []
    for r in load_humaneval(target):
        tid = r["task_id"]
        if tid not in programs:
            continue
        sp = split_of(tid)
        if split != "all" and sp != split:
            continue
        rows.append({
            "task_id": tid,
            "prompt": _prompt(source, target, programs[tid], r["prompt"]),
            "tests": r["tests"],
            "entry_point": r["entry_point"],
            "language": target,
            "source_language": source,
            "split": sp,
            "declaration": r["prompt"],
            "source_program": programs[tid],
        })
    return rows


def pair_counts() -> dict[tuple[str, str], dict[str, int]]:
    """Rows per (source, target) pair and split (the table in docs/languages.md)."""
    out = {}
    for s in SOURCES:
        for t in TARGETS:
            if s == t:
                continue
            try:
                rows = translation_rows(s, t)
            except ValueError:
                continue
            out[(s, t)] = {"train": sum(r["split"] == "train" for r in rows),
                           "heldout": sum(r["split"] == "heldout" for r in rows)}
    return out


