"""Hidden tests for HumanEval, built here: more inputs per problem, their expected outputs from the canonical
solution run in the sandbox (``rewardlang data humaneval --plus``).

The method follows what EvalPlus published (docs: ../shared design notes; no code or data of it is used): the
*seeds* are the inputs of each problem's own tests; new inputs are made by **type-aware mutation** of the seeds
(:func:`mutate`: integers and floats moved by one, doubled, halved, negated, set to a bound or drawn from the seeds'
span; strings edited character by character over the seeds' alphabet, words shuffled, dropped or doubled; lists grown,
shrunk, reordered, element-mutated; tuples and dicts item by item; nested values recursively), kept inside each
problem's **input contract** (:data:`CONTRACTS`: what its prompt states, written down here per problem; where the
prompt states none, the *seeds' domain*: the signs, the character set, the emptiness, order and uniqueness of the
seeds' values, see :class:`Domain`), and the **canonical solution is the oracle**: every new input is run in the
sandbox, twice in two processes, and an input is dropped when the reference raises, runs longer than
:data:`SLOW_CPU` CPU seconds, gives two different results (a set's order, a random draw), gives a value without a
literal form (an object, ``nan``) or one over :data:`MAX_REPR` characters, or (typed problems) a value of another type
than its tests' results. Then the **problem's budget**: the kept inputs are a prefix of the accepted ones, in
generation order, whose reference CPU time (each input's cost is the mean of its two runs' CPU seconds inside the
call) sums to at most :data:`BUDGET_CPU`; the first input that would pass it ends the problem. A correct program
must never fail its hidden tests because the set is too heavy to run within the time its judges allow (5 to 10 CPU
seconds for the whole set), so the reference's total stays far below that, leaving room for a slower correct program.

A problem's ``plus_tests`` are in the format of its ``tests``: Python ``def check(candidate):`` with one ``assert`` per
new input (a float result within ``1e-6`` relative, or the tolerance its own tests use), and for a translated
language the ``rewardlang-tests/1`` object of the new cases (:func:`plus_for_language`). They hold the *new* inputs
only; ``rewardlang eval --plus`` judges a completion on base and plus together.

    >>> import random
    >>> d = Domain.infer([[1, 2, 3], [4, 5]])
    >>> d.kind, d.elem.kind, d.nonempty, d.sorted
    ('list', 'int', True, True)
    >>> v = mutate([1, 2, 3], d, random.Random(0))
    >>> isinstance(v, list) and v == sorted(v) and len(v) > 0
    True
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import math
import random
import re
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rewardlang.datasets.types import Type, conforms

__all__ = [
    "BUDGET_CPU",
    "CONTRACTS",
    "DEFAULT_PER_PROBLEM",
    "MAX_REPR",
    "SLOW_CPU",
    "Domain",
    "PlusBuild",
    "PlusProblem",
    "attach_plus",
    "build_plus",
    "load_plus",
    "mutate",
    "plus_for_language",
    "python_plus_tests",
    "within_budget",
]

#: a reference that takes longer than this (CPU seconds) on an input makes an unfair test: dropped
SLOW_CPU = 0.5
#: results whose ``repr`` is longer are dropped (a test of one huge value is slow to judge and says little)
MAX_REPR = 1200
#: new inputs kept per problem at most
DEFAULT_PER_PROBLEM = 100
#: the CPU seconds the canonical solution may spend on a problem's whole hidden set (the sum over its kept inputs):
#: every judge of hidden tests allows 5 to 10 s for the set (``eval --plus``, the shipped specs' audits, the tests),
#: so a correct program up to several times slower than the reference still passes within them
BUDGET_CPU = 1.0


# ---------------------------------------------------------------------- domains


@dataclass
class Domain:
    """What the seeds of one argument (or of a container's elements) are like; mutation stays inside it.

    ``kind``: ``int``, ``float``, ``bool``, ``str``, ``none``, ``list``, ``tuple``, ``dict``, or ``any`` (values of
    several kinds: each is mutated by its own kind)."""

    kind: str
    lo: float = 0.0
    hi: float = 0.0
    positive: bool = False
    nonneg: bool = False
    chars: str = ""
    max_len: int = 0
    nonempty: bool = False
    sorted: bool = False
    unique: bool = False
    words: bool = False
    elem: Domain | None = None
    items: list[Domain] = field(default_factory=list)
    key: Domain | None = None
    val: Domain | None = None
    values: list[Any] = field(default_factory=list)

    @staticmethod
    def infer(values: Sequence[Any]) -> Domain:
        """The domain of a list of seed values."""
        vals = [v for v in values]
        kinds = {_kind(v) for v in vals}
        if kinds <= {"int", "float"} and "float" in kinds:
            kinds = {"float"}
        if len(kinds) != 1:
            return Domain("any", values=vals)
        kind = kinds.pop()
        d = Domain(kind, values=vals)
        if kind in ("int", "float"):
            nums = [float(v) for v in vals]
            d.lo, d.hi = min(nums), max(nums)
            d.positive = all(x > 0 for x in nums)
            d.nonneg = all(x >= 0 for x in nums)
        elif kind == "str":
            d.chars = "".join(sorted(set("".join(vals))))
            d.max_len = max(len(v) for v in vals)
            d.nonempty = all(len(v) > 0 for v in vals)
            d.words = any(" " in v.strip() for v in vals)
        elif kind == "list":
            d.elem = Domain.infer([x for v in vals for x in v]) if any(vals) else None
            d.max_len = max(len(v) for v in vals)
            d.nonempty = all(len(v) > 0 for v in vals)
            long = [v for v in vals if len(v) >= 3]
            d.sorted = bool(long) and all(_is_sorted(v) for v in vals)
            d.unique = bool(long) and all(_unique(v) for v in vals)
        elif kind == "tuple":
            n = {len(v) for v in vals}
            if len(n) == 1:
                d.items = [Domain.infer([v[i] for v in vals]) for i in range(n.pop())]
            else:
                d.kind = "any"
        elif kind == "dict":
            d.key = Domain.infer([k for v in vals for k in v]) if any(vals) else None
            d.val = Domain.infer([x for v in vals for x in v.values()]) if any(vals) else None
            d.max_len = max(len(v) for v in vals)
            d.nonempty = all(len(v) > 0 for v in vals)
        return d


def _kind(v: Any) -> str:
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
        return "list"
    if isinstance(v, tuple):
        return "tuple"
    if isinstance(v, dict):
        return "dict"
    return "other"


def _is_sorted(v: list[Any]) -> bool:
    try:
        return all(a <= b for a, b in zip(v, v[1:]))
    except TypeError:
        return False


def _unique(v: list[Any]) -> bool:
    try:
        return len(set(map(repr, v))) == len(v)
    except TypeError:
        return False


# ---------------------------------------------------------------------- mutation


def _span(d: Domain) -> float:
    """How far beyond the seeds' values a number may move (the reference's time limit drops what is too slow)."""
    return max(10.0, 2 * (d.hi - d.lo), 2 * abs(d.hi), 2 * abs(d.lo))


def _clamp_num(x: float, d: Domain) -> float:
    span = _span(d)
    lo, hi = d.lo - span, d.hi + span
    if d.positive:
        lo = max(lo, 1.0 if d.kind == "int" else 1e-3)
    elif d.nonneg:
        lo = max(lo, 0.0)
    return min(max(x, lo), max(lo, hi))


def _mut_int(v: int, d: Domain, rng: random.Random) -> int:
    span = int(_span(d))
    choice = rng.randrange(10)
    x = [v + 1, v - 1, v + rng.randint(-span, span), -v, 0, 1, int(d.lo), int(d.hi), v * 2, v // 2][choice]
    return int(_clamp_num(x, d))


def _mut_float(v: float, d: Domain, rng: random.Random) -> float:
    span = _span(d)
    choice = rng.randrange(9)
    x = [v + 1.0, v - 1.0, v * 2.0, v / 2.0, -v, 0.0, v + 0.1, round(v + rng.uniform(-span, span), 1),
         rng.uniform(d.lo, d.hi) if d.hi > d.lo else v * 1.5][choice]
    return float(_clamp_num(x, d))


def _mut_str(v: str, d: Domain, rng: random.Random) -> str:
    chars = d.chars or "abc"
    limit = max(d.max_len * 2 + 4, 8)
    ops = ["insert", "delete", "replace", "swap", "dup", "reverse"]
    if not d.nonempty:
        ops.append("empty")
    if d.words:
        ops += ["word_shuffle", "word_drop", "word_dup"]
    op = rng.choice(ops)
    s = list(v)
    if op == "insert" or not s and op in ("delete", "replace", "swap", "dup", "reverse"):
        s.insert(rng.randint(0, len(s)), rng.choice(chars))
    elif op == "delete":
        del s[rng.randrange(len(s))]
    elif op == "replace":
        s[rng.randrange(len(s))] = rng.choice(chars)
    elif op == "swap" and len(s) >= 2:
        i = rng.randrange(len(s) - 1)
        s[i], s[i + 1] = s[i + 1], s[i]
    elif op == "dup":
        i = rng.randrange(len(s))
        j = rng.randint(i, min(len(s), i + 4))
        s[j:j] = s[i:j]
    elif op == "reverse":
        s.reverse()
    elif op == "empty":
        s = []
    elif op.startswith("word"):
        words = v.split(" ")
        if op == "word_shuffle":
            rng.shuffle(words)
        elif op == "word_drop" and len(words) > 1:
            del words[rng.randrange(len(words))]
        else:
            words.insert(rng.randrange(len(words) + 1), rng.choice(words))
        s = list(" ".join(words))
    out = "".join(s)[:limit]
    if d.nonempty and not out:
        out = rng.choice(chars)
    return out


def _fresh(d: Domain | None, rng: random.Random, depth: int) -> Any:
    """A value of a domain: a mutated copy of one of its seed values."""
    if d is None or not d.values:
        return 0
    return mutate(copy.deepcopy(rng.choice(d.values)), d, rng, depth + 1)


def _mut_list(v: list[Any], d: Domain, rng: random.Random, depth: int) -> list[Any]:
    out = list(v)
    limit = max(d.max_len * 2 + 3, 6)
    ops = ["append", "insert", "remove", "mutate", "mutate", "swap", "reverse", "shuffle", "truncate"]
    if not d.unique:
        ops.append("duplicate")
    if not d.nonempty:
        ops.append("empty")
    op = rng.choice(ops)
    if (op in ("remove", "mutate", "swap", "truncate", "duplicate") and not out) or op in ("append", "insert"):
        x = _fresh(d.elem, rng, depth) if d.elem is not None else (copy.deepcopy(rng.choice(out)) if out else 0)
        out.insert(len(out) if op == "append" else rng.randint(0, len(out)), x)
    elif op == "remove":
        del out[rng.randrange(len(out))]
    elif op == "mutate":
        i = rng.randrange(len(out))
        out[i] = mutate(out[i], d.elem or Domain.infer([out[i]]), rng, depth + 1)
    elif op == "swap" and len(out) >= 2:
        i, j = rng.sample(range(len(out)), 2)
        out[i], out[j] = out[j], out[i]
    elif op == "reverse":
        out.reverse()
    elif op == "shuffle":
        rng.shuffle(out)
    elif op == "truncate":
        out = out[:rng.randrange(len(out) + 1)]
    elif op == "duplicate":
        out.insert(rng.randint(0, len(out)), copy.deepcopy(rng.choice(out)))
    elif op == "empty":
        out = []
    out = out[:limit]
    if d.unique:
        seen: set[str] = set()
        out = [x for x in out if not (repr(x) in seen or seen.add(repr(x)))]  # type: ignore[func-returns-value]
    if d.sorted:
        try:
            out.sort()
        except TypeError:
            pass
    if d.nonempty and not out:
        out = list(v) if v else [_fresh(d.elem, rng, depth)]
    return out


def mutate(v: Any, d: Domain, rng: random.Random, depth: int = 0) -> Any:
    """One type-aware mutation of ``v`` inside domain ``d`` (containers recursively)."""
    if depth > 6:
        return v
    kind = _kind(v) if d.kind == "any" else d.kind
    if d.kind == "any":
        d = Domain.infer([v])
    if kind == "bool":
        return not v
    if kind == "int" and isinstance(v, int):
        return _mut_int(v, d, rng)
    if kind == "float" and isinstance(v, (int, float)):
        return _mut_float(float(v), d, rng)
    if kind == "str" and isinstance(v, str):
        return _mut_str(v, d, rng)
    if kind == "list" and isinstance(v, list):
        return _mut_list(v, d, rng, depth)
    if kind == "tuple" and isinstance(v, tuple) and d.items and len(d.items) == len(v):
        i = rng.randrange(len(v))
        return v[:i] + (mutate(v[i], d.items[i], rng, depth + 1),) + v[i + 1:]
    if kind == "dict" and isinstance(v, dict):
        out = dict(v)
        op = rng.choice(["add", "remove", "value"] if out else ["add"])
        if op == "add" and d.key is not None:
            k = _fresh(d.key, rng, depth)
            try:
                out[k] = _fresh(d.val, rng, depth)
            except TypeError:
                pass
        elif op == "remove" and (len(out) > 1 or not d.nonempty):
            del out[rng.choice(list(out))]
        elif out:
            k = rng.choice(list(out))
            out[k] = mutate(out[k], d.val or Domain.infer([out[k]]), rng, depth + 1)
        return out
    return v


# ---------------------------------------------------------------------- contracts stated by the prompts

def _ints(*xs: Any) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


def _pos(*xs: Any) -> bool:
    return _ints(*xs) and all(x > 0 for x in xs)


def _nonneg(*xs: Any) -> bool:
    return _ints(*xs) and all(x >= 0 for x in xs)


_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_PLANETS = ("Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune")

#: per HumanEval number: (the prompt's words, a predicate over the arguments). Where a problem is not listed its
#: prompt states no contract beyond its types, and the seeds' domain (:class:`Domain`) bounds the new inputs; the
#: report says which applies (``rewardlang data humaneval --plus --report FILE``).
CONTRACTS: dict[int, tuple[str, Callable[..., bool]]] = {
    2: ("given a positive floating point number", lambda x: x > 0),
    11: ("strings a and b consisting only of 1s and 0s", lambda a, b: set(a + b) <= set("01")),
    17: ("notes o, o| and .| separated by spaces",
         lambda s: all(t in ("o", "o|", ".|") for t in s.split(" ") if t)),
    19: ("a space-delimited string of numberals from 'zero' to 'nine'",
         lambda s: all(t in _WORDS for t in s.split(" ") if t)),
    20: ("a supplied list of numbers (of length at least two)", lambda xs: len(xs) >= 2),
    21: ("a list of numbers (of at least two elements)", lambda xs: len(xs) >= 2 and max(xs) > min(xs)),
    24: ("the largest number that divides n evenly, smaller than n", lambda n: _ints(n) and n >= 2),
    39: ("the n-th number that is a Fibonacci number and it's also prime", lambda n: _pos(n) and n <= 10),
    44: ("base numbers are less than 10", lambda x, base: _nonneg(x) and _ints(base) and 2 <= base <= 9),
    46: ("the n-th element of the fib4 number sequence", lambda n: _nonneg(n)),
    49: ("Return 2^n modulo p", lambda n, p: _nonneg(n) and _pos(p)),
    55: ("Return n-th Fibonacci number", lambda n: _pos(n)),
    59: ("Assume n > 1 and is not a prime", lambda n: _ints(n) and n > 1 and not _is_prime(n)),
    60: ("sums numbers from 1 to n", lambda n: _pos(n)),
    63: ("the n-th element of the fibfib number sequence", lambda n: _nonneg(n)),
    67: ("a string that represents a number of apples and oranges",
         lambda s, n: re.fullmatch(r"\d+ apples and \d+ oranges", s) is not None and _nonneg(n)),
    68: ("Constraints: 0 <= node.value", lambda arr: _nonneg(*arr)),
    69: ("a non-empty list of positive integers", lambda lst: len(lst) > 0 and _pos(*lst)),
    71: ("the lengths of the three sides of a triangle", lambda a, b, c: a > 0 and b > 0 and c > 0),
    83: ("Given a positive integer n", lambda n: _pos(n)),
    84: ("Given a positive integer N; 0 <= N <= 10000", lambda n: _nonneg(n) and n <= 10000),
    85: ("Given a non-empty list of integers", lambda lst: len(lst) > 0),
    93: ("Assume only letters", lambda m: m.isalpha() or m == "" or all(c.isalpha() or c == " " for c in m)),
    96: ("takes an non-negative integer", lambda n: _nonneg(n)),
    100: ("Given a positive integer n", lambda n: _pos(n)),
    102: ("takes two positive numbers x and y", lambda x, y: _pos(x, y)),
    104: ("Given a list of positive integers x", lambda x: _pos(*x)),
    107: ("Given a positive integer n; 1 <= n <= 10^3", lambda n: _pos(n) and n <= 1000),
    109: ("The numbers in the array will be randomly ordered; guaranteed to have unique elements",
          lambda arr: len(set(arr)) == len(arr)),
    110: ("the input lists will be non-empty", lambda a, b: len(a) > 0 and len(b) > 0),
    111: ("a string representing a space separated lowercase letters",
          lambda s: all(len(t) == 1 and t.islower() for t in s.split(" ") if t)),
    113: ("a list of strings, where each string consists of only digits", lambda lst: all(x.isdigit() for x in lst)),
    114: ("Given an array of integers nums (non-empty sub-array)", lambda nums: len(nums) > 0),
    117: ("the input string contains only letters and spaces", lambda s, n: all(c.isalpha() or c == " " for c in s)
          and _nonneg(n)),
    118: ("the given string contains English letter only", lambda w: w.isascii() and (w == "" or w.isalpha())),
    119: ("both strings consist of open parentheses '(' or close parentheses ')' only",
          lambda lst: len(lst) == 2 and all(set(x) <= set("()") for x in lst)),
    120: ("1 <= len(arr) <= 1000, -1000 <= arr[i] <= 1000, 0 <= k <= len(arr)",
          lambda arr, k: 1 <= len(arr) <= 1000 and all(-1000 <= x <= 1000 for x in arr) and _ints(k)
          and 0 <= k <= len(arr)),
    121: ("Given a non-empty list of integers", lambda lst: len(lst) > 0),
    122: ("1 <= len(arr) <= 100, 1 <= k <= len(arr)", lambda arr, k: 1 <= len(arr) <= 100 and _ints(k)
          and 1 <= k <= len(arr)),
    123: ("Given a positive integer n", lambda n: _pos(n)),
    126: ("Assume no negative numbers and only integers", lambda lst: _nonneg(*lst)),
    127: ("each interval is a pair of integers; the start is less or equal its end",
          lambda i1, i2: i1[0] <= i1[1] and i2[0] <= i2[1]),
    129: ("N * N grid, N >= 2, every integer in [1, N * N] appears exactly once; k is positive",
          lambda grid, k: len(grid) >= 2 and all(len(r) == len(grid) for r in grid) and
          sorted(x for r in grid for x in r) == list(range(1, len(grid) ** 2 + 1)) and _pos(k)),
    130: ("given a non-negative integer number n", lambda n: _nonneg(n)),
    131: ("Given a positive integer n", lambda n: _pos(n)),
    132: ("a string as input which contains only square brackets", lambda s: set(s) <= set("[]")),
    135: ("The given array will not contain duplicate values", lambda arr: len(set(arr)) == len(arr)),
    138: ("the given number n (positive)", lambda n: _pos(n)),
    139: ("where n > 0", lambda n: _pos(n)),
    143: ("1 <= len(sentence) <= 100, sentence contains only letters",
          lambda s: 1 <= len(s) <= 100 and all(c.isalpha() or c == " " for c in s)),
    144: ("x and n are valid fractions, and do not have zero as denominator",
          lambda x, n: all(re.fullmatch(r"[1-9]\d*/[1-9]\d*", f) for f in (x, n))),
    147: ("You are given a positive integer n", lambda n: _pos(n)),
    148: ("planet1 and planet2 are planet names", lambda a, b: isinstance(a, str) and isinstance(b, str)),
    152: ("two arrays of scores and guesses of equal length", lambda game, guess: len(game) == len(guess)),
    156: ("Restrictions: 1 <= num <= 1000", lambda n: _ints(n) and 1 <= n <= 1000),
    159: ("Constrain: 0 <= number <= 1000, 0 <= need <= 1000, 0 <= remaining <= 1000",
          lambda a, b, c: _nonneg(a, b, c) and max(a, b, c) <= 1000),
    160: ("operator has at least one operator; operand at least two non-negative integers; "
          "len(operator) == len(operand) - 1",
          lambda ops, nums: len(nums) >= 2 and len(ops) == len(nums) - 1 and _nonneg(*nums)
          and all(o in ("+", "-", "*", "//", "**") for o in ops) and not any(
              o == "//" and b == 0 for o, b in zip(ops, nums[1:])) and max(nums) < 50),
    163: ("Given two positive integers a and b", lambda a, b: _pos(a, b)),
}


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


# ---------------------------------------------------------------------- one problem


@dataclass
class PlusProblem:
    """One problem's generation: the new ``inputs`` and the reference's ``outputs`` (repr texts) that were kept,
    what was dropped and why, and which contract bounded the inputs."""

    task_id: str
    number: int
    entry_point: str
    code: str                               # prompt + canonical solution: the oracle
    seeds: list[tuple[Any, ...]]
    types: list[Type] | None                # the parameters' types (typed problems) or None
    result: Type | None
    tolerance: float | None = None          # the tolerance its own tests use for a float result
    contract: str = ""
    inputs: list[tuple[Any, ...]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    #: the reference's CPU seconds on each kept input (the mean of its two runs); empty when not measured
    costs: list[float] = field(default_factory=list)
    #: the reference's CPU seconds over all kept inputs (what :data:`BUDGET_CPU` bounds)
    reference_cpu: float = 0.0

    @property
    def covered(self) -> bool:
        return bool(self.inputs)


def _seeds(number: int) -> tuple[list[tuple[Any, ...]], list[Type] | None, Type | None, float | None, str, str]:
    """(seed inputs, parameter types or None, result type or None, float tolerance, entry point, oracle code)."""
    from rewardlang.datasets.humaneval import load_humaneval
    from rewardlang.datasets.problems import _read_cases, problem

    p = problem(number)
    row = load_humaneval()[number]
    tol = next((c.tolerance for c in p.cases if c.tolerance is not None), None)
    if p.error is None:
        return [c.args for c in p.cases], [t for _, t in p.params], p.result, tol, p.entry_point, row["solution"]
    # untypable in a typed language: the raw arguments of its asserts (Python only)
    try:
        raw, _ = _read_cases(row["tests"], None, row["entry_point"])
    except Exception:  # noqa: BLE001 - tests of another shape: no seeds
        raw = []
    tol = next((t for _, _, kind, t in raw if kind == "close"), None)
    return [args for args, *_ in raw], None, None, tol, row["entry_point"], row["solution"]


def _candidates(seeds: list[tuple[Any, ...]], types: list[Type] | None, contract: Callable[..., bool] | None,
                rng: random.Random, want: int) -> tuple[list[tuple[Any, ...]], Counter]:
    """Up to ``want`` distinct new inputs (none equal to a seed), made by mutating seeds."""
    dropped: Counter = Counter()
    if not seeds:
        return [], dropped
    arity = len(seeds[0])
    seeds = [s for s in seeds if len(s) == arity]
    doms = [Domain.infer([s[i] for s in seeds]) for i in range(arity)]
    seen = {_key(s) for s in seeds}
    out: list[tuple[Any, ...]] = []
    pool = list(seeds)
    tries = 0
    while len(out) < want and tries < want * 30:
        tries += 1
        base = list(copy.deepcopy(rng.choice(pool)))
        for _ in range(rng.choice((1, 1, 2, 3))):
            i = rng.randrange(arity)
            base[i] = mutate(base[i], doms[i], rng)
        args = tuple(base)
        key = _key(args)
        if key in seen:
            continue
        seen.add(key)
        if types is not None:
            from rewardlang.datasets.problems import _coerce

            args = tuple(_coerce(a, t) for a, t in zip(args, types))
            if not all(conforms(a, t) for a, t in zip(args, types)):
                dropped["not of the parameters' types"] += 1
                continue
        if contract is not None:
            try:
                ok = bool(contract(*copy.deepcopy(args)))
            except Exception:  # noqa: BLE001 - a contract that cannot even be checked on it: outside it
                ok = False
            if not ok:
                dropped["outside the prompt's contract"] += 1
                continue
        try:
            if ast.literal_eval(repr(args)) != args:
                continue
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            continue
        out.append(args)
        if len(pool) < 4 * len(seeds):
            pool.append(args)  # mutate mutants too: further from the seeds, still inside the domain
    return out, dropped


def _key(args: Any) -> str:
    return repr(args)


# ---------------------------------------------------------------------- the oracle, in the sandbox


def _oracle_script(code: str, entry: str, inputs: Sequence[tuple[Any, ...]], nonce: str) -> str:
    """A program that runs the reference on each input in a child process of its own with a CPU limit
    (``RLIMIT_CPU``): an input that loops costs that limit and nothing more, and the others still run."""
    return (code.rstrip("\n") + "\n\n\n"
            "def __rl_plus_main():\n"
            "    import os, resource, time\n"
            f"    inputs = {list(inputs)!r}\n"
            "    for i, args in enumerate(inputs):\n"
            "        r, w = os.pipe()\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            os.close(r)\n"
            f"            resource.setrlimit(resource.RLIMIT_CPU, ({math.ceil(SLOW_CPU)}, {math.ceil(SLOW_CPU) + 1}))\n"
            "            t0 = time.process_time()\n"
            "            try:\n"
            f"                s = 'V ' + repr({entry}(*args))\n"
            "            except BaseException as e:  # noqa: BLE001\n"
            "                s = 'E ' + type(e).__name__\n"
            "            dt = time.process_time() - t0\n"
            f"            if s.startswith('V ') and len(s) > {MAX_REPR + 2}:\n"
            "                s = 'L ' + str(len(s))\n"
            f"            elif dt > {SLOW_CPU}:\n"
            "                s = 'T ' + repr(dt)\n"
            "            s = s[:2] + repr(dt) + ' ' + s[2:]\n"
            "            data = s.encode('utf-8', 'backslashreplace')\n"
            "            while data:\n"
            "                data = data[os.write(w, data):]\n"
            "            os._exit(0)\n"
            "        os.close(w)\n"
            "        out = b''\n"
            "        while True:\n"
            "            part = os.read(r, 65536)\n"
            "            if not part:\n"
            "                break\n"
            "            out += part\n"
            "        os.close(r)\n"
            "        _, status = os.waitpid(pid, 0)\n"
            "        if os.WIFSIGNALED(status) or not out:\n"
            "            out = b'T -1 killed' if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 24 else b'X -1 died'\n"
            f"        print({nonce!r}, i, out.decode('utf-8', 'replace'))\n"
            f"    print({nonce!r}, 'END', len(inputs))\n\n\n"
            "__rl_plus_main()\n")


def _run_oracle(jobs: list[tuple[str, str, list[tuple[Any, ...]]]], stats: Counter
                ) -> list[list[tuple[str, str, float]]]:
    """For each job ``(code, entry, inputs)``: per input ``(status, text, cpu)``: ``V`` and the repr of the result,
    or ``E`` (raised), ``T`` (slow: over SLOW_CPU, or killed at its CPU limit), ``L`` (too large), ``X`` (its process
    died), ``I`` (the sandbox failed); ``cpu``: the CPU seconds the call took in its child (``-1`` when the child
    was killed or died before it could say). Each input runs in a child process with its own CPU limit; inputs run in
    chunks, and a chunk whose output is incomplete runs again from where it stopped (in halves when the output was
    cut: the sandbox keeps a script's first 2,000 characters of output)."""
    from rewardlang.sandbox.config import Limits
    from rewardlang.sandbox.runner import Task, get_sandbox

    sandbox = get_sandbox()
    results: list[list[tuple[str, str, float] | None]] = [[None] * len(inp) for _, _, inp in jobs]
    # (job, first input, inputs)
    pending = [(j, start, inp[start:start + 48]) for j, (_, _, inp) in enumerate(jobs)
               for start in range(0, len(inp), 48)]
    while pending:
        tasks, nonces = [], []
        for j, _start, chunk in pending:
            nonce = "rlp" + secrets.token_hex(6)
            nonces.append(nonce)
            code, entry, _ = jobs[j]
            # each input runs in a child with its own CPU limit (math.ceil(SLOW_CPU) s): the chunk's budget
            # covers every input hitting it; a chunk that still runs out keeps what it finished, goes on from there
            cpu = min(2.0 + (math.ceil(SLOW_CPU) + 0.2) * len(chunk), 120.0)
            tasks.append(Task(_oracle_script(code, entry, chunk, nonce), None, None,
                              limits=Limits(cpu=cpu, memory_mb=1024, output_bytes=1 << 20)))
        verdicts = sandbox.evaluate(tasks, use_cache=False, stats=stats)
        again = []
        for (j, start, chunk), nonce, v in zip(pending, nonces, verdicts, strict=True):
            stats["plus.oracle_runs"] += 1
            if v.infra:
                for k in range(len(chunk)):
                    results[j][start + k] = ("I", v.infra or "", -1.0)
                continue
            got: dict[int, tuple[str, str, float]] = {}
            complete = False
            # whole lines only: output cut short ends in a partial line, whose text would be a cut result
            for line in v.stdout.split("\n")[:-1]:
                parts = line.split(" ", 4)
                if len(parts) >= 3 and parts[0] == nonce:
                    if parts[1] == "END":
                        complete = True
                    elif parts[1].isdigit() and len(parts) == 5:
                        try:
                            cpu = float(parts[3])
                        except ValueError:
                            continue
                        got[int(parts[1])] = (parts[2], parts[4], cpu)
            if complete and len(got) == len(chunk):
                for k, r in got.items():
                    results[j][start + k] = r
            elif len(chunk) == 1:
                results[j][start] = ("X", v.outcome, -1.0)
            else:
                # keep what came out whole. Inputs run in order, so when the process ended early (a limit, a
                # crash) the first input without a result is the one it ended on: it runs again alone, the rest
                # together; when it ended normally the output was cut short (the sandbox keeps the first 2,000
                # characters): the rest runs again in halves
                done = max((k for k in got if all(q in got for q in range(k + 1))), default=-1) if got else -1
                for k in range(done + 1):
                    results[j][start + k] = got[k]
                rest = chunk[done + 1:]
                base = start + done + 1
                cut = max(1, len(rest) // 2) if v.outcome == "pass" else 1
                again.append((j, base, rest[:cut]))
                if rest[cut:]:
                    again.append((j, base + cut, rest[cut:]))
        pending = again
    return [[r if r is not None else ("I", "not run", -1.0) for r in job] for job in results]


def _decode(text: str) -> tuple[bool, Any]:
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return False, None
    return True, v


def _finite(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(k) and _finite(x) for k, x in v.items())
    return True


# ---------------------------------------------------------------------- all problems


@dataclass
class PlusBuild:
    """Every problem's generation, and the counts of the report."""

    problems: list[PlusProblem]
    stats: Counter = field(default_factory=Counter)

    def by_task(self) -> dict[str, PlusProblem]:
        return {p.task_id: p for p in self.problems}

    def summary(self) -> dict[str, Any]:
        covered = [p for p in self.problems if p.covered]
        dropped: Counter = Counter()
        for p in self.problems:
            dropped.update(p.dropped)
        return {"problems": len(self.problems), "covered": len(covered),
                "extra_inputs": sum(len(p.inputs) for p in self.problems),
                "mean_extra_per_problem": sum(len(p.inputs) for p in self.problems) / max(1, len(self.problems)),
                "mean_extra_per_covered": sum(len(p.inputs) for p in covered) / max(1, len(covered)),
                "base_tests": self.stats.get("base_inputs", 0),
                "contracts_from_prompt": sum(1 for p in self.problems if p.contract.startswith("prompt")),
                "max_reference_cpu": max((p.reference_cpu for p in self.problems), default=0.0),
                "dropped": dict(dropped.most_common())}

    def report_lines(self) -> list[str]:
        s = self.summary()
        lines = [f"plus tests: {s['covered']} of {s['problems']} problems covered, {s['extra_inputs']} extra inputs "
                 f"(mean {s['mean_extra_per_problem']:.1f} per problem, {s['mean_extra_per_covered']:.1f} per covered "
                 f"problem; the base tests have {s['base_tests']} inputs); contracts: "
                 f"{s['contracts_from_prompt']} from the prompt, the others from the seeds' domain; the reference "
                 f"spends at most {s['max_reference_cpu']:.2f} CPU seconds on a problem's set"]
        for why, n in s["dropped"].items():
            lines.append(f"  dropped {n:5d}: {why}")
        for p in self.problems:
            if not p.covered:
                lines.append(f"  not covered: {p.task_id} ({p.contract})")
        return lines

    def report_json(self) -> dict[str, Any]:
        return {"summary": self.summary(),
                "problems": [{"task_id": p.task_id, "extra_inputs": len(p.inputs), "contract": p.contract,
                              "seeds": len(p.seeds), "reference_cpu": round(p.reference_cpu, 4),
                              "dropped": dict(p.dropped)} for p in self.problems]}


def build_plus(numbers: Sequence[int] | None = None, per_problem: int = DEFAULT_PER_PROBLEM, seed: int = 0,
               progress: Callable[[str], None] | None = None, budget: float = BUDGET_CPU) -> PlusBuild:
    """Generate the plus inputs of HumanEval problems (all, or the given numbers): mutate, bound by the contract,
    run the canonical solution twice in the sandbox, keep what is well-defined and deterministic, in generation
    order while the reference's CPU seconds summed over the kept inputs stay within ``budget``
    (:data:`BUDGET_CPU`; see :func:`within_budget`)."""
    from rewardlang.datasets.humaneval import load_humaneval

    total = len(load_humaneval())
    numbers = list(range(total)) if numbers is None else list(numbers)
    stats: Counter = Counter()
    probs: list[PlusProblem] = []
    for n in numbers:
        seeds, types, result, tol, entry, code = _seeds(n)
        stats["base_inputs"] += len(seeds)
        rule = CONTRACTS.get(n)
        contract = f"prompt: {rule[0]}" if rule else (
            "none stated: inputs kept within the seeds' domain (signs, characters, lengths, order, uniqueness)"
            if seeds else "no seed inputs: its tests do not call the function with literal arguments")
        rng = random.Random(f"{seed}:{n}")
        # a quarter more than wanted: the oracle drops some
        inputs, dropped = _candidates(seeds, types, rule[1] if rule else None, rng, per_problem + per_problem // 4)
        probs.append(PlusProblem(f"HumanEval/{n}", n, entry, code, seeds, types, result, tol, contract,
                                 inputs, [], dropped))
    jobs = [(p.code, p.entry_point, p.inputs) for p in probs]
    if progress:
        progress(f"running {sum(len(p.inputs) for p in probs)} inputs through the canonical solutions (twice)")
    first = _run_oracle(jobs, stats)
    second = _run_oracle(jobs, stats)
    reasons = {"E": "the reference raises", "T": f"the reference takes over {SLOW_CPU} s", "L":
               f"the result's repr is over {MAX_REPR} characters", "X": "the reference crashed or hung",
               "I": "a sandbox failure"}
    for p, a, b in zip(probs, first, second, strict=True):
        kept_in, kept_out, costs = [], [], []
        for args, (sa, ta, ca), (sb, tb, cb) in zip(p.inputs, a, b, strict=True):
            if sa != "V" or sb != "V":
                p.dropped[reasons[sa if sa != "V" else sb]] += 1
                continue
            if ta != tb:
                p.dropped["the reference gives different results on two runs"] += 1
                continue
            ok, value = _decode(ta)
            if not ok or not _finite(value):
                p.dropped["the result has no literal form (an object, nan, inf)"] += 1
                continue
            if p.result is not None and not conforms(value, p.result):
                p.dropped["the result is not of the type its tests' results have"] += 1
                continue
            kept_in.append(args)
            kept_out.append(ta)
            costs.append(_cost(ca, cb))
            if len(kept_in) >= per_problem:
                break
        keep = within_budget(costs, budget)
        if keep < len(kept_in):
            p.dropped[f"past the problem's budget of {budget} CPU seconds for the reference"] += len(kept_in) - keep
        p.inputs, p.outputs, p.costs = kept_in[:keep], kept_out[:keep], costs[:keep]
        p.reference_cpu = sum(p.costs)
    return PlusBuild(probs, stats)


def _cost(a: float, b: float) -> float:
    """An input's cost from its two runs' CPU seconds: their mean. The sandbox's process CPU clock may advance in
    ticks of a few milliseconds, so a short call reads 0 or a tick; the mean of the two keeps a set's total an
    unbiased estimate (the smaller of the two would undercount it)."""
    return (max(0.0, a) + max(0.0, b)) / 2


def within_budget(costs: Sequence[float], budget: float = BUDGET_CPU) -> int:
    """How many of the inputs, in order, to keep: the longest prefix whose costs sum to at most ``budget`` (the
    first input that would pass it ends the set, so the kept inputs stay those generated first, whatever the
    costs of later ones).

        >>> within_budget([0.2, 0.3, 0.4, 0.2], 1.0)
        3
        >>> within_budget([0.2, 0.6, 0.3, 0.01], 1.0)  # 0.01 would fit, but the set stops at the first misfit
        2
        >>> within_budget([1.5, 0.1], 1.0), within_budget([], 1.0), within_budget([0.5, 0.5], 1.0)
        (0, 0, 2)
    """
    spent, n = 0.0, 0
    for c in costs:
        if spent + c > budget:
            break
        spent += c
        n += 1
    return n


# ---------------------------------------------------------------------- test texts


def python_plus_tests(p: PlusProblem) -> str:
    """The plus tests of a problem in HumanEval's format: ``def check(candidate):`` with one assert per new input.

        >>> q = PlusProblem("HumanEval/0", 0, "f", "", [], None, None, inputs=[(1, "a"), (2.5,)],
        ...                 outputs=["True", "0.5"])
        >>> print(python_plus_tests(q), end="")
        def check(candidate):
            assert candidate(1, 'a') == True
            assert abs(candidate(2.5) - 0.5) <= 1e-06
    """
    lines = ["def check(candidate):"]
    for args, out in zip(p.inputs, p.outputs, strict=True):
        call = f"candidate({', '.join(repr(a) for a in args)})"
        _, value = _decode(out)
        if isinstance(value, float):
            tol = p.tolerance if p.tolerance is not None else 1e-6 * max(1.0, abs(value))
            lines.append(f"    assert abs({call} - {out}) <= {tol!r}")
        else:
            lines.append(f"    assert {call} == {out}")
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


def plus_for_language(p: PlusProblem, language: str) -> tuple[str | None, int]:
    """The plus tests of a typed problem in a translated language (a ``rewardlang-tests/1`` JSON text), and how
    many new cases the target could not render (an integer beyond its range, a string it cannot hold). None when
    the problem has no plus cases there."""
    from rewardlang.datasets.multilang import render_tests
    from rewardlang.datasets.problems import Case, _coerce, problem
    from rewardlang.datasets.targets import TARGETS, Unsupported

    base = problem(p.number)
    if base.error is not None or not p.inputs:
        return None, 0
    cases = []
    for args, out in zip(p.inputs, p.outputs, strict=True):
        _, value = _decode(out)
        cases.append(Case(tuple(args), _coerce(value, base.result), p.tolerance if isinstance(value, float) else None))
    try:
        tests, dropped = render_tests(replace(base, cases=cases), TARGETS[language])
    except Unsupported:
        return None, len(cases)
    return json.dumps(tests, ensure_ascii=False, allow_nan=False), len(dropped)


# ---------------------------------------------------------------------- the shipped data


def _data_path() -> str:
    import os

    return os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "humaneval_plus.jsonl.gz")


def load_plus(language: str = "python") -> dict[str, str]:
    """``task_id -> plus_tests`` from the shipped file (``rewardlang/data/humaneval_plus.jsonl.gz``, written by
    ``python -m rewardlang.datasets.plus --write``: the generator above, seed 0, on this package's HumanEval, brought
within :data:`BUDGET_CPU` by ``--trim``); for a
    translated language the cases are rendered for it. Problems without plus inputs are absent. Read and
    rendered once per language and process (a copy each call)."""
    return dict(_load_plus(language))


@functools.lru_cache(maxsize=None)
def _load_plus(language: str) -> dict[str, str]:
    """The shipped plus tests of one language, read once."""
    import gzip

    out: dict[str, str] = {}
    with gzip.open(_data_path(), "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            p = _from_row(row)
            if language == "python":
                out[p.task_id] = python_plus_tests(p)
            else:
                text, _ = plus_for_language(p, language)
                if text is not None:
                    out[p.task_id] = text
    return out


def _to_row(p: PlusProblem) -> dict[str, Any]:
    return {"task_id": p.task_id, "entry_point": p.entry_point, "inputs": [repr(a) for a in p.inputs],
            "outputs": p.outputs, "tolerance": p.tolerance, "contract": p.contract, "dropped": dict(p.dropped),
            "reference_cpu": round(p.reference_cpu, 4)}


def _from_row(row: dict[str, Any]) -> PlusProblem:
    n = int(row["task_id"].split("/")[1])
    inputs = [ast.literal_eval(a) for a in row["inputs"]]
    return PlusProblem(row["task_id"], n, row["entry_point"], "", [], None, None, row.get("tolerance"),
                       row.get("contract", ""), inputs, list(row["outputs"]), Counter(row.get("dropped", {})),
                       reference_cpu=float(row.get("reference_cpu", 0.0)))


def attach_plus(rows: list[dict[str, Any]], column: str = "plus_tests") -> int:
    """Add the shipped plus tests to HumanEval rows (by ``task_id``, in each row's ``language``); returns how many
    rows got them. A row that has the column keeps it."""
    by_lang: dict[str, dict[str, str]] = {}
    n = 0
    for r in rows:
        if column in r or "task_id" not in r:
            continue
        lang = r.get("language") or "python"
        if lang not in by_lang:
            by_lang[lang] = load_plus(lang)
        text = by_lang[lang].get(r["task_id"])
        if text is not None:
            r[column] = text
            n += 1
    return n


def write_shipped(per_problem: int = DEFAULT_PER_PROBLEM, seed: int = 0, path: str | None = None) -> PlusBuild:
    """Regenerate the shipped file (``python -m rewardlang.datasets.plus --write [PATH]``; PATH: elsewhere)."""
    import gzip
    import os

    from rewardlang.outputs import atomic_write

    build = build_plus(per_problem=per_problem, seed=seed, progress=print)
    path = path or _data_path()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    text = "".join(json.dumps(_to_row(p), ensure_ascii=False) + "\n" for p in build.problems if p.covered)
    with atomic_write(path, mode="wb") as fh:
        fh.write(gzip.compress(text.encode("utf-8"), mtime=0))
    return build


def trim_shipped(budget: float = BUDGET_CPU, path: str | None = None) -> list[tuple[str, int, int, float]]:
    """Bring the shipped file within a problem budget without regenerating it (``python -m
    rewardlang.datasets.plus --trim [PATH]``): each problem's canonical solution runs on its shipped inputs in the
    sandbox, twice, measured as the generator measures them (:func:`_run_oracle`), and the longest prefix within
    ``budget`` is kept (:func:`within_budget`); each row records ``reference_cpu``. Regeneration is not used for
    this because it is not reproducible run to run (two hash seeds decide which set-ordered results are dropped,
    timings which slow inputs are). Returns ``(task_id, inputs before, kept, reference CPU of the kept)`` per
    problem. An input on which the reference does not give the shipped result on both runs is dropped too (an
    expected value the reference does not reproduce is no fairer a test), counted in the row's ``dropped``.
    """
    import gzip
    import os

    from rewardlang.datasets.humaneval import load_humaneval
    from rewardlang.outputs import atomic_write

    src = _data_path()
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    humaneval = load_humaneval()
    probs = [_from_row(r) for r in rows]
    jobs = [(humaneval[p.number]["solution"], p.entry_point, p.inputs) for p in probs]
    stats: Counter = Counter()
    first, second = _run_oracle(jobs, stats), _run_oracle(jobs, stats)
    out, report = [], []
    for row, p, a, b in zip(rows, probs, first, second, strict=True):
        costs, idx = [], []
        dropped = dict(row.get("dropped", {}))
        for i, (want, (sa, ta, ca), (sb, tb, cb)) in enumerate(zip(p.outputs, a, b, strict=True)):
            if not (sa == sb == "V" and ta == tb == want):
                why = "the reference does not reproduce the shipped result"
                dropped[why] = dropped.get(why, 0) + 1
                continue
            costs.append(_cost(ca, cb))
            idx.append(i)
        keep = within_budget(costs, budget)
        if keep < len(costs):
            why = f"past the problem's budget of {budget} CPU seconds for the reference"
            dropped[why] = dropped.get(why, 0) + len(costs) - keep
        spent = sum(costs[:keep])
        report.append((p.task_id, len(p.inputs), keep, spent))
        if keep:
            out.append({**row, "inputs": [row["inputs"][i] for i in idx[:keep]],
                        "outputs": [row["outputs"][i] for i in idx[:keep]], "dropped": dropped,
                        "reference_cpu": round(spent, 4)})
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out)
    path = path or src
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_write(path, mode="wb") as fh:
        fh.write(gzip.compress(text.encode("utf-8"), mtime=0))
    return report


if __name__ == "__main__":  # pragma: no cover
    import sys

    if "--write" in sys.argv:
        rest = sys.argv[sys.argv.index("--write") + 1:]
        b = write_shipped(path=rest[0] if rest else None)
        print("\n".join(b.report_lines()))
    elif "--trim" in sys.argv:
        rest = sys.argv[sys.argv.index("--trim") + 1:]
        for task, before, kept, spent in trim_shipped(path=rest[0] if rest else None):
            print(f"{task}: {kept} of {before} inputs, the reference {spent:.3f} CPU s" + (
                "" if kept == before else "  (trimmed)"))
