"""C functions with test harnesses, written here, for GEPO's IR groups (``rewardlang data cfuncs``).

Each function is C source plus typed inputs. :func:`rows` compiles the function once at ``-O0`` with a recorder
that prints what it returns for every input, then writes a harness — a C ``main`` that calls the function on the
same inputs and exits 1 at the first result that differs from the recorded one. The oracle is therefore the
source's own behaviour, which is exactly what "an IR equivalent to the source" means; no second implementation
(in Python, say) can disagree with C's integer semantics.

Rows are ``{"id", "source", "harness"}``, the input of ``rewardlang ir-groups``:

    >>> fns = corpus()
    >>> len(fns) >= 100
    True
    >>> fns[0].name
    'gcd'
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CFunc", "corpus", "harness_for", "rows"]

_SCALARS = {"int": "%d", "long": "%ld", "unsigned": "%u", "double": "%a", "char": "%d"}


@dataclass(frozen=True)
class CFunc:
    """One C function: ``source`` defines ``name`` with return type ``ret`` and parameters ``params``.

    A parameter is a scalar type (``int``, ``long``, ``unsigned``, ``double``), ``str`` (a ``const char *``
    argument given as a Python string) or ``int[]``/``long[]``/``double[]`` (an array argument followed by its
    length, given as a Python list; the C parameters are ``T *a, int n``). ``inputs`` lists argument tuples.
    """

    name: str
    source: str
    ret: str
    params: tuple[str, ...]
    inputs: tuple[tuple[Any, ...], ...] = field(default=())


def _c_literal(kind: str, value: Any) -> str:
    if kind == "double":
        return repr(float(value)) if float(value) == float(value) else "0.0/0.0"
    if kind == "str":
        return json.dumps(value)  # a C string literal for ASCII text (JSON's escapes are C's for these)
    if kind == "long":
        return f"{int(value)}L"
    if kind == "unsigned":
        return f"{int(value)}u"
    return str(int(value))


def _args(fn: CFunc, args: Sequence[Any], k: int) -> tuple[list[str], list[str]]:
    """(declarations of array arguments, the call's argument list) for input number ``k``."""
    decls: list[str] = []
    out: list[str] = []
    for j, (kind, v) in enumerate(zip(fn.params, args)):
        if kind.endswith("[]"):
            base = kind[:-2]
            body = ", ".join(_c_literal(base, x) for x in v) or "0"
            decls.append(f"  {base} a{k}_{j}[] = {{{body}}};")
            out += [f"a{k}_{j}", str(len(v))]
        else:
            out.append(_c_literal(kind, v))
    return decls, out


def _prototype(fn: CFunc) -> str:
    ps: list[str] = []
    for j, kind in enumerate(fn.params):
        if kind.endswith("[]"):
            ps += [f"{kind[:-2]} *p{j}", f"int n{j}"]
        elif kind == "str":
            ps.append(f"const char *p{j}")
        else:
            ps.append(f"{kind} p{j}")
    return f"{fn.ret} {fn.name}({', '.join(ps) or 'void'});"


def _recorder(fn: CFunc) -> str:
    lines = ["#include <stdio.h>", _prototype(fn), "int main(void) {"]
    for k, args in enumerate(fn.inputs):
        decls, call = _args(fn, args, k)
        lines += decls
        lines.append(f'  printf("{_SCALARS[fn.ret]}\\n", {fn.name}({", ".join(call)}));')
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def harness_for(fn: CFunc, results: Sequence[str]) -> str:
    """The checking ``main``: each call's result compared with the recorded one (doubles bit-exactly, via the
    hexadecimal float the recorder printed); exit status k+1 at the first mismatch of input k."""
    lines = ["#include <stdlib.h>", _prototype(fn), "int main(void) {"]
    for k, (args, res) in enumerate(zip(fn.inputs, results)):
        decls, call = _args(fn, args, k)
        lines += decls
        expect = {"double": res, "long": f"{res}L", "unsigned": f"{res}u"}.get(fn.ret, res)
        lines.append(f"  if ({fn.name}({', '.join(call)}) != {expect}) return {min(k + 1, 100)};")
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def _record(fn: CFunc, workdir: str) -> list[str]:
    src = os.path.join(workdir, f"{fn.name}.c")
    rec = os.path.join(workdir, f"{fn.name}_rec.c")
    exe = os.path.join(workdir, f"{fn.name}_rec")
    with open(src, "w") as fh:
        fh.write(fn.source)
    with open(rec, "w") as fh:
        fh.write(_recorder(fn))
    subprocess.run(["clang", "-O0", "-w", "-o", exe, src, rec, "-lm"], check=True, capture_output=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True, timeout=10).stdout.split()
    if len(out) != len(fn.inputs):
        raise RuntimeError(f"{fn.name}: {len(out)} results for {len(fn.inputs)} inputs")
    return out


def rows(fns: Iterable[CFunc] | None = None, *, on_function: Callable[[int], None] | None = None
         ) -> list[dict[str, str]]:
    """``{"id", "source", "harness"}`` per function, the harness recording the source's behaviour at -O0;
    ``on_function(1)`` is called as each one is recorded (a progress bar: the corpus takes tens of seconds)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="rl-cfuncs-") as tmp:
        for fn in (corpus() if fns is None else fns):
            res = _record(fn, tmp)
            out.append({"id": fn.name, "source": fn.source, "harness": harness_for(fn, res)})
            if on_function is not None:
                on_function(1)
    return out


# ----------------------------------------------------------------------------------------------------------
# The corpus: hand-written functions of many shapes, then seeded families (the same shape with other constants,
# operators and predicates) up to well over 100 functions. Inputs avoid undefined behaviour (signed overflow,
# division by zero, out-of-bounds), so every optimisation level must agree on them.

_HAND: list[CFunc] = [
    CFunc("gcd", "int gcd(int a, int b) {\n  while (b != 0) { int t = a % b; a = b; b = t; }\n"
          "  return a < 0 ? -a : a;\n}\n", "int", ("int", "int"),
          ((12, 18), (7, 13), (100, 75), (0, 5), (-12, 8), (81, 27))),
    CFunc("is_prime", "int is_prime(int n) {\n  if (n < 2) return 0;\n  for (int d = 2; d * d <= n; d++)\n"
          "    if (n % d == 0) return 0;\n  return 1;\n}\n", "int", ("int",),
          ((0,), (1,), (2,), (9,), (97,), (221,), (7919,))),
    CFunc("sum_even", "long sum_even(int *a, int n) {\n  long s = 0;\n  for (int i = 0; i < n; i++)\n"
          "    if (a[i] % 2 == 0) s += a[i];\n  return s;\n}\n", "long", ("int[]",),
          (([1, 2, 3, 4],), ([],), ([-2, -3, 6],), ([5, 7, 9],), ([10, 20, 31, 40],))),
    CFunc("count_vowels", "int count_vowels(const char *s) {\n  int c = 0;\n  for (; *s; s++) {\n"
          "    char ch = *s | 32;\n    if (ch == 'a' || ch == 'e' || ch == 'i' || ch == 'o' || ch == 'u') c++;\n"
          "  }\n  return c;\n}\n", "int", ("str",),
          (("hello",), ("",), ("AEIOU xyz",), ("rhythm",), ("Programming Language",))),
    CFunc("max_subarray", "long max_subarray(int *a, int n) {\n  long best = a[0], cur = 0;\n"
          "  for (int i = 0; i < n; i++) {\n    cur = cur + a[i] > a[i] ? cur + a[i] : a[i];\n"
          "    if (cur > best) best = cur;\n  }\n  return best;\n}\n", "long", ("int[]",),
          (([1, -2, 3, 4, -1],), ([-5, -1, -3],), ([2, 2, 2],), ([4, -10, 5, 6],), ([0],))),
    CFunc("fib", "long fib(int n) {\n  long a = 0, b = 1;\n  for (int i = 0; i < n; i++) { long t = a + b; a = b;"
          " b = t; }\n  return a;\n}\n", "long", ("int",), ((0,), (1,), (2,), (10,), (30,), (50,))),
    CFunc("factorial", "long factorial(int n) {\n  return n <= 1 ? 1 : n * factorial(n - 1);\n}\n", "long",
          ("int",), ((0,), (1,), (5,), (10,), (15,))),
    CFunc("popcount", "int popcount(unsigned x) {\n  int c = 0;\n  while (x) { c += x & 1u; x >>= 1; }\n"
          "  return c;\n}\n", "int", ("unsigned",), ((0,), (1,), (255,), (4096,), (4294967295,), (12345,))),
    CFunc("reverse_digits", "long reverse_digits(long n) {\n  long r = 0;\n  int neg = n < 0;\n"
          "  if (neg) n = -n;\n  while (n > 0) { r = r * 10 + n % 10; n /= 10; }\n  return neg ? -r : r;\n}\n",
          "long", ("long",), ((0,), (123,), (-456,), (1000,), (9876543,))),
    CFunc("is_palindrome", "int is_palindrome(const char *s) {\n  int n = 0;\n  while (s[n]) n++;\n"
          "  for (int i = 0, j = n - 1; i < j; i++, j--)\n    if (s[i] != s[j]) return 0;\n  return 1;\n}\n",
          "int", ("str",), (("",), ("a",), ("abba",), ("abca",), ("racecar",), ("ab",))),
    CFunc("power_mod", "long power_mod(long b, long e, long m) {\n  long r = 1 % m;\n  b %= m;\n"
          "  while (e > 0) {\n    if (e & 1) r = r * b % m;\n    b = b * b % m;\n    e >>= 1;\n  }\n"
          "  return r;\n}\n", "long", ("long", "long", "long"),
          ((2, 10, 1000), (3, 0, 7), (5, 3, 13), (7, 128, 97), (10, 9, 1))),
    CFunc("collatz_steps", "int collatz_steps(long n) {\n  int s = 0;\n  while (n != 1) {\n"
          "    n = (n % 2 == 0) ? n / 2 : 3 * n + 1;\n    s++;\n  }\n  return s;\n}\n", "int", ("long",),
          ((1,), (2,), (7,), (27,), (97,))),
    CFunc("binary_search", "int binary_search(int *a, int n, int x) {\n  int lo = 0, hi = n - 1;\n"
          "  while (lo <= hi) {\n    int mid = lo + (hi - lo) / 2;\n    if (a[mid] == x) return mid;\n"
          "    if (a[mid] < x) lo = mid + 1; else hi = mid - 1;\n  }\n  return -1;\n}\n", "int",
          ("int[]", "int"), (([1, 3, 5, 7, 9], 7), ([1, 3, 5, 7, 9], 4), ([], 1), ([2], 2), ([1, 2, 3], 1))),
    CFunc("count_inversions", "int count_inversions(int *a, int n) {\n  int c = 0;\n"
          "  for (int i = 0; i < n; i++)\n    for (int j = i + 1; j < n; j++)\n      if (a[i] > a[j]) c++;\n"
          "  return c;\n}\n", "int", ("int[]",), (([1, 2, 3],), ([3, 2, 1],), ([2, 4, 1, 3, 5],), ([],))),
    CFunc("dot", "double dot(double *a, int n) {\n  double s = 0.0;\n  for (int i = 0; i < n; i++) s += a[i] * "
          "a[n - 1 - i];\n  return s;\n}\n", "double", ("double[]",),
          (([1.0, 2.0, 3.0],), ([0.5, -1.5],), ([],), ([2.25, 1.0, 4.0, 0.125],))),
    CFunc("horner", "double horner(double x) {\n  double c[] = {1.5, -2.0, 0.25, 3.0};\n  double r = 0.0;\n"
          "  for (int i = 0; i < 4; i++) r = r * x + c[i];\n  return r;\n}\n", "double", ("double",),
          ((0.0,), (1.0,), (-2.5,), (10.0,), (0.1,))),
    CFunc("sum_digits", "int sum_digits(long n) {\n  if (n < 0) n = -n;\n  int s = 0;\n"
          "  while (n) { s += n % 10; n /= 10; }\n  return s;\n}\n", "int", ("long",),
          ((0,), (9,), (1234,), (-987,), (1000000007,))),
    CFunc("triangle_kind", "int triangle_kind(int a, int b, int c) {\n"
          "  if (a <= 0 || b <= 0 || c <= 0 || a + b <= c || a + c <= b || b + c <= a) return 0;\n"
          "  if (a == b && b == c) return 3;\n  if (a == b || b == c || a == c) return 2;\n  return 1;\n}\n",
          "int", ("int", "int", "int"), ((3, 3, 3), (3, 3, 5), (3, 4, 5), (1, 2, 3), (0, 1, 1), (5, 3, 3))),
    CFunc("day_of_week", "int day_of_week(int y, int m, int d) {\n"
          "  static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};\n  if (m < 3) y -= 1;\n"
          "  return (y + y / 4 - y / 100 + y / 400 + t[m - 1] + d) % 7;\n}\n", "int", ("int", "int", "int"),
          ((2024, 1, 1), (2000, 2, 29), (1999, 12, 31), (2026, 11, 27), (1900, 3, 1))),
    CFunc("grade", "char grade(int score) {\n  switch (score / 10) {\n  case 10: case 9: return 'A';\n"
          "  case 8: return 'B';\n  case 7: return 'C';\n  case 6: return 'D';\n  default: return 'F';\n  }\n}\n",
          "char", ("int",), ((100,), (95,), (81,), (70,), (65,), (12,))),
    CFunc("isqrt", "long isqrt(long n) {\n  long lo = 0, hi = n < 2 ? n : n / 2 + 1;\n  while (lo < hi) {\n"
          "    long mid = (lo + hi + 1) / 2;\n    if (mid <= n / mid) lo = mid; else hi = mid - 1;\n  }\n"
          "  return lo;\n}\n", "long", ("long",), ((0,), (1,), (15,), (16,), (17,), (1000000,), (999999999,))),
    CFunc("second_largest", "int second_largest(int *a, int n) {\n  int m1 = -2147483647 - 1, m2 = m1;\n"
          "  for (int i = 0; i < n; i++) {\n    if (a[i] > m1) { m2 = m1; m1 = a[i]; }\n"
          "    else if (a[i] > m2 && a[i] < m1) m2 = a[i];\n  }\n  return m2;\n}\n", "int", ("int[]",),
          (([1, 2, 3],), ([5, 5, 4],), ([7],), ([-1, -5, -3],), ([2, 9, 9, 8, 1],))),
    CFunc("word_count", "int word_count(const char *s) {\n  int c = 0, in = 0;\n  for (; *s; s++) {\n"
          "    if (*s == ' ' || *s == '\\t' || *s == '\\n') in = 0;\n    else if (!in) { in = 1; c++; }\n  }\n"
          "  return c;\n}\n", "int", ("str",), (("",), ("one",), ("two words",), ("  lead and trail  ",),
                                                  ("a\tb\nc",))),
    CFunc("lcm", "long lcm(long a, long b) {\n  long x = a, y = b;\n  while (y) { long t = x % y; x = y; y = t; }\n"
          "  return x == 0 ? 0 : a / x * b;\n}\n", "long", ("long", "long"),
          ((4, 6), (21, 6), (0, 5), (17, 19), (12, 18))),
    CFunc("run_length_max", "int run_length_max(int *a, int n) {\n  int best = 0, cur = 0;\n"
          "  for (int i = 0; i < n; i++) {\n    cur = (i > 0 && a[i] == a[i - 1]) ? cur + 1 : 1;\n"
          "    if (cur > best) best = cur;\n  }\n  return best;\n}\n", "int", ("int[]",),
          (([],), ([1],), ([1, 1, 2, 2, 2, 3],), ([4, 4, 4, 4],), ([1, 2, 1, 2],))),
    CFunc("mean_abs_dev", "double mean_abs_dev(double *a, int n) {\n  if (n == 0) return 0.0;\n"
          "  double m = 0.0;\n  for (int i = 0; i < n; i++) m += a[i];\n  m /= n;\n  double d = 0.0;\n"
          "  for (int i = 0; i < n; i++) d += a[i] > m ? a[i] - m : m - a[i];\n  return d / n;\n}\n",
          "double", ("double[]",), (([1.0, 2.0, 3.0, 4.0],), ([],), ([5.5],), ([-1.0, 1.0, 10.0],))),
    CFunc("tribonacci", "long tribonacci(int n) {\n  long a = 0, b = 0, c = 1;\n  if (n < 2) return 0;\n"
          "  for (int i = 2; i < n; i++) { long t = a + b + c; a = b; b = c; c = t; }\n  return c;\n}\n",
          "long", ("int",), ((0,), (1,), (2,), (5,), (20,), (40,))),
    CFunc("caesar_checksum", "long caesar_checksum(const char *s, int k) {\n  long h = 0;\n"
          "  for (; *s; s++) {\n    char c = *s;\n    if (c >= 'a' && c <= 'z') c = 'a' + (c - 'a' + k) % 26;\n"
          "    else if (c >= 'A' && c <= 'Z') c = 'A' + (c - 'A' + k) % 26;\n    h = h * 31 + c;\n"
          "    h %= 1000000007;\n  }\n  return h;\n}\n", "long", ("str", "int"),
          (("abc", 1), ("xyz", 3), ("Hello, World", 13), ("", 5), ("ZzZ", 25))),
    CFunc("count_primes", "int count_primes(int n) {\n  int c = 0;\n  for (int i = 2; i < n; i++) {\n"
          "    int p = 1;\n    for (int d = 2; d * d <= i; d++) if (i % d == 0) { p = 0; break; }\n    c += p;\n"
          "  }\n  return c;\n}\n", "int", ("int",), ((0,), (2,), (10,), (100,), (1000,))),
    CFunc("clamp_sum", "long clamp_sum(int *a, int n, int lo, int hi) {\n  long s = 0;\n"
          "  for (int i = 0; i < n; i++) s += a[i] < lo ? lo : (a[i] > hi ? hi : a[i]);\n  return s;\n}\n",
          "long", ("int[]", "int", "int"), (([1, 5, 10], 2, 8), ([], 0, 1), ([-5, 0, 5], -1, 1),
                                            ([100, 200], 150, 160))),
    CFunc("hamming", "int hamming(long a, long b) {\n  unsigned long x = (unsigned long)(a ^ b);\n  int c = 0;\n"
          "  while (x) { x &= x - 1; c++; }\n  return c;\n}\n", "int", ("long", "long"),
          ((0, 0), (1, 2), (255, 0), (-1, 0), (12345, 54321))),
    CFunc("digital_root", "int digital_root(long n) {\n  while (n >= 10) {\n    long s = 0;\n"
          "    while (n) { s += n % 10; n /= 10; }\n    n = s;\n  }\n  return (int)n;\n}\n", "int", ("long",),
          ((0,), (9,), (38,), (123456789,), (999999999999,))),
    CFunc("is_sorted", "int is_sorted(int *a, int n) {\n  for (int i = 1; i < n; i++) if (a[i - 1] > a[i]) return 0;\n"
          "  return 1;\n}\n", "int", ("int[]",), (([],), ([1],), ([1, 2, 2, 3],), ([3, 1],), ([1, 3, 2],))),
    CFunc("bit_reverse8", "unsigned bit_reverse8(unsigned x) {\n  unsigned r = 0;\n"
          "  for (int i = 0; i < 8; i++) { r = (r << 1) | (x & 1u); x >>= 1; }\n  return r;\n}\n", "unsigned",
          ("unsigned",), ((0,), (1,), (128,), (170,), (255,), (19,))),
    CFunc("leap_days", "int leap_days(int y0, int y1) {\n  int c = 0;\n  for (int y = y0; y <= y1; y++)\n"
          "    if ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) c++;\n  return c;\n}\n", "int", ("int", "int"),
          ((2000, 2000), (1900, 1900), (1896, 1904), (2001, 2003), (1600, 2000))),
    CFunc("vowel_ratio", "double vowel_ratio(const char *s) {\n  int v = 0, n = 0;\n  for (; *s; s++, n++) {\n"
          "    char c = *s | 32;\n    v += c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';\n  }\n"
          "  return n ? (double)v / n : 0.0;\n}\n", "double", ("str",),
          (("",), ("aaaa",), ("banana",), ("xyz",), ("Education",))),
    CFunc("min_coins", "int min_coins(int amount) {\n  static const int c[] = {25, 10, 5, 1};\n  int n = 0;\n"
          "  for (int i = 0; i < 4; i++) { n += amount / c[i]; amount %= c[i]; }\n  return n;\n}\n", "int",
          ("int",), ((0,), (1,), (30,), (99,), (41,))),
    CFunc("ackermann_small", "int ackermann_small(int m, int n) {\n  if (m == 0) return n + 1;\n"
          "  if (n == 0) return ackermann_small(m - 1, 1);\n"
          "  return ackermann_small(m - 1, ackermann_small(m, n - 1));\n}\n", "int", ("int", "int"),
          ((0, 0), (1, 2), (2, 3), (3, 3), (2, 0))),
    CFunc("abs_diff_sum", "long abs_diff_sum(int *a, int n) {\n  long s = 0;\n  for (int i = 1; i < n; i++) {\n"
          "    int d = a[i] - a[i - 1];\n    s += d < 0 ? -d : d;\n  }\n  return s;\n}\n", "long", ("int[]",),
          (([],), ([5],), ([1, 4, 2, 8],), ([-3, 3, -3],), ([10, 10, 10],))),
    CFunc("upper_count", "int upper_count(const char *s) {\n  int c = 0;\n"
          "  while (*s) { if (*s >= 'A' && *s <= 'Z') c++; s++; }\n  return c;\n}\n", "int", ("str",),
          (("",), ("ABC",), ("aBcD",), ("hello World OK",), ("123",))),
    CFunc("nth_triangular", "long nth_triangular(long n) {\n  return n * (n + 1) / 2;\n}\n", "long", ("long",),
          ((0,), (1,), (10,), (1000,), (100000,))),
    CFunc("sign_changes", "int sign_changes(int *a, int n) {\n  int c = 0, prev = 0;\n  for (int i = 0; i < n; i++)"
          " {\n    int s = (a[i] > 0) - (a[i] < 0);\n    if (s != 0) { if (prev != 0 && s != prev) c++; prev = s; }\n"
          "  }\n  return c;\n}\n", "int", ("int[]",), (([],), ([1, -1, 1],), ([0, 0, 1],), ([3, 0, -2, 0, 5],),
                                                     ([-1, -2, -3],))),
    CFunc("weighted_avg", "double weighted_avg(double *a, int n) {\n  double s = 0.0, w = 0.0;\n"
          "  for (int i = 0; i < n; i++) { s += a[i] * (i + 1); w += i + 1; }\n  return w > 0 ? s / w : 0.0;\n}\n",
          "double", ("double[]",), (([],), ([2.0],), ([1.0, 2.0, 3.0],), ([-1.5, 0.5, 4.0, 8.0],))),
]


def _family_modsum(rng: random.Random, k: int) -> CFunc:
    a, b = rng.randint(2, 9), rng.randint(2, 13)
    op = rng.choice(["||", "&&"])
    name = f"sum_mult_{k}"
    src = (f"long {name}(int n) {{\n  long s = 0;\n  for (int i = 1; i < n; i++)\n"
           f"    if (i % {a} == 0 {op} i % {b} == 0) s += i;\n  return s;\n}}\n")
    return CFunc(name, src, "long", ("int",), tuple((rng.randint(0, 500),) for _ in range(6)))


def _family_poly(rng: random.Random, k: int) -> CFunc:
    cs = [rng.randint(-9, 9) for _ in range(rng.randint(2, 5))]
    m = rng.choice([97, 1009, 10007])
    name = f"poly_mod_{k}"
    body = "".join(f"  r = (r * x + ({c})) % {m};\n" for c in cs)
    src = f"long {name}(long x) {{\n  long r = 0;\n  x %= {m};\n{body}  return r;\n}}\n"
    return CFunc(name, src, "long", ("long",), tuple((rng.randint(-1000, 1000),) for _ in range(6)))


def _family_digits(rng: random.Random, k: int) -> CFunc:
    base = rng.choice([2, 3, 5, 7, 8, 12, 16])
    what = rng.choice(["sum", "count", "max"])
    name = f"digits_{what}_b{base}_{k}"
    upd = {"sum": "r += d;", "count": "r += d != 0;", "max": "if (d > r) r = d;"}[what]
    src = (f"int {name}(long n) {{\n  int r = 0;\n  if (n < 0) n = -n;\n  while (n > 0) {{\n"
           f"    int d = (int)(n % {base});\n    {upd}\n    n /= {base};\n  }}\n  return r;\n}}\n")
    return CFunc(name, src, "int", ("long",), tuple((rng.randint(-10**9, 10**9),) for _ in range(6)))


def _family_filter_count(rng: random.Random, k: int) -> CFunc:
    m, r = rng.randint(2, 7), None
    r = rng.randint(0, m - 1)
    cmp = rng.choice(["<", ">", "<=", ">="])
    t = rng.randint(-5, 20)
    name = f"count_filter_{k}"
    src = (f"int {name}(int *a, int n) {{\n  int c = 0;\n  for (int i = 0; i < n; i++) {{\n"
           f"    int v = a[i] % {m};\n    if (v < 0) v += {m};\n    if (v == {r} && a[i] {cmp} {t}) c++;\n"
           f"  }}\n  return c;\n}}\n")
    ins = tuple(([rng.randint(-30, 40) for _ in range(rng.randint(0, 12))],) for _ in range(6))
    return CFunc(name, src, "int", ("int[]",), ins)


def _family_recurrence(rng: random.Random, k: int) -> CFunc:
    c1, c2 = rng.randint(1, 5), rng.randint(-3, 4)
    m = rng.choice([1000003, 65521, 9973])
    name = f"recur_{k}"
    src = (f"long {name}(int n) {{\n  long a = {rng.randint(0, 3)}, b = {rng.randint(1, 5)};\n"
           f"  for (int i = 0; i < n; i++) {{\n    long t = ({c1} * b + ({c2}) * a) % {m};\n"
           f"    if (t < 0) t += {m};\n    a = b;\n    b = t;\n  }}\n  return a;\n}}\n")
    return CFunc(name, src, "long", ("int",), tuple((rng.randint(0, 60),) for _ in range(6)))


def _family_clamp(rng: random.Random, k: int) -> CFunc:
    lo = rng.randint(-50, 0)
    hi = rng.randint(1, 50)
    sc = rng.randint(2, 5)
    name = f"clamp_scale_{k}"
    src = (f"int {name}(int x) {{\n  int y = x * {sc};\n  if (y < {lo}) return {lo};\n"
           f"  if (y > {hi}) return {hi};\n  return y;\n}}\n")
    return CFunc(name, src, "int", ("int",), tuple((rng.randint(-40, 40),) for _ in range(7)))


def _family_charclass(rng: random.Random, k: int) -> CFunc:
    chars = rng.sample("abcdefghijklmnopqrstuvwxyz0123456789 ", rng.randint(2, 5))
    cond = " || ".join(f"c == '{c}'" for c in chars)
    name = f"count_chars_{k}"
    src = (f"int {name}(const char *s) {{\n  int n = 0;\n  for (; *s; s++) {{\n    char c = *s;\n"
           f"    if ({cond}) n++;\n  }}\n  return n;\n}}\n")
    words = ["hello world", "the quick brown fox", "", "abc123", "zzz top", "mississippi 42"]
    return CFunc(name, src, "int", ("str",), tuple((w,) for w in words))


def _family_dbl(rng: random.Random, k: int) -> CFunc:
    a, b = rng.choice([0.5, 1.5, 2.0, 0.25, 3.0]), rng.choice([-1.0, 0.75, 2.5, -0.125])
    name = f"affine_sum_{k}"
    src = (f"double {name}(double *v, int n) {{\n  double s = 0.0;\n  for (int i = 0; i < n; i++) {{\n"
           f"    double t = {a} * v[i] + {b};\n    s += t > 0.0 ? t : -t;\n  }}\n  return s;\n}}\n")
    ins = tuple(([round(rng.uniform(-10, 10), 3) for _ in range(rng.randint(0, 6))],) for _ in range(5))
    return CFunc(name, src, "double", ("double[]",), ins)


_FAMILIES = [_family_modsum, _family_poly, _family_digits, _family_filter_count, _family_recurrence, _family_clamp,
             _family_charclass, _family_dbl]


def corpus(per_family: int = 10, seed: int = 0) -> list[CFunc]:
    """The hand-written functions, then ``per_family`` seeded functions of each family (default: 123 in all)."""
    rng = random.Random(seed)
    out = list(_HAND)
    for fam in _FAMILIES:
        out += [fam(rng, k) for k in range(per_family)]
    return out
