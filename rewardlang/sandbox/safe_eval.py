"""Evaluate the *expected-value side* of a converted test in the trusted process.

A converted assert such as ``assert abs(candidate(x) - 0.5) < 1e-6`` becomes a probe ``(candidate(x),)``
run inside the sandbox and a judge expression ``abs(__rl_v0 - 0.5) < 1e-6`` evaluated here, over the
decoded plain values. The judge expression comes from the (trusted) test code, the values from the
(untrusted) program, so this evaluator only allows a small expression language and bounds the size of
every intermediate result: a program cannot make the judge allocate or compute without limit.

    >>> import ast
    >>> tree = ast.parse("abs(__rl_v0 - 0.5) < 1e-6 and sorted(__rl_v1) == [1, 2]", mode="eval")
    >>> safe_eval(tree.body, {"__rl_v0": 0.5, "__rl_v1": (2, 1)})
    True
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable

__all__ = ["safe_eval", "SafeEvalError", "SAFE_FUNCTIONS", "MATH_NAMES", "METHODS", "check_judge_ast",
           "check_hashes", "HashFlood", "MAX_SAME_HASH"]


class SafeEvalError(Exception):
    """The expression uses something the judge does not evaluate, or a result grew too large."""


#: at most this many elements of one set/dict may share a hash value (real data essentially never has
#: two: distinct ints collide only ``2**61 - 1`` apart). Building a hash table costs at most
#: ``MAX_SAME_HASH`` equality tests per element, instead of one per earlier colliding element.
MAX_SAME_HASH = 8


class HashFlood(SafeEvalError):
    """Too many values share one hash value: a hash table of them would take quadratic time."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} values share one hash value")
        self.count = count


def check_hashes(items: list[Any]) -> None:
    """Raise :class:`HashFlood` when more than :data:`MAX_SAME_HASH` of ``items`` share a hash value.

    O(n log n) time and O(n) memory, and no hash table keyed by the items is built (the hashes are sorted:
    they are machine-word ints, so sorting cannot be slowed down by an adversary). ``TypeError`` for an
    unhashable item, as building the set would raise.

        >>> check_hashes([1, 2, 3])
        >>> check_hashes([k * (2**61 - 1) for k in range(50)])
        Traceback (most recent call last):
        ...
        rewardlang.sandbox.safe_eval.HashFlood: 50 values share one hash value
    """
    n = len(items)
    if n <= MAX_SAME_HASH:
        for x in items:
            hash(x)
        return
    hs = sorted(map(hash, items))
    run, best = 1, 1
    for i in range(1, n):
        if hs[i] == hs[i - 1]:
            run += 1
            best = max(best, run)
        else:
            run = 1
    if best > MAX_SAME_HASH:
        raise HashFlood(best)


def _items(x: Any) -> list[Any]:
    """The elements a set/dict constructor would insert from ``x``, checked (tables already built are
    trusted: every one the judge builds went through :func:`check_hashes`)."""
    if type(x) in (set, frozenset, dict):
        return list(x)
    items = list(x)
    if len(items) > MAX_LEN:
        raise SafeEvalError("value too large")
    check_hashes(items)
    return items


def _set(*args: Any) -> set:
    return set(_items(args[0])) if args else set()


def _frozenset(*args: Any) -> frozenset:
    return frozenset(_items(args[0])) if args else frozenset()


def _dict(*args: Any, **kwargs: Any) -> dict:
    if not args:
        return dict(**kwargs)
    src = args[0]
    if type(src) is dict:
        return dict(src, **kwargs)
    pairs = [tuple(p) for p in src]
    if len(pairs) > MAX_LEN:
        raise SafeEvalError("value too large")
    check_hashes([p[0] for p in pairs if len(p) == 2])
    return dict(pairs, **kwargs)


def _sum(it: Any, start: Any = 0) -> Any:
    """``sum``; with a list or tuple start, concatenation in linear time (``sum(lists, [])`` is
    quadratic in Python) and bounded size."""
    if type(start) in (list, tuple):
        out = list(start)
        for x in it:
            if type(x) is not type(start):
                raise TypeError(f"can only concatenate {type(start).__name__}")
            out += x
            if len(out) > MAX_LEN:
                raise SafeEvalError("value too large")
        return out if type(start) is list else tuple(out)
    return sum(it, start)


def _weight(v: Any, cap: int) -> int:
    """An upper bound of the characters ``repr(v)`` takes, counting until ``cap`` (iterative, so cost
    O(min(size, cap)))."""
    total, todo = 0, [v]
    while todo and total <= cap:
        x = todo.pop()
        t = type(x)
        if t in (str, bytes):
            total += 4 * len(x) + 3
        elif t is int:
            total += x.bit_length() // 3 + 2
        elif t in (list, tuple, set, frozenset):
            total += 2 * len(x) + 2
            todo.extend(x)
        elif t is dict:
            total += 4 * len(x) + 2
            todo.extend(x.keys())
            todo.extend(x.values())
        else:
            total += 32
    return total


def _str(*args: Any) -> str:
    if len(args) == 1 and _weight(args[0], MAX_LEN) > MAX_LEN:
        raise SafeEvalError("value too large to convert to text")
    return str(*args)


def _repr(v: Any) -> str:
    if _weight(v, MAX_LEN) > MAX_LEN:
        raise SafeEvalError("value too large to convert to text")
    return repr(v)


MAX_LEN = 10_000_000
MAX_INT_BITS = 1_000_000


def _bounded_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_LEN:
        raise SafeEvalError("range too large")
    return r


def _type1(x: Any) -> type:
    """``type(x)`` (the one-argument form only: the judge never creates classes)."""
    return type(x)


SAFE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "all": all, "any": any, "bool": bool, "dict": dict, "float": float, "frozenset": frozenset,
    "int": int, "len": len, "list": list, "max": max, "min": min, "round": round, "set": set, "sorted": sorted,
    "str": str, "sum": sum, "tuple": tuple, "isinstance": isinstance, "type": _type1, "repr": repr,
    "reversed": reversed, "enumerate": enumerate, "zip": zip, "range": _bounded_range, "chr": chr, "ord": ord,
    "divmod": divmod, "complex": complex, "hash": hash,
}
#: calls of these names run a bounded version (the names still denote the types, for isinstance and type())
_GUARDED: dict[Any, Callable[..., Any]] = {set: _set, frozenset: _frozenset, dict: _dict, sum: _sum, str: _str,
                                          repr: _repr}
#: set methods that build a hash table from their (possibly untrusted) iterable arguments
_SET_BUILDING = frozenset({"union", "intersection", "difference", "symmetric_difference", "issubset",
                           "issuperset"})
SAFE_CONSTANTS = {"True": True, "False": False, "None": None}
MATH_NAMES = frozenset({
    "isclose", "fabs", "sqrt", "floor", "ceil", "isnan", "isinf", "isfinite", "log", "log2", "log10", "exp",
    "pi", "e", "inf", "nan", "gcd", "trunc", "copysign", "fsum", "prod", "sin", "cos", "tan", "atan", "atan2",
    "hypot", "degrees", "radians", "factorial", "comb", "perm", "isqrt", "tau",
})
#: methods of plain values the judge may call (pure, no mutation of shared state that matters)
METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "split", "splitlines", "count", "index", "find", "keys",
    "values", "items", "startswith", "endswith", "join", "replace", "get", "isdigit", "isalpha", "isupper",
    "islower", "isspace", "title", "capitalize", "casefold", "real", "imag", "is_integer", "issubset",
    "issuperset", "union", "intersection", "difference", "symmetric_difference", "copy",
})
_BIN = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_UN = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_, ast.Invert: operator.invert}
_CMP = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Call, ast.keyword, ast.BinOp,
    ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Subscript,
    ast.Slice, ast.And, ast.Or, *(_BIN), *(_UN), *(_CMP),
)


def check_judge_ast(node: ast.AST, names: set[str]) -> str | None:
    """Why ``node`` cannot be evaluated here (``None`` if it can); ``names`` are the value placeholders."""
    for sub in ast.walk(node):
        if not isinstance(sub, _ALLOWED_NODES):
            return f"uses {type(sub).__name__}"
        if isinstance(sub, ast.Name) and sub.id not in names and sub.id not in SAFE_FUNCTIONS \
                and sub.id not in SAFE_CONSTANTS and sub.id != "math":
            return f"uses the name {sub.id!r}"
        if isinstance(sub, ast.Attribute):
            if isinstance(sub.value, ast.Name) and sub.value.id == "math":
                if sub.attr not in MATH_NAMES:
                    return f"uses math.{sub.attr}"
            elif sub.attr not in METHODS:
                return f"uses the attribute .{sub.attr}"
    # `math` may only appear as the object of an attribute
    for sub in ast.walk(node):
        for child in ast.iter_child_nodes(sub):
            if isinstance(child, ast.Name) and child.id == "math" and not isinstance(sub, ast.Attribute):
                return "uses the math module as a value"
    if isinstance(node, ast.Name) and node.id == "math":
        return "uses the math module as a value"
    return None


def _size_ok(v: Any) -> Any:
    t = type(v)
    if t is int and v.bit_length() > MAX_INT_BITS:
        raise SafeEvalError("integer too large")
    if t in (str, list, tuple, bytes, set, frozenset, dict) and len(v) > MAX_LEN:
        raise SafeEvalError("value too large")
    return v


def _is_view(x: Any) -> bool:
    return type(x).__name__ in ("dict_keys", "dict_items")


def _binop(op: type, a: Any, b: Any) -> Any:
    if op is ast.Pow:
        if type(b) is int and type(a) is int:
            if b > 0 and max(a.bit_length(), 1) * b > MAX_INT_BITS:
                raise SafeEvalError("power too large")
        elif type(b) is int and abs(b) > 10_000 and not isinstance(a, float):
            raise SafeEvalError("power too large")
    if op is ast.Mult:
        for x, n in ((a, b), (b, a)):
            if isinstance(x, (str, list, tuple, bytes)) and type(n) is int and len(x) * max(n, 0) > MAX_LEN:
                raise SafeEvalError("repetition too large")
    if op in (ast.BitOr, ast.BitAnd, ast.BitXor, ast.Sub) and (_is_view(a) or _is_view(b)):
        # a dict view combined with an iterable builds a set of that iterable's elements (only then: for any
        # other operands these operators build no table, and listing a program's 8M-character string here
        # would cost this process 400 MiB before `-` fails; str and bytes elements cannot be chosen to collide)
        for x in (a, b):
            if type(x) in (list, tuple) or _is_view(x):
                check_hashes(list(x))
    if op is ast.LShift and type(b) is int and b > MAX_INT_BITS:
        raise SafeEvalError("shift too large")
    if op in (ast.Add,) and isinstance(a, (str, list, tuple)) and isinstance(b, (str, list, tuple)) \
            and len(a) + len(b) > MAX_LEN:
        raise SafeEvalError("value too large")
    return _size_ok(_BIN[op](a, b))


def safe_eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate an expression node produced by the converter (see :func:`check_judge_ast`)."""
    ev = safe_eval
    if isinstance(node, ast.Expression):
        return ev(node.body, env)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in SAFE_CONSTANTS:
            return SAFE_CONSTANTS[node.id]
        if node.id in SAFE_FUNCTIONS:
            return SAFE_FUNCTIONS[node.id]
        raise SafeEvalError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "math" and "math" not in env:
            if node.attr not in MATH_NAMES:
                raise SafeEvalError(f"math.{node.attr} is not allowed")
            return getattr(math, node.attr)
        if node.attr not in METHODS:
            raise SafeEvalError(f".{node.attr} is not allowed")
        obj = ev(node.value, env)
        if type(obj) not in (str, list, tuple, dict, set, frozenset, int, float, complex, bytes, bool):
            raise SafeEvalError("attribute of a non-plain value")
        return getattr(obj, node.attr)
    if isinstance(node, ast.Call):
        fn = ev(node.func, env)
        args = [ev(a, env) for a in node.args]
        kwargs = {k.arg: ev(k.value, env) for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords):
            raise SafeEvalError("**kwargs are not allowed")
        allowed = fn in SAFE_FUNCTIONS.values() or getattr(fn, "__module__", None) == "math" or (
            getattr(fn, "__self__", None) is not None and getattr(fn, "__name__", "") in METHODS
            and type(fn.__self__) in (str, list, tuple, dict, set, frozenset, int, float, bytes, complex))
        if not allowed:
            raise SafeEvalError("call of a function that is not allowed")
        if fn in (math.factorial, math.comb, math.perm) and any(type(a) is int and a > 100_000 for a in args):
            raise SafeEvalError("argument too large")
        guarded = _GUARDED.get(fn) if type(fn) is type or fn in (sum, repr) else None
        if guarded is not None:
            return _size_ok(guarded(*args, **kwargs))
        self_ = getattr(fn, "__self__", None)
        name = getattr(fn, "__name__", "")
        if type(self_) in (set, frozenset) and name in _SET_BUILDING:
            args = [a if type(a) in (set, frozenset, dict) else _items(a) for a in args]
        elif type(self_) in (str, bytes) and name == "join":
            args = [list(args[0])] if args else args
            if args and sum(len(x) for x in args[0] if type(x) in (str, bytes)) > MAX_LEN:
                raise SafeEvalError("value too large")
        elif type(self_) in (str, bytes) and name == "replace" and len(args) >= 2:
            old, new = args[0], args[1]
            if type(old) is type(self_) and type(new) is type(self_):
                n = self_.count(old) if old else len(self_) + 1
                if len(self_) + n * max(0, len(new) - len(old)) > MAX_LEN:
                    raise SafeEvalError("value too large")
        return _size_ok(fn(*args, **kwargs))
    if isinstance(node, ast.BinOp):
        return _binop(type(node.op), ev(node.left, env), ev(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _UN[type(node.op)](ev(node.operand, env))
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            v: Any = True
            for x in node.values:
                v = ev(x, env)
                if not v:
                    return v
            return v
        v = False
        for x in node.values:
            v = ev(x, env)
            if v:
                return v
        return v
    if isinstance(node, ast.Compare):
        left = ev(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = ev(comp, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return ev(node.body, env) if ev(node.test, env) else ev(node.orelse, env)
    if isinstance(node, ast.List):
        return [ev(e, env) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(ev(e, env) for e in node.elts)
    if isinstance(node, ast.Set):
        return {ev(e, env) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise SafeEvalError("** in a dict display is not allowed")
        return {ev(k, env): ev(v, env) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.Subscript):
        obj = ev(node.value, env)
        sl = node.slice
        if isinstance(sl, ast.Slice):
            idx: Any = slice(ev(sl.lower, env) if sl.lower else None, ev(sl.upper, env) if sl.upper else None,
                             ev(sl.step, env) if sl.step else None)
        else:
            idx = ev(sl, env)
        return obj[idx]
    raise SafeEvalError(f"{type(node).__name__} is not allowed")
