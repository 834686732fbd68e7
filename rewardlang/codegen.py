"""Code generation: IR → a readable, self-contained Python module.

The module has four functions over the whole batch — ``rows`` (every component's per-sample column, with
NumPy/Numba kernels), ``weights`` (the weights at a training step), ``reward`` (the total from component
values) and ``advantage`` (the normalization pipeline) — plus ``SPEC``, the metadata the runtime needs. It
needs no ``.reward`` file at run time: ``rewardlang.runtime.program.Program.from_module`` runs it.

User strings (regexes, literals, tag names) enter the module only through ``repr()`` of validated Python
values, never by pasting source text, so no spec can inject code.

A spec's ``audit`` declarations never reach these functions: the audits of samples are a second module, generated
from the same graph with the audits as its components, whose source the first holds as the text ``AUDITS`` (the
runtime compiles it only when audits are scored: ``Program.audit``). ``SPEC["audits"]`` describes every audit.
"""

from __future__ import annotations

import pprint
from typing import Any

from rewardlang import ir
from rewardlang.version import __version__

__all__ = ["generate"]

_ROW_KERNELS = {
    "neg": "K.neg", "num": "K.num", "concat": "K.concat", "to_text": "K.to_text", "not": "K.not_",
    "and": "K.and_", "or": "K.or_", "is_none": "K.is_none", "if": "K.if_", "coalesce": "K.coalesce",
    "len": "K.length", "index": "K.index",
}


def _docstring(text: str) -> str:
    """A triple-quoted literal of ``text`` that nothing in it can end early: quotes and backslashes are escaped,
    and so is every character other than the newline that Python's tokenizer could read as a line break."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n" or (ch.isprintable() and ch not in "\x85\u2028\u2029"):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return '"""' + "".join(out) + '"""'


def _lit(value: Any) -> str:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, (bool, int, str)) or value is None:
        return repr(value)
    if isinstance(value, tuple):
        return "(" + "".join(_lit(v) + ", " for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_lit(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot emit constant {value!r}")  # pragma: no cover - the checker only folds the above


class _Emitter:
    def __init__(self, prog: ir.Program, let_names: dict[int, str]) -> None:
        self.p = prog
        self.g = prog.graph
        self.let_names = let_names
        self.consts: list[str] = []       # module-level constant lines
        self.const_names: dict[Any, str] = {}
        self.fn_names: dict[str, str] = {}
        # which components each node feeds (calls report their time to them)
        self.users: dict[int, list[str]] = {}
        for c in prog.components:
            for nid in self.g.closure([c.value] + ([c.spans] if c.spans is not None else [])):
                self.users.setdefault(nid, []).append(c.name)

    def module_const(self, key: Any, expr: str, prefix: str) -> str:
        if key in self.const_names:
            return self.const_names[key]
        name = f"_{prefix}{len(self.const_names)}"
        self.const_names[key] = name
        self.consts.append(f"{name} = {expr}")
        return name

    def fn(self, name: str) -> str:
        if name not in self.fn_names:
            var = self.module_const(("fn", name), f"_function({name!r})", "f")
            self.fn_names[name] = var
        return self.fn_names[name]

    def const(self, value: Any) -> str:
        if isinstance(value, tuple) and len(value) == 3 and value[0] in ("regex", "literal"):
            return self.module_const(("re",) + value, f"K.pattern({_lit(value[0])}, {_lit(value[1])}, "
                                                      f"{_lit(value[2])})", "re")
        if isinstance(value, list) and value and isinstance(value[0], tuple) and len(value[0]) == 3 \
                and value[0][0] in ("regex", "literal"):
            return "[" + ", ".join(self.const(v) for v in value) + "]"
        return _lit(value)

    # ---- the per-sample phase
    def row_expr(self, node: ir.Node, var: dict[int, str]) -> str:
        a = [var[i] for i in node.args]
        k = node.kind
        if k == "const":
            return self.const(node.value)
        if k == "input":
            return f"I[{node.attrs[0]!r}]"
        if k == "step":
            return "step"
        if k == "call":
            name, layout, params_json, timeout, spans_index = node.attrs
            f = self.fn(name)
            lay = self.module_const(("layout", layout), _lit(tuple(tuple(e) for e in layout)), "L")
            params = "None"
            if params_json is not None:
                params = self.module_const(("params", name, repr(params_json)),
                                           f"{f}.signature.params.model_validate({_lit(params_json)})", "P")
            users = ",".join(self.users.get(node.id, ())) or None
            return (f"K.call(ctx, {f}, {lay}, ({''.join(x + ', ' for x in a)}), {params}, "
                    f"{_lit(spans_index)}, {_lit(timeout)}, {_lit(users)})")
        if k == "arith":
            return f"K.arith({node.attrs[0]!r}, {a[0]}, {a[1]})"
        if k == "cmp":
            return f"K.cmp({node.attrs[0]!r}, {a[0]}, {a[1]})"
        if k == "math":
            fn, digits = node.attrs
            return f"K.math_({fn!r}, {a[0]}" + (f", {digits}" if digits else "") + ")"
        if k == "minmax":
            return f"K.minmax({node.attrs[0]!r}, {a[0]}, {a[1]})"
        if k == "step_fn":
            arms = self.module_const(("arms", node.attrs[0]), _lit(node.attrs[0]), "T")
            return f"K.step_fn({arms}, {', '.join(a)})"
        if k == "piecewise":
            return f"K.piecewise({_lit(node.attrs[0])}, {_lit(node.attrs[1])}, {a[0]})"
        if k == "schedule":
            kind, a0, b0, steps, start = node.attrs
            return f"K.schedule({kind!r}, {a0!r}, {b0!r}, {steps!r}, {start!r}, {a[0]})"
        if k in _ROW_KERNELS:
            return f"{_ROW_KERNELS[k]}({', '.join(a)})"
        raise ValueError(f"node kind {k!r} in the per-sample phase")  # pragma: no cover

    # ---- scalar, reward and advantage phases: plain NumPy over float arrays (NaN = masked)
    def np_expr(self, node: ir.Node, var: dict[int, str]) -> str:
        a = [var[i] for i in node.args]
        k = node.kind
        if k == "const":
            v = node.value
            if v is None:  # none is NaN in these phases (a masked value)
                return "float('nan')"
            return _lit(float(v) if isinstance(v, bool) else v)
        if k == "is_none":
            return f"A.is_none({a[0]})"
        if k == "step":
            return "step"
        if k == "comp":
            return f"C[{node.attrs[0]!r}]"
        if k == "weight":
            return f"W[{node.attrs[0]!r}]"
        if k == "total":
            return "R"
        if k == "stage_in":
            return "x"
        if k == "agg":
            fn, ddof, scope = node.attrs
            key = "None" if scope[0] == "batch" else repr(scope[1])
            return f"A.aggregate({fn!r}, {a[0]}, G, {key}" + (f", ddof={ddof}" if fn == "std" else "") + ")"
        if k == "arith":
            op = node.attrs[0]
            return f"({a[0]} {op} {a[1]})"
        if k == "neg":
            return f"(-{a[0]})"
        if k == "num":
            return f"A.as_float({a[0]})"
        if k == "cmp":
            return f"({a[0]} {node.attrs[0]} {a[1]})"
        if k == "and":
            return f"A.logical_and({a[0]}, {a[1]})"
        if k == "or":
            return f"A.logical_or({a[0]}, {a[1]})"
        if k == "not":
            return f"A.logical_not({a[0]})"
        if k == "if":
            return f"A.where({a[0]}, {a[1]}, {a[2]})"
        if k == "math":
            fn, digits = node.attrs
            return f"A.math({fn!r}, {a[0]}" + (f", {digits}" if digits else "") + ")"
        if k == "minmax":
            return f"A.{'minimum' if node.attrs[0] == 'min' else 'maximum'}({a[0]}, {a[1]})"
        if k == "step_fn":
            arms = self.module_const(("arms", node.attrs[0]), _lit(node.attrs[0]), "T")
            return f"A.step_fn({arms}, {', '.join(a)})"
        if k == "piecewise":
            return f"A.interp({a[0]}, {_lit(node.attrs[0])}, {_lit(node.attrs[1])})"
        if k == "schedule":
            kind, a0, b0, steps, start = node.attrs
            return f"K.schedule({kind!r}, {a0!r}, {b0!r}, {steps!r}, {start!r}, {a[0]})"
        raise ValueError(f"node kind {k!r} outside the per-sample phase")  # pragma: no cover

    def body(self, roots: list[int], emit: Any, indent: str = "    ", inline_consts: bool = True
             ) -> tuple[list[str], dict[int, str]]:
        lines: list[str] = []
        var: dict[int, str] = {}
        used_names: set[str] = set()
        for nid in self.g.closure(roots):
            node = self.g[nid]
            expr = emit(node, var)
            trivial = node.kind in ("const", "input", "step", "comp", "weight", "total", "stage_in")
            if trivial and inline_consts:
                var[nid] = expr
                continue
            name = self.let_names.get(nid)
            if name is None or name in used_names:
                name = f"v{nid}"
            used_names.add(name)
            lines.append(f"{indent}{name} = {expr}")
            var[nid] = name
        return lines, var


def generate(prog: ir.Program, let_names: dict[int, str] | None = None, source_file: str | None = None) -> str:
    """The Python source of the compiled program."""
    em = _Emitter(prog, let_names or {})

    # rows
    roots = [c.value for c in prog.components] + [c.spans for c in prog.components if c.spans is not None]
    row_lines, row_var = em.body(roots, em.row_expr)
    rows_fn = ["def rows(I, ctx, step=0, trace=None):",
               '    """Every component\'s value (and spans) for each unique sample of the batch (the runtime calls it with '
               'validated column objects and a Context; from Python, call score() or program() below)."""']
    rows_fn += row_lines
    rows_fn.append("    if trace is not None:  # `rewardlang explain` reads the intermediate values")
    rows_fn.append("        trace.update(locals())")
    rows_fn.append("    return {")
    for c in prog.components:
        spans = row_var[c.spans] if c.spans is not None else "None"
        rows_fn.append(f"        {c.name!r}: ({row_var[c.value]}, {spans}),")
    rows_fn.append("    }")

    # weights
    w_lines, w_var = em.body([c.weight for c in prog.components], em.np_expr)
    weights_fn = ["def weights(step=0):", '    """The weight of each component at a training step."""'] + w_lines
    weights_fn.append("    return {" + ", ".join(f"{c.name!r}: float({w_var[c.weight]})" for c in prog.components)
                      + "}")

    # reward
    r_lines, r_var = em.body([prog.reward], em.np_expr)
    # every text that comes from the spec enters the module through repr(): it cannot end a string early
    reward_fn = ["def reward(C, W, step=0):", "    " + _docstring(f"reward = {prog.reward_text}")] + r_lines + [f"    return A.as_float({r_var[prog.reward]})"]

    # advantage
    adv_fn: list[str] = []
    if prog.advantage is not None:
        adv = prog.advantage
        adv_fn = ["def advantage(R, C, W, G, step=0):", "    " + _docstring(adv.text)]
        stage_fns = []
        for i, st in enumerate(adv.stages):
            if st.is_sum:
                continue
            lines, var = em.body([st.node], em.np_expr, indent="        ")
            stage_fns.append((i, lines, var[st.node], st.text))
        for i, lines, result, text in stage_fns:
            adv_fn.append(f"    def stage{i}(x):")
            adv_fn.append("        " + _docstring(text))
            adv_fn += lines
            adv_fn.append(f"        return A.as_float({result})")
        per_component = adv.each_component
        if per_component:
            adv_fn.append("    xs = dict(C)")
        else:
            adv_fn.append("    x = R")
        for i, st in enumerate(adv.stages):
            if st.is_sum:
                adv_fn.append("    x = A.weighted_sum(xs, W)")
                per_component = False
            elif per_component:
                adv_fn.append(f"    xs = {{name: stage{i}(v) for name, v in xs.items()}}")
            else:
                adv_fn.append(f"    x = stage{i}(x)")
        adv_fn.append("    return x")

    # preference: the ranking and the winner/loser rules of `preference { }`, over the same columns as the reward
    pref_fn: list[str] = []
    pref = getattr(prog, "preference", None)
    pref_meta = None
    if pref is not None:
        exprs = {k: v for k, v in pref.items() if k in ("rank", "winners", "losers")}
        pref_meta = {k: (v[0] if k not in exprs else v[1]) for k, v in pref.items()}
        p_lines, p_var = em.body([v[0] for v in exprs.values()], em.np_expr)
        pref_fn = ["def preference(R, C, W, step=0):",
                   '    """The `preference { }` expressions (rank, winners, losers) for each sample."""'] + p_lines
        pref_fn.append("    return {" + ", ".join(
            f"{k!r}: A.as_float({p_var[v[0]]})" for k, v in exprs.items()) + "}")

    audits_source = _audits_module(prog, let_names or {}, source_file)

    meta = {
        "name": prog.name,
        "doc": prog.doc,
        "file": source_file or prog.file,
        "source_hash": prog.source_hash,
        "rewardlang": __version__,
        "inputs": [{"name": i.name, "type": str(i.type), "column": i.column, "used": i.used} for i in prog.inputs],
        "components": [{"name": c.name, "range": c.range, "on_error": c.on_error, "on_error_given": c.on_error_given,
                        "timeout": c.timeout, "weight": c.weight_text, "has_spans": c.spans is not None,
                        "tokens": c.tokens}
                       for c in prog.components],
        "reward": prog.reward_text,
        "reward_is_weighted_sum": prog.reward_is_weighted_sum,
        "reward_components": sorted({em.g[i].attrs[0] for i in em.g.closure([prog.reward])
                                     if em.g[i].kind == "comp"}),
        "advantage": None if prog.advantage is None else {
            "text": prog.advantage.text, "scope": list(prog.advantage.scope),
            "group_keys": sorted({s.scope[1] for s in prog.advantage.stages if s.scope[0] == "group"}
                                 | ({prog.advantage.scope[1]} if prog.advantage.scope[0] == "group" else set())),
            "each_component": prog.advantage.each_component},
        "train": prog.train,
        "preference": pref_meta,
        "params": prog.params,
        "examples": [{"name": e.name, "file": e.file, "line": e.line, "rows": e.rows,
                      "expects": [(n, v, t) for n, v, t, _ in e.expects]} for e in prog.examples],
        "row_inputs": sorted({em.g[i].attrs[0] for i in em.g.closure(roots) if em.g[i].kind == "input"}),
        "functions": sorted(em.fn_names),
        "audits": [{"name": a.name, "kind": "statistic" if a.statistic else "samples", "every": a.every,
                    "window": a.window, "margin": a.margin, "text": a.text, "statistic": a.statistic,
                    "options": dict(a.options), "line": a.line,
                    "range": None if a.value is None else a.value.range} for a in prog.audits],
    }
    doc = "\n".join([
        f"Reward program `{prog.name}`, compiled by rewardlang {__version__} from {source_file or prog.file}.",
        "",
        prog.doc or "Generated code: edit the spec, not this file.",
        "",
        f"Spec sha256: {prog.source_hash}",
        f"Parameters: {', '.join(f'{k}={v!r}' for k, v in prog.params.items()) or 'none'}",
        "Load it with `rewardlang.runtime.program.Program.from_module(module)`; it needs no .reward file.",
    ])
    header = [
        _docstring(doc),
        "",
        "from rewardlang.runtime import kernels as K",
        "from rewardlang.runtime import aggregates as A",
        "from rewardlang.runtime.registry import get as _function",
        "",
        "inf, nan = float('inf'), float('nan')  # for constants that repr() writes as bare inf / nan",
        "",
        "SPEC = " + pprint.pformat(meta, width=110, sort_dicts=False),
        "",
        "# functions, patterns and options used below (validated when the spec was compiled)",
    ]
    body = header + em.consts + ["", ""] + rows_fn + ["", ""] + weights_fn + ["", ""] + reward_fn
    if audits_source is not None:
        body += ["", "", "# the audits' own module (never part of the reward): Program.audit compiles and runs it",
                 "AUDITS = " + repr(audits_source)]
    if adv_fn:
        body += ["", ""] + adv_fn
    if pref_fn:
        body += ["", ""] + pref_fn
    body += ["", ""] + _API
    return "\n".join(body)


def _audits_module(prog: ir.Program, let_names: dict[int, str], source_file: str | None) -> str | None:
    """The source of the audits' module: the spec's audits of samples as the components of a program of their own
    (same graph, inputs, params and functions), whose reward is 0 and which has no advantage, preference or
    examples. None when the spec has no such audit."""
    comps = [a.value for a in prog.audits if a.value is not None]
    if not comps:
        return None
    from dataclasses import replace

    from rewardlang.types import NUMBER

    g = prog.graph
    roots = [c.value for c in comps]
    read = {g[i].attrs[0] for i in g.closure(roots) if g[i].kind == "input"}
    sub = ir.Program(f"{prog.name}_audits", f"The audits of spec `{prog.name}` (never part of its reward).",
                     prog.file, g, [replace(i, used=i.name in read) for i in prog.inputs], comps,
                     g.const(0.0, NUMBER), "0", False, None, [], {}, prog.params, prog.source_hash, {})
    return generate(sub, let_names, source_file)


#: the module's public face: run it as a script, or call program()/score() from Python. rows(), weights(),
#: reward() and advantage() above are the runtime's entry points (rows() takes validated column objects and
#: a Context), not meant to be called directly.
_API = '''_PROGRAM = None


def program():
    """This module as a :class:`rewardlang.runtime.program.Program` (built once): ``program().score(...)``."""
    global _PROGRAM
    if _PROGRAM is None:
        import sys
        import types

        from rewardlang.runtime.program import Program

        module = sys.modules.get(__name__)
        if module is None or getattr(module, "SPEC", None) is not SPEC:  # loaded without sys.modules
            module = types.SimpleNamespace(**globals())
        _PROGRAM = Program.from_module(module)
    return _PROGRAM


def score(completion=None, **columns):
    """Score a batch: ``score(completion=[...], prompt=[...])`` -> ScoreResult (``.total``, ``.components``,
    ``.advantages``, ``.errors``), exactly as ``rewardlang.load(spec).score(...)`` would."""
    return program().score(completion, **columns)


if __name__ == "__main__":  # python this_module.py [-i rows.jsonl] [-o scored.jsonl] [--group-by COLUMN]
    from rewardlang.runtime.scoring import module_main

    raise SystemExit(module_main(program()))
'''.splitlines()
