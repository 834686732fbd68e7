"""Which /regex/ patterns can backtrack catastrophically (exponential time in the length of the text).

Python's ``re`` backtracks; a pattern such as ``(a+)+$`` takes seconds on 30 characters and never returns on
a few hundred. Two shapes cause it, and :func:`catastrophic` finds both in the parsed pattern:

* a *nested quantifier*: a repeated group whose body holds an unbounded repetition, as in ``(a+)+``,
  ``(\\w+\\s?)*``, ``(.*a){20}`` -- unless every repetition of the group must consume a character that the
  inner repetitions cannot match (``(\\w+\\s)+``, ``(?:Step \\d+:.*\\n)+`` are linear: the separator fixes
  where each repetition ends);
* an *overlapping alternation under a quantifier*: ``(a|a)*``, ``(ab|ac|a)*`` -- two alternatives that can
  start with the same character, so the engine may try both at every repetition.

The checker warns about such patterns (W006) and the runtime runs them with a deadline (see
``rewardlang.runtime.kernels.Pattern``). The analysis looks at characters below U+0180, enough to tell the
classes apart.

    >>> catastrophic("(a+)+$", "")
    'nested quantifier: `+` repeats a group holding `+`'
    >>> catastrophic("(a|a)*c", "")
    'overlapping alternation under `*`: two alternatives can start with the same character'
    >>> catastrophic("(?:Step \\\\d+:.*\\\\n)+", "") is None
    True
"""

from __future__ import annotations

import re
from typing import Any

try:
    import re._constants as _C  # type: ignore[import-not-found]
    import re._parser as _P  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _C  # type: ignore[no-redef]
    import sre_parse as _P  # type: ignore[no-redef]

__all__ = ["catastrophic"]

_ALPHABET = [chr(i) for i in range(0x180)]
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", None))
_UNBOUNDED = 10  # a repetition allowing more than this many is treated as unbounded


def catastrophic(source: str, flags: str) -> str | None:
    """Why the pattern can backtrack exponentially, or None when it cannot (as far as this analysis sees)."""
    bits = 0
    for f in flags:
        bits |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}.get(f, 0)
    try:
        parsed = _P.parse(source, bits)
    except Exception:  # noqa: BLE001 - an invalid pattern is reported elsewhere (E004)
        return None
    return _walk(list(parsed), bits)


def _walk(items: list, bits: int) -> str | None:
    for op, av in items:
        if op in _REPEATS and op is not None:
            lo, hi, body = av
            body = list(body)
            if hi > 1:
                inner = _unbounded_items(body)
                if inner and not _has_separator(body, inner, bits):
                    return (f"nested quantifier: `{_q(lo, hi)}` repeats a group holding `{_q(*inner[0][1][:2])}`")
                if hi >= _UNBOUNDED:
                    why = _overlapping_branch(body, bits, _first(body, bits))
                    if why:
                        return f"overlapping alternation under `{_q(lo, hi)}`: {why}"
            found = _walk(body, bits)
            if found:
                return found
        elif op == _C.SUBPATTERN:
            found = _walk(list(av[-1]), bits)
            if found:
                return found
        elif op == _C.BRANCH:
            for alt in av[1]:
                found = _walk(list(alt), bits)
                if found:
                    return found
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            found = _walk(list(av[1]), bits)
            if found:
                return found
        elif op == getattr(_C, "ATOMIC_GROUP", None):
            continue  # atomic groups do not backtrack into
    return None


def _q(lo: int, hi: int) -> str:
    if hi == _C.MAXREPEAT:
        return "*" if lo == 0 else ("+" if lo == 1 else f"{{{lo},}}")
    if lo == hi:
        return f"{{{lo}}}"
    return "?" if (lo, hi) == (0, 1) else f"{{{lo},{hi}}}"


def _unbounded_items(items: list) -> list:
    """The repetitions (at any depth, outside atomic groups) that allow many repeats."""
    out = []
    for op, av in items:
        if op in _REPEATS and op is not None:
            if av[1] >= _UNBOUNDED or av[1] == _C.MAXREPEAT:
                out.append((op, av))
            out.extend(_unbounded_items(list(av[2])))
        elif op == _C.SUBPATTERN:
            out.extend(_unbounded_items(list(av[-1])))
        elif op == _C.BRANCH:
            for alt in av[1]:
                out.extend(_unbounded_items(list(alt)))
    return out


def _has_separator(body: list, inner: list, bits: int) -> bool:
    """Whether the body has a mandatory single-character element that none of the inner repetitions can
    match: each repetition of the group then ends at such a character, which removes the ambiguity."""
    inner_chars: set[str] = set()
    for _, (_, _, ibody) in inner:
        inner_chars |= _chars(list(ibody), bits, all_of=True)
    while len(body) == 1 and body[0][0] == _C.SUBPATTERN:  # `(...)+`: look inside the group
        body = list(body[0][1][-1])
    for op, av in body:
        if op in _REPEATS and op is not None:
            continue  # optional or repeated: not a separator
        cs = _single(op, av, bits)
        if cs is not None and cs and not (cs & inner_chars):
            return True
    return False


def _overlapping_branch(body: list, bits: int, loop_first: set[str]) -> str | None:
    for op, av in body:
        if op == _C.SUBPATTERN:
            found = _overlapping_branch(list(av[-1]), bits, loop_first)
            if found:
                return found
        if op == _C.BRANCH:
            # `re` factors a common prefix out (`a|ab` is parsed as `a(?:|b)`), so alternatives left equal,
            # such as the two empty ones of `(a|a)*`, are an overlap too
            # an empty alternative (left by that factoring: `\\d|\\d\\d` is `\\d(?:|\\d)`) is followed by the
            # next repetition, so it starts with what the repeated body starts with
            alts = [list(alt) for alt in av[1]]
            firsts = [_first(alt, bits) if alt else loop_first for alt in alts]
            for i in range(len(firsts)):
                for j in range(i + 1, len(firsts)):
                    if firsts[i] & firsts[j] or alts[i] == alts[j]:
                        return "two alternatives can start with the same character"
            return None
        if op == _C.IN and len(body) == 1:
            return None
    return None


def _first(items: list, bits: int) -> set[str]:
    """Characters that can start a match of the sequence (over the analysis alphabet)."""
    out: set[str] = set()
    for op, av in items:
        if op in _REPEATS and op is not None:
            out |= _first(list(av[2]), bits)
            if av[0] > 0:
                return out
            continue
        if op == _C.SUBPATTERN:
            sub = _first(list(av[-1]), bits)
            out |= sub
            if sub:
                return out
            continue
        if op == _C.BRANCH:
            for alt in av[1]:
                out |= _first(list(alt), bits)
            return out
        cs = _single(op, av, bits)
        if cs is not None:
            return out | cs
        if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):
            continue
        return out | set(_ALPHABET)  # backreferences and the like: assume anything
    return out


def _chars(items: list, bits: int, all_of: bool) -> set[str]:
    """Every character some element of the sequence can match."""
    out: set[str] = set()
    for op, av in items:
        if op in _REPEATS and op is not None:
            out |= _chars(list(av[2]), bits, all_of)
        elif op == _C.SUBPATTERN:
            out |= _chars(list(av[-1]), bits, all_of)
        elif op == _C.BRANCH:
            for alt in av[1]:
                out |= _chars(list(alt), bits, all_of)
        else:
            cs = _single(op, av, bits)
            out |= cs if cs is not None else (set() if op == _C.AT else set(_ALPHABET))
    return out


def _single(op: Any, av: Any, bits: int) -> set[str] | None:
    """The characters a single-character element matches, or None when it is not one."""
    ic = bits & re.IGNORECASE
    if op == _C.LITERAL:
        c = chr(av)
        return {c, c.lower(), c.upper()} if ic else {c}
    if op == _C.NOT_LITERAL:
        c = chr(av)
        return set(_ALPHABET) - ({c, c.lower(), c.upper()} if ic else {c})
    if op == _C.ANY:
        return set(_ALPHABET) if bits & re.DOTALL else set(_ALPHABET) - {"\n"}
    if op == _C.IN:
        neg = any(o == _C.NEGATE for o, _ in av)
        got = set()
        for o, a in av:
            if o == _C.LITERAL:
                got |= {chr(a), chr(a).lower(), chr(a).upper()} if ic else {chr(a)}
            elif o == _C.RANGE:
                got |= {ch for ch in _ALPHABET if a[0] <= ord(ch) <= a[1]}
                if ic:
                    got |= {ch.lower() for ch in got} | {ch.upper() for ch in got}
            elif o == _C.CATEGORY:
                got |= _category(a)
        got &= set(_ALPHABET)
        return set(_ALPHABET) - got if neg else got
    return None


_CATS: dict[Any, str] = {}


def _category(cat: Any) -> set[str]:
    name = str(cat).lower()
    rx = {"category_digit": r"\d", "category_not_digit": r"\D", "category_space": r"\s",
          "category_not_space": r"\S", "category_word": r"\w", "category_not_word": r"\W",
          "category_uni_digit": r"\d", "category_uni_not_digit": r"\D", "category_uni_space": r"\s",
          "category_uni_not_space": r"\S", "category_uni_word": r"\w", "category_uni_not_word": r"\W",
          "category_linebreak": r"\n", "category_uni_linebreak": r"\n"}.get(name)
    if rx is None:
        return set(_ALPHABET)
    compiled = re.compile(rx)
    return {ch for ch in _ALPHABET if compiled.fullmatch(ch)}
