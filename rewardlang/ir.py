"""The intermediate representation: a hash-consed graph of typed operations over the whole batch.

The checker lowers a spec into one :class:`Graph`; identical sub-expressions become one node (so
``words(completion)`` used by three components is computed once). Node ids are topological: a node's
operands always have smaller ids. :class:`Program` holds the graph and the outputs the code generator emits.

    >>> from rewardlang.types import NUMBER
    >>> g = Graph()
    >>> a = g.add("input", (), ("completion",), NUMBER)
    >>> g.add("math", (a,), ("tanh",), NUMBER) == g.add("math", (a,), ("tanh",), NUMBER)
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rewardlang.types import Type

__all__ = ["Node", "Graph", "ComponentIR", "AuditIR", "StageIR", "AdvantageIR", "ExampleIR", "Program"]


@dataclass(frozen=True)
class Node:
    """One operation. ``kind`` selects the kernel, ``args`` are operand node ids, ``attrs`` static values."""

    id: int
    kind: str
    args: tuple[int, ...]
    attrs: tuple[Any, ...]
    type: Type

    @property
    def is_const(self) -> bool:
        return self.kind == "const"

    @property
    def value(self) -> Any:
        assert self.kind == "const"
        return self.attrs[0]


def _freeze(x: Any) -> Any:
    if isinstance(x, list):
        return ("__list__", tuple(_freeze(i) for i in x))
    if isinstance(x, tuple):
        return tuple(_freeze(i) for i in x)
    if isinstance(x, dict):
        return ("__dict__", tuple(sorted((k, _freeze(v)) for k, v in x.items())))
    if isinstance(x, float) and x != x:
        return ("__nan__",)
    return (type(x).__name__, x) if isinstance(x, (bool, int, float)) else x


class Graph:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._index: dict[tuple, int] = {}

    def add(self, kind: str, args: tuple[int, ...], attrs: tuple[Any, ...], type: Type) -> int:
        key = (kind, args, _freeze(attrs), type)
        found = self._index.get(key)
        if found is not None:
            return found
        nid = len(self.nodes)
        self.nodes.append(Node(nid, kind, tuple(args), tuple(attrs), type))
        self._index[key] = nid
        return nid

    def const(self, value: Any, type: Type) -> int:
        return self.add("const", (), (value,), type)

    def __getitem__(self, nid: int) -> Node:
        return self.nodes[nid]

    def closure(self, roots: list[int]) -> list[int]:
        """The ids needed to compute ``roots``, in topological (id) order."""
        seen: set[int] = set()
        stack = [r for r in roots if r is not None]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            stack.extend(self.nodes[n].args)
        return sorted(seen)

    def depends_on(self, root: int, kinds: set[str]) -> bool:
        return any(self.nodes[i].kind in kinds for i in self.closure([root]))


@dataclass
class ComponentIR:
    name: str
    value: int
    spans: int | None
    range: tuple[float, float] | None
    on_error: float | None          # None: mask the sample (the default)
    on_error_given: bool
    timeout: float | None
    weight: int                     # a node of the scalar phase (may depend on `step`)
    weight_text: str
    doc: str = ""
    tokens: dict | None = None      # token attribution ({"mode": ..., options}); None: a sequence reward


@dataclass
class AuditIR:
    """An ``audit``: either a per-sample expression (``value``: a component-like column, never in the reward) or a
    built-in statistic of the run (``statistic`` with its ``options``), with its period and alarm settings."""

    name: str
    every: int                      # audited at step 1, at every multiple of `every` and at the last step
    window: int                     # the alarm compares the reward and the audit over this many steps
    margin: float                   # the rise of the reward (on [0, 1] where ranges allow) that counts
    text: str                       # the audit's expression as written
    value: ComponentIR | None = None
    statistic: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    line: int = 0


@dataclass
class StageIR:
    scope: tuple[str, str | None]   # ("group", key) or ("batch", None)
    node: int | None                # expression over `x` and aggregates; None for the `sum` stage
    is_sum: bool = False
    text: str = ""


@dataclass
class AdvantageIR:
    scope: tuple[str, str | None]
    each_component: bool
    stages: list[StageIR]
    text: str = ""


@dataclass
class ExampleIR:
    name: str
    line: int
    file: str
    rows: list[dict[str, Any]]
    expects: list[tuple[str, list[Any], float, Any]]   # (name, values per row, tolerance, loc)


@dataclass
class InputIR:
    name: str
    type: Type
    column: str
    used: bool = True


@dataclass
class Program:
    """Everything the code generator needs; produced by :func:`rewardlang.checker.check`."""

    name: str
    doc: str
    file: str
    graph: Graph
    inputs: list[InputIR]
    components: list[ComponentIR]
    reward: int                       # reward-phase node
    reward_text: str
    reward_is_weighted_sum: bool
    advantage: AdvantageIR | None
    examples: list[ExampleIR]
    train: dict[str, Any]
    params: dict[str, Any]
    source_hash: str
    sources: dict[str, str] = field(default_factory=dict)
    audits: list[AuditIR] = field(default_factory=list)
    #: inputs read only by audits (not by the reward): scoring does not need their columns
    audit_only_inputs: set[str] = field(default_factory=set)
