"""What the language server knows about one open spec: its diagnostics, definitions, and answers at a position.

Everything here is protocol-free (positions are 0-based lines and UTF-16 columns, as LSP counts them; ranges are
``((line, character), (line, character))``), so it is tested directly as well as through the server.

The diagnostics are the checker's own, on the editor's text (imports read from the editor's unsaved buffers
when they are open): the same codes, messages, ranges and hints ``rewardlang check`` prints. Examples are not
run as you type (they may run programs in the sandbox); ``rewardlang check`` runs them.

    >>> from rewardlang.lsp.analysis import analyse
    >>> a = analyse("let n = lenn(completion)\\ncomponent c = n\\n", "x.reward", {})
    >>> [(d.code, d.range) for d in a.diagnostics]
    [('E102', ((0, 8), (0, 12)))]
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rewardlang import syntax as S
from rewardlang.checker import (AGGREGATES, PREFERENCE_SETTINGS, STAGE_SHORTHANDS, STATISTICS, Checker, ModuleEnv,
                                canonical_path, strip_bom, unique_diagnostics)
from rewardlang.diagnostics import CODES, Diagnostic
from rewardlang.highlight import scan
from rewardlang.parser import STATEMENT_KEYWORDS, ParseFailure, deep_recursion
from rewardlang.signature import Signature
from rewardlang.specfiles import ImportRefused, import_roots, inside, read_spec_file, resolve_import

__all__ = ["Analysis", "LspDiagnostic", "Definition", "LineIndex", "analyse", "Completion", "Symbol", "semantic_tokens",
           "LANGUAGE_FUNCTIONS", "TOKENS_FORMS", "format_document"]

Pos = tuple[int, int]
Range = tuple[Pos, Pos]

#: the language's own functions (handled by the checker, not the registry): signature and meaning, as in
#: docs/language.md, "Language functions"
LANGUAGE_FUNCTIONS: dict[str, tuple[str, str]] = {
    "len": ("len(x) -> number", "length of text, a list or spans"),
    "min": ("min(a, b, ...) -> number", "smallest of numbers, of a literal list, or of a comprehension; `none` if "
                                        "any is `none`. In an advantage stage a bare `min` is the aggregate"),
    "max": ("max(a, b, ...) -> number", "largest; as `min`"),
    "clip": ("clip(x, lo, hi) -> number", "`min(max(x, lo), hi)`. In a stage, `clip(lo, hi)` clips `x`"),
    "sum": ("sum(a, b, ...) -> number", "sum of numbers, a literal list or a comprehension; 0 over nothing"),
    "mean": ("mean(a, b, ...) -> number", "mean, as `sum` (0 over nothing). In a stage a bare `mean` is the "
                                          "aggregate"),
    "std": ("std(a, b, ...) -> number", "population standard deviation; in a stage the aggregate"),
    "any": ("any(a, b, ...) -> bool", "true if any bool holds (`none` counts as false); false over nothing"),
    "all": ("all(a, b, ...) -> bool", "true if every bool holds (`none` counts as false); true over nothing"),
    "step": ("step(x, <= b: v, ..., else: v) -> number", "thresholds: the first arm that holds"),
    "piecewise": ("piecewise(x, x0 -> y0, x1 -> y1, ...) -> number",
                  "piecewise-linear map, constant beyond the ends"),
    "number": ("number(b) -> number", "a bool as 0 or 1 (a number stays a number)"),
    "text": ("text(x) -> text", "a number (`3`, `0.25`) or bool (`true`, `false`) as text"),
    "abs": ("abs(x) -> number", "absolute value"),
    "log": ("log(x) -> number", "natural logarithm; `x <= 0` is an error of the sample"),
    "exp": ("exp(x) -> number", "e to the x; overflow is an error"),
    "tanh": ("tanh(x) -> number", "hyperbolic tangent"),
    "sqrt": ("sqrt(x) -> number", "square root; `x < 0` is an error"),
    "floor": ("floor(x) -> number", "round down"),
    "ceil": ("ceil(x) -> number", "round up"),
    "round": ("round(x, digits=0) -> number", "round half to even (NumPy), `digits` a constant"),
    "sigmoid": ("sigmoid(x) -> number", "`1 / (1 + exp(-x))`"),
    "linear": ("linear(a -> b, steps=N, start=0) -> number",
               "schedule over the training step: `a + (b - a) * t`, `t = clip((step - start) / N, 0, 1)`"),
    "cosine": ("cosine(a -> b, steps=N, start=0) -> number", "schedule: `a + (b - a) * (1 - cos(pi * t)) / 2`"),
}

#: the forms of a component's `tokens` clause (docs/language.md, Token attribution): label, snippet, meaning
TOKENS_FORMS: list[tuple[str, str, str]] = [
    ("last", "last", "the whole value on the last token of the completion (a sequence reward)"),
    ("over", "over(${1:code})", "the value on every token of a text cut out of the completion"),
    ("spans", "spans", "each span of the `spans` clause places its value on its tokens"),
    ("spans(uncovered=…)", "spans(uncovered=${1:0})", "as `spans`; tokens no span covers get `uncovered`"),
    ("ends", "ends", "each span's value on the last token of the span"),
    ("split", "split(${1:code}, at=${2:pos}, before=${3:1}, after=${4:-1}, edges=${5:0})",
     "`before` on the tokens of TEXT before position `at`, `after` from it on, `edges` on the fences"),
]

EXPRESSION_KEYWORDS = ("if", "else", "and", "or", "not", "for", "in", "true", "false", "none")
COMPONENT_CLAUSES = ("on_error", "timeout", "spans", "tokens")
#: an audit's clauses (on its head line: `every N steps`, `window N steps`, `margin X`; below it: the others)
AUDIT_CLAUSES = (("every", "every ${1:10} steps", "how often it is scored: step 1, every N steps and the last"),
                 ("window", "window ${1:20} steps", "the alarm's window: the reward and the audit over these steps"),
                 ("margin", "margin ${1:0.1}", "the reward's rise over the window that fires the alarm"),
                 ("on_error", "on_error ${1:0}", "what a failing sample scores"),
                 ("timeout", "timeout ${1:10}", "seconds per sample for the functions it calls"))
TYPES = ("text", "code", "number", "bool", "group", "list[text]", "list[code]", "list[number]")
#: the always-present inputs of every spec
IMPLICIT_INPUTS = ("completion", "prompt")

_NAME_AT = {
    S.Let: r"let\s+", S.Component: r"component\s+", S.Param: r"param\s+", S.Input: r"input\s+",
    S.Audit: r"audit\s+",
    S.SpecStmt: r"spec\s+", S.Weight: r"",
}


# ---------------------------------------------------------------------- positions


class LineIndex:
    """Converts between 0-based character offsets of a text and LSP positions (line, UTF-16 column)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def _line_end(self, line: int) -> int:
        return self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.text)

    def offset(self, line: int, character: int) -> int:
        """The offset of an LSP position (clamped to the text)."""
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        start, end = self.starts[line], self._line_end(line)
        seg = self.text[start:end]
        if seg.isascii():
            return start + min(max(character, 0), len(seg))
        units = 0
        for i, ch in enumerate(seg):
            if units >= character:
                return start + i
            units += 2 if ord(ch) > 0xFFFF else 1  # a character outside the BMP is two UTF-16 units
        return end

    def position(self, offset: int) -> Pos:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        seg = self.text[self.starts[line]:offset]
        return line, len(seg) + sum(1 for c in seg if ord(c) > 0xFFFF)

    def linecol(self, line: int, column: int) -> int:
        """The offset of a 1-based (line, column) as the parser counts them (code points)."""
        if line < 1:
            return 0
        if line > len(self.starts):
            return len(self.text)
        start = self.starts[line - 1]
        return min(start + max(column - 1, 0), self._line_end(line - 1))


# ---------------------------------------------------------------------- results


@dataclass
class LspDiagnostic:
    """A checker diagnostic placed in the open document."""

    code: str
    severity: str  # "error" | "warning"
    message: str   # the message, then the hint and notes as the CLI prints them
    range: Range
    related: list[tuple[str, Range, str]] = field(default_factory=list)  # (file, range, message)


@dataclass
class Definition:
    """A name a spec defines: an input, param, let or component (in the spec or a file it imports)."""

    kind: str
    name: str
    file: str
    stmt: Any
    name_range: Range | None  # in its own file (None when that file's text is not known)
    full_range: Range | None
    type: str | None = None
    detail: str = ""


@dataclass
class Completion:
    label: str
    kind: str  # function | variable | constant | field | keyword | module | property | value | snippet | class
    detail: str = ""
    documentation: str = ""
    insert_text: str | None = None
    snippet: bool = False
    sort: str = "5"


@dataclass
class Symbol:
    name: str
    kind: str  # module | variable | constant | field | function | property | event (an audit) | namespace | key |
    # operator | object (an example)
    detail: str
    range: Range
    selection: Range
    children: list["Symbol"] = field(default_factory=list)


# ---------------------------------------------------------------------- the checker, recording what it learns


class _RecordingChecker(Checker):
    """The checker, keeping each component's checked form (its range after constants fold) for hover."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.component_irs: dict[str, Any] = {}
        self.audit_irs: dict[str, Any] = {}

    def check_component(self, stmt: S.Component, env: ModuleEnv, what: str = "component") -> Any:
        c = super().check_component(stmt, env, what)
        if c is not None and what == "component":
            self.component_irs[stmt.name] = c
        return c

    def check_audit(self, stmt: S.Audit, env: ModuleEnv) -> Any:
        a = super().check_audit(stmt, env)
        if a is not None:
            self.audit_irs[stmt.name] = a
        return a


def _walk(node: Any) -> Iterator[Any]:
    """Every syntax node below ``node`` (itself first), depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, S.Node):
            yield n
            kids = [getattr(n, f.name) for f in dataclasses.fields(n) if f.name != "loc"]
        elif isinstance(n, (list, tuple)):
            kids = list(n)
        else:
            continue
        stack.extend(reversed(kids))


def _contains(loc: S.Loc, offset: int) -> bool:
    return loc.start <= offset <= loc.end and loc.end > loc.start


def _path_to(stmt: Any, offset: int) -> list[Any]:
    """The chain of nodes from ``stmt`` down to the innermost one whose range holds ``offset``."""
    path = [stmt]
    node = stmt
    while True:
        best = None
        for f in dataclasses.fields(node):
            if f.name == "loc":
                continue
            for k in _flatten(getattr(node, f.name)):
                if isinstance(k, S.Node) and _contains(k.loc, offset):
                    if best is None or (k.loc.end - k.loc.start) < (best.loc.end - best.loc.start):
                        best = k
        if best is None:
            return path
        path.append(best)
        node = best


def _flatten(v: Any) -> Iterator[Any]:
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flatten(x)
    else:
        yield v


def _usage(sig: Signature) -> str:
    return sig.usage()


def _option_lines(sig: Signature) -> list[str]:
    out = []
    if sig.params is None:
        return out
    for name, f in sig.params.model_fields.items():
        default = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
        ann = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
        line = f"- `{name}`: `{ann}` = `{default!r}`"
        if f.description:
            line += f" — {f.description}"
        out.append(line)
    return out


def function_markdown(name: str, sigs: dict[str, Signature]) -> str | None:
    """Hover text of a function: its signature, its doc and options (registry), or the language's own entry."""
    sig = sigs.get(name)
    if sig is not None:
        parts = [f"```reward\n{_usage(sig)}\n```"]
        if sig.range is not None:
            parts.append(f"range: [{sig.range[0]:g}, {sig.range[1]:g}]")
        if sig.doc:
            parts.append(sig.doc)
        opts = _option_lines(sig)
        if opts:
            parts.append("options:\n" + "\n".join(opts))
        return "\n\n".join(parts)
    if name in LANGUAGE_FUNCTIONS:
        usage, doc = LANGUAGE_FUNCTIONS[name]
        return f"```reward\n{usage}\n```\n\n{doc} (a language function)"
    return None


# ---------------------------------------------------------------------- the analysis


class Analysis:
    """One run of the checker over an open document, and the answers derived from it."""

    def __init__(self, file: str, text: str, sigs: dict[str, Signature], ch: _RecordingChecker | None,
                 diags: list[Diagnostic], sources: dict[str, str]) -> None:
        self.file = file
        self.text = text
        self.bom = 1 if text.startswith("\ufeff") else 0
        self.index = LineIndex(text)
        self.sigs = sigs
        self.ch = ch
        self.raw_diagnostics = diags
        self.sources = sources
        self._indexes: dict[str, LineIndex] = {file: self.index}
        entry = ch.imported_files.get(file) if ch is not None else None
        self.module: S.Module | None = entry[0] if entry else None
        self.env: ModuleEnv | None = entry[1] if entry else None
        self.definitions: list[Definition] = self._definitions() if ch is not None else []
        self.diagnostics = [self._place(d) for d in diags]

    # ---- positions
    def index_of(self, file: str) -> LineIndex | None:
        if file not in self._indexes:
            src = self.sources.get(file)
            if src is None:
                return None
            self._indexes[file] = LineIndex(src)
        return self._indexes[file]

    def range_of(self, loc: S.Loc, file: str | None = None) -> Range | None:
        """A syntax location as an LSP range in its file (by line and column: some diagnostics carry no offsets)."""
        idx = self.index_of(file or loc.file)
        if idx is None:
            return None
        bom = self.bom if (file or loc.file) == self.file else 0
        a = idx.linecol(loc.line, loc.column + (bom if loc.line == 1 else 0))
        b = idx.linecol(loc.end_line, loc.end_column + (bom if loc.end_line == 1 else 0))
        return idx.position(a), idx.position(max(a, b))

    def offset_range(self, start: int, end: int, file: str | None = None) -> Range | None:
        idx = self.index_of(file or self.file)
        if idx is None:
            return None
        bom = self.bom if (file or self.file) == self.file else 0
        return idx.position(start + bom), idx.position(end + bom)

    def offset_at(self, line: int, character: int) -> int:
        """A document position as an offset into the parsed source (BOM left out)."""
        return max(0, self.index.offset(line, character) - self.bom)

    # ---- diagnostics
    def _place(self, d: Diagnostic) -> LspDiagnostic:
        text = d.message
        if d.hint:
            text += f"\nhint: {d.hint}"
        for n in d.notes:
            text += f"\nnote: {n}"
        if d.loc is None or d.loc.file == self.file:
            rng = self.range_of(d.loc) if d.loc is not None else None
            return LspDiagnostic(d.code, d.severity, text, rng or ((0, 0), (0, 0)))
        # in an imported file: shown at the import that brings the file in, pointing to the place itself
        rng = self._import_range_for(d.loc.file) or ((0, 0), (0, 0))
        where = f"{d.loc.file}:{d.loc.line}:{d.loc.column}"
        related = []
        there = self.range_of(d.loc)
        if there is not None:
            related.append((d.loc.file, there, d.message))
        return LspDiagnostic(d.code, d.severity, f"in {where}: {text}", rng, related)

    def _import_range_for(self, file: str) -> Range | None:
        if self.module is None:
            return None
        imports = [s for s in self.module.body if isinstance(s, S.Import)]
        want = canonical_path(file)
        for s in imports:
            path = self.resolve_path(s.path)
            if path is not None and canonical_path(path) == want:
                return self.range_of(s.loc)
        return self.range_of(imports[0].loc) if imports else None  # imported at a further remove

    def resolve_path(self, path: str) -> str | None:
        """An import path as the checker resolves it (relative to the importing spec's directory, then the search
        path); None for one the checker refuses (outside the spec's folder and the search path, not a spec)."""
        search = self.ch.import_search if self.ch is not None else None
        roots = self.ch.import_roots if self.ch is not None else import_roots(self.file, search)
        try:
            return resolve_import(path, self.file, roots, search)
        except ImportRefused:
            return None

    # ---- definitions
    def _name_range(self, stmt: Any, name: str, file: str) -> Range | None:
        src = self.sources.get(file)
        if src is None:
            return None
        prefix = _NAME_AT.get(type(stmt))
        if prefix is None:
            return self.range_of(stmt.loc, file)
        m = re.compile(prefix + re.escape(name) + r"\b").match(src, stmt.loc.start)
        if m is None:
            return self.range_of(stmt.loc, file)
        return self.offset_range(m.end() - len(name), m.end(), file)

    def _definitions(self) -> list[Definition]:
        ch = self.ch
        assert ch is not None
        out: list[Definition] = []
        seen: set[int] = set()
        for module, env in ch.imported_files.values():
            for stmt in module.body:
                if id(stmt) in seen or not isinstance(stmt, (S.Input, S.Param, S.Let, S.Component, S.Audit)):
                    continue
                seen.add(id(stmt))
                file = stmt.loc.file
                d = Definition(type(stmt).__name__.lower(), stmt.name, file, stmt,
                               self._name_range(stmt, stmt.name, file), self.range_of(stmt.loc, file))
                self._describe(d, env)
                out.append(d)
        return out

    def _describe(self, d: Definition, env: ModuleEnv) -> None:
        ch = self.ch
        assert ch is not None
        stmt = d.stmt
        src = self.sources.get(d.file, "")
        where = f"{Path(d.file).name}:{stmt.loc.line}"
        if isinstance(stmt, S.Input):
            entry = ch.inputs.get(stmt.name)
            d.type = str(entry[1]) if entry else stmt.type.text
            column = stmt.column or stmt.name
            d.detail = f"```reward\ninput {stmt.name}: {d.type}\n```\n\nread from the column `{column}` ({where})"
        elif isinstance(stmt, S.Param):
            entry = ch.params.get(stmt.name)
            d.type = str(entry[2]) if entry else (stmt.type.text if stmt.type else None)
            value = entry[1] if entry is not None and entry[0] is stmt else None
            head = f"param {stmt.name}: {d.type} = {src[stmt.default.loc.start:stmt.default.loc.end]}"
            d.detail = f"```reward\n{head}\n```\n\n" + (f"{stmt.doc}\n\n" if stmt.doc else "") + \
                (f"value: `{value!r}` ({where}; `--set {stmt.name}=...` overrides it)" if value is not None
                 else where)
        elif isinstance(stmt, S.Let):
            typ = None
            for key, v in env.let_values.items():
                if key.startswith(f"{env.file}::{stmt.name}::"):
                    typ = str(v.type)
                    break
            d.type = typ
            value = " ".join(src[stmt.value.loc.start:stmt.value.loc.end].split())
            if len(value) > 200:
                value = value[:197] + "..."
            d.detail = f"```reward\nlet {stmt.name}: {typ or '?'}\n```\n\n`= {value}`\n\n({where})"
        elif isinstance(stmt, S.Component):
            c = ch.component_irs.get(stmt.name)
            d.type = "number"
            if c is not None and c.range is not None:
                rng = f"[{c.range[0]:g}, {c.range[1]:g}]"
            elif stmt.range is not None:
                lo, hi = stmt.range
                rng = f"[{src[lo.loc.start:lo.loc.end]}, {src[hi.loc.start:hi.loc.end]}]"
            else:
                rng = "not declared"
            lines = [f"```reward\ncomponent {stmt.name}: number\n```", f"declared range: {rng}"]
            w = ch.weights.get(stmt.name)
            if w is not None:
                wsrc = self.sources.get(w.loc.file, "")
                lines.append(f"weight: `{' '.join(wsrc[w.value.loc.start:w.value.loc.end].split())}`")
            else:
                lines.append("weight: 1 (not set)")
            if c is not None:
                lines.append("on error: " + ("mask the sample (none)" if c.on_error is None else f"{c.on_error:g}"))
                if c.timeout is not None:
                    lines.append(f"timeout: {c.timeout:g} s")
                if c.tokens is not None:
                    lines.append(f"tokens: {c.tokens.get('mode')}")
            lines.append(f"({where})")
            d.detail = "\n\n".join(lines)
        elif isinstance(stmt, S.Audit):
            a = ch.audit_irs.get(stmt.name)
            d.type = "number"
            lines = [f"```reward\naudit {stmt.name}: number\n```",
                     "an audit: a second verifier scored on the policy's samples while it trains; never part of the "
                     "reward, the advantage, masks or preference pairs"]
            if a is not None:
                what = f"the statistic `{a.statistic}`" + (
                    " (" + ", ".join(f"{k}={v:g}" for k, v in a.options.items()) + ")" if a.options else "") \
                    if a.statistic else f"`{a.text}`"
                lines.append(f"{what}: audited at step 1, every {a.every} step{'s' if a.every != 1 else ''} and at "
                             f"the last step; alarm over {a.window} steps when the reward rises by {a.margin:g}")
                if a.value is not None and a.value.range is not None:
                    lines.append(f"declared range: [{a.value.range[0]:g}, {a.value.range[1]:g}]")
            lines.append(f"({where})")
            d.detail = "\n\n".join(lines)

    def definition_of(self, stmt: Any) -> Definition | None:
        for d in self.definitions:
            if d.stmt is stmt:
                return d
        return None

    def _by(self, kind: str, name: str) -> Definition | None:
        ch = self.ch
        if ch is None:
            return None
        stmt = None
        if kind == "let" and self.env is not None and name in self.env.lets:
            stmt = self.env.lets[name][0]
        elif kind == "component" and name in ch.components:
            stmt = ch.components[name][0]
        elif kind == "audit" and name in ch.audits:
            stmt = ch.audits[name][0]
        elif kind == "param" and name in ch.params:
            stmt = ch.params[name][0]
        elif kind == "input" and name in ch.inputs:
            stmt = ch.inputs[name][0]
        return self.definition_of(stmt) if stmt is not None else None

    def resolve(self, name: str, context: Any = None) -> Definition | None:
        """What ``name`` refers to, as the checker resolves it in the statement ``context``."""
        order = ("let", "param", "input", "component", "audit")
        if isinstance(context, (S.Reward, S.Advantage, S.Weight, S.Section)):
            order = ("component", "param", "let", "input", "audit")
        for kind in order:
            d = self._by(kind, name)
            if d is not None:
                return d
        return None

    # ---- at a position
    def statement_at(self, offset: int) -> Any:
        if self.module is None:
            return None
        for stmt in self.module.body:
            if stmt.loc.start <= offset <= stmt.loc.end:
                return stmt
        return None

    def hover(self, line: int, character: int) -> tuple[str, Range] | None:
        """Markdown for the thing at a position, and its range."""
        off = self.offset_at(line, character)
        stmt = self.statement_at(off)
        if stmt is None:
            return None
        # the name a statement defines
        d = self.definition_of(stmt)
        if d is not None and d.name_range is not None and d.file == self.file:
            a, b = (self.offset_at(*d.name_range[0]), self.offset_at(*d.name_range[1]))
            if a <= off <= b:
                return d.detail, d.name_range
        if isinstance(stmt, S.Weight):
            n = len(stmt.component)
            if stmt.loc.start <= off <= stmt.loc.start + n:
                c = self.resolve(stmt.component, stmt)
                if c is not None:
                    return c.detail, self.offset_range(stmt.loc.start, stmt.loc.start + n)
        if isinstance(stmt, S.Import):
            text = self._import_markdown(stmt)
            if text is not None:
                return text, self.range_of(stmt.loc)  # type: ignore[return-value]
        path = _path_to(stmt, off)
        node = path[-1]
        if isinstance(node, S.Call) and _contains(node.func_loc, off):
            md = function_markdown(node.func, self.sigs)
            if md is not None:
                return md, self.range_of(node.func_loc)  # type: ignore[return-value]
        if isinstance(node, S.Keyword) and off <= node.loc.start + len(node.name):
            call = next((p for p in reversed(path) if isinstance(p, S.Call)), None)
            sig = self.sigs.get(call.func) if call is not None else None
            if sig is not None and sig.params is not None and node.name in sig.params.model_fields:
                line_ = next(x for x in _option_lines(sig) if x.startswith(f"- `{node.name}`"))
                return (f"option of `{sig.name}`\n\n{line_[2:]}",
                        self.offset_range(node.loc.start, node.loc.start + len(node.name)))  # type: ignore
        if isinstance(node, S.Name):
            for p in reversed(path):
                if isinstance(p, S.Comprehension) and node.id in p.targets:
                    return f"`{node.id}`: a comprehension variable", self.range_of(node.loc)  # type: ignore
            d = self.resolve(node.id, stmt)
            if d is not None:
                return d.detail, self.range_of(node.loc)  # type: ignore[return-value]
            if node.id in IMPLICIT_INPUTS:
                return f"```reward\ninput {node.id}: text\n```\n\nthe model's {node.id}", self.range_of(node.loc)  # type: ignore
            if node.id == "step":
                return "`step`: the training step (a number)", self.range_of(node.loc)  # type: ignore
            if node.id in AGGREGATES or node.id in STAGE_SHORTHANDS:
                return f"`{node.id}`: an advantage-stage aggregate or shorthand", self.range_of(node.loc)  # type: ignore
        if isinstance(node, S.Attr) and isinstance(node.target, S.Name) and node.name == "weight":
            d = self.resolve(node.target.id, stmt)
            if d is not None:
                return d.detail, self.range_of(node.loc)  # type: ignore[return-value]
        return None

    def _import_markdown(self, stmt: S.Import) -> str | None:
        if self.ch is None:
            return None
        path = self.resolve_path(stmt.path)
        if path is None:
            return f"imports `{stmt.path}` (refused: see its diagnostic)"
        target = canonical_path(path)
        names = {"let": [], "component": [], "param": [], "input": [], "audit": []}  # type: dict[str, list[str]]
        for d in self.definitions:
            if canonical_path(d.file) == target:
                names[d.kind].append(d.name)
        body = [f"imports `{stmt.path}`"]
        for kind in ("let", "component", "param", "input", "audit"):
            if names[kind]:
                body.append(f"{kind}s: " + ", ".join(f"`{n}`" for n in names[kind]))
        return "\n\n".join(body)

    def definition(self, line: int, character: int) -> tuple[str, Range] | None:
        """(file, range) of the definition of what is at a position (a let, component, param, input or an
        imported file)."""
        off = self.offset_at(line, character)
        stmt = self.statement_at(off)
        if stmt is None:
            return None
        if isinstance(stmt, S.Import):
            if stmt.names:
                for name, nloc in stmt.names:
                    if nloc.start <= off <= nloc.end:
                        path = self.resolve_path(stmt.path)
                        if path is None:
                            return None
                        target = canonical_path(path)
                        for d in self.definitions:
                            if d.name == name and canonical_path(d.file) == target and d.name_range is not None:
                                return d.file, d.name_range
            path = self.resolve_path(stmt.path)
            return (path, ((0, 0), (0, 0))) if path is not None else None
        if isinstance(stmt, S.Weight) and stmt.loc.start <= off <= stmt.loc.start + len(stmt.component):
            d = self.resolve(stmt.component, stmt)
            return (d.file, d.name_range) if d is not None and d.name_range is not None else None
        path = _path_to(stmt, off)
        node = path[-1]
        if isinstance(node, S.Attr) and isinstance(node.target, S.Name):
            node = node.target
        if isinstance(node, S.Name):
            d = self.resolve(node.id, stmt)
            if d is not None and d.name_range is not None:
                return d.file, d.name_range
        return None

    # ---- symbols
    def symbols(self) -> list[Symbol]:
        if self.module is None:
            return []
        out = []
        for stmt in self.module.body:
            rng = self.range_of(stmt.loc)
            if rng is None:
                continue
            sym = self._symbol(stmt, rng)
            if sym is not None:
                out.append(sym)
        return out

    def _symbol(self, stmt: Any, rng: Range) -> Symbol | None:
        d = self.definition_of(stmt)
        sel = d.name_range if d is not None and d.name_range is not None else rng
        if isinstance(stmt, S.SpecStmt):
            return Symbol(stmt.name, "module", stmt.doc or "", rng, self._name_range(stmt, stmt.name, self.file) or rng)
        if isinstance(stmt, S.Import):
            names = ", ".join(n for n, _ in stmt.names) if stmt.names else "*"
            return Symbol(stmt.path, "namespace", f"import {names}", rng, rng)
        if isinstance(stmt, S.Input):
            return Symbol(stmt.name, "field", f"input: {d.type if d else stmt.type.text}", rng, sel)
        if isinstance(stmt, S.Param):
            return Symbol(stmt.name, "constant", f"param: {d.type if d else ''}", rng, sel)
        if isinstance(stmt, S.Let):
            return Symbol(stmt.name, "variable", f"let: {d.type if d and d.type else '?'}", rng, sel)
        if isinstance(stmt, S.Component):
            kids = []
            for clause, cloc in stmt.clause_locs.items():
                crng = self.range_of(cloc)
                if crng is not None:
                    kids.append(Symbol(clause, "property", "clause", crng, crng))
            src = self.text[self.bom:]
            rtxt = ""
            if stmt.range is not None:
                rtxt = f" in [{src[stmt.range[0].loc.start:stmt.range[0].loc.end]}, " \
                       f"{src[stmt.range[1].loc.start:stmt.range[1].loc.end]}]"
            return Symbol(stmt.name, "function", "component" + rtxt, rng, sel, kids)
        if isinstance(stmt, S.Audit):
            kids = [Symbol(clause, "property", "clause", crng, crng) for clause, cloc in stmt.clause_locs.items()
                    if (crng := self.range_of(cloc)) is not None]
            a = self.ch.audit_irs.get(stmt.name) if self.ch is not None else None
            detail = "audit" + (f" every {a.every} step{'s' if a.every != 1 else ''}" if a is not None else "")
            return Symbol(stmt.name, "event", detail, rng, sel, kids)
        if isinstance(stmt, S.Weight):
            return Symbol(f"{stmt.component}.weight", "property", "weight", rng,
                          self.offset_range(stmt.loc.start, stmt.loc.start + len(stmt.component)) or rng)
        if isinstance(stmt, S.Reward):
            return Symbol("reward", "operator", "the reward", rng, rng)
        if isinstance(stmt, S.Advantage):
            return Symbol("advantage", "operator", "the advantage pipeline", rng, rng)
        if isinstance(stmt, S.Example):
            # an object (a record of inputs and what to expect), not an event: audits are the outline's events, and
            # the two kinds keep them apart there
            return Symbol(stmt.name or f"example (line {stmt.loc.line})", "object", "example", rng, rng)
        if isinstance(stmt, S.Section):
            kids = []
            for item in stmt.items:
                irng = self.range_of(item.loc)
                if irng is not None:
                    kids.append(Symbol(item.name, "key", f"{stmt.kind} setting", irng, irng))
            return Symbol(stmt.kind, "namespace", "section", rng, rng, kids)
        return None


def analyse(text: str, file: str, sigs: dict[str, Signature],
            read_file: Callable[[str], str] | None = None) -> Analysis:
    """Check ``text`` (the spec at ``file``) as ``rewardlang check`` does, and index what it defines."""
    source = strip_bom(text)
    ch = _RecordingChecker(sigs, None, read_file)
    try:
        with deep_recursion():
            ch.run(file, source)
    except RecursionError:
        ch.error("E001", "expression nested too deeply", S.Loc(file, 1, 1, 1, 2),
                 hint="split it into `let` definitions")
    ch.sources.setdefault(file, source)
    diags = unique_diagnostics(ch.diags)
    return Analysis(file, text, sigs, ch, diags, dict(ch.sources))


def format_document(text: str, file: str) -> str | None:
    """The formatted document (``rewardlang fmt``), or None when it does not parse."""
    from rewardlang.fmt import format_source

    try:
        return format_source(text, file)
    except ParseFailure:
        return None


# ---------------------------------------------------------------------- completion


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def _scan(text: str) -> tuple[list[tuple[str, str | None]], bool]:
    """The open brackets at the end of ``text`` (each with the name before it: a call's function, a section's
    name), and whether the text ends inside a string or comment. Regex literals are not tracked (a `(` in one
    is rare enough at the cursor's left)."""
    stack: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            if j < 0:
                return stack, True
            i = j + 1
            continue
        if c == '"':
            if text.startswith('"""', i):
                j = text.find('"""', i + 3)
                if j < 0:
                    return stack, True
                i = j + 3
                continue
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return stack, True
            i = j + 1
            continue
        if c in "([{":
            # the word before the bracket: a call's function, a section's or an example's keyword (an example's
            # name string sits between them)
            m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:"(?:[^"\\\n]|\\.)*"\s*)?$', text[max(0, i - 256):i])
            stack.append((c, m.group(1) if m else None))
        elif c in ")]}":
            if stack:
                stack.pop()
        i += 1
    return stack, False


#: the semantic token types and modifiers the server sends (the protocol's standard names), in its legend's order
SEMANTIC_TYPES = ("keyword", "function", "variable", "parameter", "property", "class", "event", "string", "number",
                  "comment", "regexp", "operator", "type")
SEMANTIC_MODIFIERS = ("declaration", "readonly", "defaultLibrary")
#: a name's token type by what defines it (the completion's kinds: a component is a class, an audit an event)
_SEMANTIC_OF = {"let": "variable", "param": "parameter", "input": "property", "component": "class",
                "audit": "event"}
#: rewardlang.highlight.scan's kinds that are not names
_SEMANTIC_LEXICAL = {"keyword": "keyword", "declaration": "keyword", "constant": "keyword", "type": "type",
                     "number": "number", "string": "string", "regex": "regexp", "comment": "comment",
                     "operator": "operator"}


def semantic_tokens(analysis: Analysis, names: Analysis | None = None) -> list[int]:
    """The document's semantic tokens, encoded as the protocol sends them (five integers a token: line and start
    relative to the previous token, length, type and modifier bits; UTF-16 units). Words come from the lexer the
    highlighters share (rewardlang.highlight.scan: `audit`, `every N steps`, `margin` are keywords in the same
    shapes); a name is typed by what defines it in ``names`` (the last analysis that parsed, where this one does
    not): a let is a variable, a param a read-only parameter, an input a property, a component a class, an audit
    an event; a definition's own name carries ``declaration``. A name nothing defines gets no token."""
    text = analysis.text[analysis.bom:]
    src = names if names is not None and names.module is not None else analysis
    kinds = {}
    for d in src.definitions:
        kinds.setdefault(d.name, d.kind)
    out: list[int] = []
    prev_line = prev_col = 0
    idx = analysis.index
    for off, kind, word in scan(text):
        mods = 0
        if kind in _SEMANTIC_LEXICAL:
            typ = _SEMANTIC_LEXICAL[kind]
        elif kind == "function":
            typ = "function"
            mods = 4 if word in analysis.sigs or word in LANGUAGE_FUNCTIONS else 0
        elif kind == "builtin":
            typ, mods = "property", 4
        elif kind in ("variable", "name") and word in kinds:
            if kind == "name" and re.match(r"\s*=(?!=)", text[off + len(word):off + len(word) + 64]):
                continue  # an option's or a setting's name (`reference=solution`, `beta = 0.04`), not the input
            typ = _SEMANTIC_OF[kinds[word]]
            mods = (1 if kind == "variable" else 0) | (2 if kinds[word] == "param" else 0)
        else:
            continue
        start = off + analysis.bom
        for piece in word.split("\n"):  # a token never spans lines (a multi-line string)
            if piece:
                (line, col), (_, end) = idx.position(start), idx.position(start + len(piece))
                out += [line - prev_line, col - prev_col if line == prev_line else col, end - col,
                        SEMANTIC_TYPES.index(typ), mods]
                prev_line, prev_col = line, col
            start += len(piece) + 1
    return out


def _kind_of(d: Definition) -> str:
    return {"let": "variable", "param": "constant", "input": "field", "component": "class", "audit": "event"}[d.kind]


def complete(analysis: Analysis | None, text: str, file: str, line: int, character: int,
             sigs: dict[str, Signature], workspace_columns: list[str] | None = None) -> list[Completion]:
    """Completions at a position of ``text`` (which may not parse: the context is read from the text before the
    cursor; the names in scope come from ``analysis``, the last analysis that got as far as defining them)."""
    idx = LineIndex(text)
    off = idx.offset(line, character)
    before = text[:off]
    line_start = before.rfind("\n") + 1
    prefix_line = before[line_start:]
    stack, in_literal = _scan(before)

    m = re.match(r"\s*input\s+\w+\s*:\s*[\w\[\]?]+\s+from\s+\"([^\"]*)$", prefix_line)
    if m:
        return _columns(analysis, workspace_columns)
    if in_literal:
        return []
    if re.match(r"\s*(input|param)\s+\w+\s*:\s*[\w\[]*$", prefix_line):
        return [Completion(t, "class", "type", sort="1") for t in TYPES]
    if re.match(r"\s*tokens\s+\w*$", prefix_line) and not stack:
        return [Completion(label, "snippet", "tokens form", doc, insert, snippet=True, sort="0")
                for label, insert, doc in TOKENS_FORMS]

    braces = [s for s in stack if s[0] == "{"]
    if braces and not [s for s in stack[stack.index(braces[-1]) + 1:] if s[0] in "(["]:
        section = braces[-1][1]
        item_start = re.match(r"\s*\w*$", prefix_line) or re.search(r"[{,]\s*\w*$", before)
        if item_start:
            if section == "example":
                return _example_items(analysis)
            if section == "preference":
                return [Completion(k, "property", f"preference setting ({kind})", insert_text=f"{k} = ",
                                   sort="0") for k, (kind, _) in PREFERENCE_SETTINGS.items()]
            return []  # train settings are the trainer's; its own docs list them

    out: list[Completion] = []
    calls = [s for s in stack if s[0] == "("]
    at_statement_start = not stack and re.match(r"[A-Za-z_]*$", prefix_line) is not None
    if at_statement_start:
        for k in STATEMENT_KEYWORDS:
            out.append(Completion(k, "keyword", "statement", sort="0"))
        if analysis is not None and analysis.ch is not None:
            for name in analysis.ch.components:
                out.append(Completion(f"{name}.weight", "property", "the weight of a component",
                                      insert_text=f"{name}.weight = ", sort="1"))
        if re.match(r"\s", prefix_line or "x") is None and prefix_line == "":
            return out
        # an indented line inside a component: its clauses
    if re.match(r"\s+[A-Za-z_]*$", prefix_line) and not stack:
        if _statement_keyword(before) == "audit":
            for k, insert, doc in AUDIT_CLAUSES:
                out.append(Completion(k, "keyword", "audit clause", doc, insert, snippet=True, sort="0"))
        else:
            for k in COMPONENT_CLAUSES:
                out.append(Completion(k, "keyword", "component clause", sort="0"))
    if at_statement_start:
        return out

    # inside a call's argument list: the function's options first
    if calls and calls[-1][1]:
        sig = sigs.get(calls[-1][1])
        if sig is not None and sig.params is not None:
            for name, f in sig.params.model_fields.items():
                default = f.default_factory() if f.default_factory is not None else f.default  # type: ignore
                out.append(Completion(f"{name}=", "property", f"option of {sig.name} (default {default!r})",
                                      f.description or "", insert_text=f"{name}=", sort="0"))
    stmt_kind = _statement_keyword(before)
    out.extend(_names(analysis, stmt_kind))
    for name, sig in sorted(sigs.items()):
        out.append(Completion(name, "function", _usage(sig), sig.doc, insert_text=name, sort="3"))
    for name, (usage, doc) in LANGUAGE_FUNCTIONS.items():
        if name not in sigs:
            out.append(Completion(name, "function", usage, doc, sort="3"))
    for k in EXPRESSION_KEYWORDS:
        out.append(Completion(k, "keyword", "keyword", sort="4"))
    if stmt_kind == "advantage":
        for k in sorted(AGGREGATES | set(STAGE_SHORTHANDS)):
            out.append(Completion(k, "value", "advantage aggregate / shorthand", sort="2"))
    if stmt_kind == "audit":
        if re.match(r"\s*audit\s+\w+(?:\s+in\s*\[[^\]]*\])?\s*=\s*\w*$", prefix_line):
            for k, opts in STATISTICS.items():  # `audit NAME = ` can name a built-in statistic of the run
                args = ", ".join(f"{o}={d[0]:g}" for o, d in opts.items())
                out.append(Completion(k, "function", f"{k}({args}): a statistic of the run", sort="2"))
        elif not calls:
            for k, insert, doc in AUDIT_CLAUSES[:3]:
                out.append(Completion(k, "keyword", "audit clause", doc, insert, snippet=True, sort="2"))
    return out


def _statement_keyword(before: str) -> str | None:
    """The keyword of the statement the cursor is in (the last line before the cursor that starts a statement at
    column 0)."""
    for m in reversed(list(re.finditer(r"^([A-Za-z_]+)", before, re.M))):
        word = m.group(1)
        if word in STATEMENT_KEYWORDS:
            return word
        rest = before[m.end():m.end() + 64]
        if rest.startswith(".weight"):
            return "weight"
    return None


def _names(analysis: Analysis | None, stmt_kind: str | None) -> list[Completion]:
    out: list[Completion] = []
    if analysis is None:
        return [Completion(n, "field", "input: text", sort="1") for n in IMPLICIT_INPUTS]
    if stmt_kind == "weight":  # a weight is a constant or a schedule: params and `step` only
        return [Completion(d.name, _kind_of(d), f"param: {d.type or '?'}", d.detail, sort="1")
                for d in analysis.definitions if d.kind == "param"] + [
            Completion("step", "variable", "the training step: number", sort="2")]
    in_reward = stmt_kind in ("reward", "advantage", "preference")
    have = set()
    for d in analysis.definitions:
        if d.kind == "audit" or d.kind == "component" and not in_reward:
            continue  # an audit is never read by an expression (E219)
        if d.kind == "let" and (in_reward or (analysis.env is not None and d.name not in analysis.env.lets)):
            continue
        if d.kind == "input" and in_reward:
            continue
        have.add(d.name)
        out.append(Completion(d.name, _kind_of(d), f"{d.kind}: {d.type or '?'}", d.detail, sort="1"))
    if not in_reward:
        for n in IMPLICIT_INPUTS:
            if n not in have:
                out.append(Completion(n, "field", "input: text", sort="1"))
    out.append(Completion("step", "variable", "the training step: number", sort="2"))
    return out


def _example_items(analysis: Analysis | None) -> list[Completion]:
    out = [Completion("expect", "keyword", "an expected value: expect NAME = VALUE", insert_text="expect ", sort="1")]
    names = list(IMPLICIT_INPUTS)
    if analysis is not None and analysis.ch is not None:
        names += [n for n in analysis.ch.inputs if n not in names]
    for n in names:
        out.append(Completion(f"{n}:", "field", "example input", insert_text=f"{n}: ", sort="0"))
    return out


def _columns(analysis: Analysis | None, workspace_columns: list[str] | None) -> list[Completion]:
    """Column names: those the spec's inputs read, then those of other specs beside it."""
    seen: list[str] = []
    if analysis is not None and analysis.ch is not None:
        for _, _, column in analysis.ch.inputs.values():
            if column not in seen:
                seen.append(column)
    for c in workspace_columns or []:
        if c not in seen:
            seen.append(c)
    return [Completion(c, "value", "column", sort="0") for c in seen]


def columns_near(file: str) -> list[str]:
    """The column names that the specs in ``file``'s directory (and its ``lib/``) read: `from "COL"` clauses and
    input names. Only ``.reward`` regular files that really lie in that directory are read (a symlink out of it, a
    FIFO or a device named ``x.reward`` is skipped), each through :func:`rewardlang.specfiles.read_spec_file`."""
    out: list[str] = []
    folder = Path(file).parent
    try:
        real_folder = os.path.realpath(folder)
        paths = sorted(folder.glob("*.reward")) + sorted(folder.glob("lib/*.reward"))
    except (OSError, ValueError):
        return out
    pat = re.compile(r"^\s*input\s+(\w+)\s*:\s*[\w\[\]?]+(?:\s+from\s+\"([^\"]*)\")?", re.M)
    for p in paths[:200]:
        try:
            real = os.path.realpath(p)
            if not inside(real, [real_folder]) or not real.endswith(".reward"):
                continue
            text = read_spec_file(str(p))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for m in pat.finditer(text):
            col = m.group(2) or m.group(1)
            if col not in out:
                out.append(col)
    return out


def code_title(code: str) -> str:
    return CODES.get(code, "")

