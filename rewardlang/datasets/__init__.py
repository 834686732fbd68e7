"""Data builders: task data sets that rewardlang writes as JSONL rows.

- :func:`load_humaneval` — HumanEval translated into C, C++, Java, JavaScript, PHP, Bash and Go (or the original
  Python problems), with typed tests in the ``rewardlang-tests/1`` format (:mod:`.multilang`, docs/languages.md);
- :func:`translation_rows` — translation problems from a source language into a target (:mod:`.translate`);
- C functions with test harnesses (:mod:`.cfuncs`, ``rewardlang data cfuncs``) and GEPO groups of LLVM IR built
  from them (:mod:`.irgroups`, ``rewardlang ir-groups``).

    >>> from rewardlang.datasets import LANGUAGES, load_humaneval
    >>> LANGUAGES
    ('python', 'c', 'cpp', 'java', 'js', 'php', 'sh', 'go')
    >>> load_humaneval("js")[0]["prompt"].splitlines()[-1]
    'function has_close_elements(numbers, threshold) {'
"""

from __future__ import annotations

from rewardlang.datasets.multilang import (
    FILE_NAMES,
    LANGUAGES,
    TESTS_FORMAT,
    Build,
    build,
    counts,
    load_humaneval,
    render_prompt,
    render_tests,
)
from rewardlang.datasets.translate import split_of, translation_rows

__all__ = ["FILE_NAMES", "LANGUAGES", "TESTS_FORMAT", "Build", "build", "counts", "load_humaneval",
           "render_prompt", "render_tests", "split_of", "translation_rows"]
