"""Text, tag, fenced-code and regex functions: the language's built-in vocabulary, registered like any plug-in.

Functions that cut text out of their input (``tag``, ``strip``, ``code_block``) report where the piece starts,
so spans found inside it later map onto the completion's characters.

    >>> from rewardlang.runtime.api import Context
    >>> r = tag.fn(["<answer> x = 1 </answer>"], "answer", params=TagParams(), ctx=Context())
    >>> r.values, r.offsets
    ([' x = 1 '], [8])
"""

from __future__ import annotations

import re
import sys
from itertools import repeat
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rewardlang.runtime.api import ComponentError, Context, Result, Span, function, per_row
from rewardlang.runtime.columns import Col
from rewardlang.signature import Arg
from rewardlang.types import NUMBER, REGEX, TEXT

# Cheap functions skip the per-call deduplication (the batch's rows are already unique).
CHEAP = ("no_dedup",)


class _Opts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------- plain text

@function("strip", args={"text": "text"}, returns="text", spans_of="text", tags=CHEAP,
          doc="The text without leading and trailing whitespace.")
def strip(text: list[str], *, params: None, ctx: Context) -> Result:
    out, offs = [], []
    for t in text:
        s = t.lstrip()
        offs.append(len(t) - len(s))
        out.append(s.rstrip())
    return Result(out, offsets=offs)


@function("lower", args={"text": "text"}, returns="text", spans_of="text", tags=CHEAP, doc="Lower case.")
def lower(text: list[str], *, params: None, ctx: Context) -> Result:
    out = [t.lower() for t in text]
    return Result(out, offsets=[0 if len(a) == len(b) else None for a, b in zip(text, out)])


@function("upper", args={"text": "text"}, returns="text", spans_of="text", tags=CHEAP, doc="Upper case.")
def upper(text: list[str], *, params: None, ctx: Context) -> Result:
    out = [t.upper() for t in text]
    return Result(out, offsets=[0 if len(a) == len(b) else None for a, b in zip(text, out)])


@function("lines", args={"text": "text"}, returns="list[text]", tags=CHEAP,
          doc="The lines of the text (Python's str.splitlines).")
def lines(text: list[str], *, params: None, ctx: Context) -> list[list[str]]:
    return [t.splitlines() for t in text]


@function("chars", args={"text": "text"}, returns="list[text]", tags=CHEAP, doc="The characters of the text.")
def chars(text: list[str], *, params: None, ctx: Context) -> list[list[str]]:
    return [list(t) for t in text]


class LazyWords(Sequence):
    """The whitespace words of each text, split only when a row is read.

    ``distinct``/``repetition``/``ngrams`` recognise it and count n-grams straight from the text bytes.
    """

    __slots__ = ("_split", "texts", "tokens")

    def __init__(self, texts: list[Any]) -> None:
        self.texts = texts
        self.tokens: Any = None  # rewardlang.runtime.ngrams.Tokens, made once for all n
        self._split: dict[str, list[str]] | None = None  # distinct text -> its words, shared by every n

    def distinct(self, n: int, bad: Any) -> np.ndarray:
        """``distinct_py(words, n)`` of every row (1.0 where ``bad``), each distinct text split and counted once.

        A GRPO batch repeats completions across its rows (the same answer against another reference, or sampled
        twice), and ``rep`` asks for several n: the words of a text are split once for all n, and its value
        computed once per n.
        """
        split = self._split
        if split is None:
            split = self._split = {}
        memo: dict[str, float] = {}

        def one(t: Any) -> float:
            if t is None:  # not flagged bad: as the row-by-row path would, which fails the row
                return distinct_py(t, n)
            v = memo.get(t)
            if v is None:
                w = split.get(t)
                if w is None:
                    w = split[t] = t.split()
                v = memo[t] = distinct_py(w, n)
            return v

        return np.fromiter((1.0 if b else one(t) for t, b in zip(self.texts, bad)), dtype=np.float64,
                           count=len(self.texts))

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [t.split() if t is not None else None for t in self.texts[i]]
        t = self.texts[i]
        return None if t is None else t.split()

    def __iter__(self):  # type: ignore[no-untyped-def]
        for t in self.texts:
            yield None if t is None else t.split()


def _warm_ngrams() -> None:
    from rewardlang.runtime import ngrams

    ngrams.warm()


def _ngrams_ready() -> bool:
    """The n-gram kernels are loaded in this process (without importing numba to find out)."""
    mod = sys.modules.get("rewardlang.runtime.ngrams")
    return mod is not None and mod.READY


@function("words", args={"text": "text"}, returns="list[text]", columnar=True, warm=_warm_ngrams,
          doc="The whitespace-separated words of the text (Python's str.split()).")
def words(text: Any, *, params: None, ctx: Context) -> Any:
    if not isinstance(text, Col):
        return None if text is None else text.split()
    return Col(LazyWords(text.v), text.none, text.err, kind="obj")


@function("contains", args={"text": "text", "part": "text"}, returns="bool", tags=CHEAP,
          doc="True when `part` occurs in the text.")
def contains(text: list[str], part: list[str], *, params: None, ctx: Context) -> list[bool]:
    return [p in t for t, p in zip(text, part)]


@function("startswith", args={"text": "text", "prefix": "text"}, returns="bool", tags=CHEAP,
          doc="True when the text starts with `prefix`.")
def startswith(text: list[str], prefix: list[str], *, params: None, ctx: Context) -> list[bool]:
    return [t.startswith(p) for t, p in zip(text, prefix)]


@function("endswith", args={"text": "text", "suffix": "text"}, returns="bool", tags=CHEAP,
          doc="True when the text ends with `suffix`.")
def endswith(text: list[str], suffix: list[str], *, params: None, ctx: Context) -> list[bool]:
    return [t.endswith(p) for t, p in zip(text, suffix)]


# ---------------------------------------------------------------------- tags

class TagParams(_Opts):
    dotall: bool = Field(True, description="`.` also matches newlines, so multi-line content is found")
    greedy: bool = Field(False, description="extend to the last closing tag instead of the first")


def _tag_regex(name: str, p: TagParams) -> re.Pattern[str]:
    body = "(.*)" if p.greedy else "(.*?)"
    return re.compile(f"<{re.escape(name)}>{body}</{re.escape(name)}>", re.DOTALL if p.dotall else 0)


def _tag_matches(t: str, name: str, dotall: bool, greedy: bool, first: bool) -> list[tuple[int, int]]:
    """(content start, content end) of what ``findall``/``search`` of ``<name>(.*?)</name>`` (``(.*)`` when
    greedy; ``.`` without newlines unless dotall) finds, in linear time.

    The regex is quadratic on hostile text: with 5,000 ``<answer>`` and no closing tag, every opening tag scans to
    the end (16 s for one completion). Here each step finds the next opening tag and the closing tag after it with
    ``str.find``/``rfind`` inside the span the content may cover (the whole rest, or the rest of the line): when an
    opening tag has no closing tag in that span, neither has any later opening tag inside it, so the scan skips it.
    """
    open_, close = f"<{name}>", f"</{name}>"
    out: list[tuple[int, int]] = []
    pos, n = 0, len(t)
    while True:
        i = t.find(open_, pos)
        if i < 0:
            return out
        c0 = i + len(open_)
        limit = n if dotall else (lambda k: n if k < 0 else k)(t.find("\n", c0))
        j = t.rfind(close, c0, limit) if greedy else t.find(close, c0, limit)
        if j < 0:
            if dotall:
                return out  # no closing tag after this opening tag: none after any later one either
            pos = limit + 1  # none on this line: the next opening tag that can match is on a later line
            if pos > n:
                return out
            continue
        out.append((c0, j))
        if first:
            return out
        pos = j + len(close)


@function("tag", args={"text": "text", "name": Arg("name", TEXT, static=True)}, returns="text?", params=TagParams,
          spans_of="text", tags=CHEAP,
          doc="The inner text of the first <name>…</name> (none when absent). With dotall=false the content "
              "must fit on one line, as the regex printed in CodePO's Algorithm 1 has it.")
def tag(text: list[str], name: str, *, params: TagParams, ctx: Context) -> Result:
    out: list[str | None] = []
    offs: list[int | None] = []
    if params.dotall and not params.greedy:
        # the first <name> followed by a </name> is what `<name>(.*?)</name>` with DOTALL finds: if the first
        # opening tag has no closing tag after it, no later one has either
        open_, close = f"<{name}>", f"</{name}>"
        for t in text:
            i = t.find(open_)
            j = t.find(close, i + len(open_)) if i >= 0 else -1
            if j < 0:
                out.append(None)
                offs.append(None)
            else:
                out.append(t[i + len(open_):j])
                offs.append(i + len(open_))
        return Result(out, offsets=offs)
    for t in text:
        m = _tag_matches(t, name, params.dotall, params.greedy, first=True)
        out.append(t[m[0][0]:m[0][1]] if m else None)
        offs.append(m[0][0] if m else None)
    return Result(out, offsets=offs)


@function("tags", args={"text": "text", "name": Arg("name", TEXT, static=True)}, returns="list[text]",
          params=TagParams, tags=CHEAP, doc="The inner texts of every <name>…</name>.")
def tags(text: list[str], name: str, *, params: TagParams, ctx: Context) -> list[list[str]]:
    return [[t[a:b] for a, b in _tag_matches(t, name, params.dotall, params.greedy, first=False)] for t in text]


# ---------------------------------------------------------------------- fenced code blocks

_EOL = re.compile(r"\r\n|\r|\n")


def fences(text: str) -> list[tuple[str, int, int, bool]]:
    """Fenced blocks as (language, content start, content end, closed). A fence is ``` anywhere; lines end at
    ``\\n``, ``\\r\\n`` or a lone ``\\r`` (as Python's). The info string runs to the end of the opening fence's
    line and the content starts after that line's break; a closed block's content ends where :func:`_content_end`
    says (before the line break ahead of the closing fence's line, that line's indentation included).

        >>> fences("a\\n```py\\nx = 1\\n```\\n```js\\nlet")
        [('py', 8, 13, True), ('js', 24, 27, False)]
    """
    out = []
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return out
        eol = _EOL.search(text, start + 3)
        info_end = eol.start() if eol else len(text)
        info = text[start + 3:info_end].strip()
        if "```" in info:  # ```inline``` on one line: content is between the fences
            close = text.find("```", start + 3)
            out.append(("", start + 3, close, True))
            pos = close + 3
            continue
        lang = info.split()[0].lower() if info else ""
        content_start = eol.end() if eol else len(text)
        close = text.find("```", content_start)
        if close < 0:
            out.append((lang, content_start, len(text), False))
            return out
        out.append((lang, content_start, _content_end(text, content_start, close), True))
        pos = close + 3


def _content_end(text: str, start: int, close: int) -> int:
    """Where a closed block's content ends: when only spaces or tabs stand before the closing fence on its line
    (an indented fence, or none), before the line break ahead of that line (``\\r\\n`` whole); else at the fence.

    >>> t = "```python\\r\\nx = 1\\r\\n  ```"
    >>> t[11:_content_end(t, 11, t.index("  ```") + 2)]
    'x = 1'
    """
    k = close
    while k > start and text[k - 1] in " \t":
        k -= 1
    if k == start:  # the fence's line is the content's first: no content
        return start
    if text[k - 1] not in "\r\n":  # code before the fence on its line
        return close
    return k - 2 if text[k - 2:k] == "\r\n" and k - 2 >= start else k - 1


def fence_language_ok(lang: str, want: str | None) -> bool:
    """Whether a fence's info string ``lang`` names the language ``want`` (any, when ``want`` is none).

        >>> fence_language_ok("py", "python"), fence_language_ok("js", "python"), fence_language_ok("js", None)
        (True, False, True)
    """
    if not want:
        return True
    from rewardlang.sandbox.languages import fence_names  # stdlib-only; the fence names of each language

    return lang in fence_names(want)


class BlockParams(_Opts):
    which: Literal["first", "last"] = "first"
    allow_unclosed: bool = Field(False, description="also return a block whose closing fence is missing")


# `lang` may be a column (one language per row: translation data mixes targets) or a constant; "" (the default)
# is any language. Not optional: a none argument would make the whole call none (null propagation).
_LANG = Arg("lang", TEXT, default="")


@function("code_block", args={"text": "text", "lang": _LANG},
          returns="code?", params=BlockParams, spans_of="text", tags=CHEAP,
          doc="The content of the first (or last) fenced ``` block, optionally of one language "
              "(`python` also accepts py/python3). None when there is no such closed block. Lines end at \\n, "
              "\\r\\n or \\r; the content runs from after the opening fence's line to the line break ahead of "
              "the closing fence's line (that line's indentation is the fence's).")
def code_block(text: list[str], lang: Any, *, params: BlockParams, ctx: Context) -> Result:
    out: list[str | None] = []
    offs: list[int | None] = []
    for t, lg in zip(text, per_row(lang, len(text))):
        blocks = [b for b in fences(t) if fence_language_ok(b[0], lg) and (b[3] or params.allow_unclosed)]
        if not blocks:
            out.append(None)
            offs.append(None)
            continue
        b = blocks[0] if params.which == "first" else blocks[-1]
        out.append(t[b[1]:b[2]])
        offs.append(b[1])
    return Result(out, offsets=offs)


@function("code_blocks", args={"text": "text", "lang": _LANG},
          returns="list[code]", tags=CHEAP, doc="The contents of every closed fenced block (of one language).")
def code_blocks(text: list[str], lang: Any, *, params: None, ctx: Context) -> list[list[str]]:
    return [[t[b[1]:b[2]] for b in fences(t) if b[3] and fence_language_ok(b[0], lg)]
            for t, lg in zip(text, per_row(lang, len(text)))]


@function("n_code_blocks", args={"text": "text", "lang": _LANG},
          returns="number", tags=CHEAP, doc="How many fenced blocks (closed or not) the text has.")
def n_code_blocks(text: list[str], lang: Any, *, params: None, ctx: Context) -> list[float]:
    return [float(sum(1 for b in fences(t) if fence_language_ok(b[0], lg))) for t, lg in zip(text, per_row(lang, len(text)))]


@function("unclosed_fence", args={"text": "text"}, returns="bool", tags=CHEAP,
          doc="True when a ``` fence is opened and never closed.")
def unclosed_fence(text: list[str], *, params: None, ctx: Context) -> list[bool]:
    return [any(not b[3] for b in fences(t)) for t in text]


# ---------------------------------------------------------------------- regular expressions

_PAT = Arg("pattern", REGEX, static=True)


def _bounded(pattern: Any, text: list[str], ctx: Context, each: Any) -> Result:
    """Run ``each(compiled, t, timeout)`` on every text for a pattern that can backtrack catastrophically
    (``pattern.risky``, warned about as W006): with the `regex` package and a deadline per call -- the
    component's ``timeout``, else ``kernels.REGEX_TIMEOUT`` -- so that one sample costs at most that long and
    its value is an error instead of a hang. `re` itself cannot be interrupted."""
    from rewardlang.runtime.kernels import REGEX_TIMEOUT

    limit = ctx.timeout if ctx.timeout is not None and ctx.timeout > 0 else REGEX_TIMEOUT
    rx = pattern.bounded()
    values: list[Any] = []
    errors: list[str | None] = []
    for t in text:
        try:
            values.append(each(rx, t, limit))
            errors.append(None)
        except TimeoutError:
            values.append(None)
            errors.append(f"regex {pattern!r} gave up after {limit:g} s ({pattern.risky})")
            ctx.stats["regex_timeouts"] += 1
    return Result(values, errors=errors)


@function("count", args={"text": "text", "patterns": Arg("patterns", REGEX, static=True, variadic=True)},
          returns="number", tags=CHEAP,
          doc="Total number of non-overlapping matches of all patterns (/regex/ or literal text), each counted "
              "on its own, as repeated re.findall calls would.")
def count(text: list[str], patterns: list[Any], *, params: None, ctx: Context) -> np.ndarray:
    n = len(text)
    out = np.zeros(n, dtype=np.float64)
    errors: list[str | None] | None = None
    for p in patterns:
        if p.risky:
            r = _bounded(p, text, ctx, lambda rx, t, limit: len(rx.findall(t, timeout=limit)))
            out += np.array([np.nan if v is None else v for v in r.values], dtype=np.float64)
            if any(r.errors):
                errors = [a or b for a, b in zip(errors or [None] * n, r.errors)]
            continue
        # map() over C-level callables: no Python frame per text where the pattern allows it
        if p.is_literal and p.source == "":
            counts = map(len, text)
            out += 1
        elif p.is_literal:
            counts = map(str.count, text, repeat(p.source))
        elif p.counter_is_findall:
            counts = map(len, map(p.regex.findall, text))
        else:
            counts = map(p.counter(), text)
        out += np.fromiter(counts, dtype=np.float64, count=n)
    if errors is not None:
        return Result([None if e else float(v) for v, e in zip(out, errors)], errors=errors)
    return out


@function("search", args={"text": "text", "pattern": _PAT}, returns="bool", tags=CHEAP,
          doc="True when the pattern matches anywhere.")
def search(text: list[str], pattern: Any, *, params: None, ctx: Context) -> Any:
    if pattern.risky:
        return _bounded(pattern, text, ctx, lambda rx, t, limit: rx.search(t, timeout=limit) is not None)
    s = pattern.regex.search
    return [s(t) is not None for t in text]


@function("match", args={"text": "text", "pattern": _PAT}, returns="bool", tags=CHEAP,
          doc="True when the pattern matches at the start.")
def match(text: list[str], pattern: Any, *, params: None, ctx: Context) -> Any:
    if pattern.risky:
        return _bounded(pattern, text, ctx, lambda rx, t, limit: rx.match(t, timeout=limit) is not None)
    m = pattern.regex.match
    return [m(t) is not None for t in text]


@function("fullmatch", args={"text": "text", "pattern": _PAT}, returns="bool", tags=CHEAP,
          doc="True when the pattern matches the whole text.")
def fullmatch(text: list[str], pattern: Any, *, params: None, ctx: Context) -> Any:
    if pattern.risky:
        return _bounded(pattern, text, ctx, lambda rx, t, limit: rx.fullmatch(t, timeout=limit) is not None)
    m = pattern.regex.fullmatch
    return [m(t) is not None for t in text]


@function("findall", args={"text": "text", "pattern": _PAT}, returns="list[text]", tags=CHEAP,
          doc="Every non-overlapping match (the whole match, even when the pattern has groups).")
def findall(text: list[str], pattern: Any, *, params: None, ctx: Context) -> Any:
    if pattern.risky:
        return _bounded(pattern, text, ctx,
                        lambda rx, t, limit: [m.group(0) for m in rx.finditer(t, timeout=limit)])
    it = pattern.regex.finditer
    return [[m.group(0) for m in it(t)] for t in text]


class ExtractParams(_Opts):
    group: int | str = 0


@function("extract", args={"text": "text", "pattern": _PAT}, returns="text?", params=ExtractParams,
          spans_of="text", tags=CHEAP, doc="The first match (or its `group`), none when there is none.")
def extract(text: list[str], pattern: Any, *, params: ExtractParams, ctx: Context) -> Result:
    g = params.group
    if (isinstance(g, int) and not 0 <= g <= pattern.regex.groups) or (
            isinstance(g, str) and g not in pattern.regex.groupindex):
        # a property of the spec, not of a sample: every sample fails the same way, in any batch
        raise ComponentError(f"extract: {pattern!r} has no group {g!r}")
    if pattern.risky:
        found = _bounded(pattern, text, ctx, lambda rx, t, limit: rx.search(t, timeout=limit) or False)
    else:
        found = Result([pattern.regex.search(t) for t in text])
    out: list[str | None] = []
    offs: list[int | None] = []
    for m in found.values:
        try:
            g = m.group(params.group) if m else None
        except (IndexError, re.error):
            raise ValueError(f"the pattern has no group {params.group!r}") from None
        out.append(g)
        offs.append(m.start(params.group) if g is not None else None)
    return Result(out, errors=found.errors, offsets=offs)


class SpanParams(_Opts):
    value: float = 1.0
    label: str = ""


@function("matches", args={"text": "text", "pattern": _PAT}, returns="spans", params=SpanParams, spans_of="text",
          tags=CHEAP, doc="A span for every match, each with `value` and `label`.")
def matches(text: list[str], pattern: Any, *, params: SpanParams, ctx: Context) -> Any:
    label = params.label or repr(pattern)
    if pattern.risky:
        return _bounded(pattern, text, ctx, lambda rx, t, limit: [
            Span(m.start(), m.end(), params.value, label) for m in rx.finditer(t, timeout=limit)])
    it = pattern.regex.finditer
    return [[Span(m.start(), m.end(), params.value, label) for m in it(t)] for t in text]


@function("span", args={"text": "text"}, returns="spans", params=SpanParams, spans_of="text", tags=CHEAP,
          doc="One span covering the whole text (e.g. an answer's code block) with `value`.")
def span(text: list[str], *, params: SpanParams, ctx: Context) -> list[list[Span]]:
    return [[Span(0, len(t), params.value, params.label)] for t in text]


# ---------------------------------------------------------------------- n-grams

_N = Arg("n", NUMBER, static=True)


def _check_n(n: Any) -> int:
    if not float(n).is_integer() or n < 1:
        raise ValueError(f"n must be a positive whole number, not {n!r}")
    return int(n)


def distinct_py(items: Sequence[Any], n: int) -> float:
    """Distinct-n of one token list: unique n-grams / all n-grams, 1.0 when there are no n-grams."""
    total = len(items) - n + 1
    if total <= 0:
        return 1.0
    return len(set(zip(*(items[i:] for i in range(n))))) / total


@function("distinct", args={"items": "list[text]", "n": _N}, returns="number", range=(0.0, 1.0), columnar=True,
          warm=_warm_ngrams,
          doc="Distinct-n: unique n-grams / all n-grams of a token list; 1 when it has fewer than n tokens.")
def distinct(items: Any, n: float, *, params: None, ctx: Context) -> Any:
    k = _check_n(n)
    if not isinstance(items, Col):
        return None if items is None else distinct_py(items, k)
    bad = items.bad()
    # the kernel's first use in a process costs ~0.5 s (numba import, cached machine code); once loaded it wins
    # from a handful of rows (scoring worker processes load it at start-up: the functions' `warm`)
    # a short run that knows its size (`rewardlang score` of a file: ctx.extra["run_rows"]) loads it only when the
    # whole run repays the load (import numba and scipy, load the machine code: ~1 s of a fresh process)
    if isinstance(items.v, LazyWords) and len(items.v) >= (
            _NUMBA_MIN_ROWS_LOADED if _ngrams_ready() else
            _NUMBA_MIN_ROWS if ctx.extra.get("run_rows", _NUMBA_MIN_RUN_ROWS) >= _NUMBA_MIN_RUN_ROWS else 1 << 62):
        from rewardlang.runtime import ngrams

        if items.v.tokens is None:
            items.v.tokens = ngrams.Tokens([None if b else t for t, b in zip(items.v.texts, bad)])
        v = items.v.tokens.distinct(k)
    elif isinstance(items.v, LazyWords):
        v = items.v.distinct(k, bad)
    else:
        v = np.fromiter((1.0 if b else distinct_py(x, k) for x, b in zip(items.v, bad)), dtype=np.float64,
                        count=items.n)
    return Col(v, items.none, items.err)


@function("repetition", args={"items": "list[text]", "n": _N}, returns="number", range=(0.0, 1.0), columnar=True,
          warm=_warm_ngrams,
          doc="1 - distinct(items, n): the share of repeated n-grams.")
def repetition(items: Any, n: float, *, params: None, ctx: Context) -> Any:
    d = distinct.fn(items, n, params=None, ctx=ctx)
    if not isinstance(d, Col):
        return None if d is None else 1.0 - d
    return Col(1.0 - d.v, d.none, d.err)


@function("ngrams", args={"items": "list[text]", "n": _N}, returns="list[text]", tags=CHEAP,
          doc="The n-grams of a token list, each joined by one space.")
def ngrams_(items: list[list[str]], n: float, *, params: None, ctx: Context) -> list[list[str]]:
    k = _check_n(n)
    return [[" ".join(g) for g in zip(*(x[i:] for i in range(k)))] for x in items]


#: below this many rows the pure-Python path is faster than loading (and maybe compiling) the Numba kernel /
#: than calling the kernel once it is loaded
_NUMBA_MIN_ROWS = 256
_NUMBA_MIN_ROWS_LOADED = 8
#: rows of a whole run below which loading the kernel never pays (pure Python: ~0.1 ms per ~600-character row
#: for n = 2, 3, 4 together; loading: ~1 s)
_NUMBA_MIN_RUN_ROWS = 20_000
