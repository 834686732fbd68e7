"""Typed values of structured tests (``rewardlang-tests/1``): the type parser, the record parser and the
type-directed comparison, all run in the trusted process. Standard library only.

A program in another language reports what its function returned as one line per test case on file
descriptor 3: ``<case index> <JSON>``. The JSON is untrusted: it is parsed with bounded numbers and
compared here against the expected value, which never entered the sandbox.

    >>> parse_type("list[tuple[int, str]]")
    ('list', ('tuple', (('int',), ('str',))))
    >>> compare([[1, "a"]], [[1, "a"]], "list[tuple[int,str]]")
    True
    >>> compare(0.1 + 0.2, 0.3, "float"), compare(1, 1.0, "int"), compare(1, 1.0, "int", integral_floats=True)
    (True, False, True)
    >>> compare([["a", 1], ["b", 2]], [["b", 2], ["a", 1]], "dict[str,int]")
    True
    >>> parse_records(b'0 [1,2]\\n1 "x"\\n', 2)
    ([[1, 2], 'x'], [])

Comparison rules (per type): ``int`` an exact JSON integer (a float with an integral value only where the
target has no integer type, ``integral_floats``: JavaScript); ``float`` ``|a - e| <= tol`` with ``tol`` the
case's ``tolerance``, else ``DEFAULT_REL_TOL * max(1, |e|)`` (1e-6 relative, 1e-6 absolute near zero), an
integer accepted as a float, and ``"nan"``/``"inf"``/``"-inf"`` (strings) equal only to themselves; ``bool``
a JSON bool; ``str`` exact; ``none`` null; ``list[T]``/``tuple[...]`` the same length, elementwise;
``dict[K, V]`` an array of ``[key, value]`` pairs, the same keys (order-insensitive, no duplicate key) with
equal values; ``optional[T]`` null equals null, otherwise ``T``.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

__all__ = [
    "DEFAULT_REL_TOL",
    "MAX_NUMBER_CHARS",
    "TypeExprError",
    "compare",
    "format_type",
    "parse_records",
    "parse_type",
]

#: the default float tolerance: relative 1e-6, and absolute 1e-6 for expected values below 1 in magnitude
DEFAULT_REL_TOL = 1e-6
#: characters of one number in a record (an integer of a million digits costs quadratic time to convert)
MAX_NUMBER_CHARS = 400
#: pairs of one dict whose keys have no exact form (float keys) compared pairwise, quadratic: more fail
_MAX_PAIRWISE = 256

_SCALARS = ("int", "float", "bool", "str", "none")


class TypeExprError(ValueError):
    """A type expression that does not parse."""


def parse_type(text: str) -> tuple:
    """Parse a type expression into a nested tuple: ``('int',)``, ``('list', T)``, ``('tuple', (T, ...))``,
    ``('dict', K, V)``, ``('optional', T)``.

        >>> parse_type("optional[dict[str, list[float]]]")
        ('optional', ('dict', ('str',), ('list', ('float',))))
        >>> parse_type("list[int")
        Traceback (most recent call last):
        ...
        rewardlang.sandbox.values.TypeExprError: expected ']' at 8 in 'list[int'
    """
    if not isinstance(text, str):
        raise TypeExprError(f"a type expression is a string, not {type(text).__name__}")
    return _parse_text(text)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> tuple:
    # memoised: every program of a batch carries its cases' type texts, the same few strings, and a parsed
    # type is nested tuples, immutable, so one object can serve them all (an error is raised, never cached)
    pos, t = _parse(text, 0, 0)
    pos = _skip(text, pos)
    if pos != len(text):
        raise TypeExprError(f"unexpected {text[pos]!r} at {pos} in {text!r}")
    return t


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def _parse(s: str, i: int, depth: int) -> tuple[int, tuple]:
    if depth > 32:
        raise TypeExprError(f"type expression nested too deeply: {s[:60]!r}")
    i = _skip(s, i)
    j = i
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    name = s[i:j].lower()
    if not name:
        raise TypeExprError(f"expected a type name at {i} in {s!r}")
    if name in _SCALARS:
        return j, (name,)
    arity = {"list": 1, "optional": 1, "dict": 2, "tuple": -1}.get(name)
    if arity is None:
        raise TypeExprError(f"unknown type {name!r} in {s!r} (int, float, bool, str, none, list[T], "
                            "tuple[T1, ...], dict[K, V], optional[T])")
    j = _skip(s, j)
    if j >= len(s) or s[j] != "[":
        raise TypeExprError(f"expected '[' after {name} at {j} in {s!r}")
    args = []
    j += 1
    while True:
        j, t = _parse(s, j, depth + 1)
        args.append(t)
        j = _skip(s, j)
        if j < len(s) and s[j] == ",":
            j += 1
            continue
        if j < len(s) and s[j] == "]":
            j += 1
            break
        raise TypeExprError(f"expected ']' at {j} in {s!r}")
    if arity > 0 and len(args) != arity:
        raise TypeExprError(f"{name} takes {arity} type argument(s), {len(args)} given in {s!r}")
    if name == "tuple":
        return j, ("tuple", tuple(args))
    return j, (name, *args)


def format_type(t: tuple) -> str:
    """The text of a parsed type (``parse_type``'s inverse, normalised).

        >>> format_type(parse_type("dict[ str ,list[int]]"))
        'dict[str, list[int]]'
    """
    if len(t) == 1:
        return t[0]
    if t[0] == "tuple":
        return "tuple[" + ", ".join(format_type(x) for x in t[1]) + "]"
    return t[0] + "[" + ", ".join(format_type(x) for x in t[1:]) + "]"


_type_cache: dict[str, tuple] = {}


def _as_type(type_expr: str | tuple) -> tuple:
    if isinstance(type_expr, tuple):
        return type_expr
    t = _type_cache.get(type_expr)
    if t is None:
        t = parse_type(type_expr)
        if len(_type_cache) < 4096:
            _type_cache[type_expr] = t
    return t


def compare(expected: Any, actual: Any, type_expr: str | tuple, tolerance: float | None = None, *,
            integral_floats: bool = False) -> bool:
    """Does ``actual`` (decoded from a record) equal ``expected`` (from the trusted tests) as a ``type_expr``?

    ``tolerance``: the absolute float tolerance of this case (None: the default, see the module docstring).
    ``integral_floats``: the target has no integer type (JavaScript), so an ``int`` may arrive as a float with
    an integral value.

        >>> compare(None, None, "optional[int]"), compare(True, 1, "bool"), compare("nan", "nan", "float")
        (True, False, True)
        >>> compare(1.0, 1.05, "float", 0.1), compare(1.0, 1.05, "float")
        (True, False)
    """
    try:
        return _cmp(expected, actual, _as_type(type_expr), tolerance, integral_floats, 0)
    except RecursionError:
        return False


def _float(v: Any) -> float | None:
    if type(v) is float or type(v) is int:
        return float(v) if type(v) is float or abs(v) < (1 << 1023) else None
    if v == "nan":
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return None


def _cmp(e: Any, a: Any, t: tuple, tol: float | None, intf: bool, depth: int) -> bool:
    if depth > 200:
        return False
    k = t[0]
    if k == "int":
        if type(a) is int:
            return type(e) is int and a == e
        if intf and type(a) is float and math.isfinite(a) and a == int(a):
            return type(e) is int and int(a) == e
        return False
    if k == "float":
        x, y = _float(a), _float(e)
        if x is None or y is None:
            return False
        if math.isnan(y) or math.isnan(x):
            return math.isnan(x) and math.isnan(y)
        if math.isinf(y) or math.isinf(x):
            return x == y
        bound = tol if tol is not None else DEFAULT_REL_TOL * max(1.0, abs(y))
        return abs(x - y) <= bound
    if k == "bool":
        return type(a) is bool and a is e
    if k == "str":
        return type(a) is str and a == e
    if k == "none":
        return a is None
    if k == "optional":
        if e is None or a is None:
            return e is None and a is None
        return _cmp(e, a, t[1], tol, intf, depth + 1)
    if k == "list":
        if type(a) is not list or not isinstance(e, list) or len(a) != len(e):
            return False
        return all(_cmp(x, y, t[1], tol, intf, depth + 1) for x, y in zip(e, a))
    if k == "tuple":
        ts = t[1]
        if type(a) is not list or not isinstance(e, (list, tuple)) or len(a) != len(ts) or len(e) != len(ts):
            return False
        return all(_cmp(x, y, ti, tol, intf, depth + 1) for x, y, ti in zip(e, a, ts))
    if k == "dict":
        return _cmp_dict(e, a, t[1], t[2], tol, intf, depth)
    return False


def _pairs(v: Any) -> list | None:
    if isinstance(v, dict):
        return [[k, x] for k, x in v.items()]
    if type(v) is list and all(type(p) is list and len(p) == 2 for p in v):
        return v
    return None


def _key(v: Any, t: tuple, intf: bool) -> Any:
    """A hashable canonical form of a key of type ``t`` (None: no exact form, compare pairwise)."""
    k = t[0]
    if k == "int":
        if type(v) is int:
            return ("i", v)
        if intf and type(v) is float and math.isfinite(v) and v == int(v):
            return ("i", int(v))
        return ("bad",)
    if k == "str":
        return ("s", v) if type(v) is str else ("bad",)
    if k == "bool":
        return ("b", v) if type(v) is bool else ("bad",)
    if k == "none":
        return ("n",) if v is None else ("bad",)
    if k == "optional":
        return ("n",) if v is None else _key(v, t[1], intf)
    if k == "tuple" and type(v) in (list, tuple) and len(v) == len(t[1]):
        parts = tuple(_key(x, ti, intf) for x, ti in zip(v, t[1]))
        return None if any(p is None for p in parts) else ("t", parts)
    if k == "tuple":
        return ("bad",)
    return None   # float, list, dict keys: pairwise with the tolerance


def _cmp_dict(e: Any, a: Any, kt: tuple, vt: tuple, tol: float | None, intf: bool, depth: int) -> bool:
    ep, ap = _pairs(e), (a if type(a) is list and all(type(p) is list and len(p) == 2 for p in a) else None)
    if ep is None or ap is None or len(ep) != len(ap):
        return False
    ekeys = [_key(p[0], kt, intf) for p in ep]
    if all(x is not None for x in ekeys):
        akeys = [_key(p[0], kt, intf) for p in ap]
        if any(x is None or x == ("bad",) for x in akeys):
            return False
        amap: dict = {}
        for key, p in zip(akeys, ap):
            if key in amap:
                return False        # a duplicate key: not a dict
            amap[key] = p[1]
        for key, p in zip(ekeys, ep):
            if key not in amap or not _cmp(p[1], amap[key], vt, tol, intf, depth + 1):
                return False
        return True
    if len(ep) > _MAX_PAIRWISE:
        return False
    used = [False] * len(ap)
    for ek, ev in ep:
        for j, (ak, av) in enumerate(ap):
            if not used[j] and _cmp(ek, ak, kt, tol, intf, depth + 1):
                used[j] = True
                if not _cmp(ev, av, vt, tol, intf, depth + 1):
                    return False
                break
        else:
            return False
    return True


def _bounded_int(s: str) -> int:
    if len(s) > MAX_NUMBER_CHARS:
        raise ValueError("number too long")
    return int(s)


def _bounded_float(s: str) -> float:
    if len(s) > MAX_NUMBER_CHARS:
        raise ValueError("number too long")
    return float(s)


def _no_constant(s: str) -> Any:
    raise ValueError(f"{s} is not JSON (write \"nan\", \"inf\" or \"-inf\")")


_decoder = json.JSONDecoder(parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_no_constant)
_MISSING = object()


def parse_records(data: bytes, n: int) -> tuple[list[Any], list[str]]:
    """Decode a result channel of ``n`` cases: ``(values, problems)``. ``values[i]`` is the decoded JSON of
    case ``i``'s record, or a sentinel (see :func:`has_value`) when there is none, it is malformed, or there are
    two (a duplicate fails the case: the program's own code may have written a record before the harness
    did). ``problems`` names what was wrong, at most a few. A line that does not start with a case index in
    range is counted as a problem and ignored. Linear in the size of ``data`` (already capped by the worker).

        >>> vals, probs = parse_records(b'0 1\\n0 1\\n1 {\\n5 2\\n', 2)
        >>> [has_value(v) for v in vals], probs
        ([False, False], ['case 0: more than one record', 'case 1: malformed record', 'line 4: no case 5'])
    """
    values: list[Any] = [_MISSING] * n
    bad = [False] * n
    problems: list[str] = []

    def note(msg: str) -> None:
        if len(problems) < 8:
            problems.append(msg)

    for ln, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        sp = line.find(b" ")
        head = line[:sp] if sp >= 0 else line
        if not head.isdigit() or len(head) > 9:
            note(f"line {ln}: not a record")
            continue
        i = int(head)
        if i >= n:
            note(f"line {ln}: no case {i}")
            continue
        if bad[i]:
            continue
        if values[i] is not _MISSING:
            values[i] = _MISSING
            bad[i] = True
            note(f"case {i}: more than one record")
            continue
        try:
            text = line[sp + 1:].decode("utf-8") if sp >= 0 else ""
            v, end = _decoder.raw_decode(text.strip())
            if end != len(text.strip()):
                raise ValueError("trailing data")
        except (ValueError, RecursionError, UnicodeDecodeError):
            bad[i] = True
            note(f"case {i}: malformed record")
            continue
        values[i] = v
    return values, problems


def has_value(v: Any) -> bool:
    """Did :func:`parse_records` find exactly one well-formed record for this case?"""
    return v is not _MISSING
