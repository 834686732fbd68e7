"""Value types of translated HumanEval problems: the ``type`` grammar of ``rewardlang-tests/1``.

A type is a plain value: a scalar name (``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"none"``) or a tuple
``("list", T)``, ``("tuple", T1, T2, ...)``, ``("dict", K, V)``, ``("optional", T)``; ``None`` stands for "not
known yet" (the element type of an empty list). Types come from a problem's annotations, else from the values its
tests and canonical solution produce (:func:`type_of` and :func:`unify`).

    >>> type_text(unify(type_of([1, 2]), type_of([])))
    'list[int]'
    >>> type_text(unify(type_of(None), type_of("a")))
    'optional[str]'
    >>> type_text(unify(type_of(1), type_of(2.5)))
    'float'
    >>> unify("int", "str")
    Traceback (most recent call last):
    ...
    rewardlang.datasets.types.Untypable: values of types int and str (a union)
"""

from __future__ import annotations

import ast
import math
from typing import Any

__all__ = [
    "Type",
    "Untypable",
    "complete",
    "conforms",
    "from_annotation",
    "to_json",
    "type_of",
    "type_text",
    "unify",
]

Type = str | tuple | None

_SCALARS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "None": "none"}
_GENERIC = {"List": "list", "list": "list", "Tuple": "tuple", "tuple": "tuple", "Dict": "dict", "dict": "dict",
            "Optional": "optional"}


class Untypable(ValueError):
    """A value or annotation that has no sound type in the grammar (a union, ``Any``, an object ...)."""


def type_of(v: Any) -> Type:
    """The type of one Python value (``None`` inside for the element type of an empty container)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if v is None:
        return "none"
    if isinstance(v, list):
        t: Type = None
        for x in v:
            t = unify(t, type_of(x))
        return ("list", t)
    if isinstance(v, tuple):
        return ("tuple",) + tuple(type_of(x) for x in v)
    if isinstance(v, dict):
        k: Type = None
        val: Type = None
        for a, b in v.items():
            k, val = unify(k, type_of(a)), unify(val, type_of(b))
        return ("dict", k, val)
    raise Untypable(f"a value of Python type {type(v).__name__}")


def unify(a: Type, b: Type) -> Type:
    """The least type holding both (int and float give float; none and T give optional[T])."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if {a, b} == {"int", "float"}:
        return "float"
    if a == "none":
        return b if isinstance(b, tuple) and b[0] == "optional" else ("optional", b)
    if b == "none":
        return unify(b, a)
    if isinstance(a, tuple) and a[0] == "optional":
        return ("optional", unify(a[1], b[1] if isinstance(b, tuple) and b[0] == "optional" else b))
    if isinstance(b, tuple) and b[0] == "optional":
        return unify(b, a)
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and len(a) == len(b):
        return (a[0],) + tuple(unify(x, y) for x, y in zip(a[1:], b[1:]))
    raise Untypable(f"values of types {type_text(a)} and {type_text(b)} (a union)")


def complete(t: Type) -> bool:
    """Whether ``t`` has no unknown part."""
    if t is None:
        return False
    return not isinstance(t, tuple) or all(complete(x) for x in t[1:])


def type_text(t: Type) -> str:
    """The grammar's text of a type: ``list[int]``, ``tuple[int,str]``, ``dict[str,int]``, ``optional[str]``."""
    if t is None:
        return "?"
    if isinstance(t, str):
        return t
    return f"{t[0]}[{','.join(type_text(x) for x in t[1:])}]"


def from_annotation(node: ast.expr | None) -> Type:
    """The type an annotation names; ``None`` when there is none (or a bare ``list``); raises
    :class:`Untypable` for ``Union``, ``Any`` and what the grammar lacks."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return "none"
    if isinstance(node, ast.Name):
        if node.id in _SCALARS:
            return _SCALARS[node.id]
        if node.id in ("list", "List", "dict", "Dict", "tuple", "Tuple"):
            return None  # a bare container: the values decide
        raise Untypable(f"the annotation {node.id}")
    if isinstance(node, ast.Attribute):
        return from_annotation(ast.Name(node.attr))
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
        name = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        kind = _GENERIC.get(name)
        if kind is None:
            raise Untypable(f"the annotation {ast.unparse(node)}")
        if kind == "tuple" and len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is ...:
            kind, args = "list", args[:1]  # Tuple[T, ...] is a sequence of T
        parts = tuple(from_annotation(a) for a in args)
        if kind in ("list", "optional") and len(parts) != 1 or kind == "dict" and len(parts) != 2:
            raise Untypable(f"the annotation {ast.unparse(node)}")
        if not all(complete(p) for p in parts):
            return None
        return (kind,) + parts
    raise Untypable(f"the annotation {ast.unparse(node)}")


def conforms(v: Any, t: Type) -> bool:
    """Whether value ``v`` is of type ``t`` (an int is a float; a tuple or list value fits either kind of
    sequence only as its own kind)."""
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "bool":
        return isinstance(v, bool)
    if t == "str":
        return isinstance(v, str)
    if t == "none":
        return v is None
    if not isinstance(t, tuple):
        return False
    if t[0] == "optional":
        return v is None or conforms(v, t[1])
    if t[0] == "list":
        return isinstance(v, list) and all(conforms(x, t[1]) for x in v)
    if t[0] == "tuple":
        return isinstance(v, tuple) and len(v) == len(t) - 1 and all(conforms(x, y) for x, y in zip(v, t[1:]))
    if t[0] == "dict":
        return isinstance(v, dict) and all(conforms(a, t[1]) and conforms(b, t[2]) for a, b in v.items())
    return False


def to_json(v: Any, t: Type) -> Any:
    """The JSON form of a value of type ``t`` (the harness's record format): floats non-finite as the strings
    ``"nan"``, ``"inf"``, ``"-inf"``; tuples as arrays; dicts as arrays of ``[key, value]`` pairs.

        >>> to_json({"a": (1, 2.0)}, ("dict", "str", ("tuple", "int", "float")))
        [['a', [1, 2.0]]]
        >>> to_json([float("nan"), -math.inf], ("list", "float"))
        ['nan', '-inf']
    """
    if v is None:
        return None
    if t == "float":
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if isinstance(t, tuple):
        if t[0] == "optional":
            return to_json(v, t[1])
        if t[0] == "list":
            return [to_json(x, t[1]) for x in v]
        if t[0] == "tuple":
            return [to_json(x, y) for x, y in zip(v, t[1:])]
        if t[0] == "dict":
            return [[to_json(a, t[1]), to_json(b, t[2])] for a, b in v.items()]
    return v
