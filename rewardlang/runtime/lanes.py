"""Independent components at the same time: a batch's components that share no function call run in lanes,
one thread each, when two or more of them call functions that run their own processes.

The generated ``rows`` function computes the components one after the other. When a component's work is done in
other processes (``in_workers=False`` functions: the sandbox's ``tests_pass_rate``, the code-quality tools of
``quality_score``), the calling thread mostly waits, and so does one of the machine's cores: on a 16-row batch of
``quality_grpo.reward`` the sandbox's programs keep ~1.3 cores busy and the analysers ~1.7, one after the other.
Run side by side they fill both cores (docs/scale.md, "Server").

:func:`plan` reads the ``rows`` function of a generated module (statements ``name = expression`` in dependency
order, then ``return {component: (value, spans)}``) and groups the components: two components are in one lane when
one function call serves both (a ``let`` both read), or when they call out-of-process functions of the same module
(they may share state, such as the sandbox's pool: never used from two threads). Functions that run in-process
(``in_workers=True``) hold no state: they also run in the scoring worker processes. Each lane is a
function of its own, compiled from the statements its components need; what two lanes both need (a ``let`` of
in-process work, such as the code block both read) is computed once before the lanes start. Lanes whose calls all run in-process (``in_workers=True``: NumPy kernels,
text functions) join the first lane. No lanes (None) when fewer than two lanes call out-of-process functions.

Every value, mask and error is the one the sequential ``rows`` gives: each lane runs the same statements on the
same inputs. The counters functions add to ``ctx.stats`` are counted per lane and merged as differences, so a
counter two lanes both add to gets both additions and a value one lane sets (a level, a maximum) is that lane's.
An exception in a lane is raised after every lane has finished (the functions' processes are never used from two
threads, even while the caller retries); an interrupt (``KeyboardInterrupt``, the CLI's ``Interrupted``) is
raised at once, and the other lanes' runs end on their own deadlines.
``REWARDLANG_COMPONENT_LANES=0`` turns lanes off (one component after the other).

    >>> import rewardlang
    >>> prog = rewardlang.load("specs/quality_grpo.reward")
    >>> lanes = plan(prog.python_source, prog.module)
    >>> [sorted(names) for names in lanes.components]
    [['correct', 'format'], ['quality']]
"""

from __future__ import annotations

import ast
import copy
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Lanes", "enabled", "plan"]

_ENV = "REWARDLANG_COMPONENT_LANES"


def enabled() -> bool:
    """Whether independent components may run at the same time (``REWARDLANG_COMPONENT_LANES=0``: never)."""
    return os.environ.get(_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


class Lanes:
    """The lanes of one program: ``functions[k](I, ctx, step, None, shared)`` returns ``{component: (value,
    spans)}`` for the components ``components[k]``; ``shared`` is what :attr:`shared` returned."""

    def __init__(self, functions: list[Callable[..., dict]], components: list[tuple[str, ...]],
                 order: list[str], shared: Callable[..., dict] | None = None) -> None:
        self.functions = functions
        #: computes, before the lanes start, the values several lanes need (``{name: value}``)
        self.shared = shared
        self.components = components
        #: the components in the order ``rows`` returns them
        self.order = order

    def run(self, I: Any, ctx: Any, step: int = 0) -> dict[str, Any]:
        """Every component's ``(value, spans)``, the first lane in this thread and the others beside it."""
        from dataclasses import replace

        shared = self.shared(I, ctx, step) if self.shared is not None else {}
        stats = ctx.stats
        snapshot = Counter(stats)
        contexts = [replace(ctx, stats=Counter(snapshot)) for _ in self.functions]
        results: list[Any] = [None] * len(self.functions)
        failures: list[BaseException | None] = [None] * len(self.functions)

        def lane(k: int) -> None:
            try:
                results[k] = self.functions[k](I, contexts[k], step, None, shared)
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                failures[k] = exc

        threads = [threading.Thread(target=lane, args=(k,), name=f"rewardlang-lane-{k}", daemon=True)
                   for k in range(1, len(self.functions))]
        for t in threads:
            t.start()
        try:
            results[0] = self.functions[0](I, contexts[0], step, None, shared)
        except Exception as exc:  # noqa: BLE001 - raised once the other lanes have finished
            failures[0] = exc
        # an interrupt is not caught: it propagates at once (the other lanes are daemon threads)
        for t in threads:
            t.join()
        for c in contexts:
            _merge(stats, snapshot, c.stats)
        for exc in failures:
            if exc is not None:
                raise exc
        merged: dict[str, Any] = {}
        for r in results:
            merged.update(r)
        return {name: merged[name] for name in self.order}


def _merge(target: Any, snapshot: Counter, lane: Mapping[str, Any]) -> None:
    """Add what a lane changed in its copy of the counters to ``target``."""
    for k, v in lane.items():
        old = snapshot.get(k)
        if k in snapshot and v == old:
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (old is None or isinstance(old, (int, float))):
            target[k] = target.get(k, 0) + (v - (old or 0))
        else:
            target[k] = v


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "call" and isinstance(n.func.value, ast.Name) and n.func.value.id == "K"]


def plan(source: str, module: Any) -> Lanes | None:
    """The lanes of the generated module ``module`` (its source ``source``), or None (see the module docstring)."""
    from rewardlang.runtime.api import Implementation

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "rows"), None)
    if fn is None:
        return None
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) < 2 or not isinstance(body[-1], ast.Return) or not isinstance(body[-1].value, ast.Dict):
        return None
    ret = body[-1].value
    stmts: list[ast.Assign] = []
    for st in body[:-1]:
        if isinstance(st, ast.If) and isinstance(st.test, ast.Compare) and _names(st.test) == {"trace"}:
            continue  # `if trace is not None: trace.update(locals())`: explain only, never in a lane
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
            return None  # not the shape codegen emits: run it as it is
        stmts.append(st)
    defined: dict[str, int] = {}
    for i, st in enumerate(stmts):
        name = st.targets[0].id  # type: ignore[union-attr]
        if name in defined or name in ("I", "ctx", "step", "trace"):
            return None
        defined[name] = i
    deps = [{defined[n] for n in _names(st.value) if n in defined and defined[n] < i} for i, st in enumerate(stmts)]
    outputs: dict[str, set[int]] = {}
    order: list[str] = []
    for key, value in zip(ret.keys, ret.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        order.append(key.value)
        todo = [defined[n] for n in _names(value) if n in defined]
        need: set[int] = set()
        while todo:
            i = todo.pop()
            if i not in need:
                need.add(i)
                todo.extend(deps[i])
        outputs[key.value] = need
    # union-find over components: one call serving two components, or two components calling one module
    parent = {c: c for c in order}

    def find(c: str) -> str:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    external: set[str] = set()
    by_module: dict[str, str] = {}
    for i, st in enumerate(stmts):
        users = [c for c in order if i in outputs[c]]
        for call in _calls(st.value):
            impl = getattr(module, call.args[1].id, None) if len(call.args) > 1 and isinstance(call.args[1], ast.Name) \
                else None
            if not isinstance(impl, Implementation):
                return None
            if impl.in_workers:  # runs in this process (and in the scoring worker processes): holds no state
                continue
            for c in users[1:]:  # one run serves them all: one lane
                union(users[0], c)
            for c in users:
                external.add(c)
                if impl.module in by_module:
                    union(c, by_module[impl.module])
                else:
                    by_module[impl.module] = c
    groups: dict[str, list[str]] = {}
    for c in order:
        groups.setdefault(find(c), []).append(c)
    lanes = [g for g in groups.values() if any(c in external for c in g)]
    if len(lanes) < 2:
        return None
    lanes[0] = lanes[0] + [c for g in groups.values() if not any(c in external for c in g) for c in g]
    needs = [set().union(*(outputs[c] for c in comps)) for comps in lanes]
    # what two lanes both need (in-process work only: an out-of-process call serves one lane) runs once, first
    shared = sorted(i for i in range(len(stmts)) if sum(i in need for need in needs) > 1)
    filename = f"<rewardlang lanes of {getattr(module, '__name__', 'rows')}>"

    def compiled(name: str, body: list[ast.stmt], extra_arg: bool) -> Callable[..., Any]:
        f = copy.copy(fn)  # `rows` itself: its arguments (and, for a lane, the shared values), not its statements
        f.name = name
        f.args = copy.copy(fn.args)
        if extra_arg:
            f.args.args = [*fn.args.args, ast.arg("shared")]
            f.args.defaults = [*fn.args.defaults, ast.Constant(None)]
        f.body = body
        mod = ast.fix_missing_locations(ast.Module(body=[f], type_ignores=[]))
        namespace: dict[str, Any] = {}
        exec(compile(mod, filename, "exec"), vars(module), namespace)  # noqa: S102 - codegen's own statements
        return namespace[name]

    names = [stmts[i].targets[0].id for i in shared]  # type: ignore[union-attr]
    prefix = compiled("rows_shared", [stmts[i] for i in shared] + [ast.Return(ast.Dict(
        keys=[ast.Constant(n) for n in names], values=[ast.Name(n, ast.Load()) for n in names]))], False) \
        if shared else None
    functions = []
    for k, comps in enumerate(lanes):
        own = sorted(needs[k] - set(shared))
        used = [n for i, n in zip(shared, names) if i in needs[k]]
        unpack = [ast.Assign(targets=[ast.Name(n, ast.Store())],
                             value=ast.Subscript(ast.Name("shared", ast.Load()), ast.Constant(n), ast.Load()))
                  for n in used]
        ret_k = ast.Dict(keys=[ast.Constant(c) for c in comps], values=[ret.values[order.index(c)] for c in comps])
        functions.append(compiled(f"rows_lane_{k}", unpack + [stmts[i] for i in own] + [ast.Return(ret_k)], True))
    return Lanes(functions, [tuple(c) for c in lanes], order, prefix)
