"""A cached tree-sitter parse layer: each distinct code string is parsed once per process.

Components that look at the syntax of code (CodeBLEU's syntax and dataflow matches, syntax errors, linters,
quality checks) call :func:`parse` and share its trees. Trees are kept in a process-wide LRU bounded both by
entry count and by the total size of the parsed text, so a few 1 MB inputs cannot hold on to gigabytes.

Text is encoded to UTF-8 with each lone surrogate (possible in a Python ``str``, never valid UTF-8) replaced by
U+FFFD, one character for one, as the lint components do. tree-sitter positions are byte offsets;
:func:`byte_to_char` turns them into ``str`` indices.

Example::

    >>> from rewardlang.runtime.code.parse import parse
    >>> tree = parse("def f(x):\\n    return x\\n")
    >>> tree.root_node.type, tree.root_node.has_error
    ('module', False)
    >>> parse("def f(x):\\n    return x\\n") is tree   # cached
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter is imported on first use, not at import time
    from tree_sitter import Language, Parser, Tree

__all__ = [
    "SUPPORTED",
    "ParseCache",
    "ParseTimeout",
    "byte_to_char",
    "clear_cache",
    "encode",
    "language",
    "parse",
    "parser",
    "replace_surrogates",
]

#: languages with an installed grammar (more can be added here when their ``tree-sitter-<lang>`` is pinned)
SUPPORTED: tuple[str, ...] = ("python",)


class ParseTimeout(Exception):
    """tree-sitter gave up within the time budget."""


_LANGS: dict[str, Any] = {}
_LOCAL = threading.local()


def language(lang: str = "python") -> Language:
    """The tree-sitter ``Language`` for ``lang`` (loaded once)."""
    if lang not in _LANGS:
        if lang != "python":
            raise ValueError(f"no tree-sitter grammar for {lang!r} (supported: {', '.join(SUPPORTED)})")
        import tree_sitter_python
        from tree_sitter import Language

        _LANGS[lang] = Language(tree_sitter_python.language())
    return _LANGS[lang]


def parser(lang: str = "python") -> Parser:
    """A ``Parser`` for ``lang`` owned by the calling thread (tree-sitter parsers are not thread-safe)."""
    parsers = getattr(_LOCAL, "parsers", None)
    if parsers is None:
        parsers = _LOCAL.parsers = {}
    if lang not in parsers:
        from tree_sitter import Parser

        parsers[lang] = Parser(language(lang))
    return parsers[lang]


_SURROGATE = None


def replace_surrogates(code: str) -> str:
    """``code`` with each lone surrogate replaced by U+FFFD (same length, so indices are unchanged).

    >>> replace_surrogates("a\\ud800b") == "a\\ufffdb"
    True
    """
    global _SURROGATE
    try:
        code.encode("utf-8")
        return code
    except UnicodeEncodeError:
        if _SURROGATE is None:
            import re

            _SURROGATE = re.compile("[\ud800-\udfff]")
        return _SURROGATE.sub("\ufffd", code)


def encode(code: str) -> bytes:
    """UTF-8 bytes of ``code``, lone surrogates encoded as U+FFFD."""
    try:
        return code.encode("utf-8")
    except UnicodeEncodeError:
        return replace_surrogates(code).encode("utf-8")


def byte_to_char(code: str, offsets: Sequence[int]) -> list[int]:
    """Map UTF-8 byte offsets of ``encode(code)`` to indices into ``code``.

    An offset inside a multi-byte character maps to that character's index.

    >>> byte_to_char("é=1", [0, 2, 3, 4])
    [0, 1, 2, 3]
    """
    if code.isascii():
        return [int(o) for o in offsets]
    starts: list[int] = []  # byte offset at which each character starts
    pos = 0
    for ch in code:
        starts.append(pos)
        o = ord(ch)
        pos += 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4  # a surrogate: U+FFFD, 3 bytes
    starts.append(pos)
    import bisect

    return [bisect.bisect_right(starts, int(o)) - 1 for o in offsets]


class ParseCache:
    """A thread-safe LRU keyed by ``(lang, text)``, bounded by entries and by the total characters of the texts.

    Holds parse trees here, and CodeBLEU's per-program features (``code/codebleu.py``).
    """

    def __init__(self, max_entries: int = 4096, max_chars: int = 64_000_000) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._data: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str]) -> Any:
        with self._lock:
            tree = self._data.get(key)
            if tree is None:
                self.misses += 1
            else:
                self.hits += 1
                self._data.move_to_end(key)
            return tree

    def put(self, key: tuple[str, str], tree: Any) -> None:
        size = len(key[1])
        if size > self.max_chars:
            return
        with self._lock:
            if key in self._data:
                return
            self._data[key] = tree
            self._chars += size
            while len(self._data) > self.max_entries or self._chars > self.max_chars:
                (_, old), _ = self._data.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._data)


CACHE = ParseCache()


def clear_cache() -> None:
    """Drop every cached tree (tests and benchmarks use it to measure cold runs)."""
    CACHE.clear()


def parse(code: str, lang: str = "python", *, cache: bool = True, timeout: float | None = None) -> Tree:
    """Parse ``code`` with tree-sitter, reusing the tree of an identical earlier call.

    ``timeout`` (seconds) bounds tree-sitter's work; :class:`ParseTimeout` is raised when it runs out.
    tree-sitter itself never fails on bad input: syntax errors become ``ERROR``/``MISSING`` nodes.
    """
    key = (lang, code)
    if cache:
        tree = CACHE.get(key)
        if tree is not None:
            return tree
    p = parser(lang)
    p.timeout_micros = 0 if timeout is None else max(1, int(timeout * 1e6))
    try:
        tree = p.parse(encode(code))
    except ValueError as exc:  # the binding reports a timeout as ValueError("Parsing failed")
        p.reset()
        raise ParseTimeout(f"tree-sitter parse exceeded {timeout} s") from exc
    finally:
        p.timeout_micros = 0
    if cache:
        CACHE.put(key, tree)
    return tree
