"""Target languages: how a typed problem becomes a prompt (a comment with the docstring, then the function's
declaration and opening) and a harness (the code added after the program, calling the function once per case and
writing one record ``<index> <JSON>\\n`` per call to file descriptor 3).

Each target has a type mapping (a type it cannot express soundly raises :class:`Unsupported`, and the problem is
skipped for that target only), a literal renderer (a value it cannot render raises :class:`Unsupported` for that
case only), and the fixed text around them. Expected values never appear in a harness: it holds the arguments only.

    >>> from rewardlang.datasets.types import type_of
    >>> TARGETS["cpp"].literal(["a\\"b", "é"], ("list", "str"))
    'std::vector<std::string>{std::string("a\\\\"b", 3), std::string("\\\\303\\\\251", 2)}'
    >>> TARGETS["java"].literal({"k": 1}, ("dict", "str", "int"))
    'new HashMap<String, Long>(Map.ofEntries(Map.entry("k", 1L)))'
    >>> TARGETS["go"].literal([-1, 2], ("list", "int"))
    '[]int{-1, 2}'
    >>> TARGETS["sh"].literal(["a", "b c"], ("list", "str"))
    Traceback (most recent call last):
    ...
    rewardlang.datasets.targets.Unsupported: a list element holds whitespace or is empty (Bash lists are space-separated)
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar

from rewardlang.datasets.types import Type, type_text

__all__ = ["FILE_NAMES", "LANGUAGES", "TARGETS", "Target", "Unsupported"]

#: the file the sandbox writes ``code + "\\n" + harness`` to, per language
FILE_NAMES = {"c": "main.c", "cpp": "main.cpp", "java": "Main.java", "js": "main.js", "php": "main.php",
              "sh": "main.sh", "go": "main.go"}

_I64 = (-(2 ** 63), 2 ** 63 - 1)


class Unsupported(ValueError):
    """A type or value the target cannot express soundly (the reason is the message)."""


def _int_range(v: int, lo: int = _I64[0], hi: int = _I64[1]) -> None:
    if not lo <= v <= hi:
        raise Unsupported(f"an integer outside the target's range ({v})")


def _float_text(v: float) -> str:
    """Python's shortest round-trip text, always with a fraction or exponent (a float literal everywhere)."""
    s = repr(float(v))
    return s if any(c in s for c in ".en") else s + ".0"


def _comment_lines(doc: str, prefix: str) -> list[str]:
    """The docstring as line comments; a trailing backslash (a C/C++ line continuation) is neutralised."""
    out = []
    for line in doc.splitlines() or [""]:
        line = line.rstrip()
        if line.endswith("\\"):
            line += " (end of line)"
        out.append(f"{prefix} {line}".rstrip())
    return out


def _is_seq(t: Type) -> bool:
    return isinstance(t, tuple) and t[0] in ("list", "tuple")


def _homogeneous(t: Type) -> Type:
    """The element type of a tuple whose elements all share one type (else Unsupported)."""
    if len(set(t[1:])) != 1:
        raise Unsupported(f"a tuple of different types ({type_text(t)})")
    return t[1]


class Target:
    """One target language (subclasses fill in types, literals, prompt and harness)."""

    name = ""
    ext = ""
    reserved: frozenset[str] = frozenset()
    renames: ClassVar[dict[str, str]] = {}

    def function_name(self, entry: str) -> str:
        """The target's name for the entry point (standard-library clashes renamed)."""
        return self.renames.get(entry, entry)

    def param_name(self, name: str) -> str:
        """A parameter's name in the target (keywords and predeclared names get a trailing ``_``)."""
        return name + "_" if name in self.reserved else name

    def check_signature(self, params: list[tuple[str, Type]], result: Type) -> None:
        """Raise :class:`Unsupported` when the target cannot type the function soundly."""
        for _, t in params:
            self.type_name(t)
        self.type_name(result)

    # How scalars are written: the target's name in messages, true/false, the int -2**63 (most targets cannot
    # write it as a negated literal), an int's suffix, the ints it holds exactly, NaN / +inf / -inf, and None
    # where the target writes it as a value (the dynamically typed ones; the others use an optional's empty).
    LANG = ""
    TRUE_FALSE = ("true", "false")
    INT_MIN = str(_I64[0])
    INT_SUFFIX = ""
    INT_RANGE = _I64
    NAN, INF, NEG_INF = "NAN", "INFINITY", "(-INFINITY)"
    NULL: str | None = None

    # How a statically typed target names types: its scalars, the boxed form a scalar takes inside a generic type
    # (Java), and a format per compound kind over its element types' names ({0}, {1}; {all}: a tuple's, comma
    # separated). A target without a heterogeneous tuple type writes a tuple of one element type as that kind's
    # format with the one type; a kind missing from the table has no sound rendering there. Targets whose names
    # depend on more than the type (C, Bash) or that only check it (JS, PHP) override :meth:`type_name`.
    SCALARS: ClassVar[dict[str, str]] = {}
    BOXED: ClassVar[dict[str, str]] = {}
    COMPOUNDS: ClassVar[dict[str, str]] = {}
    HOMOGENEOUS_TUPLES = False

    def type_name(self, t: Type, inner: bool = False) -> str:
        """The target's name of type ``t`` (``inner``: as an element of a compound type).

        >>> Cpp().type_name(("dict", "str", ("list", "int")))
        'std::map<std::string, std::vector<long>>'
        >>> Java().type_name(("list", ("tuple", "int", "int")))
        'List<List<Long>>'
        """
        if isinstance(t, str) and t in self.SCALARS:
            n = self.SCALARS[t]
            return self.BOXED.get(n, n) if inner else n
        if isinstance(t, tuple) and t[0] in self.COMPOUNDS:
            args = (_homogeneous(t),) if t[0] == "tuple" and self.HOMOGENEOUS_TUPLES else t[1:]
            names = [self.type_name(x, True) for x in args]
            return self.COMPOUNDS[t[0]].format(*names, all=", ".join(names))
        raise Unsupported(f"{self.LANG} has no sound rendering of {type_text(t)}")

    def string(self, v: str) -> str:  # pragma: no cover - overridden
        """A string literal of ``v``."""
        raise NotImplementedError

    def compound(self, v: Any, t: tuple) -> str | None:
        """A literal of a list, tuple, dict or optional type (None: the target has none)."""
        return None

    def literal(self, v: Any, t: Type) -> str:
        """The target's source text of the value ``v`` of type ``t`` (:class:`Unsupported` when it has none)."""
        if v is None and self.NULL is not None:
            return self.NULL
        if t == "bool":
            return self.TRUE_FALSE[0] if v else self.TRUE_FALSE[1]
        if t == "int":
            _int_range(v, *self.INT_RANGE)
            return self.INT_MIN if v == _I64[0] else f"{v}{self.INT_SUFFIX}"
        if t == "float":
            f = float(v)
            if math.isnan(f):
                return self.NAN
            if math.isinf(f):
                return self.INF if f > 0 else self.NEG_INF
            return _float_text(f)
        if t == "str":
            return self.string(v)
        if isinstance(t, tuple):
            out = self.compound(v, t)
            if out is not None:
                return out
        raise Unsupported(f"{self.LANG} has no literal of type {type_text(t)}")

    def elements(self, v: Any, t: tuple) -> list[str]:
        """The literals of a list's or a tuple's elements."""
        if t[0] == "list":
            return [self.literal(x, t[1]) for x in v]
        return [self.literal(x, y) for x, y in zip(v, t[1:])]

    def items(self, v: dict, t: tuple, sep: str) -> list[str]:
        """A dict's entries as ``key<sep>value`` literals."""
        return [f"{self.literal(a, t[1])}{sep}{self.literal(b, t[2])}" for a, b in v.items()]

    def case_type(self, t: Type) -> str:
        """The ``type`` field of a case (the grammar's text of the result type)."""
        return type_text(t)

    def expected(self, v: Any, t: Type) -> Any:
        """The expected value as the comparator sees it (JSON-ready)."""
        from rewardlang.datasets.types import to_json
        return to_json(v, t)

    def call_args(self, args: tuple[Any, ...], params: list[tuple[str, Type]]) -> str:
        return ", ".join(self.literal(v, t) for v, (_, t) in zip(args, params))


# ----------------------------------------------------------------------------------------------------------
# C
# ----------------------------------------------------------------------------------------------------------

def _utf8(s: str) -> bytes:
    """The UTF-8 bytes of ``s``; a lone surrogate has none (the program could not print it back either)."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        raise Unsupported("a lone surrogate in a string") from None


def _c_string(s: str) -> str:
    """A C/C++ string literal of the UTF-8 bytes of ``s``: printable ASCII as itself (``"``, ``\\``, ``?``
    escaped: no trigraphs), every other byte as a 3-digit octal escape (never a greedy ``\\x``)."""
    out = []
    for b in _utf8(s):
        c = chr(b)
        if c in '"\\?':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


class C(Target):
    """C11: int -> ``long``, float -> ``double``, bool -> ``bool``, str -> ``const char *`` (result ``char *``),
    list[int|float|str] parameters -> a pointer and a ``size_t`` length; a list[int|float|str] result -> a
    returned pointer, its length stored through a last parameter ``size_t *out_len``. Other types are skipped."""

    name, ext = "c", "c"
    LANG, INT_MIN, INT_SUFFIX = "C", "(-9223372036854775807L - 1)", "L"
    renames: ClassVar[dict[str, str]] = {"strlen": "string_length"}
    reserved = frozenset({"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
                          "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
                          "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
                          "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
                          "true", "false", "index", "time", "exp", "log", "abs", "round", "floor", "ceil"})
    HEADERS = ("#include <ctype.h>\n#include <limits.h>\n#include <math.h>\n#include <stdbool.h>\n"
               "#include <stddef.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n")
    _ELEM: ClassVar[dict[str, str]] = {"int": "long", "float": "double", "str": "const char *"}

    def type_name(self, t: Type, result: bool = False) -> str:
        if t == "int":
            return "long"
        if t == "float":
            return "double"
        if t == "bool":
            return "bool"
        if t == "str":
            return "char *" if result else "const char *"
        if isinstance(t, tuple) and t[0] == "list" and t[1] in self._ELEM:
            if result:
                return {"int": "long *", "float": "double *", "str": "char **"}[t[1]]
            return self._ELEM[t[1]] + " const *"
        raise Unsupported(f"C has no sound rendering of {'a result' if result else 'a parameter'} of type "
                          f"{type_text(t)}")

    def check_signature(self, params: list[tuple[str, Type]], result: Type) -> None:
        for _, t in params:
            self.type_name(t)
        self.type_name(result, result=True)

    def declaration(self, entry: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = []
        for n, t in params:
            n = self.param_name(n)
            if isinstance(t, tuple):
                ps += [f"{self._ELEM[t[1]]} const *{n}", f"size_t {n}_len"]
            else:
                ps.append(f"{self.type_name(t)} {n}".replace("* ", "*"))
        ret = self.type_name(result, result=True)
        if isinstance(result, tuple):
            ps.append("size_t *out_len")
        sep = "" if ret.endswith("*") else " "
        return f"{ret}{sep}{self.function_name(entry)}({', '.join(ps) or 'void'})"

    def string(self, v: str) -> str:
        if "\0" in v:
            raise Unsupported("a string holding NUL (C strings end at NUL)")
        return _c_string(v)

    def compound(self, v: Any, t: tuple) -> str | None:
        if t[0] != "list":
            return None
        if not v:
            return "NULL, 0"  # an argument pair: the pointer and the length
        return f"({self._ELEM[t[1]]} const[]){{{', '.join(self.elements(v, t))}}}, {len(v)}"

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        note = ["// Return a new array (malloc) and store its length in *out_len."] if isinstance(result, tuple) else []
        return (self.HEADERS + "\n" + "\n".join(_comment_lines(doc, "//") + note) + "\n"
                + self.declaration(entry, params, result) + " {\n")

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        emit = {"int": "rl_emit_long", "float": "rl_emit_double", "bool": "rl_emit_bool", "str": "rl_emit_str"}
        fn = self.function_name(entry)
        if isinstance(result, tuple):
            calls = [f"    rl_begin(&rl_b, {i}); {{ size_t rl_n = 0; {self.type_name(result, True)}rl_r = "
                     f"{fn}({args + ', ' if args else ''}&rl_n); if (!rl_r && rl_n) rl_puts(&rl_b, \"null\"); "
                     f"else {{ rl_puts(&rl_b, \"[\"); for (size_t rl_i = 0; rl_i < rl_n; rl_i++) {{ "
                     f"if (rl_i) rl_puts(&rl_b, \", \"); {emit[result[1]]}(&rl_b, rl_r[rl_i]); }} "
                     f"rl_puts(&rl_b, \"]\"); }} }} rl_end(&rl_b);"
                     for i, args in enumerate(cases)]
            return _C_HARNESS.replace("@CALLS@", "\n".join(calls))
        calls = [f"    rl_begin(&rl_b, {i}); {emit[result]}(&rl_b, {fn}({args})); rl_end(&rl_b);"
                 for i, args in enumerate(cases)]
        return _C_HARNESS.replace("@CALLS@", "\n".join(calls))


_C_HARNESS = r"""
/* rewardlang harness: one record per case on fd 3 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef struct { char *p; size_t n, cap; } rl_sb;
static void rl_cat(rl_sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = (char *)realloc(b->p, cap);
        if (!p) abort();
        b->p = p; b->cap = cap;
    }
    memcpy(b->p + b->n, s, n); b->n += n;
}
static void rl_puts(rl_sb *b, const char *s) { rl_cat(b, s, strlen(s)); }
static void rl_begin(rl_sb *b, int i) { char t[32]; b->n = 0; snprintf(t, sizeof t, "%d ", i); rl_puts(b, t); }
static void rl_end(rl_sb *b) {
    size_t off = 0;
    rl_cat(b, "\n", 1);
    while (off < b->n) { ssize_t w = write(3, b->p + off, b->n - off); if (w <= 0) abort(); off += (size_t)w; }
}
static void rl_emit_long(rl_sb *b, long v) { char t[32]; snprintf(t, sizeof t, "%ld", v); rl_puts(b, t); }
static void rl_emit_bool(rl_sb *b, bool v) { rl_puts(b, v ? "true" : "false"); }
static void rl_emit_double(rl_sb *b, double v) {
    char t[40];
    if (isnan(v)) { rl_puts(b, "\"nan\""); return; }
    if (isinf(v)) { rl_puts(b, v > 0 ? "\"inf\"" : "\"-inf\""); return; }
    snprintf(t, sizeof t, "%.17g", v); rl_puts(b, t);
}
static void rl_emit_str(rl_sb *b, const char *s) {
    if (!s) { rl_puts(b, "null"); return; }
    rl_cat(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char t[8];
        if (c == '"' || c == '\\') { t[0] = '\\'; t[1] = (char)c; rl_cat(b, t, 2); }
        else if (c < 0x20 || c == 0x7f) { snprintf(t, sizeof t, "\\u%04x", c); rl_puts(b, t); }
        else rl_cat(b, (const char *)&c, 1);
    }
    rl_cat(b, "\"", 1);
}
int main(void) {
    rl_sb rl_b = {0, 0, 0};
@CALLS@
    return 0;
}
"""


# ----------------------------------------------------------------------------------------------------------
# C++
# ----------------------------------------------------------------------------------------------------------

class Cpp(Target):
    """C++17: int -> ``long``, float -> ``double``, str -> ``std::string``, list -> ``std::vector``, tuple ->
    ``std::tuple``, dict -> ``std::map``, optional -> ``std::optional``."""

    name, ext = "cpp", "cpp"
    LANG, INT_MIN, INT_SUFFIX = "C++", "LONG_MIN", "L"
    renames: ClassVar[dict[str, str]] = {"strlen": "string_length"}
    reserved = C.reserved | {"operator", "class", "new", "delete", "template", "this", "namespace", "private",
                             "public", "protected", "virtual", "friend", "and", "or", "not", "xor"}
    HEADERS = ("#include <algorithm>\n#include <cassert>\n#include <cctype>\n#include <climits>\n"
               "#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <map>\n#include <numeric>\n"
               "#include <optional>\n#include <set>\n#include <sstream>\n#include <string>\n#include <tuple>\n"
               "#include <unordered_map>\n#include <unordered_set>\n#include <vector>\n")
    SCALARS: ClassVar[dict[str, str]] = {"int": "long", "float": "double", "bool": "bool", "str": "std::string"}
    COMPOUNDS: ClassVar[dict[str, str]] = {"list": "std::vector<{0}>", "tuple": "std::tuple<{all}>",
                                           "dict": "std::map<{0}, {1}>", "optional": "std::optional<{0}>"}

    def declaration(self, entry: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = ", ".join(f"{self.type_name(t)} {self.param_name(n)}" for n, t in params)
        return f"{self.type_name(result)} {self.function_name(entry)}({ps})"

    def string(self, v: str) -> str:
        return f"std::string({_c_string(v)}, {len(_utf8(v))})"  # the length keeps an embedded NUL

    def compound(self, v: Any, t: tuple) -> str | None:
        tn = self.type_name(t)
        if t[0] in ("list", "tuple"):
            return f"{tn}{{{', '.join(self.elements(v, t))}}}"
        if t[0] == "dict":
            return f"{tn}{{{', '.join('{' + kv + '}' for kv in self.items(v, t, ', '))}}}"
        if t[0] == "optional":
            return "std::nullopt" if v is None else f"{tn}({self.literal(v, t[1])})"
        return None

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        return (self.HEADERS + "\n" + "\n".join(_comment_lines(doc, "//")) + "\n"
                + self.declaration(entry, params, result) + " {\n")

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        calls = [f"    rl_record({i}, {fn}({args}));" for i, args in enumerate(cases)]
        return _CPP_HARNESS.replace("@CALLS@", "\n".join(calls))


_CPP_HARNESS = r"""
// rewardlang harness: one record per case on fd 3
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include <unistd.h>
namespace rl_harness {
inline void emit(std::string &o, bool v) { o += v ? "true" : "false"; }
inline void emit(std::string &o, long v) { o += std::to_string(v); }
inline void emit(std::string &o, double v) {
    if (std::isnan(v)) { o += "\"nan\""; return; }
    if (std::isinf(v)) { o += v > 0 ? "\"inf\"" : "\"-inf\""; return; }
    char t[40]; std::snprintf(t, sizeof t, "%.17g", v); o += t;
}
inline void emit(std::string &o, const std::string &s) {
    o += '"';
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += (char)c; }
        else if (c < 0x20 || c == 0x7f) { char t[8]; std::snprintf(t, sizeof t, "\\u%04x", c); o += t; }
        else o += (char)c;
    }
    o += '"';
}
template <class T> void emit(std::string &o, const std::vector<T> &v);
template <class T> void emit(std::string &o, const std::optional<T> &v);
template <class K, class V> void emit(std::string &o, const std::map<K, V> &v);
template <class... T> void emit(std::string &o, const std::tuple<T...> &v);
template <class T> void emit(std::string &o, const std::vector<T> &v) {
    o += '[';
    bool first = true;
    for (const auto &x : v) { if (!first) o += ", "; first = false; emit(o, static_cast<T>(x)); }
    o += ']';
}
template <class T> void emit(std::string &o, const std::optional<T> &v) { if (v) emit(o, *v); else o += "null"; }
template <class K, class V> void emit(std::string &o, const std::map<K, V> &v) {
    o += '[';
    bool first = true;
    for (const auto &kv : v) {
        if (!first) o += ", ";
        first = false; o += '['; emit(o, kv.first); o += ", "; emit(o, kv.second); o += ']';
    }
    o += ']';
}
template <class... T> void emit(std::string &o, const std::tuple<T...> &v) {
    o += '[';
    bool first = true;
    std::apply([&](const auto &...x) { ((o += first ? "" : ", ", first = false, emit(o, x)), ...); }, v);
    o += ']';
}
template <class T> void record(int i, const T &v) {
    std::string o = std::to_string(i) + " ";
    emit(o, v);
    o += '\n';
    size_t off = 0;
    while (off < o.size()) { ssize_t w = ::write(3, o.data() + off, o.size() - off); if (w <= 0) std::abort(); off += (size_t)w; }
}
}  // namespace rl_harness
template <class T> static void rl_record(int i, const T &v) { rl_harness::record(i, v); }
int main() {
@CALLS@
    return 0;
}
"""


# ----------------------------------------------------------------------------------------------------------
# Java
# ----------------------------------------------------------------------------------------------------------

def _java_string(s: str) -> str:
    """A Java string literal: printable ASCII as itself, ``\\uXXXX`` (UTF-16 units) for everything else except
    line ends and quotes, which get their letter escapes (a ``\\u000a`` would end the line before lexing)."""
    _utf8(s)
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o < 0x80:
            out.append(f"\\{o:03o}")  # control characters as octal escapes
        elif o > 0xFFFF:
            hi, lo = 0xD800 + ((o - 0x10000) >> 10), 0xDC00 + ((o - 0x10000) & 0x3FF)
            out.append(f"\\u{hi:04x}\\u{lo:04x}")
        else:
            out.append(f"\\u{o:04x}")
    return '"' + "".join(out) + '"'


class Java(Target):
    """Java 17: int -> ``long``/``Long``, float -> ``double``/``Double``, bool -> ``boolean``, str -> ``String``,
    list and tuples of one element type -> ``List<T>``, dict -> ``Map<K, V>``, optional -> ``Optional<T>``;
    tuples of mixed types are skipped (no standard pair type)."""

    name, ext = "java", "java"
    LANG, INT_MIN, INT_SUFFIX = "Java", "Long.MIN_VALUE", "L"
    NAN, INF, NEG_INF = "Double.NaN", "Double.POSITIVE_INFINITY", "Double.NEGATIVE_INFINITY"
    reserved = frozenset({"abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class",
                          "const", "continue", "default", "do", "double", "else", "enum", "extends", "final",
                          "finally", "float", "for", "goto", "if", "implements", "import", "instanceof", "int",
                          "interface", "long", "native", "new", "package", "private", "protected", "public",
                          "return", "short", "static", "strictfp", "super", "switch", "synchronized", "this",
                          "throw", "throws", "transient", "try", "void", "volatile", "while", "var", "record",
                          "yield", "true", "false", "null"})
    SCALARS: ClassVar[dict[str, str]] = {"int": "long", "float": "double", "bool": "boolean", "str": "String"}
    BOXED: ClassVar[dict[str, str]] = {"long": "Long", "double": "Double", "boolean": "Boolean"}
    COMPOUNDS: ClassVar[dict[str, str]] = {"list": "List<{0}>", "tuple": "List<{0}>", "dict": "Map<{0}, {1}>",
                                           "optional": "Optional<{0}>"}
    HOMOGENEOUS_TUPLES = True

    def declaration(self, entry: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = ", ".join(f"{self.type_name(t)} {self.param_name(n)}" for n, t in params)
        return f"public static {self.type_name(result)} {self.function_name(entry)}({ps})"

    def string(self, v: str) -> str:
        return _java_string(v)

    def compound(self, v: Any, t: tuple) -> str | None:
        if t[0] in ("list", "tuple"):
            bt = self.type_name(t[1] if t[0] == "list" else _homogeneous(t), True)
            if not v:
                return f"new ArrayList<{bt}>()"
            return f"new ArrayList<{bt}>(Arrays.<{bt}>asList({', '.join(self.elements(v, t))}))"
        if t[0] == "dict":
            kt, vt = self.type_name(t[1], True), self.type_name(t[2], True)
            if not v:
                return f"new HashMap<{kt}, {vt}>()"
            entries = ", ".join(f"Map.entry({kv})" for kv in self.items(v, t, ", "))
            return f"new HashMap<{kt}, {vt}>(Map.ofEntries({entries}))"
        if t[0] == "optional":
            return (f"Optional.<{self.type_name(t[1], True)}>empty()" if v is None
                    else f"Optional.of({self.literal(v, t[1])})")
        return None

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        # a \u in a Java comment is a Unicode escape even there: double the backslashes of the docstring
        lines = _comment_lines(doc.replace("\\", "\\\\"), "    //")
        return ("import java.util.*;\nimport java.util.function.*;\nimport java.util.stream.*;\n\nclass Problem {\n"
                + "\n".join(lines) + "\n    " + self.declaration(entry, params, result) + " {\n")

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        calls = [f"        rlRecord({i}, Problem.{fn}({args}));" for i, args in enumerate(cases)]
        return _JAVA_HARNESS.replace("@CALLS@", "\n".join(calls))


_JAVA_HARNESS = r"""
// rewardlang harness: one record per case on fd 3
public class Main {
    static java.io.FileOutputStream rlOut;
    static void rlEmit(StringBuilder b, Object v) {
        if (v == null) { b.append("null"); }
        else if (v instanceof Boolean) { b.append(((Boolean) v) ? "true" : "false"); }
        else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) { b.append(v.toString()); }
        else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d)) b.append("\"nan\"");
            else if (Double.isInfinite(d)) b.append(d > 0 ? "\"inf\"" : "\"-inf\"");
            else b.append(Double.toString(d));
        }
        else if (v instanceof String || v instanceof Character) {
            String s = v.toString();
            b.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') { b.append('\\').append(c); }
                else if (c < 0x20 || c == 0x7f) { b.append(String.format("\\u%04x", (int) c)); }
                else b.append(c);
            }
            b.append('"');
        }
        else if (v instanceof java.util.Optional) { rlEmit(b, ((java.util.Optional<?>) v).orElse(null)); }
        else if (v instanceof java.util.Map) {
            b.append('[');
            boolean first = true;
            for (java.util.Map.Entry<?, ?> e : ((java.util.Map<?, ?>) v).entrySet()) {
                if (!first) b.append(", ");
                first = false;
                b.append('['); rlEmit(b, e.getKey()); b.append(", "); rlEmit(b, e.getValue()); b.append(']');
            }
            b.append(']');
        }
        else if (v instanceof java.util.Collection) {
            b.append('[');
            boolean first = true;
            for (Object x : (java.util.Collection<?>) v) { if (!first) b.append(", "); first = false; rlEmit(b, x); }
            b.append(']');
        }
        else { b.append("{\"rl_unsupported\": \"").append(v.getClass().getName().replace("\"", "")).append("\"}"); }
    }
    static void rlRecord(int i, Object v) throws Exception {
        StringBuilder b = new StringBuilder();
        b.append(i).append(' ');
        rlEmit(b, v);
        b.append('\n');
        rlOut.write(b.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        rlOut.flush();
    }
    public static void main(String[] args) throws Exception {
        rlOut = new java.io.FileOutputStream("/proc/self/fd/3");
@CALLS@
    }
}
"""


# ----------------------------------------------------------------------------------------------------------
# JavaScript
# ----------------------------------------------------------------------------------------------------------

class JS(Target):
    """JavaScript (node): numbers for int and float (integers beyond 2**53 skipped), arrays for lists and tuples,
    plain objects for dicts with string keys (other keys skipped), ``null`` for None."""

    name, ext = "js", "js"
    LANG, INT_RANGE, NULL = "JavaScript", (-(2 ** 53), 2 ** 53), "null"  # numbers hold ints exactly to 2**53
    NAN, INF, NEG_INF = "NaN", "Infinity", "-Infinity"
    reserved = frozenset({"break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
                          "do", "else", "export", "extends", "finally", "for", "function", "if", "import", "in",
                          "instanceof", "new", "return", "super", "switch", "this", "throw", "try", "typeof",
                          "var", "void", "while", "with", "yield", "let", "static", "enum", "await",
                          "arguments", "eval"})

    def type_name(self, t: Type) -> str:
        if isinstance(t, tuple):
            if t[0] == "dict" and t[1] != "str":
                raise Unsupported(f"a JavaScript object has string keys ({type_text(t)})")
            for x in t[1:]:
                self.type_name(x)
        return type_text(t)

    def string(self, v: str) -> str:
        return json.dumps(v, ensure_ascii=True)

    def compound(self, v: Any, t: tuple) -> str | None:
        if t[0] in ("list", "tuple"):
            return "[" + ", ".join(self.elements(v, t)) + "]"
        if t[0] == "dict":
            return "{" + ", ".join(self.items(v, t, ": ")) + "}"
        if t[0] == "optional":
            return self.literal(v, t[1])
        return None

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = ", ".join(self.param_name(n) for n, _ in params)
        return "\n".join(_comment_lines(doc, "//")) + f"\nfunction {self.function_name(entry)}({ps}) {{\n"

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        calls = [f"rl_record({i}, () => {fn}({args}));" for i, args in enumerate(cases)]
        return _JS_HARNESS.replace("@CALLS@", "\n".join(calls))


_JS_HARNESS = r"""
// rewardlang harness: one record per case on fd 3
const rl_fs = require("fs");
function rl_json(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") {
    if (Number.isNaN(v)) return '"nan"';
    if (!Number.isFinite(v)) return v > 0 ? '"inf"' : '"-inf"';
    return String(v);
  }
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(rl_json).join(", ") + "]";
  if (v instanceof Map) return "[" + Array.from(v.entries()).map(([k, x]) => "[" + rl_json(k) + ", " + rl_json(x) + "]").join(", ") + "]";
  if (typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype)
    return "[" + Object.entries(v).map(([k, x]) => "[" + rl_json(k) + ", " + rl_json(x) + "]").join(", ") + "]";
  return '{"rl_unsupported": ' + JSON.stringify(typeof v) + "}";
}
function rl_record(i, f) {
  const line = i + " " + rl_json(f()) + "\n";
  rl_fs.writeSync(3, line);
}
@CALLS@
"""


# ----------------------------------------------------------------------------------------------------------
# PHP
# ----------------------------------------------------------------------------------------------------------

def _php_string(s: str) -> str:
    """A double-quoted PHP literal: ``"``, ``\\``, ``$`` escaped, ASCII controls as ``\\xHH`` (always two
    digits), other characters as themselves (the file is UTF-8)."""
    _utf8(s)
    out = []
    for c in s:
        o = ord(c)
        if c in '"\\$':
            out.append("\\" + c)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


class PHP(Target):
    """PHP 8: int, float, bool, string, null; lists and tuples as arrays, dicts as associative arrays (the
    harness is told the type, so a list is emitted in iteration order and a dict as key/value pairs)."""

    name, ext = "php", "php"
    LANG, INT_MIN, NULL = "PHP", "PHP_INT_MIN", "null"
    NAN, INF, NEG_INF = "NAN", "INF", "-INF"
    renames: ClassVar[dict[str, str]] = {"strlen": "string_length"}

    def type_name(self, t: Type) -> str:
        if isinstance(t, tuple) and t[0] == "dict" and t[1] not in ("int", "str"):
            raise Unsupported(f"PHP array keys are ints or strings ({type_text(t)})")
        if isinstance(t, tuple):
            for x in t[1:]:
                self.type_name(x)
        return type_text(t)

    def string(self, v: str) -> str:
        return _php_string(v)

    def compound(self, v: Any, t: tuple) -> str | None:
        if t[0] in ("list", "tuple"):
            return "[" + ", ".join(self.elements(v, t)) + "]"
        if t[0] == "dict":
            if t[1] == "str" and any(re.fullmatch(r"-?[1-9][0-9]*|0", k) for k in v):
                raise Unsupported("a string key PHP would turn into an integer")
            return "[" + ", ".join(self.items(v, t, " => ")) + "]"
        if t[0] == "optional":
            return self.literal(v, t[1])
        return None

    def type_tree(self, t: Type) -> str:
        """The type as a PHP value for the harness's emitter."""
        if isinstance(t, str):
            return f"'{t}'"
        return "[" + ", ".join([f"'{t[0]}'"] + [self.type_tree(x) for x in t[1:]]) + "]"

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = ", ".join("$" + n for n, _ in params)
        lines = _comment_lines(doc.replace("?>", "? >"), "//")  # `?>` ends PHP mode even in a // comment
        return "<?php\n" + "\n".join(lines) + f"\nfunction {self.function_name(entry)}({ps}) {{\n"

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        tree = self.type_tree(result)
        calls = [f"rl_record({i}, {fn}({args}), {tree});" for i, args in enumerate(cases)]
        return _PHP_HARNESS.replace("@CALLS@", "\n".join(calls))


_PHP_HARNESS = r"""
// rewardlang harness: one record per case on fd 3
function rl_emit($v, $t) {
    if ($v === null) return "null";
    if (is_bool($v)) return $v ? "true" : "false";
    if (is_int($v)) return (string)$v;
    if (is_float($v)) {
        if (is_nan($v)) return '"nan"';
        if (is_infinite($v)) return $v > 0 ? '"inf"' : '"-inf"';
        return json_encode($v, JSON_PRESERVE_ZERO_FRACTION);
    }
    if (is_string($v)) return json_encode($v, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    if (is_array($v)) {
        $kind = is_array($t) ? $t[0] : $t;
        if ($kind === 'optional') return rl_emit($v, $t[1]);
        $parts = [];
        if ($kind === 'dict') {
            foreach ($v as $k => $x) {
                $key = $t[1] === 'str' ? (string)$k : $k;
                $parts[] = "[" . rl_emit($key, $t[1]) . ", " . rl_emit($x, $t[2]) . "]";
            }
        } else {
            $i = 0;
            foreach ($v as $x) {
                $et = $kind === 'list' ? $t[1] : ($kind === 'tuple' && isset($t[$i + 1]) ? $t[$i + 1] : 'none');
                $parts[] = rl_emit($x, $et);
                $i++;
            }
        }
        return "[" . implode(", ", $parts) . "]";
    }
    return '{"rl_unsupported": "' . gettype($v) . '"}';
}
$rl_out = fopen('php://fd/3', 'w');
function rl_record($i, $v, $t) {
    global $rl_out;
    fwrite($rl_out, $i . " " . rl_emit($v, $t) . "\n");
    fflush($rl_out);
}
@CALLS@
"""


# ----------------------------------------------------------------------------------------------------------
# Bash
# ----------------------------------------------------------------------------------------------------------

class Bash(Target):
    """Bash 5: arguments are words (int, float, bool as ``true``/``false``, str, lists of those as one
    space-separated word); the function prints its result, which the harness captures (trailing newlines
    stripped, as ``$(...)`` does) and records as a JSON string. The expected value is the result's text: int as
    digits, bool as ``true``/``false``, a list or tuple as its elements joined by single spaces. Floats,
    optionals, dicts and nested lists as results are skipped; list elements holding whitespace are skipped."""

    name, ext = "sh", "sh"
    _WORD = ("int", "float", "bool", "str")

    def type_name(self, t: Type, result: bool = False) -> str:
        if t in ("int", "bool", "str") or (t == "float" and not result):
            return type_text(t)
        if isinstance(t, tuple) and t[0] in ("list", "tuple") and \
                all(x in (("int", "str") if result else self._WORD) for x in t[1:]):
            return type_text(t)
        raise Unsupported(f"Bash has no sound text form of {'a result' if result else 'a parameter'} of type "
                          f"{type_text(t)}")

    def check_signature(self, params: list[tuple[str, Type]], result: Type) -> None:
        for _, t in params:
            self.type_name(t)
        self.type_name(result, result=True)

    def text(self, v: Any, t: Type) -> str:
        """The text form of a value (what the function prints, what an argument word holds)."""
        if t == "bool":
            return "true" if v else "false"
        if t == "int":
            return str(v)
        if t == "float":
            if not math.isfinite(v):
                raise Unsupported("a non-finite float")
            return _float_text(v)
        if t == "str":
            if "\0" in v:
                raise Unsupported("a string holding NUL")
            return v
        if isinstance(t, tuple) and t[0] in ("list", "tuple"):
            types = [t[1]] * len(v) if t[0] == "list" else list(t[1:])
            words = [self.text(x, y) for x, y in zip(v, types)]
            if any(not w or re.search(r"\s", w) for w in words):
                raise Unsupported("a list element holds whitespace or is empty (Bash lists are space-separated)")
            return " ".join(words)
        raise Unsupported(f"Bash has no text form of {type_text(t)}")

    def literal(self, v: Any, t: Type) -> str:
        return "'" + self.text(v, t).replace("'", "'\\''") + "'"

    def call_args(self, args: tuple[Any, ...], params: list[tuple[str, Type]]) -> str:
        return " ".join(self.literal(v, t) for v, (_, t) in zip(args, params))

    def case_type(self, t: Type) -> str:
        return "str"

    def expected(self, v: Any, t: Type) -> Any:
        s = self.text(v, t)
        if s.endswith("\n"):
            raise Unsupported("a result ending with a newline ($(...) strips it)")
        return s

    _DESCRIBE: ClassVar[dict[str, str]] = {"int": "an integer", "float": "a floating point number", "bool": "true or false",
                 "str": "a string"}

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        lines = ["#!/bin/bash"] + _comment_lines(doc, "#")
        for i, (n, t) in enumerate(params, 1):
            what = self._DESCRIBE.get(t) if isinstance(t, str) else "a space-separated list"
            lines.append(f"#\n# ${i} ({n}) is {what}")
        lines.append("# Print the result" + (" as space-separated words." if _is_seq(result) else "."))
        return "\n".join(lines) + f"\n{self.function_name(entry)}() {{\n"

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        calls = [f"rl_out=$({fn} {args} 3>&-); rl_record {i} \"$rl_out\"" for i, args in enumerate(cases)]
        return _SH_HARNESS.replace("@CALLS@", "\n".join(calls))


_SH_HARNESS = r"""
# rewardlang harness: one record per case on fd 3 (the function runs with fd 3 closed)
rl_json() {
    local LC_ALL=C s=$1 o= c i
    s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/\\r}
    if [[ $s == *[[:cntrl:]]* ]]; then
        for ((i = 0; i < ${#s}; i++)); do
            c=${s:i:1}
            if [[ $c == [[:cntrl:]] ]]; then printf -v c '\\u%04x' "'$c"; fi
            o+=$c
        done
        s=$o
    fi
    REPLY="\"$s\""
}
rl_record() { rl_json "$2"; printf '%s %s\n' "$1" "$REPLY" >&3; }
@CALLS@
"""


# ----------------------------------------------------------------------------------------------------------
# Go
# ----------------------------------------------------------------------------------------------------------

def _go_string(s: str) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif 0xD800 <= o <= 0xDFFF:
            raise Unsupported("a lone surrogate in a string")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


class Go(Target):
    """Go 1.19: int -> ``int`` (64-bit), float -> ``float64``, str -> ``string``, list and tuples of one element
    type -> slices, dict -> ``map[K]V``. Optional, None and tuples of mixed types are skipped."""

    name, ext = "go", "go"
    LANG, INT_MIN = "Go", "math.MinInt64"
    NAN, INF, NEG_INF = "math.NaN()", "math.Inf(1)", "math.Inf(-1)"
    reserved = frozenset({"break", "case", "chan", "const", "continue", "default", "defer", "else",
                          "fallthrough", "for", "func", "go", "goto", "if", "import", "interface", "map",
                          "package", "range", "return", "select", "struct", "switch", "type", "var", "string",
                          "int", "float64", "bool", "byte", "rune", "len", "cap", "append", "make", "new",
                          "copy", "delete", "panic", "print", "println", "true", "false", "nil", "error",
                          "fmt", "math", "os", "reflect", "sort", "strconv", "strings", "unicode", "json"})
    IMPORTS = ("encoding/json", "fmt", "math", "os", "reflect", "sort", "strconv", "strings", "unicode")
    USES = ("json.Marshal", "fmt.Sprint", "math.Abs", "os.Exit", "reflect.ValueOf", "sort.Ints", "strconv.Itoa",
            "strings.Split", "unicode.IsUpper")
    SCALARS: ClassVar[dict[str, str]] = {"int": "int", "float": "float64", "bool": "bool", "str": "string"}
    COMPOUNDS: ClassVar[dict[str, str]] = {"list": "[]{0}", "tuple": "[]{0}", "dict": "map[{0}]{1}"}
    HOMOGENEOUS_TUPLES = True

    def declaration(self, entry: str, params: list[tuple[str, Type]], result: Type) -> str:
        ps = ", ".join(f"{self.param_name(n)} {self.type_name(t)}" for n, t in params)
        return f"func {self.function_name(entry)}({ps}) {self.type_name(result)}"

    def string(self, v: str) -> str:
        return _go_string(v)

    def compound(self, v: Any, t: tuple) -> str | None:
        if t[0] in ("list", "tuple"):
            return self.type_name(t) + "{" + ", ".join(self.elements(v, t)) + "}"
        if t[0] == "dict":
            return self.type_name(t) + "{" + ", ".join(self.items(v, t, ": ")) + "}"
        return None

    def prompt(self, entry: str, doc: str, params: list[tuple[str, Type]], result: Type) -> str:
        imports = "\n".join(f'\t"{m}"' for m in self.IMPORTS)
        return (f"package main\n\nimport (\n{imports}\n)\n\n" + "\n".join(_comment_lines(doc, "//")) + "\n"
                + self.declaration(entry, params, result) + " {\n")

    def harness(self, entry: str, params: list[tuple[str, Type]], result: Type, cases: list[tuple]) -> str:
        fn = self.function_name(entry)
        uses = "\n".join(f"var _ = {u}" for u in self.USES)
        calls = [f"\trlRecord({i}, {fn}({args}))" for i, args in enumerate(cases)]
        return _GO_HARNESS.replace("@USES@", uses).replace("@CALLS@", "\n".join(calls))


_GO_HARNESS = r"""
// rewardlang harness: one record per case on fd 3
@USES@

var rlOut = os.NewFile(3, "obs")

func rlEmit(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("null")
	case reflect.Bool:
		if v.Bool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) {
			b.WriteString("\"nan\"")
		} else if math.IsInf(f, 1) {
			b.WriteString("\"inf\"")
		} else if math.IsInf(f, -1) {
			b.WriteString("\"-inf\"")
		} else {
			b.WriteString(strconv.FormatFloat(f, 'g', 17, 64))
		}
	case reflect.String:
		j, _ := json.Marshal(v.String())
		b.Write(j)
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			rlEmit(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.Map:
		b.WriteByte('[')
		it := v.MapRange()
		first := true
		for it.Next() {
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteByte('[')
			rlEmit(b, it.Key())
			b.WriteString(", ")
			rlEmit(b, it.Value())
			b.WriteByte(']')
		}
		b.WriteByte(']')
	case reflect.Interface, reflect.Ptr:
		if v.IsNil() {
			b.WriteString("null")
		} else {
			rlEmit(b, v.Elem())
		}
	default:
		b.WriteString("{\"rl_unsupported\": \"" + v.Kind().String() + "\"}")
	}
}

func rlRecord(i int, v interface{}) {
	var b strings.Builder
	b.WriteString(strconv.Itoa(i))
	b.WriteByte(' ')
	rlEmit(&b, reflect.ValueOf(v))
	b.WriteByte('\n')
	if _, err := rlOut.WriteString(b.String()); err != nil {
		os.Exit(3)
	}
}

func main() {
@CALLS@
}
"""


TARGETS: dict[str, Target] = {t.name: t for t in (C(), Cpp(), Java(), JS(), PHP(), Bash(), Go())}
#: every language ``rewardlang data humaneval --lang`` accepts (``python``: the original problems)
LANGUAGES = ("python",) + tuple(TARGETS)
