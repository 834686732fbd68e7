"""The checker: resolves names and imports, type-checks every expression and lowers the spec to IR.

One pass per construct, collecting every diagnostic of the run (it never stops at the first error). The
function table comes from outside (``signatures``), so the checker knows nothing about any particular
reward function; only the language's own forms (arithmetic, ``step``, ``piecewise``, schedules,
comprehensions, aggregates of the advantage pipeline) are handled here.

    >>> from rewardlang.checker import check_source
    >>> prog, diags, _ = check_source('component short in [0, 1] = 1 if len(completion) < 5 else 0', "x.reward", {})
    >>> [d.code for d in diags], prog.components[0].name
    ([], 'short')
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import ValidationError

from rewardlang import ir
from rewardlang import syntax as S
from rewardlang.diagnostics import Diagnostic, did_you_mean
from rewardlang.parser import STATEMENT_KEYWORDS, ParseFailure, deep_recursion, parse
from rewardlang.regexrisk import catastrophic
from rewardlang.signature import MISSING, Signature
from rewardlang.specfiles import ImportRefused, import_roots, import_search_path, read_spec_file, resolve_import
from rewardlang.types import (ANY, BOOL, CODE, NONE, NUMBER, REGEX, SPANS, TEXT, ListOf, Scalar,
                              TupleOf, Type, parse_type)

__all__ = ["check_source", "check_file", "MATH_FUNCS", "AGGREGATES", "LANGUAGE_FUNCS", "STATISTICS", "AUDIT_DEFAULTS"]

MATH_FUNCS = {"abs", "log", "exp", "tanh", "sqrt", "floor", "ceil", "round", "sigmoid"}
AGGREGATES = {"mean", "std", "min", "max", "median", "count", "loo_mean", "rank", "sum"}
STAGE_SHORTHANDS = {
    "center": "x - mean",
    "loo": "x - loo_mean",
    "tanh": "tanh(x)",
    "rank": "rank",
    "standardize": "(x - mean) / (std + 1e-8)",
    "scale": "x / (std + 1e-8)",
}
SCHEDULES = {"linear", "cosine"}
LANGUAGE_FUNCS = (MATH_FUNCS | {"len", "min", "max", "clip", "sum", "mean", "any", "all", "step", "piecewise",
                                "number", "text", "std"} | SCHEDULES)
#: the `preference { }` settings: name -> (kind, allowed values or minimum); see docs/language.md
PREFERENCE_SETTINGS: dict[str, tuple[str, Any]] = {
    "pairs": ("choice", ("max_min", "all", "threshold")),
    "rank": ("rank", None),
    "margin": ("number", 0),
    "chosen_min": ("number", -math.inf),
    "rejected_max": ("number", -math.inf),
    "ties": ("choice", ("first", "shortest")),
    "max_pairs": ("count", 1),
    "winners": ("rule", None),
    "losers": ("rule", None),
    "min_winners": ("count", 1),
    "min_losers": ("count", 1),
    "max_group": ("count", 2),
}

#: the built-in statistical audits (``audit NAME = STATISTIC(option=value, ...)``): per statistic its options with
#: (default, lowest, highest), and what it watches. The trainers and ``rewardlang audit`` compute them
#: (rewardlang/runtime/audits.py); docs/language.md, "Audits", gives each one's alarm.
STATISTICS: dict[str, dict[str, tuple[float, float, float]]] = {
    "component_dominance": {"threshold": (0.9, 0.0, 1.0)},
    "length_drift": {"margin": (0.5, 0.0, 1e6)},
    "group_collapse": {"threshold": (0.75, 0.0, 1.0)},
    "kl_acceleration": {"ratio": (2.0, 1.0, 1e6), "min_kl": (0.01, 0.0, 1e6)},
    "entropy_collapse": {"fraction": (0.5, 0.0, 1.0)},
}
#: an expression audit's period, window and margin when its clauses leave them out (a statistic: every step)
AUDIT_DEFAULTS = {"every": 10, "window": 20, "margin": 0.1}

RESERVED = {"completion", "prompt", "step", "reward", "x", "true", "false", "none", "advantage"}

ERR = -1  # the lowering of an invalid expression; callers keep going to report every error
_INVALID = object()  # the value of a param whose declaration is an error (E207, E601): its uses lower to ERR


@dataclass
class Value:
    nid: int
    type: Type


@dataclass
class ModuleEnv:
    """The names one spec file defines (imports bring in names bound to their own ModuleEnv)."""

    file: str
    lets: dict[str, tuple[S.Let, "ModuleEnv"]] = field(default_factory=dict)
    let_values: dict[str, Value] = field(default_factory=dict)
    used_lets: set[str] = field(default_factory=set)


@dataclass
class Scope:
    """Where an expression is lowered: which names mean what there."""

    kind: str                       # row | scalar | reward | stage | const
    env: ModuleEnv
    bindings: dict[str, Value] = field(default_factory=dict)   # comprehension targets
    timeout: float | None = None
    stage_in: int | None = None
    stage_scope: tuple[str, str | None] | None = None

    def with_bindings(self, extra: dict[str, Value]) -> "Scope":
        return Scope(self.kind, self.env, {**self.bindings, **extra}, self.timeout, self.stage_in, self.stage_scope)


class Checker:
    def __init__(self, signatures: dict[str, Signature], params: dict[str, Any] | None = None,
                 read_file: Callable[[str], str] | None = None, import_path: Iterable[str] | None = None) -> None:
        self.sigs = signatures
        self.overrides = dict(params or {})
        # only regular files, bounded, never blocking (rewardlang.specfiles)
        self.read_file = read_file or read_spec_file
        self.import_search = import_search_path(list(import_path or []))
        self.import_roots: list[str] = []  # set by run(): the main spec's folder and the search path's
        self.diags: list[Diagnostic] = []
        self.g = ir.Graph()
        self.sources: dict[str, str] = {}
        self.inputs: dict[str, tuple[S.Input | None, Type, str]] = {}
        self.used_inputs: set[str] = set()
        self.params: dict[str, tuple[S.Param, Any, Type]] = {}
        self.components: dict[str, tuple[S.Component, ModuleEnv]] = {}
        self.audits: dict[str, tuple[S.Audit, ModuleEnv]] = {}
        self.weights: dict[str, S.Weight] = {}
        self.used_weights: set[str] = set()
        self.in_progress: list[str] = []
        self.rejected: dict[str, tuple[S.Node, ModuleEnv]] = {}  # definitions refused with E107
        self.import_stack: list[str] = []  # real paths of the files being declared (see resolve_import)
        self.import_names: list[str] = []  # the same files as their imports spelt them
        self.imported_files: dict[str, tuple[S.Module, ModuleEnv]] = {}
        self.let_names: dict[int, str] = {}
        self.tokens_locs: dict[str, S.Loc] = {}  # components with a `tokens` clause (checked against `reward`)
        self.main_file = ""

    # ------------------------------------------------------------------ helpers
    def error(self, code: str, message: str, loc: S.Loc | None, hint: str | None = None) -> int:
        self.diags.append(Diagnostic(code, message, loc, hint))
        return ERR

    def warn(self, code: str, message: str, loc: S.Loc | None, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(code, message, loc, hint))

    def const(self, value: Any, typ: Type) -> int:
        return self.g.const(value, typ)

    def cval(self, nid: int) -> Any:
        return self.g[nid].value

    def is_const(self, nid: int) -> bool:
        return nid != ERR and self.g[nid].is_const

    def type_of(self, nid: int) -> Type:
        return ANY if nid == ERR else self.g[nid].type

    # ------------------------------------------------------------------ modules and imports
    def load_module(self, file: str, source: str | None, loc: S.Loc | None) -> tuple[S.Module, ModuleEnv] | None:
        key = str(Path(file)) if source is None else file
        if key in self.imported_files:
            return self.imported_files[key]
        if source is None:
            try:
                source = self.read_file(file)
            except OSError as exc:
                self.error("E105", f"cannot read `{file}`: {exc.strerror or exc}", loc,
                           hint="import paths are relative to the importing spec's directory")
                return None
            except UnicodeDecodeError:
                self.error("E105", f"`{file}` is not valid UTF-8", loc)
                return None
        source = strip_bom(source)
        self.sources[file] = source
        try:
            module = parse(source, file)
        except ParseFailure as pf:
            self.diags.extend(pf.diagnostics)  # every statement's syntax error, in file order
            return None
        env = ModuleEnv(file)
        self.imported_files[key] = (module, env)
        self.import_stack.append(canonical_path(file))
        self.import_names.append(file)
        try:
            self.declare(module, env)
        finally:
            self.import_stack.pop()
            self.import_names.pop()
        return module, env

    def resolve_import(self, stmt: S.Import, env: ModuleEnv) -> None:
        try:
            path = resolve_import(stmt.path, env.file, self.import_roots, self.import_search)
        except ImportRefused as exc:
            self.error("E105", exc.message, stmt.loc, hint=exc.hint)
            return
        norm = str(Path(path))
        # the stack holds every file being declared, the main spec first, by its real path: `a.reward`,
        # `./a.reward` and a symlink to it are one file, so a.reward -> b.reward -> a.reward and a file
        # importing itself are cycles however the paths are spelt
        canon = canonical_path(norm)
        if canon in self.import_stack:
            start = self.import_stack.index(canon)
            chain = [self.import_names[i] for i in range(start, len(self.import_stack))] + [norm]
            self.error("E105", f"circular import of `{stmt.path}`", stmt.loc,
                       hint="import cycle: " + " -> ".join(chain) + "; move what both files need into a third "
                            "file that imports neither")
            return
        loaded = self.load_module(norm, None, stmt.loc)
        if loaded is None:
            return
        _, other = loaded
        names = stmt.names
        if names is None:
            for name, entry in other.lets.items():
                env.lets.setdefault(name, entry)
            return
        for name, nloc in names:
            if name in other.lets:
                env.lets[name] = other.lets[name]
            elif name in self.components and self.components[name][1] is other:
                pass  # components are global once declared
            else:
                known = list(other.lets) + [n for n, (_, e) in self.components.items() if e is other]
                self.error("E106", f"`{stmt.path}` defines no `{name}`", nloc, hint=did_you_mean(name, known))

    def declare(self, module: S.Module, env: ModuleEnv) -> None:
        """First pass over one file: record every definition (so order of statements does not matter)."""
        for stmt in module.body:
            if isinstance(stmt, S.Import):
                self.resolve_import(stmt, env)
        imported_only = env.file != self.main_file
        if imported_only:
            self.misplaced_in_import(module)
        for stmt in module.body:
            if isinstance(stmt, S.Input):
                self.declare_input(stmt)
            elif isinstance(stmt, S.Param):
                self.declare_param(stmt, override=not imported_only)
            elif isinstance(stmt, S.Let):
                if stmt.name in RESERVED:
                    self.reject(stmt, env)
                elif stmt.name in env.lets and env.lets[stmt.name][1] is env:
                    self.error("E103", f"`{stmt.name}` is defined twice", stmt.loc,
                               hint=f"first defined on line {env.lets[stmt.name][0].loc.line}")
                else:
                    env.lets[stmt.name] = (stmt, env)
            elif isinstance(stmt, S.Component):
                if stmt.name in RESERVED:
                    self.reject(stmt, env)
                elif stmt.name in self.components:
                    prev = self.components[stmt.name][0]
                    if prev is not stmt:
                        self.error("E103", f"component `{stmt.name}` is defined twice", stmt.loc,
                                   hint=f"first defined at {prev.loc.file}:{prev.loc.line}")
                else:
                    self.components[stmt.name] = (stmt, env)
            elif isinstance(stmt, S.Audit) and not imported_only:  # E108 in an imported file (misplaced_in_import)
                if stmt.name in RESERVED:
                    self.reject(stmt, env)
                elif stmt.name in self.audits:
                    self.error("E103", f"audit `{stmt.name}` is defined twice", stmt.loc,
                               hint=f"first defined on line {self.audits[stmt.name][0].loc.line}")
                else:
                    self.audits[stmt.name] = (stmt, env)
        # weights: an imported file's apply to its components; the main spec's own weight statements win
        for stmt in module.body:
            if isinstance(stmt, S.Weight):
                prev = self.weights.get(stmt.component)
                if prev is None or (not imported_only and prev.loc.file != env.file):
                    self.weights[stmt.component] = stmt
                elif prev.loc.file == env.file or not imported_only:
                    self.error("E103", f"the weight of `{stmt.component}` is set twice", stmt.loc,
                               hint=f"first set at {prev.loc.file}:{prev.loc.line}")

    def reject(self, stmt: S.Let | S.Component | S.Audit, env: ModuleEnv) -> None:
        """E107 for a definition with a reserved name. The name is remembered so that its uses, its weight and
        its example expectations add no follow-on errors, and its value is still checked (for its own errors,
        and so that what it uses is not reported unused)."""
        what = "component" if isinstance(stmt, S.Component) else "audit" if isinstance(stmt, S.Audit) else "let"
        self.error("E107", f"`{stmt.name}` is a reserved name", stmt.loc,
                   hint=f"rename the {what}: `{stmt.name}` means {_RESERVED_MEANING.get(stmt.name, 'something else')}")
        self.rejected[stmt.name] = (stmt, env)

    def misplaced_in_import(self, module: S.Module) -> None:
        """E108 for each statement an imported file cannot contribute: the reward, the advantage, examples and
        sections (`train`) belong to the spec being checked or trained, never to a library it imports."""
        main = Path(self.main_file).name
        for stmt in module.body:
            if isinstance(stmt, S.Reward):
                what = "a `reward` statement"
            elif isinstance(stmt, S.Advantage):
                what = "an `advantage` statement"
            elif isinstance(stmt, S.Example):
                what = "an example"
            elif isinstance(stmt, S.Section):
                what = f"a `{stmt.kind}` section"
            elif isinstance(stmt, S.Audit):
                what = "an audit"
            else:
                continue
            self.error("E108", f"{what} in an imported file", stmt.loc,
                       hint=f"move it into the importing spec (`{main}`): an imported file contributes only its "
                            "inputs, params, lets, components and weights")

    def audit_misuse(self, name: str, loc: S.Loc, sc: Scope) -> int:
        """E219 for an audit named where the reward is made (reward, advantage, preference, a component): an audit
        is a second verifier beside the reward, and a reward that read it would train on it."""
        where = {"reward": "the reward", "stage": "the advantage", "preference": "the `preference` section",
                 "row": "a component or let", "scalar": "a weight"}.get(sc.kind, "here")
        return self.error("E219", f"`{name}` is an audit: it cannot be used in {where}", loc,
                          hint="audits never enter the reward, the advantage, masks or preference pairs; to train on "
                               f"this expression, declare it as a component (`component {name} = ...`)")

    def declare_input(self, stmt: S.Input) -> None:
        try:
            typ = parse_type(stmt.type.text)
        except ValueError:
            self.error("E207", f"unknown type `{stmt.type.text}`", stmt.type.loc,
                       hint="input types: text, code, number, bool, group, list[text], list[code], list[number] "
                            "(add `?` for a column that may be null)")
            typ = ANY
        if typ in (SPANS, REGEX):
            self.error("E207", f"an input cannot have type `{typ}`", stmt.type.loc)
        if stmt.name in ("completion", "prompt") and typ.required() not in (TEXT, CODE, ANY):
            self.error("E201", f"`{stmt.name}` is text", stmt.type.loc)
        if stmt.name in ("step", "reward", "x"):
            self.error("E107", f"`{stmt.name}` is a reserved name", stmt.loc)
            return
        prev = self.inputs.get(stmt.name)
        if prev is not None and prev[0] is not None and prev[0] is not stmt:
            if prev[1] != typ or prev[2] != (stmt.column or stmt.name):
                self.error("E103", f"input `{stmt.name}` is declared twice, differently", stmt.loc,
                           hint=f"first declared at {prev[0].loc.file}:{prev[0].loc.line} as `{prev[1]}`")
            return
        self.inputs[stmt.name] = (stmt, typ, stmt.column or stmt.name)

    def declare_param(self, stmt: S.Param, override: bool) -> None:
        if stmt.name in RESERVED:
            self.error("E107", f"`{stmt.name}` is a reserved name", stmt.loc)
            return
        if stmt.name in self.params and not override:
            return  # the importing spec's own param wins
        if stmt.name in self.params and self.params[stmt.name][0].loc.file == stmt.loc.file:
            self.error("E103", f"parameter `{stmt.name}` is defined twice", stmt.loc)
            return
        want = None
        if stmt.type is not None:
            try:
                want = parse_type(stmt.type.text)
            except ValueError:
                self.error("E207", f"unknown type `{stmt.type.text}`", stmt.type.loc)
        nid = self.lower(stmt.default, Scope("const", ModuleEnv(stmt.loc.file)))
        if nid != ERR and not self.is_const(nid):
            self.error("E601", f"the default of `{stmt.name}` must be a constant", stmt.default.loc)
            nid = ERR
        if nid == ERR or (stmt.type is not None and want is None):
            # declared all the same (with no value), so that its uses are not reported again as unknown names
            self.params[stmt.name] = (stmt, _INVALID, want or ANY)
            return
        value, typ = self.cval(nid), self.type_of(nid)
        if want is not None:
            if not typ.is_assignable_to(want):
                self.error("E601", f"`{stmt.name}` is declared `{want}` but its default is `{typ}`", stmt.default.loc)
                self.params[stmt.name] = (stmt, _INVALID, want)
                return
            typ = want
        self.params[stmt.name] = (stmt, value, typ)

    def apply_param_overrides(self) -> None:
        """``--set name=value`` for parameters, after every file declared its own (the main spec's win)."""
        for name in [k for k in self.overrides if k in self.params]:
            stmt, value, typ = self.params[name]
            raw = self.overrides.pop(name)
            if value is _INVALID:
                continue  # its declaration is already an error; an override does not repair it
            new = coerce_override(raw, typ)
            if new is MISSING:
                finite = "" if typ.required() != NUMBER else " (a finite number)"
                self.error("E602", f"--set {name}={raw!r}: `{name}` is `{typ}`{finite}", stmt.loc,
                           hint=f"the default stays {_spell(value)}")
            else:
                self.params[name] = (stmt, new, typ)

    # ------------------------------------------------------------------ expressions
    def lower(self, e: S.Expr, sc: Scope) -> int:
        method = getattr(self, "lower_" + type(e).__name__)
        nid = method(e, sc)
        if self.is_const(nid) and _non_finite(self.cval(nid)):
            # `1e400`, `1e308 * 10`, `sum(1e308, 1e308)`: infinity and nan have no JSON form and make every
            # sum they enter meaningless, so a constant that is (or folds to) one is refused where it appears
            shown = " ".join(_slice(self.sources, e.loc).split())
            shown = f"`{shown}`" if shown and len(shown) <= 40 else "this constant"
            return self.error("E217", f"{shown} is not a finite number", e.loc,
                              hint="numbers in a spec must be finite (at most about 1.8e308 in magnitude)")
        return nid

    def lower_Number(self, e: S.Number, sc: Scope) -> int:
        return self.const(e.value, NUMBER)

    def lower_String(self, e: S.String, sc: Scope) -> int:
        return self.const(e.value, TEXT)

    def lower_Regex(self, e: S.Regex, sc: Scope) -> int:
        flags = 0
        for f in e.flags:
            flags |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}[f]
        try:
            re.compile(e.pattern, flags)
        except (re.error, OverflowError, RecursionError) as exc:
            return self.error("E004", f"invalid regular expression: {exc}", e.loc,
                              hint="rewardlang regexes are Python `re` patterns")
        if len(set(e.flags)) != len(e.flags):
            return self.error("E004", "a regex flag is repeated", e.loc)
        risk = catastrophic(e.pattern, e.flags)
        if risk is not None:
            self.warn("W006", f"this regex can take exponential time on some texts: {risk}", e.loc,
                      hint="make the repetition unambiguous (`(a+)+` -> `a+`, `(\\w+\\s?)+` -> `[\\w\\s]+`, "
                           "alternatives that start differently); it runs with a deadline (the component's "
                           "`timeout`, else 1 s per call) and a sample that hits it is an error")
        return self.const(("regex", e.pattern, e.flags), REGEX)

    def lower_Bool(self, e: S.Bool, sc: Scope) -> int:
        return self.const(e.value, BOOL)

    def lower_NoneLit(self, e: S.NoneLit, sc: Scope) -> int:
        return self.const(None, NONE)

    def lower_Name(self, e: S.Name, sc: Scope) -> int:
        name = e.id
        if name in sc.bindings:
            return sc.bindings[name].nid
        if sc.kind == "stage":
            if name == "x":
                return sc.stage_in  # type: ignore[return-value]
            if name == "reward":
                return self.g.add("total", (), (), NUMBER)
            if name in AGGREGATES:
                return self.aggregate(name, {}, e.loc, sc)
        if sc.kind in ("reward", "stage", "preference") and name in self.components:
            return self.g.add("comp", (), (name,), NUMBER)
        if sc.kind == "preference" and name == "reward":  # the total, as the spec's `reward` defines it
            return self.g.add("total", (), (), NUMBER)
        if name in self.rejected and isinstance(self.rejected[name][0], S.Let) and self.rejected[name][1] is sc.env:
            return ERR  # `let prompt = ...` (E107): its uses meant the let, not the input of that name
        if name in sc.env.lets and sc.kind == "row":
            return self.lower_let(name, sc, e.loc)
        if name in self.params:
            _, value, typ = self.params[name]
            if value is _INVALID:
                return ERR  # the param's declaration was reported
            return self.const(value, typ)
        if name == "step":
            if sc.kind == "const":
                return self.error("E101", "`step` (the training step) is not known here", e.loc,
                                  hint="constants may not depend on the training step")
            return self.g.add("step", (), (), NUMBER)
        if sc.kind == "row" and name in ("completion", "prompt") and name not in self.inputs:
            self.inputs[name] = (None, TEXT, name)
        if name in self.inputs and sc.kind in ("row",):
            self.used_inputs.add(name)
            _, typ, _ = self.inputs[name]
            return self.g.add("input", (), (name,), typ)
        return self.unknown_name(e, sc)

    def unknown_name(self, e: S.Name, sc: Scope) -> int:
        name = e.id
        if name in self.rejected:
            return ERR  # its definition is already an error (E107)
        if name in _PYTHON_LITERALS:
            return self.error("E101", f"unknown name `{name}`", e.loc,
                              hint=f"rewardlang writes `{_PYTHON_LITERALS[name]}` (lower case)")
        if sc.kind in ("reward", "stage") and (name in self.inputs or name in ("completion", "prompt")
                                               or name in sc.env.lets):
            where = "the reward" if sc.kind == "reward" else "the advantage"
            if name in sc.env.lets:
                sc.env.used_lets.add(name)
            else:
                self.used_inputs.add(name)  # used, wrongly: no "never used" warning on top of this error
            return self.error("E101", f"`{name}` varies per sample and cannot be used in {where}", e.loc,
                              hint=f"{where} combines components, weights, params and constants; compute from "
                                   f"`{name}` in a component, e.g. `component n = len({name})`, and use `n`")
        if name in self.audits and name not in self.components:
            return self.audit_misuse(name, e.loc, sc)
        if name in self.components and sc.kind == "row":
            return self.error("E101", f"component `{name}` cannot be used inside another component", e.loc,
                              hint="combine components in `reward = ...`, or share the expression with a `let`")
        if name in self.inputs or name in sc.env.lets or name in ("completion", "prompt"):
            where = {"scalar": "a weight", "const": "a constant", "reward": "the reward", "stage": "the advantage"}
            return self.error("E101", f"`{name}` varies per sample and cannot be used in {where.get(sc.kind, 'here')}",
                              e.loc)
        candidates = list(sc.bindings) + list(self.params) + ["step"]
        if sc.kind == "row":
            candidates += list(sc.env.lets) + list(self.inputs) + ["completion", "prompt"]
        if sc.kind in ("reward", "stage", "preference"):
            candidates += list(self.components)
        if sc.kind == "preference":
            candidates += ["reward"]
        if sc.kind == "stage":
            candidates += ["x", "reward"] + list(AGGREGATES)
        return self.error("E101", f"unknown name `{name}`", e.loc, hint=did_you_mean(name, candidates))

    def lower_let(self, name: str, sc: Scope, loc: S.Loc) -> int:
        stmt, env = sc.env.lets[name]
        env.used_lets.add(name)
        sc.env.used_lets.add(name)
        key = f"{env.file}::{name}::{sc.timeout}"
        cached = env.let_values.get(key)
        if cached is not None:
            return cached.nid
        if key in self.in_progress:
            cycle = [k.split("::")[1] for k in self.in_progress[self.in_progress.index(key):]] + [name]
            return self.error("E104", "definitions form a cycle: " + " -> ".join(cycle), loc,
                              hint="a `let` cannot depend on itself")
        self.in_progress.append(key)
        try:
            nid = self.lower(stmt.value, Scope("row", env, {}, sc.timeout))
        finally:
            self.in_progress.pop()
        env.let_values[key] = Value(nid, self.type_of(nid))
        if nid != ERR and not self.is_const(nid):
            self.let_names.setdefault(nid, name)
        return nid

    def lower_Attr(self, e: S.Attr, sc: Scope) -> int:
        if isinstance(e.target, S.Name) and e.name == "weight" and e.target.id in self.components:
            if sc.kind not in ("reward", "stage", "preference"):
                return self.error("E217", "weights are known only in `reward` and `advantage`", e.loc)
            self.used_weights.add(e.target.id)
            return self.g.add("weight", (), (e.target.id,), NUMBER)
        if isinstance(e.target, S.Name) and e.name == "weight" and e.target.id in self.audits:
            return self.audit_misuse(e.target.id, e.loc, sc)
        if isinstance(e.target, S.Name) and e.name == "weight":
            return self.error("E101", f"unknown component `{e.target.id}`", e.target.loc,
                              hint=did_you_mean(e.target.id, self.components))
        return self.error("E217", f"`.{e.name}` is not supported", e.loc, hint="only `<component>.weight` exists")

    def lower_Index(self, e: S.Index, sc: Scope) -> int:
        t = self.lower(e.target, sc)
        i = self.lower(e.index, sc)
        if ERR in (t, i):
            return ERR
        tt, it = self.type_of(t), self.type_of(i)
        if not it.is_assignable_to(NUMBER.optional()):
            return self.error("E203", f"an index must be a number, not `{it}`", e.index.loc)
        base = tt.required()
        if isinstance(base, ListOf):
            out = base.item.optional()
        elif base.is_assignable_to(TEXT):
            out = TEXT.optional()
        else:
            return self.error("E201", f"cannot index `{tt}`", e.target.loc)
        if self.is_const(t) and self.is_const(i):
            try:
                return self.const(self.cval(t)[int(self.cval(i))], out.required())
            except (IndexError, TypeError, ValueError):
                return self.const(None, NONE)
        return self.g.add("index", (t, i), (), out)

    def lower_Unary(self, e: S.Unary, sc: Scope) -> int:
        x = self.lower(e.operand, sc)
        if x == ERR:
            return ERR
        t = self.type_of(x)
        if not t.is_assignable_to(NUMBER.optional()):
            return self.error("E201", f"`{e.op}` needs a number, not `{t}`", e.operand.loc)
        if e.op == "+":
            return self.to_number(x)
        if self.is_const(x) and self.cval(x) is not None:
            return self.const(-float(self.cval(x)), NUMBER)
        return self.g.add("neg", (self.to_number(x),), (), NUMBER.optional() if t.nullable else NUMBER)

    def to_number(self, nid: int) -> int:
        t = self.type_of(nid)
        if t.required() == BOOL:
            if self.is_const(nid):
                v = self.cval(nid)
                return self.const(None if v is None else float(v), NUMBER.optional() if v is None else NUMBER)
            return self.g.add("num", (nid,), (), NUMBER.optional() if t.nullable else NUMBER)
        return nid

    def lower_BinOp(self, e: S.BinOp, sc: Scope) -> int:
        a, b = self.lower(e.left, sc), self.lower(e.right, sc)
        if ERR in (a, b):
            return ERR
        ta, tb = self.type_of(a), self.type_of(b)
        nullable = ta.nullable or tb.nullable
        if e.op == "+" and ta.required().is_assignable_to(TEXT) and tb.required().is_assignable_to(TEXT) \
                and ta.required() != NONE:
            if self.is_const(a) and self.is_const(b) and None not in (self.cval(a), self.cval(b)):
                return self.const(self.cval(a) + self.cval(b), TEXT)
            return self.g.add("concat", (a, b), (), TEXT.optional() if nullable else TEXT)
        for _side, t, loc in ((a, ta, e.left.loc), (b, tb, e.right.loc)):
            if not t.is_assignable_to(NUMBER.optional()):
                hint = "use `len(...)` for the length of text" if t.required().is_assignable_to(TEXT) else None
                return self.error("E201", f"`{e.op}` needs numbers, not `{t}`", loc, hint=hint)
        a, b = self.to_number(a), self.to_number(b)
        if self.is_const(a) and self.is_const(b):
            va, vb = self.cval(a), self.cval(b)
            if va is None or vb is None:
                return self.const(None, NONE)
            try:
                return self.const(_arith(e.op, float(va), float(vb)), NUMBER)
            except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
                return self.error("E217", f"constant arithmetic fails: {exc}", e.loc)
        return self.g.add("arith", (a, b), (e.op,), NUMBER.optional() if nullable else NUMBER)

    def lower_Compare(self, e: S.Compare, sc: Scope) -> int:
        a, b = self.lower(e.left, sc), self.lower(e.right, sc)
        if ERR in (a, b):
            return ERR
        ta, tb = self.type_of(a).required(), self.type_of(b).required()
        nullable = self.type_of(a).nullable or self.type_of(b).nullable
        is_none_lit = [isinstance(t, Scalar) and t.name == "none" for t in (ta, tb)]
        if any(is_none_lit):
            if e.op not in ("==", "!="):
                return self.error("E201", "`none` can only be compared with == or !=", e.loc)
            other = b if is_none_lit[0] else a
            node = self.g.add("is_none", (other,), (), BOOL)
            return node if e.op == "==" else self.g.add("not", (node,), (), BOOL)
        numeric = ta.is_assignable_to(NUMBER) and tb.is_assignable_to(NUMBER)
        texty = ta.is_assignable_to(TEXT) and tb.is_assignable_to(TEXT)
        if not (numeric or (texty and e.op in ("==", "!=")) or (ta == tb and e.op in ("==", "!="))):
            return self.error("E201", f"cannot compare `{self.type_of(a)}` {e.op} `{self.type_of(b)}`", e.loc)
        if numeric:
            a, b = self.to_number(a), self.to_number(b)
        if self.is_const(a) and self.is_const(b):
            return self.const(_compare(e.op, self.cval(a), self.cval(b)), BOOL)
        return self.g.add("cmp", (a, b), (e.op,), BOOL.optional() if nullable else BOOL)

    def as_bool(self, nid: int, loc: S.Loc, what: str) -> int:
        if nid == ERR:
            return ERR
        t = self.type_of(nid)
        if not t.is_assignable_to(BOOL.optional()):
            return self.error("E206", f"{what} must be a bool, not `{t}`", loc,
                              hint="compare it, e.g. `x > 0`, or test presence with `x != none`")
        return nid

    def lower_BoolOp(self, e: S.BoolOp, sc: Scope) -> int:
        a, b = self.lower(e.left, sc), self.lower(e.right, sc)
        if ERR in (a, b):
            return ERR
        ta, tb = self.type_of(a), self.type_of(b)
        if e.op == "or" and ta.required() != BOOL:
            # none-defaulting: `tag(x, "answer") or ""`
            if not ta.nullable:
                self.warn("W002", "the left side of `or` is never none, so the default is unused", e.right.loc)
                return a
            out = _common(ta.required(), tb)
            if out is None:
                return self.error("E201", f"`or` default of type `{tb}` does not match `{ta.required()}`", e.right.loc)
            if self.is_const(a):
                return b if self.cval(a) is None else a
            return self.g.add("coalesce", (a, b), (), out)
        a = self.as_bool(a, e.left.loc, f"the left side of `{e.op}`")
        b = self.as_bool(b, e.right.loc, f"the right side of `{e.op}`")
        if ERR in (a, b):
            return ERR
        if self.is_const(a) and self.is_const(b):
            va, vb = bool(self.cval(a)), bool(self.cval(b))
            return self.const(va and vb if e.op == "and" else va or vb, BOOL)
        return self.g.add(e.op, (a, b), (), BOOL)

    def lower_Not(self, e: S.Not, sc: Scope) -> int:
        a = self.as_bool(self.lower(e.operand, sc), e.operand.loc, "the operand of `not`")
        if a == ERR:
            return ERR
        if self.is_const(a):
            return self.const(not self.cval(a), BOOL)
        return self.g.add("not", (a,), (), BOOL)

    def lower_IfExpr(self, e: S.IfExpr, sc: Scope) -> int:
        c = self.as_bool(self.lower(e.cond, sc), e.cond.loc, "the condition")
        a, b = self.lower(e.then, sc), self.lower(e.orelse, sc)
        if ERR in (c, a, b):
            return ERR
        ta, tb = self.type_of(a), self.type_of(b)
        out = _common(ta, tb)
        if out is None:
            return self.error("E201", f"the branches have different types: `{ta}` and `{tb}`", e.loc)
        if out.required() == BOOL and (ta.required() == NUMBER or tb.required() == NUMBER):
            out = NUMBER.optional() if out.nullable else NUMBER
        if out.required() == NUMBER:
            a, b = self.to_number(a), self.to_number(b)
        if self.is_const(c):
            return a if self.cval(c) else b
        return self.g.add("if", (c, a, b), (), out)

    def lower_TupleLit(self, e: S.TupleLit, sc: Scope) -> int:
        items = [self.lower(i, sc) for i in e.items]
        if ERR in items:
            return ERR
        if not all(self.is_const(i) for i in items):
            return self.error("E205", "tuples must hold constants", e.loc)
        return self.const(tuple(self.cval(i) for i in items), TupleOf(tuple(self.type_of(i) for i in items)))

    def lower_ListLit(self, e: S.ListLit, sc: Scope) -> int:
        items = [self.lower(i, sc) for i in e.items]
        if ERR in items:
            return ERR
        if not all(self.is_const(i) for i in items):
            return self.error("E205", "list literals must hold constants", e.loc,
                              hint="to combine per-sample values use min(a, b), max(a, b) or arithmetic")
        types = [self.type_of(i) for i in items]
        item = types[0] if types else ANY
        for t in types[1:]:
            c = _common(item, t)
            if c is None:
                return self.error("E201", f"list items have different types: `{item}` and `{t}`", e.loc)
            item = c
        return self.const([self.cval(i) for i in items], ListOf(item))

    # ------------------------------------------------------------------ calls
    def lower_Call(self, e: S.Call, sc: Scope) -> int:
        name = e.func
        special = getattr(self, "call_" + name, None)
        if sc.kind == "stage" and name in AGGREGATES:
            pos = [a for a in e.args if isinstance(a, S.Positional)]
            kws = {a.name: a for a in e.args if isinstance(a, S.Keyword)}
            if len(pos) + len(kws) == len(e.args) and len(pos) <= 1 and (pos or kws or name not in LANGUAGE_FUNCS):
                # `mean(x)`, `max(reward)`, `std(ddof=1)`: the aggregate over the group, not min/max of one value
                arg = self.lower(pos[0].value, sc) if pos else sc.stage_in
                if arg == ERR:
                    return ERR
                if not self.type_of(arg).is_assignable_to(NUMBER):
                    return self.error("E301", f"`{name}` aggregates numbers", pos[0].loc if pos else e.loc)
                return self.aggregate(name, kws, e.loc, sc, self.to_number(arg))
        if special is not None and name in LANGUAGE_FUNCS:
            return special(e, sc)
        sig = self.sigs.get(name)
        if sig is None:
            known = list(self.sigs) + list(LANGUAGE_FUNCS)
            return self.error("E102", f"unknown function `{name}`", e.func_loc, hint=did_you_mean(name, known))
        return self.call_registered(sig, e, sc)

    def call_registered(self, sig: Signature, e: S.Call, sc: Scope) -> int:
        if sc.kind != "row":
            return self.error("E217", f"`{sig.name}` works on samples and cannot be called in a "
                                      f"{'weight' if sc.kind == 'scalar' else sc.kind} expression", e.loc)
        positional = [a for a in e.args if isinstance(a, S.Positional)]
        keywords = [a for a in e.args if isinstance(a, S.Keyword)]
        others = [a for a in e.args if not isinstance(a, (S.Positional, S.Keyword))]
        if others:
            return self.error("E203", f"`{sig.name}` takes plain arguments", others[0].loc, hint=sig.usage())
        ok = True
        arg_nodes: list[int] = []
        arg_names = [a.name for a in sig.args]
        by_kw: dict[str, S.Keyword] = {}
        option_kws: dict[str, S.Keyword] = {}
        for kw in keywords:
            if kw.name in arg_names:
                by_kw[kw.name] = kw
            elif sig.params is not None and kw.name in sig.params.model_fields:
                option_kws[kw.name] = kw
            else:
                known = arg_names + (list(sig.params.model_fields) if sig.params else [])
                self.error("E204", f"`{sig.name}` has no option `{kw.name}`", kw.loc,
                           hint=did_you_mean(kw.name, known) or sig.usage())
                ok = False
        pi = 0
        spans_index = None
        layout: list[tuple] = []
        for a in sig.args:
            exprs: list[S.Expr] = []
            if a.variadic:
                exprs = [p.value for p in positional[pi:]]
                pi = len(positional)
                if not exprs:
                    self.error("E202", f"`{sig.name}` needs at least one `{a.name}`", e.loc, hint=sig.usage())
                    ok = False
            elif pi < len(positional):
                exprs = [positional[pi].value]
                pi += 1
                if a.name in by_kw:
                    self.error("E202", f"`{a.name}` is given twice", by_kw[a.name].loc)
                    ok = False
            elif a.name in by_kw:
                exprs = [by_kw[a.name].value]
            elif a.default is not MISSING:
                if a.static:
                    layout.append(("s", a.default))
                else:
                    layout.append(("d", len(arg_nodes)))
                    arg_nodes.append(self.const(a.default, a.type))
                continue
            else:
                self.error("E202", f"`{sig.name}` is missing `{a.name}`", e.loc, hint=sig.usage())
                ok = False
                continue
            entries: list[Any] = []
            for ex in exprs:
                nid = self.lower(ex, sc)
                if nid == ERR:
                    ok = False
                    continue
                t = self.type_of(nid)
                want = a.type
                if want == REGEX and t.required().is_assignable_to(TEXT) and self.is_const(nid):
                    # a text literal where a pattern is expected matches literally
                    nid = self.const(("literal", self.cval(nid), ""), REGEX)
                    t = REGEX
                if not t.is_assignable_to(want):
                    if t.nullable and t.required().is_assignable_to(want):
                        pass  # none propagates: the result becomes none-able
                    else:
                        self.error("E203", f"`{a.name}` of `{sig.name}` must be `{a.type}`, not `{t}`", ex.loc,
                                   hint=sig.usage())
                        ok = False
                        continue
                if a.check is not None and self.is_const(nid) and self.cval(nid) is not None:
                    refused = a.check(self.cval(nid))
                    if refused:
                        self.error("E203", f"`{a.name}` of `{sig.name}`: {refused[0]}", ex.loc, hint=refused[1])
                        ok = False
                        continue
                if a.trusted and any(self.g[i].kind == "input" and self.g[i].attrs[:1] == ("completion",)
                                     for i in self.g.closure([nid])):
                    self.error("E203", f"`{a.name}` of `{sig.name}` must not come from the completion: it is "
                               "trusted code of the task, and the program under test would write it",
                               ex.loc, hint=f"give the task's own text, e.g. `{a.name}=prompt` (docs/language.md, "
                                            "Tests' helpers)")
                    ok = False
                    continue
                if a.static:
                    if not self.is_const(nid):
                        self.error("E205", f"`{a.name}` of `{sig.name}` must be a constant", ex.loc)
                        ok = False
                        continue
                    entries.append(self.cval(nid))
                else:
                    if sig.spans_of == a.name:
                        spans_index = len(arg_nodes)
                    entries.append(len(arg_nodes))
                    arg_nodes.append(nid)
            if a.variadic:
                layout.append(("vs" if a.static else "vd", tuple(entries)))
            elif entries:
                layout.append(("s" if a.static else "d", entries[0]))
        if pi < len(positional):
            self.error("E202", f"`{sig.name}` takes {len(sig.args)} argument(s), {len(positional)} given",
                       positional[pi].loc, hint=sig.usage())
            ok = False
        options: dict[str, Any] = {}
        for name, kw in option_kws.items():
            nid = self.lower(kw.value, sc)
            if nid == ERR:
                ok = False
            elif not self.is_const(nid):
                self.error("E205", f"option `{name}` must be a constant", kw.value.loc)
                ok = False
            else:
                options[name] = self.cval(nid)
        params_json = None
        if sig.params is not None and ok:
            try:
                model = sig.params.model_validate(options)
                params_json = model.model_dump(mode="json")
            except ValidationError as exc:
                for err in exc.errors():
                    field_name = str(err["loc"][0]) if err["loc"] else ""
                    loc = option_kws[field_name].value.loc if field_name in option_kws else e.loc
                    self.error("E204", f"`{sig.name}` option `{field_name}`: {err['msg']}", loc, hint=sig.usage())
                ok = False
        if not ok:
            return ERR
        nullable = any(self.type_of(n).nullable for n in arg_nodes) and not sig.accepts_none
        out = sig.returns.optional() if (nullable or sig.returns.nullable) else sig.returns
        all_const = all(self.is_const(n) for n in arg_nodes)
        attrs = (sig.name, tuple(layout), params_json, sc.timeout if not all_const else None, spans_index)
        node = self.g.add("call", tuple(arg_nodes), attrs, out)
        return node

    def _plain_args(self, e: S.Call, sc: Scope, allow_kw: Iterable[str] = ()) -> tuple[list[int], dict[str, int]] | None:
        pos, kws = [], {}
        allowed = set(allow_kw)
        ok = True
        for a in e.args:
            if isinstance(a, S.Positional):
                pos.append(self.lower(a.value, sc))
            elif isinstance(a, S.Keyword) and a.name in allowed:
                kws[a.name] = self.lower(a.value, sc)
            elif isinstance(a, S.Keyword):
                self.error("E204", f"`{e.func}` has no option `{a.name}`", a.loc,
                           hint=did_you_mean(a.name, allowed) if allowed else None)
                ok = False
            else:
                self.error("E203", f"`{e.func}` takes plain arguments", a.loc)
                ok = False
        if not ok or ERR in pos or ERR in kws.values():
            return None
        return pos, kws

    def _number_arg(self, nid: int, loc: S.Loc, fname: str) -> int:
        t = self.type_of(nid)
        if not t.is_assignable_to(NUMBER.optional()):
            return self.error("E203", f"`{fname}` needs a number, not `{t}`", loc)
        return self.to_number(nid)

    def call_len(self, e: S.Call, sc: Scope) -> int:
        r = self._plain_args(e, sc)
        if r is None:
            return ERR
        pos, _ = r
        if len(pos) != 1:
            return self.error("E202", "`len` takes one argument", e.loc, hint="len(text | list | spans) -> number")
        t = self.type_of(pos[0])
        base = t.required()
        if not (base.is_assignable_to(TEXT) or isinstance(base, (ListOf, TupleOf)) or base == SPANS):
            return self.error("E203", f"`len` needs text, a list or spans, not `{t}`", e.args[0].loc)
        if self.is_const(pos[0]):
            v = self.cval(pos[0])
            return self.const(None if v is None else float(len(v)), NUMBER if v is not None else NONE)
        return self.g.add("len", (pos[0],), (), NUMBER.optional() if t.nullable else NUMBER)

    def _math1(self, e: S.Call, sc: Scope) -> int:
        r = self._plain_args(e, sc, allow_kw=("digits",) if e.func == "round" else ())
        if r is None:
            return ERR
        pos, kws = r
        if len(pos) != 1:
            return self.error("E202", f"`{e.func}` takes one argument", e.loc)
        x = self._number_arg(pos[0], e.args[0].loc, e.func)
        if x == ERR:
            return ERR
        digits = 0
        if "digits" in kws:
            dv = self.cval(kws["digits"]) if self.is_const(kws["digits"]) else None
            if not isinstance(dv, (int, float)) or isinstance(dv, bool) or not math.isfinite(dv) \
                    or not float(dv).is_integer() or abs(dv) > 20:
                return self.error("E204", "`digits` is a constant whole number between -20 and 20", e.loc)
            digits = int(dv)
        if self.is_const(x) and self.cval(x) is not None:
            try:
                return self.const(_math(e.func, float(self.cval(x)), digits), NUMBER)
            except (ValueError, OverflowError) as exc:
                return self.error("E217", f"`{e.func}` of a constant fails: {exc}", e.loc)
        return self.g.add("math", (x,), (e.func, digits), self.type_of(x))

    call_abs = call_log = call_exp = call_tanh = call_sqrt = call_floor = call_ceil = call_round = _math1
    call_sigmoid = _math1

    def call_number(self, e: S.Call, sc: Scope) -> int:
        r = self._plain_args(e, sc)
        if r is None:
            return ERR
        pos, _ = r
        if len(pos) != 1 or not self.type_of(pos[0]).is_assignable_to(NUMBER.optional()):
            return self.error("E203", "`number` converts a bool to 0/1: number(x > 0)", e.loc)
        return self.to_number(pos[0])

    def call_text(self, e: S.Call, sc: Scope) -> int:
        r = self._plain_args(e, sc)
        if r is None:
            return ERR
        pos, _ = r
        if len(pos) != 1:
            return self.error("E202", "`text` takes one argument", e.loc)
        t = self.type_of(pos[0])
        if t.required().is_assignable_to(TEXT):
            return pos[0]
        if not t.is_assignable_to(NUMBER.optional()):
            return self.error("E203", f"`text` converts numbers and bools, not `{t}`", e.loc)
        return self.g.add("to_text", (pos[0],), (), TEXT.optional() if t.nullable else TEXT)

    def call_clip(self, e: S.Call, sc: Scope) -> int:
        r = self._plain_args(e, sc)
        if r is None:
            return ERR
        pos, _ = r
        if len(pos) != 3:
            return self.error("E202", "`clip` takes three arguments", e.loc, hint="clip(x, lo, hi)")
        nums = [self._number_arg(p, a.loc, "clip") for p, a in zip(pos, e.args)]
        if ERR in nums:
            return ERR
        if all(self.is_const(n) for n in nums):
            x, lo, hi = (self.cval(n) for n in nums)
            return self.const(min(max(x, lo), hi), NUMBER)
        nullable = any(self.type_of(n).nullable for n in nums)
        lo = self.g.add("minmax", (nums[0], nums[1]), ("max",), NUMBER.optional() if nullable else NUMBER)
        return self.g.add("minmax", (lo, nums[2]), ("min",), NUMBER.optional() if nullable else NUMBER)

    def _reduce_items(self, e: S.Call, sc: Scope) -> list[tuple[int, S.Loc]] | None:
        """The items of min/max/sum/mean/any/all: arguments, a literal list, or an unrolled comprehension."""
        if len(e.args) == 1 and isinstance(e.args[0], S.Comprehension):
            return self.unroll(e.args[0], sc)
        if len(e.args) == 1 and isinstance(e.args[0], S.Positional) and isinstance(e.args[0].value, S.ListLit):
            items = e.args[0].value.items
            return [(self.lower(i, sc), i.loc) for i in items]
        out = []
        for a in e.args:
            if not isinstance(a, S.Positional):
                self.error("E203", f"`{e.func}` takes values, a list or a comprehension", a.loc)
                return None
            nid = self.lower(a.value, sc)
            t = self.type_of(nid)
            if nid != ERR and self.is_const(nid) and isinstance(t, (ListOf, TupleOf)) and len(e.args) == 1:
                kind = BOOL if e.func in ("any", "all") else NUMBER
                return [(self.const(v, kind), a.loc) for v in self.cval(nid)]
            out.append((nid, a.value.loc))
        return out

    def unroll(self, c: S.Comprehension, sc: Scope) -> list[tuple[int, S.Loc]] | None:
        it = self.lower(c.iter, sc)
        if it == ERR:
            return None
        if not self.is_const(it) or not isinstance(self.cval(it), (list, tuple)):
            self.error("E213", "a comprehension must run over a constant list", c.iter.loc,
                       hint="per-sample lists have functions instead: count, findall, len, distinct")
            return None
        out = []
        for item in self.cval(it):
            if len(c.targets) == 1:
                values = [item]
            elif isinstance(item, (list, tuple)) and len(item) == len(c.targets):
                values = list(item)
            else:
                self.error("E213", f"cannot unpack {item!r} into {len(c.targets)} names", c.loc)
                return None
            binds = {name: Value(self.const(v, _type_of_const(v)), _type_of_const(v))
                     for name, v in zip(c.targets, values)}
            inner = sc.with_bindings(binds)
            if c.cond is not None:
                cond = self.lower(c.cond, inner)
                if cond == ERR:
                    return None
                if not self.is_const(cond):
                    self.error("E213", "a comprehension's `if` must be constant", c.cond.loc)
                    return None
                if not self.cval(cond):
                    continue
            out.append((self.lower(c.value, inner), c.value.loc))
        return out

    def _reduce(self, e: S.Call, sc: Scope, kind: str) -> int:
        items = self._reduce_items(e, sc)
        if items is None or any(n == ERR for n, _ in items):
            return ERR
        want = BOOL if kind in ("any", "all") else NUMBER
        nodes = []
        for n, loc in items:
            t = self.type_of(n)
            if not t.is_assignable_to(want.optional()):
                return self.error("E203", f"`{e.func}` needs {'bools' if want == BOOL else 'numbers'}, not `{t}`", loc)
            nodes.append(self.to_number(n) if want == NUMBER else n)
        if not nodes:
            if kind in ("min", "max"):
                return self.error("E202", f"`{e.func}` of nothing", e.loc)
            return self.const({"sum": 0.0, "mean": 0.0, "any": False, "all": True}[kind], want)
        if kind in ("min", "max"):
            acc = nodes[0]
            for n in nodes[1:]:
                acc = self._fold2("minmax", acc, n, (kind,), NUMBER)
            return acc
        if kind in ("any", "all"):
            acc = self._fold2("and", nodes[0], self.const(True, BOOL), (), BOOL)  # none counts as false
            for n in nodes[1:]:
                acc = self._fold2("or" if kind == "any" else "and", acc, n, (), BOOL)
            return acc
        acc = nodes[0]
        for n in nodes[1:]:
            acc = self._fold2("arith", acc, n, ("+",), NUMBER)
        if kind == "mean":
            acc = self._fold2("arith", acc, self.const(float(len(nodes)), NUMBER), ("/",), NUMBER)
        return acc

    def _fold2(self, kind: str, a: int, b: int, attrs: tuple, typ: Type) -> int:
        if self.is_const(a) and self.is_const(b) and None not in (self.cval(a), self.cval(b)):
            va, vb = self.cval(a), self.cval(b)
            if kind == "minmax":
                return self.const(min(va, vb) if attrs[0] == "min" else max(va, vb), NUMBER)
            if kind == "arith":
                try:
                    return self.const(_arith(attrs[0], float(va), float(vb)), NUMBER)
                except (ZeroDivisionError, OverflowError, ValueError):
                    pass  # left to run time, where it is a per-sample error
            if kind in ("and", "or"):
                return self.const(bool(va) and bool(vb) if kind == "and" else bool(va) or bool(vb), BOOL)
        nullable = self.type_of(a).nullable or self.type_of(b).nullable
        if kind in ("and", "or"):
            nullable = False
        return self.g.add(kind, (a, b), attrs, typ.optional() if nullable else typ)

    def call_min(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "min")

    def call_max(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "max")

    def call_sum(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "sum")

    def call_mean(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "mean")

    def call_any(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "any")

    def call_all(self, e: S.Call, sc: Scope) -> int:
        return self._reduce(e, sc, "all")

    def call_std(self, e: S.Call, sc: Scope) -> int:
        if sc.kind != "stage":
            return self.error("E102", "`std` is an aggregate of the advantage pipeline", e.func_loc,
                              hint="use it in `advantage over group(...) = (x - mean) / (std(ddof=0) + 1e-8)`")
        kws = {a.name: a for a in e.args if isinstance(a, S.Keyword)}
        if len(kws) != len(e.args):
            return self.error("E301", "`std` takes only keyword options (`std(ddof=1)`)", e.loc)
        return self.aggregate("std", kws, e.loc, sc)

    def call_step(self, e: S.Call, sc: Scope) -> int:
        """Thresholds: ``step(x, <= 0.2: 0, <= 0.4: 0.5, else: 1)``; the first arm that holds wins."""
        if not e.args or not isinstance(e.args[0], S.Positional):
            return self.error("E214", "`step` starts with the value to threshold", e.loc,
                              hint="step(x, <= 0.2: 0, <= 0.4: 0.5, else: 1)")
        x = self._number_arg(self.lower(e.args[0].value, sc), e.args[0].loc, "step")
        arms: list[tuple[str, float]] = []
        values: list[int] = []
        else_value = None
        ok = x != ERR
        for a in e.args[1:]:
            if isinstance(a, S.Arm):
                if else_value is not None:
                    self.error("E214", "`else` must be the last arm", a.loc)
                    ok = False
                b = self.lower(a.bound, sc)
                if b != ERR and not self.is_const(b):
                    self.error("E214", "a threshold must be a constant", a.bound.loc)
                    ok = False
                    continue
                v = self._number_arg(self.lower(a.value, sc), a.value.loc, "step")
                if b == ERR or v == ERR:
                    ok = False
                    continue
                if not isinstance(self.cval(b), (int, float)):
                    self.error("E214", "a threshold must be a number", a.bound.loc)
                    ok = False
                    continue
                arms.append((a.op, float(self.cval(b))))
                values.append(v)
            elif isinstance(a, S.ElseArm):
                if else_value is not None:
                    self.error("E214", "two `else` arms", a.loc)
                    ok = False
                else_value = self._number_arg(self.lower(a.value, sc), a.value.loc, "step")
                ok = ok and else_value != ERR
            else:
                self.error("E214", "`step` arms look like `<= 0.2: 0` or `else: 1`", a.loc)
                ok = False
        if ok and else_value is None:
            return self.error("E214", "`step` needs an `else:` arm", e.loc,
                              hint="say what the value is when no threshold holds: `else: 1`")
        if not ok:
            return ERR
        if not arms:
            return else_value  # type: ignore[return-value]
        args = (x, *values, else_value)
        nullable = any(self.type_of(n).nullable for n in args)
        return self.g.add("step_fn", args, (tuple(arms),), NUMBER.optional() if nullable else NUMBER)

    def call_piecewise(self, e: S.Call, sc: Scope) -> int:
        """Piecewise-linear map: ``piecewise(x, 0 -> 0, 0.5 -> 1, 1 -> 1)``, constant beyond the ends."""
        if not e.args or not isinstance(e.args[0], S.Positional):
            return self.error("E214", "`piecewise` starts with the value to map", e.loc,
                              hint="piecewise(x, 0 -> 0, 0.5 -> 1)")
        x = self._number_arg(self.lower(e.args[0].value, sc), e.args[0].loc, "piecewise")
        pts: list[tuple[float, float]] = []
        ok = x != ERR
        for a in e.args[1:]:
            if not isinstance(a, S.Arrow):
                self.error("E214", "`piecewise` points look like `0.5 -> 1`", a.loc)
                ok = False
                continue
            l, r = self.lower(a.left, sc), self.lower(a.right, sc)
            if ERR in (l, r) or not (self.is_const(l) and self.is_const(r)) \
                    or not all(isinstance(self.cval(n), (int, float)) for n in (l, r)):
                self.error("E214", "`piecewise` points must be constant numbers", a.loc)
                ok = False
                continue
            pts.append((float(self.cval(l)), float(self.cval(r))))
        if ok and len(pts) < 2:
            return self.error("E214", "`piecewise` needs at least two points", e.loc)
        if ok and any(b[0] <= a[0] for a, b in zip(pts, pts[1:])):
            return self.error("E214", "`piecewise` points must have increasing x", e.loc)
        if not ok:
            return ERR
        return self.g.add("piecewise", (x,), (tuple(p[0] for p in pts), tuple(p[1] for p in pts)),
                          self.type_of(x))

    def _schedule(self, e: S.Call, sc: Scope) -> int:
        arrows = [a for a in e.args if isinstance(a, S.Arrow)]
        kws = {a.name: a for a in e.args if isinstance(a, S.Keyword)}
        # the usage in the writer's own terms where it wrote an arrow (its endpoints), else an example's
        ends = (f"{_unparse(arrows[0].left, self.sources)} -> {_unparse(arrows[0].right, self.sources)}"
                if len(arrows) == 1 else "2.0 -> 1.0")
        usage = f"{e.func}({ends}, steps=5000, start=0)"
        if len(arrows) != 1 or len(arrows) + len(kws) != len(e.args):
            return self.error("E212", f"`{e.func}` is a schedule: `{usage}`", e.loc)
        if sc.kind == "const":
            return self.error("E212", "schedules depend on the training step and cannot be constants", e.loc)
        if "steps" not in kws:
            return self.error("E212", f"`{e.func}` needs `steps=`: the number of training steps it takes", e.loc,
                              hint=usage)
        vals = []
        for ex in (arrows[0].left, arrows[0].right, kws["steps"].value,
                   kws["start"].value if "start" in kws else None):
            if ex is None:
                vals.append(0.0)
                continue
            n = self.lower(ex, sc)
            if n == ERR:
                return ERR
            if not self.is_const(n) or not isinstance(self.cval(n), (int, float)):
                return self.error("E212", "schedule values must be constant numbers", ex.loc)
            vals.append(float(self.cval(n)))
        for k in kws:
            if k not in ("steps", "start"):
                return self.error("E204", f"`{e.func}` has no option `{k}`", kws[k].loc, hint=usage)
        if vals[2] <= 0:
            return self.error("E212", "`steps` must be positive", kws["steps"].value.loc)
        st = self.g.add("step", (), (), NUMBER)
        return self.g.add("schedule", (st,), (e.func, *vals), NUMBER)

    call_linear = call_cosine = _schedule

    # ------------------------------------------------------------------ advantage aggregates
    def aggregate(self, name: str, kws: dict[str, S.Keyword], loc: S.Loc, sc: Scope, arg: int | None = None) -> int:
        if sc.kind != "stage":
            return self.error("E101", f"`{name}` is an aggregate of the advantage pipeline", loc)
        opts: dict[str, Any] = {}
        allowed = {"std": {"ddof"}}.get(name, set())
        for k, kw in kws.items():
            if k not in allowed:
                return self.error("E301", f"`{name}` has no option `{k}`", kw.loc)
            n = self.lower(kw.value, Scope("const", sc.env))
            if n == ERR:
                return ERR
            if not self.is_const(n) or self.cval(n) not in (0, 1):
                return self.error("E301", "`ddof` is 0 (population) or 1 (sample)", kw.value.loc)
            opts[k] = int(self.cval(n))
        src = sc.stage_in if arg is None else arg
        return self.g.add("agg", (src,), (name, opts.get("ddof", 0), sc.stage_scope), NUMBER)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ statements
    def check_component(self, stmt: S.Component, env: ModuleEnv, what: str = "component"
                        ) -> ir.ComponentIR | None:
        """A component's value and clauses (``what = "audit"``: an audit's, which has no weight and no spans)."""
        clause_code = "E216" if what == "component" else "E218"
        timeout = None
        if stmt.timeout is not None:
            t = self.lower(stmt.timeout, Scope("const", env))
            if t != ERR:
                if not self.is_const(t) or not isinstance(self.cval(t), (int, float)) or self.cval(t) <= 0:
                    self.error(clause_code, "`timeout` is a positive number of seconds", stmt.timeout.loc)
                else:
                    timeout = float(self.cval(t))
        on_error: float | None = None
        if stmt.on_error is not None:
            o = self.lower(stmt.on_error, Scope("const", env))
            if o != ERR:
                v = self.cval(o) if self.is_const(o) else MISSING
                if v is None:
                    on_error = None
                elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    on_error = float(v)
                else:
                    self.error(clause_code, "`on_error` is a number, or `none` to mask the sample", stmt.on_error.loc)
        rng = None
        if stmt.range is not None:
            lo, hi = (self.lower(x, Scope("const", env)) for x in stmt.range)
            if ERR not in (lo, hi):
                bad = [x for x, n in zip(stmt.range, (lo, hi))
                       if not self.is_const(n) or not isinstance(self.cval(n), (int, float))]
                if bad:  # the caret goes under the bound that is not a constant number
                    self.error("E208", "range bounds must be constant numbers", bad[0].loc)
                elif self.cval(lo) > self.cval(hi):
                    self.error("E208", f"empty range [{self.cval(lo)}, {self.cval(hi)}]", stmt.range[0].loc)
                else:
                    rng = (float(self.cval(lo)), float(self.cval(hi)))
        if on_error is not None and rng is not None and not rng[0] <= on_error <= rng[1]:
            self.error(clause_code, f"`on_error {on_error:g}` lies outside the range [{rng[0]:g}, {rng[1]:g}]",
                       stmt.on_error.loc if stmt.on_error else stmt.loc)
        sc = Scope("row", env, {}, timeout)
        value = self.lower(stmt.value, sc)
        if value != ERR:
            t = self.type_of(value)
            if not t.is_assignable_to(NUMBER.optional()):
                self.error("E209" if what == "component" else "E218", f"{what} `{stmt.name}` is `{t}`, not a number",
                           stmt.value.loc,
                           hint="turn text into a number with len(...), count(...), or a condition: 1 if ... else 0")
                value = ERR
            else:
                value = self.to_number(value)
                if t.nullable:
                    self.warn("W004", f"{what} `{stmt.name}` is none for some samples (they will be masked)",
                              stmt.value.loc, hint="give a default with `or`, e.g. `codebleu(...) or 0`")
            if value != ERR and self.is_const(value) and self.cval(value) is None:
                value = ERR
                self.error("E209" if what == "component" else "E218", f"{what} `{stmt.name}` is always none",
                           stmt.value.loc)
        spans = None
        if stmt.spans is not None:
            s = self.lower(stmt.spans, sc)
            if s != ERR:
                if not self.type_of(s).is_assignable_to(SPANS.optional()):
                    self.error("E210", f"`spans` needs spans, not `{self.type_of(s)}`", stmt.spans.loc,
                               hint="spans come from functions such as matches(completion, /re/), syntax_errors(code)")
                else:
                    spans = s
        tokens = None
        if stmt.tokens is not None:
            tokens, spans = self.check_tokens(stmt, sc, env, spans)
        wstmt = self.weights.get(stmt.name) if what == "component" else None
        if wstmt is not None:
            w = self.lower(wstmt.value, Scope("scalar", env))
            if w != ERR and not self.type_of(w).is_assignable_to(NUMBER):
                self.error("E211", f"the weight of `{stmt.name}` must be a number, not `{self.type_of(w)}`",
                           wstmt.value.loc)
                w = ERR
            weight_text = _unparse(wstmt.value, self.sources)
        else:
            w = self.const(1.0, NUMBER)
            weight_text = "1"
        if f"{stmt.name}.weight" in self.overrides:
            raw = self.overrides.pop(f"{stmt.name}.weight")
            v = coerce_override(raw, NUMBER)
            if v is MISSING:
                self.error("E602", f"--set {stmt.name}.weight={raw!r}: a weight is a finite number", None)
            else:
                w, weight_text = self.const(float(v), NUMBER), repr(float(v))
        if value == ERR or w == ERR:
            return None
        comp = ir.ComponentIR(stmt.name, value, spans, rng, on_error, stmt.on_error is not None, timeout, w,
                              weight_text, tokens=tokens)
        if tokens is not None:
            self.tokens_locs[stmt.name] = stmt.clause_locs.get("tokens", stmt.loc)
        return comp

    def check_audit(self, stmt: S.Audit, env: ModuleEnv) -> ir.AuditIR | None:
        """An ``audit``: its period, window and margin, and either a per-sample value checked as a component's is
        (a number, `on_error`, `timeout`, a range) or a built-in statistic with its options (STATISTICS)."""
        ok = True
        statistic = stmt.value.func if isinstance(stmt.value, S.Call) and stmt.value.func in STATISTICS \
            and stmt.value.func not in self.sigs else None
        if statistic is None and isinstance(stmt.value, S.Name) and stmt.value.id in STATISTICS \
                and stmt.value.id not in self.inputs and stmt.value.id not in env.lets and stmt.value.id not in self.params:
            statistic = stmt.value.id  # `audit groups = group_collapse`: the statistic with its default options
        settings: dict[str, float] = {}
        defaults = {"every": 1 if statistic else AUDIT_DEFAULTS["every"], "window": AUDIT_DEFAULTS["window"],
                    "margin": AUDIT_DEFAULTS["margin"]}
        for key in ("every", "window", "margin"):
            e = getattr(stmt, key)
            if e is None:
                settings[key] = defaults[key]
                continue
            n = self.lower(e, Scope("const", env))
            if n == ERR:
                ok = False
                continue
            v = self.cval(n) if self.is_const(n) else MISSING
            if key == "margin":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1e6:
                    self.error("E218", "`margin` is a positive number: how far the reward must rise", e.loc,
                               hint="e.g. `margin 0.1`: the reward's mean (on [0, 1] when its range is known) rising "
                                    "by 0.1 over the window while the audit does not")
                    ok = False
                    continue
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or v < 1 or float(v) != int(v):
                self.error("E218", f"`{key}` is a whole number of steps, at least 1", e.loc,
                           hint=f"e.g. `{key} {defaults[key] if key != 'every' else 10} steps`")
                ok = False
                continue
            settings[key] = float(v) if key == "margin" else int(v)
        if ok and settings["window"] < 2 * settings["every"]:
            loc = stmt.window.loc if stmt.window is not None else stmt.loc
            self.error("E218", f"a window of {settings['window']} steps holds fewer than two audits taken every "
                               f"{settings['every']} steps", loc,
                       hint=f"make the window at least twice the period (`window {2 * settings['every']} steps`): the "
                            "alarm compares the audits of the window's first and second halves")
            ok = False
        from rewardlang.fmt import format_expr

        text = format_expr(stmt.value)  # canonical: the same text however the spec is laid out
        if statistic is not None:
            for kind in ("on_error", "timeout"):
                if getattr(stmt, kind) is not None:
                    self.error("E218", f"the statistic `{statistic}` takes no `{kind}`",
                               stmt.clause_locs.get(kind, stmt.loc), hint="it is computed from the step's logged "
                               "values, not per sample")
                    ok = False
            if stmt.range is not None:
                self.error("E218", f"the statistic `{statistic}` has no declared range", stmt.range[0].loc,
                           hint="drop `in [...]`: each statistic's scale is fixed (docs/language.md, Audits)")
                ok = False
            options = {k: v[0] for k, v in STATISTICS[statistic].items()}
            for a in (stmt.value.args if isinstance(stmt.value, S.Call) else []):
                if not isinstance(a, S.Keyword):
                    self.error("E218", f"`{statistic}` takes options only, such as "
                                       f"`{statistic}({next(iter(options))}={next(iter(options.values())):g})`",
                               a.loc)
                    ok = False
                    continue
                if a.name not in options:
                    self.error("E218", f"`{statistic}` has no option `{a.name}`", a.loc,
                               hint=did_you_mean(a.name, options) or f"its options: {', '.join(options)}")
                    ok = False
                    continue
                n = self.lower(a.value, Scope("const", env))
                v = self.cval(n) if n != ERR and self.is_const(n) else MISSING
                _, lo, hi = STATISTICS[statistic][a.name]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                    if n != ERR:
                        self.error("E218", f"`{a.name}` of `{statistic}` is a constant number in [{lo:g}, {hi:g}]",
                                   a.value.loc)
                    ok = False
                    continue
                options[a.name] = float(v)
            if statistic == "component_dominance" and len(self.components) < 2:
                self.error("E218", "`component_dominance` needs at least two components", stmt.value.loc,
                           hint="with one component the reward is that component: there is nothing to dominate")
                ok = False
            if not ok:
                return None
            return ir.AuditIR(stmt.name, int(settings["every"]), int(settings["window"]), float(settings["margin"]),
                              text, statistic=statistic, options=options, line=stmt.loc.line)
        comp = S.Component(stmt.loc, stmt.name, stmt.range, stmt.value, on_error=stmt.on_error,
                           timeout=stmt.timeout, clause_locs=dict(stmt.clause_locs))
        value = self.check_component(comp, env, what="audit")
        if value is None or not ok:
            return None
        return ir.AuditIR(stmt.name, int(settings["every"]), int(settings["window"]), float(settings["margin"]), text,
                          value=value, line=stmt.loc.line)

    _TOKENS_FORMS = "last, over(TEXT), spans, spans(uncovered=V), ends or split(TEXT, at=POS, before=A, after=B, " \
                    "edges=E)"

    def check_tokens(self, stmt: S.Component, sc: Scope, env: ModuleEnv, spans: int | None
                     ) -> tuple[dict | None, int | None]:
        """The ``tokens`` clause: how the component's value reaches tokens (docs/language.md, Token attribution).

        Returns the placement recorded in SPEC (``{"mode": ..., options}``) and the component's spans, which
        ``over`` and ``split`` lower to (``span(TEXT)``, ``split_at(TEXT, POS or -1, before=, after=)``)."""
        e = stmt.tokens
        assert e is not None
        if isinstance(e, S.Name):
            form, args = e.id, []
        elif isinstance(e, S.Call):
            form, args = e.func, list(e.args)
        else:
            form, args = "", []
        if form not in ("last", "over", "spans", "ends", "split"):
            self.error("E216", "`tokens` names how the value reaches tokens", e.loc, hint=f"use {self._TOKENS_FORMS}")
            return None, spans
        pos = [a.value for a in args if isinstance(a, S.Positional)]
        kws: dict[str, S.Keyword] = {}
        for a in args:
            if isinstance(a, S.Keyword):
                kws[a.name] = a
            elif not isinstance(a, S.Positional):
                self.error("E216", f"`tokens {form}(...)` takes plain and name=value arguments", a.loc)
                return None, spans
        allowed = {"last": (0, set()), "over": (1, set()), "spans": (0, {"uncovered", "overlap"}), "ends": (0, set()),
                   "split": (1, {"at", "before", "after", "edges"})}[form]
        if len(pos) != allowed[0]:
            want = "one text argument" if allowed[0] else "no plain arguments"
            self.error("E216", f"`tokens {form}` takes {want}", e.loc, hint=f"use {self._TOKENS_FORMS}")
            return None, spans
        for k, kw in kws.items():
            if k not in allowed[1]:
                self.error("E216", f"`tokens {form}` has no option `{k}`", kw.loc,
                           hint=f"options: {', '.join(sorted(allowed[1])) or 'none'}")
                return None, spans

        bad = object()  # a rejected option (ERR is a node id, which a number could equal)

        def number(name: str, default: float | None) -> Any:
            kw = kws.get(name)
            if kw is None:
                return default
            n = self.lower(kw.value, Scope("const", env))
            if n == ERR:
                return bad
            v = self.cval(n) if self.is_const(n) else None
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                self.error("E216", f"`{name}` is a constant number", kw.value.loc)
                return bad
            return float(v)

        if form in ("spans", "ends"):
            if spans is None:
                if stmt.spans is None:
                    self.error("E216", f"`tokens {form}` places the component's spans, but it has no `spans` clause",
                               e.loc, hint="add e.g. `spans matches(completion, /TODO/, value=-1)`")
                return None, spans
            if form == "ends":
                return {"mode": "ends"}, spans
            unc = number("uncovered", None)
            overlap = "add"
            okw = kws.get("overlap")
            if okw is not None:  # how the spans that overlap one token combine: "add" (default) or "last"
                n = self.lower(okw.value, Scope("const", env))
                overlap = self.cval(n) if n != ERR and self.is_const(n) else None
                if overlap not in ("add", "last"):
                    if n != ERR:
                        self.error("E216", '`overlap` is "add" (overlapping spans add) or "last" (a token takes the '
                                   "value of the last span it overlaps)", okw.value.loc)
                    return None, spans
            if unc is bad:
                return None, spans
            meta: dict[str, Any] = {"mode": "spans", "uncovered": unc}
            if overlap == "last":  # recorded only when set: specs without it keep their SPEC unchanged
                meta["overlap"] = "last"
            return meta, spans
        if form == "last":
            return {"mode": "last"}, spans
        if stmt.spans is not None:
            self.error("E216", f"`tokens {form}(...)` makes the component's spans; it cannot have a `spans` clause too",
                       stmt.clause_locs.get("spans", e.loc), hint="use `tokens spans` to place a `spans` clause")
            return None, spans
        text = pos[0]
        t = self.lower(text, sc)
        if t == ERR:
            return None, spans
        if not self.type_of(t).is_assignable_to(TEXT.optional()):
            self.error("E216", f"`tokens {form}` needs a piece of the completion (text), not `{self.type_of(t)}`",
                       text.loc, hint="e.g. code_block(completion, \"python\")")
            return None, spans
        if form == "over":
            call = S.Call(e.loc, "span", e.loc, [S.Positional(text.loc, text),
                                                 S.Keyword(e.loc, "label", S.String(e.loc, "over", '"over"'))])
            s = self.lower(call, sc)
            return ({"mode": "over"}, s) if s != ERR else (None, spans)
        if "at" not in kws:
            self.error("E216", "`tokens split` needs `at=POS`: the character of TEXT where `after` starts",
                       e.loc, hint="e.g. split(code, at=first_violation(code), before=1, after=-1, edges=2)")
            return None, spans
        at = self.lower(kws["at"].value, sc)
        if at == ERR:
            return None, spans
        if not self.type_of(at).is_assignable_to(NUMBER.optional()):
            self.error("E216", f"`at` is a character position (a number, none: nowhere), not `{self.type_of(at)}`",
                       kws["at"].value.loc)
            return None, spans
        vals = {k: number(k, d) for k, d in (("before", 1.0), ("after", -1.0), ("edges", None))}
        if any(v is bad for v in vals.values()):
            return None, spans
        at_expr = kws["at"].value
        if self.type_of(at).nullable:  # none: no violation, all `before` (split_at reads a negative position so)
            minus_one = S.Unary(at_expr.loc, "-", S.Number(at_expr.loc, 1.0, "1"))
            at_expr = S.BoolOp(at_expr.loc, "or", at_expr, minus_one)
        call = S.Call(e.loc, "split_at", e.loc, [
            S.Positional(text.loc, text), S.Positional(at_expr.loc, at_expr),
            S.Keyword(e.loc, "before", S.Number(e.loc, vals["before"], repr(vals["before"]))),
            S.Keyword(e.loc, "after", S.Number(e.loc, vals["after"], repr(vals["after"])))])
        s = self.lower(call, sc)
        return ({"mode": "split", "edges": vals["edges"]}, s) if s != ERR else (None, spans)

    def check_advantage(self, stmt: S.Advantage, env: ModuleEnv, comps: list[ir.ComponentIR]) -> ir.AdvantageIR | None:
        def scope_of(s: S.Scope) -> tuple[str, str | None] | None:
            if s.kind == "batch":
                return ("batch", None)
            key = s.key
            if key not in self.inputs and key not in ("prompt",):
                self.error("E301", f"`group({key})`: `{key}` is not an input", s.loc,
                           hint=did_you_mean(key or "", list(self.inputs) + ["prompt"])
                           or f"declare it: `input {key}: group`")
                return None
            if key == "prompt" and key not in self.inputs:
                self.inputs["prompt"] = (None, TEXT, "prompt")
            self.used_inputs.add(key)  # type: ignore[arg-type]
            return ("group", key)

        scope = scope_of(stmt.scope)
        if scope is None:
            return None
        stages: list[ir.StageIR] = []
        per_component = stmt.each_component
        ok = True
        for i, st in enumerate(stmt.stages):
            if st.scope is not None:
                new = scope_of(st.scope)
                if new is None:
                    ok = False
                    continue
                scope = new
            text = _unparse(st.value, self.sources)
            if isinstance(st.value, S.Name) and st.value.id == "sum":
                if not per_component:
                    self.error("E301", "`sum` adds per-component advantages; use it after `each component`",
                               st.value.loc)
                    ok = False
                per_component = False
                stages.append(ir.StageIR(scope, None, True, "sum"))
                continue
            expr: S.Expr = st.value
            if isinstance(expr, S.Name) and expr.id in STAGE_SHORTHANDS:
                expr = parse_expr(STAGE_SHORTHANDS[expr.id], st.value.loc)
            elif isinstance(expr, S.Call) and expr.func == "clip" and len(expr.args) == 2:
                expr = S.Call(expr.loc, "clip", expr.func_loc, [S.Positional(expr.loc, S.Name(expr.loc, "x"))]
                              + list(expr.args))
            elif isinstance(expr, S.Call) and expr.func == "standardize":
                kws = {a.name: a.value for a in expr.args if isinstance(a, S.Keyword)}
                ddof = _unparse(kws["ddof"], self.sources) if "ddof" in kws else "0"
                eps = _unparse(kws["eps"], self.sources) if "eps" in kws else "1e-8"
                expr = parse_expr(f"(x - mean) / (std(ddof={ddof}) + {eps})", st.value.loc)
            stage_in = self.g.add("stage_in", (), (i,), NUMBER)
            sc = Scope("stage", env, {}, None, stage_in, scope)
            node = self.lower(expr, sc)
            if node == ERR:
                ok = False
                continue
            if not self.type_of(node).is_assignable_to(NUMBER):
                self.error("E301", f"an advantage stage must be a number, not `{self.type_of(node)}`", st.value.loc)
                ok = False
                continue
            stages.append(ir.StageIR(scope, self.to_number(node), False, text))
        if per_component:
            self.error("E302", "`each component` normalizes components separately: add `then sum` to combine them",
                       stmt.loc, hint="advantage over group(prompt) each component = (x - mean) / (std + 1e-6) then sum")
            ok = False
        if not ok:
            return None
        return ir.AdvantageIR(_scope_of(stmt.scope), stmt.each_component, stages,
                              _slice(self.sources, stmt.loc))

    def check_example(self, stmt: S.Example, env: ModuleEnv, index: int) -> ir.ExampleIR | None:
        ok = True
        values: dict[str, Any] = {}
        for item in stmt.inputs:
            n = self.lower(item.value, Scope("const", env))
            if n == ERR:
                ok = False
                continue
            if not self.is_const(n):
                self.error("E401", "example inputs must be constants", item.value.loc)
                ok = False
                continue
            if item.name not in self.inputs and item.name not in ("completion", "prompt", "step", "group"):
                self.error("E401", f"`{item.name}` is not an input of this spec", item.loc,
                           hint=did_you_mean(item.name, list(self.inputs) + ["completion", "prompt"]))
                ok = False
                continue
            if item.name in values:
                self.error("E401", f"`{item.name}` is given twice", item.loc)
                ok = False
                continue
            values[item.name] = (self.cval(n), self.type_of(n), item.loc)
        # a list where the input is not a list means one row per item
        n_rows = None
        rows_cols: dict[str, list[Any]] = {}
        for name, (v, _t, loc) in values.items():
            declared = TEXT if name in ("completion", "prompt") else (
                NUMBER if name == "step" else (self.inputs[name][1] if name in self.inputs else ANY))
            if name == "group":
                declared = ANY
            many = isinstance(v, list) and not isinstance(declared.required(), ListOf) \
                or isinstance(v, list) and v and isinstance(v[0], list)
            col = list(v) if many else None
            if col is not None:
                if n_rows is not None and len(col) != n_rows:
                    self.error("E401", f"`{name}` gives {len(col)} rows, other inputs {n_rows}", loc)
                    ok = False
                n_rows = len(col)
                rows_cols[name] = col
            else:
                rows_cols[name] = [v]
            if name == "completion" and not all(isinstance(x, str) for x in rows_cols[name]):
                self.error("E401", "`completion` must be text", loc)
                ok = False
        if not ok:
            return None
        n_rows = n_rows or 1
        rows = [{k: (c[i] if len(c) > 1 or n_rows == 1 else c[0]) for k, c in rows_cols.items()}
                for i in range(n_rows)]
        expects = []
        comp_names = set(self.components)
        audit_names = {n for n, (a, _) in self.audits.items() if n not in comp_names}
        for ex in stmt.expects:
            if ex.name in self.rejected:
                ok = False  # the component is already an error (E107)
                continue
            if ex.name in audit_names and _is_statistic(self.audits[ex.name][0], self.sigs):
                self.error("E402", f"`{ex.name}` is a statistic of a training run: an example cannot expect it",
                           ex.loc, hint="examples expect components, audits of samples, `reward` and `advantage`")
                ok = False
                continue
            if ex.name not in comp_names and ex.name not in audit_names and ex.name not in ("reward", "advantage"):
                self.error("E402", f"`{ex.name}` is not a component", ex.loc,
                           hint=did_you_mean(ex.name, list(comp_names) + list(audit_names) + ["reward", "advantage"]))
                ok = False
                continue
            n = self.lower(ex.value, Scope("const", env))
            if n == ERR:
                ok = False
                continue
            v = self.cval(n) if self.is_const(n) else MISSING
            vals = v if isinstance(v, list) else [v]
            if v is MISSING or not all(x is None or isinstance(x, (int, float)) for x in vals):
                self.error("E402", "an expected value is a number, `none`, or a list of them", ex.value.loc)
                ok = False
                continue
            if len(vals) == 1 and n_rows > 1:
                vals = vals * n_rows
            if len(vals) != n_rows:
                self.error("E402", f"{len(vals)} expected values for {n_rows} rows", ex.value.loc)
                ok = False
                continue
            tol = 1e-9
            if ex.tolerance is not None:
                tn = self.lower(ex.tolerance, Scope("const", env))
                if tn == ERR:  # already reported (no follow-on error)
                    ok = False
                    continue
                if not self.is_const(tn) or not isinstance(self.cval(tn), (int, float)) \
                        or isinstance(self.cval(tn), bool):
                    self.error("E402", "a tolerance is a constant number", ex.tolerance.loc)
                    ok = False
                    continue
                tol = float(self.cval(tn))
                if not tol >= 0 or math.isinf(tol):  # NaN and a negative tolerance would fail every value
                    self.error("E402", f"a tolerance is a finite number >= 0, not {tol:g}", ex.tolerance.loc,
                               hint="`expect name = value +- tolerance`, e.g. `+- 1e-6`")
                    ok = False
                    continue
            expects.append((ex.name, [None if x is None else float(x) for x in vals], tol, ex.loc))
        if not ok:
            return None
        return ir.ExampleIR(stmt.name or f"example {index + 1}", stmt.loc.line, stmt.loc.file, rows, expects)

    def check_section(self, stmt: S.Section, env: ModuleEnv, train: dict[str, Any], locs: dict[str, S.Loc]) -> None:
        if stmt.kind == "preference":
            self.check_preference(stmt, env)
            return
        if stmt.kind != "train":
            close = did_you_mean(stmt.kind, STATEMENT_KEYWORDS)
            self.error("E501", f"unknown section `{stmt.kind}`", stmt.loc,
                       hint=(close + " " if close else "") + "(the sections: train, preference)")
            return
        for item in stmt.items:
            n = self.lower(item.value, Scope("const", env))
            if n == ERR:
                continue
            if not self.is_const(n):
                self.error("E502", f"train setting `{item.name}` must be a constant", item.value.loc)
                continue
            if item.name in train:
                self.error("E103", f"train setting `{item.name}` is given twice", item.loc)
                continue
            v = self.cval(n)
            train[item.name] = int(v) if isinstance(v, float) and v.is_integer() and "." not in _slice(
                self.sources, item.value.loc) and "e" not in _slice(self.sources, item.value.loc).lower() else v
            locs[item.name] = item.loc

    def check_preference(self, stmt: S.Section, env: ModuleEnv) -> None:
        """`preference { ... }`: how scored samples become DPO pairs and GEPO groups (rewardlang.preference mines
        them). Constant settings are checked against PREFERENCE_SETTINGS; `rank` is a number expression and
        `winners`/`losers` bool expressions over `reward`, the components and their weights."""
        pref: dict[str, Any] = getattr(self, "preference", None) or {}
        self.preference = pref
        for item in stmt.items:
            if item.name in pref:
                self.error("E103", f"preference setting `{item.name}` is given twice", item.loc)
                continue
            if item.name not in PREFERENCE_SETTINGS:
                self.error("E503", f"unknown preference setting `{item.name}`", item.loc,
                           hint=did_you_mean(item.name, PREFERENCE_SETTINGS))
                continue
            kind, allowed = PREFERENCE_SETTINGS[item.name]
            text = _slice(self.sources, item.value.loc)
            if kind in ("rank", "rule"):
                n = self.lower(item.value, Scope("preference", env))
                if n == ERR:
                    continue
                t = self.type_of(n)
                if kind == "rank" and not t.is_assignable_to(NUMBER.optional()):
                    self.error("E505", f"`{item.name}` is `{t}`, not a number", item.value.loc,
                               hint="rank by a number: `reward`, a component, or an expression of them")
                    continue
                if kind == "rule" and not t.is_assignable_to(BOOL.optional()):
                    self.error("E505", f"`{item.name}` is `{t}`, not a bool", item.value.loc,
                               hint="a rule is a condition, e.g. `rule == 1`")
                    continue
                pref[item.name] = (self.to_number(n) if kind == "rank" else n, text)
                continue
            n = self.lower(item.value, Scope("const", env))
            if n == ERR:
                continue
            if not self.is_const(n):
                self.error("E502", f"preference setting `{item.name}` must be a constant", item.value.loc)
                continue
            v = self.cval(n)
            ok = (kind == "choice" and v in allowed) or (
                kind in ("number", "count") and isinstance(v, (int, float)) and not isinstance(v, bool)
                and v == v and v >= allowed and (kind == "number" or float(v).is_integer()))
            if not ok:
                want = (" | ".join(f'"{a}"' for a in allowed) if kind == "choice" else
                        f"a {'whole ' if kind == 'count' else ''}number >= {allowed}")
                self.error("E504", f"preference setting `{item.name}` is `{text}`; it takes {want}", item.value.loc)
                continue
            pref[item.name] = (int(v) if kind == "count" else v, text)
        if "chosen_min" in pref and "rejected_max" in pref and pref["chosen_min"][0] < pref["rejected_max"][0]:
            self.error("E504", "preference `chosen_min` is below `rejected_max`: a sample could be both", stmt.loc,
                       hint="the threshold split needs chosen_min >= rejected_max")
        if "max_group" in pref and pref["max_group"][0] < pref.get("min_winners", (1,))[0] + pref.get(
                "min_losers", (1,))[0]:
            self.error("E504", "preference `max_group` is below min_winners + min_losers", stmt.loc)
        if pref.get("pairs", ("",))[0] == "threshold" and not ("chosen_min" in pref and "rejected_max" in pref):
            self.error("E504", '`pairs = "threshold"` needs `chosen_min` and `rejected_max`', stmt.loc,
                       hint="e.g. `chosen_min = 1, rejected_max = 0`: chosen rank >= 1, rejected rank <= 0")

    # ------------------------------------------------------------------ the whole spec
    def run(self, file: str, source: str) -> ir.Program | None:
        self.main_file = file
        self.import_roots = import_roots(file, self.import_search)
        loaded = self.load_module(file, source, None)
        self.apply_param_overrides()
        if loaded is None:
            return None
        module, env = loaded
        spec_name = Path(file).stem
        doc = ""
        seen: dict[type, S.Node] = {}
        for stmt in module.body:
            if isinstance(stmt, (S.SpecStmt, S.Reward, S.Advantage)):
                if type(stmt) in seen:
                    what = {S.SpecStmt: "`spec`", S.Reward: "`reward`", S.Advantage: "`advantage`"}[type(stmt)]
                    self.error("E103", f"{what} is given twice", stmt.loc,
                               hint=f"first on line {seen[type(stmt)].loc.line}")
                else:
                    seen[type(stmt)] = stmt
            if isinstance(stmt, S.SpecStmt):
                spec_name, doc = stmt.name, stmt.doc or ""
        for name, stmt in self.weights.items():
            if name in self.audits and name not in self.components:
                self.error("E219", f"`{name}` is an audit: it has no weight", stmt.loc,
                           hint="audits never enter the reward; to train on it, declare it as a component")
            elif name not in self.components and name not in self.rejected:
                self.error("E211", f"weight for unknown component `{name}`", stmt.loc,
                           hint=did_you_mean(name, self.components))
        comps = []
        for stmt, cenv in self.components.values():
            c = self.check_component(stmt, cenv)
            if c is not None:
                comps.append(c)
        for rstmt, renv in self.rejected.values():
            # a rejected definition's own errors are still errors, and what it uses counts as used
            self.lower(rstmt.value, Scope("row", renv))
        if not self.components and not self.rejected:
            self.warn("W005", "the spec has no components", None, hint="add `component name = expression`")
        # reward
        reward_stmt = seen.get(S.Reward)
        if reward_stmt is not None:
            r = self.lower(reward_stmt.value, Scope("reward", env))  # type: ignore[attr-defined]
            if r != ERR and not self.type_of(r).is_assignable_to(NUMBER.optional()):
                self.error("E215", f"the reward is `{self.type_of(r)}`, not a number",
                           reward_stmt.value.loc)  # type: ignore[attr-defined]
                r = ERR
            reward_text = _unparse(reward_stmt.value, self.sources)  # type: ignore[attr-defined]
            for name, w in self.weights.items():
                if name not in self.used_weights and name in self.components:
                    self.warn("W003", f"the weight of `{name}` is set but the reward does not use it", w.loc,
                              hint=f"write `{name}.weight * {name}` in the reward, or drop the `reward` line to "
                                   "get the weighted sum of all components")
            weighted_sum = False
            for name, loc in self.tokens_locs.items():
                self.error("E216", f"`{name}` has token attribution, so the reward must be the weighted sum of the "
                                   "components", loc, hint="drop the `reward` statement and set `NAME.weight = ...` "
                                                           "(per-token values add up with the weights)")
        else:
            r = ERR if not comps else None
            for c in comps:
                t = self.g.add("arith", (self.g.add("weight", (), (c.name,), NUMBER),
                                         self.g.add("comp", (), (c.name,), NUMBER)), ("*",), NUMBER)
                r = t if r is None else self.g.add("arith", (r, t), ("+",), NUMBER)
            reward_text = " + ".join(f"{c.name}.weight * {c.name}" for c in comps) or "0"
            weighted_sum = True
            if r is None or r == ERR:
                r = self.const(0.0, NUMBER)
        r = self.to_number(r) if r != ERR else ERR
        adv = None
        adv_stmt = seen.get(S.Advantage)
        if adv_stmt is not None:
            adv = self.check_advantage(adv_stmt, env, comps)  # type: ignore[arg-type]
        examples = []
        train: dict[str, Any] = {}
        train_locs: dict[str, S.Loc] = {}
        for stmt in module.body:
            if isinstance(stmt, S.Section):
                self.check_section(stmt, env, train, train_locs)
        for k in list(self.overrides):
            if k.startswith("train."):
                train[k[6:]] = _parse_scalar(self.overrides.pop(k))
        # audits: lowered after everything the reward reads, so an input only they read is known as such (the
        # reward's scoring never needs its column)
        before = set(self.used_inputs)
        audits = []
        for name, (astmt, aenv) in self.audits.items():
            if name in self.components:
                prev = self.components[name][0]
                self.error("E103", f"`{name}` is both a component and an audit", astmt.loc,
                           hint=f"the component is defined at {prev.loc.file}:{prev.loc.line}; rename the audit")
                continue
            a = self.check_audit(astmt, aenv)
            if a is not None:
                audits.append(a)
        audit_only = self.used_inputs - before
        for i, stmt in enumerate(s for s in module.body if isinstance(s, S.Example)):
            ex = self.check_example(stmt, env, i)
            if ex is not None:
                examples.append(ex)
        for k in self.overrides:
            known = list(self.params) + [f"{c}.weight" for c in self.components] + ["train.<setting>"]
            self.error("E602", f"--set {k}: no such parameter", None, hint=did_you_mean(k, known))
        # unused definitions
        for name, (stmt, _typ, _column) in self.inputs.items():
            if stmt is not None and name not in self.used_inputs and stmt.loc.file == file \
                    and name not in ("completion",):
                self.warn("W001", f"input `{name}` is never used", stmt.loc)
        for name, (stmt, lenv) in list(env.lets.items()):
            if lenv is env and name not in env.used_lets:
                self.warn("W002", f"`{name}` is never used", stmt.loc)
                self.lower_let(name, Scope("row", env), stmt.loc)  # its own errors are still errors
        if any(d.is_error for d in self.diags) or r == ERR:
            return None
        inputs = [ir.InputIR(n, t, col, n in self.used_inputs and n not in audit_only)
                  for n, (_, t, col) in self.inputs.items()]
        if not any(i.name == "completion" for i in inputs):
            inputs.insert(0, ir.InputIR("completion", TEXT, "completion", False))
        digest = hashlib.sha256()
        for f in sorted(self.sources):
            digest.update(f.encode() + b"\0" + self.sources[f].encode("utf-8", "surrogatepass") + b"\0")
        params = {n: v for n, (_, v, _) in self.params.items()}
        prog = ir.Program(spec_name, doc, file, self.g, inputs, comps, r, reward_text, weighted_sum, adv, examples,
                          train, params, digest.hexdigest(), dict(self.sources), audits, audit_only)
        prog.train_locs = train_locs  # type: ignore[attr-defined]
        prog.preference = getattr(self, "preference", None)  # type: ignore[attr-defined]
        prog.let_names = self.let_names  # type: ignore[attr-defined]
        return prog


# ---------------------------------------------------------------------- utilities

def _is_statistic(stmt: S.Audit, sigs: dict[str, Signature]) -> bool:
    v = stmt.value
    return (isinstance(v, S.Call) and v.func in STATISTICS and v.func not in sigs) or \
        (isinstance(v, S.Name) and v.id in STATISTICS)


def _scope_of(s: S.Scope) -> tuple[str, str | None]:
    return ("batch", None) if s.kind == "batch" else ("group", s.key)


def _slice(sources: dict[str, str], loc: S.Loc) -> str:
    src = sources.get(loc.file, "")
    return src[loc.start:loc.end]


def _unparse(e: S.Expr, sources: dict[str, str]) -> str:
    text = _slice(sources, e.loc)
    return " ".join(text.split()) if text else "?"


def parse_expr(text: str, loc: S.Loc) -> S.Expr:
    """Parse a language-defined expression (stage shorthands); it inherits ``loc`` for diagnostics."""
    mod = parse(f"let __e = {text}", loc.file)
    expr = mod.body[0].value  # type: ignore[union-attr]
    return _relocate(expr, loc)


def _relocate(node: Any, loc: S.Loc) -> Any:
    if isinstance(node, S.Node):
        object.__setattr__(node, "loc", loc)
        for f in node.__dataclass_fields__:
            _relocate(getattr(node, f), loc)
        if isinstance(node, S.Call):
            node.func_loc = loc
    elif isinstance(node, list):
        for x in node:
            _relocate(x, loc)
    return node


def _type_of_const(v: Any) -> Type:
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, (int, float)):
        return NUMBER
    if isinstance(v, str):
        return TEXT
    if v is None:
        return NONE
    if isinstance(v, tuple) and len(v) == 3 and v[0] in ("regex", "literal"):
        return REGEX
    if isinstance(v, (list, tuple)):
        return ListOf(_type_of_const(v[0]) if v else ANY)
    return ANY


def _common(a: Type, b: Type) -> Type | None:
    nullable = a.nullable or b.nullable
    ar, br = a.required(), b.required()
    if ar == NONE.required() or a == NONE:
        return b.optional()
    if br == NONE.required() or b == NONE:
        return a.optional()
    if ar.is_assignable_to(br):
        out = br
    elif br.is_assignable_to(ar):
        out = ar
    else:
        return None
    if {ar, br} == {CODE, TEXT}:
        out = TEXT
    return out.optional() if nullable else out


def _arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "%":
        return a % b
    if op == "**":
        r = a ** b
        if isinstance(r, complex):
            raise ValueError(f"{a:g} ** {b:g} is not a real number")
        return float(r)
    raise ValueError(op)


def _compare(op: str, a: Any, b: Any) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _math(fn: str, x: float, digits: int = 0) -> float:
    if fn == "abs":
        return abs(x)
    if fn == "round":
        return float(round(x, digits))
    if fn == "sigmoid":
        return 1.0 / (1.0 + math.exp(-x))
    return float(getattr(math, fn)(x))


def _parse_scalar(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def coerce_override(raw: Any, typ: Type) -> Any:
    """A ``--set`` value (text from the command line, or a Python value) as a value of ``typ``."""
    v = _parse_scalar(raw)
    base = typ.required()
    if base == NUMBER:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return MISSING  # inf and nan too: they have no JSON form (E217 for constants in a spec)
        return float(v)
    if base == BOOL:
        return v if isinstance(v, bool) else MISSING
    if base.is_assignable_to(TEXT):
        return raw if isinstance(raw, str) else MISSING
    if isinstance(base, ListOf):
        if isinstance(raw, str):
            import json
            try:
                raw = json.loads(raw)
            except ValueError:
                return MISSING
        return list(raw) if isinstance(raw, (list, tuple)) else MISSING
    return v


#: Python's spellings of the literals, and rewardlang's
_PYTHON_LITERALS = {"None": "none", "True": "true", "False": "false", "null": "none", "nil": "none",
                    "TRUE": "true", "FALSE": "false"}

#: what each reserved name already means (the hint of E107)
_RESERVED_MEANING = {
    "completion": "the model's completion", "prompt": "the prompt", "step": "the training step",
    "reward": "the total reward", "x": "the value an advantage stage transforms", "true": "the bool true",
    "false": "the bool false", "none": "no value", "advantage": "the advantage",
}


def canonical_path(file: str) -> str:
    """The real path of a spec file (a name like ``<string>`` stays as it is): what tells two spellings of one
    imported file apart from two files.

        >>> canonical_path("<string>")
        '<string>'
    """
    if file.startswith("<"):
        return file
    try:
        return os.path.realpath(file)
    except (OSError, ValueError):
        return file


def strip_bom(source: str) -> str:
    """Editors on Windows start UTF-8 files with a byte-order mark; it is not part of the spec.

        >>> strip_bom("\ufeffcomponent n = 1")
        'component n = 1'
    """
    return source[1:] if source.startswith("\ufeff") else source


def _spell(v: Any) -> str:
    """A constant as a spec writes it (``true``, ``none``, ``"text"``, ``[1, 2]``), for messages and hints.

        >>> _spell(True), _spell(None), _spell("a b"), _spell([1, 2.5, False])
        ('true', 'none', '"a b"', '[1, 2.5, false]')
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_spell(x) for x in v) + "]"
    return repr(v)


def _non_finite(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def check_source(source: str, file: str, signatures: dict[str, Signature], params: dict[str, Any] | None = None,
                 read_file: Callable[[str], str] | None = None, import_path: Iterable[str] | None = None
                 ) -> tuple[ir.Program | None, list[Diagnostic], dict[str, str]]:
    """Check ``source`` (the spec at ``file``) and lower it. Its imports read only inside its folder and the
    search path (``import_path``, ``$REWARDLANG_IMPORT_PATH``, the shipped library; rewardlang.specfiles).

    Returns the program (None on errors), all diagnostics (warnings too) sorted by location, and the source
    of every file read (the spec and its imports), for rendering the diagnostics.
    """
    source = strip_bom(source)
    ch = Checker(signatures, params, read_file, import_path)
    try:
        with deep_recursion():  # a long flat chain of terms or of lets (bounded by the parser) recurses
            prog = ch.run(file, source)
    except RecursionError:
        ch.error("E001", "expression nested too deeply", S.Loc(file, 1, 1, 1, 2),
                 hint="split it into `let` definitions")
        prog = None
    if any(d.is_error for d in ch.diags):
        prog = None
    ch.sources.setdefault(file, source)
    return prog, unique_diagnostics(ch.diags), dict(ch.sources)


def unique_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics sorted by location, each once: a `let` is lowered once per timeout of the components that
    use it (its calls run under that timeout), so an error in its value would otherwise be reported once per
    distinct timeout."""
    seen: set[tuple] = set()
    out = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        key = (d.code, d.message, d.loc, d.hint, tuple(d.notes))
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def check_file(path: str, signatures: dict[str, Signature], params: dict[str, Any] | None = None
               ) -> tuple[ir.Program | None, list[Diagnostic], dict[str, str]]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return None, [Diagnostic("E105", f"cannot read `{path}`: {exc.strerror or exc}", None)], {}
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        d, shown = not_utf8(path, raw, exc)
        return None, [d], {path: shown}
    return check_source(source, path, signatures, params)


def not_utf8(path: str, raw: bytes, exc: UnicodeDecodeError) -> tuple[Diagnostic, str]:
    r"""E005 for a spec file that is not UTF-8, located at the first bad byte (line, column in characters), and the
    text to show it in (each bad byte replaced by U+FFFD).

        >>> raw = b'let a = 1\nlet s = "caf\xe9"\n'
        >>> d, shown = not_utf8("a.reward", raw, UnicodeDecodeError("utf-8", raw, 22, 23, "invalid byte"))
        >>> d.code, d.loc.line, d.loc.column, shown.splitlines()[1] == 'let s = "caf\ufffd"'
        ('E005', 2, 13, True)
    """
    start = exc.start
    line_start = raw.rfind(b"\n", 0, start) + 1
    line = raw.count(b"\n", 0, start) + 1
    column = len(raw[line_start:start].decode("utf-8", "replace")) + 1
    shown = raw.decode("utf-8", "replace")
    offset = len(raw[:start].decode("utf-8", "replace"))
    loc = S.Loc(path, line, column, line, column + 1, offset, offset + 1)
    return Diagnostic("E005", f"`{path}` is not valid UTF-8 (byte {start}: 0x{raw[start]:02x})", loc,
                      hint="save the file as UTF-8 (an editor's 'encoding' setting; `iconv -f latin1 -t utf-8` "
                           "converts a Latin-1 file)"), shown
