"""The syntax tree of a ``.reward`` spec: one dataclass per construct, each with its source location.

Built by :mod:`rewardlang.parser`; read by the checker, the formatter and the IR lowering.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class Loc:
    """A source range: 1-based line/column of its first and last character, 0-based character offsets."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    start: int = 0
    end: int = 0

    @staticmethod
    def unknown(file: str = "<unknown>") -> "Loc":
        return Loc(file, 1, 1, 1, 1, 0, 0)


# ---------------------------------------------------------------- expressions


@dataclass
class Node:
    loc: Loc = field(repr=False, compare=False)


@dataclass
class Number(Node):
    value: float
    text: str


@dataclass
class String(Node):
    value: str
    text: str


@dataclass
class Regex(Node):
    pattern: str
    flags: str
    text: str


@dataclass
class Bool(Node):
    value: bool


@dataclass
class NoneLit(Node):
    pass


@dataclass
class Name(Node):
    id: str


@dataclass
class Positional(Node):
    value: "Expr"


@dataclass
class Keyword(Node):
    name: str
    value: "Expr"


@dataclass
class Arrow(Node):
    left: "Expr"
    right: "Expr"


@dataclass
class Arm(Node):
    op: str
    bound: "Expr"
    value: "Expr"


@dataclass
class ElseArm(Node):
    value: "Expr"


@dataclass
class Comprehension(Node):
    value: "Expr"
    targets: list[str]
    iter: "Expr"
    cond: "Expr | None"


CallArg = Union[Positional, Keyword, Arrow, Arm, ElseArm, Comprehension]


@dataclass
class Call(Node):
    func: str
    func_loc: Loc
    args: list[CallArg]


@dataclass
class Index(Node):
    target: "Expr"
    index: "Expr"


@dataclass
class Attr(Node):
    target: "Expr"
    name: str


@dataclass
class Unary(Node):
    op: str
    operand: "Expr"


@dataclass
class BinOp(Node):
    op: str  # + - * / % **
    left: "Expr"
    right: "Expr"


@dataclass
class Compare(Node):
    op: str
    left: "Expr"
    right: "Expr"


@dataclass
class BoolOp(Node):
    op: str  # and / or
    left: "Expr"
    right: "Expr"


@dataclass
class Not(Node):
    operand: "Expr"


@dataclass
class IfExpr(Node):
    cond: "Expr"
    then: "Expr"
    orelse: "Expr"


@dataclass
class TupleLit(Node):
    items: list["Expr"]


@dataclass
class ListLit(Node):
    items: list["Expr"]


Expr = Union[Number, String, Regex, Bool, NoneLit, Name, Call, Index, Attr, Unary, BinOp, Compare, BoolOp, Not,
             IfExpr, TupleLit, ListLit]


# ---------------------------------------------------------------- statements


@dataclass
class TypeRef(Node):
    text: str


@dataclass
class SpecStmt(Node):
    name: str
    doc: str | None


@dataclass
class Import(Node):
    path: str
    names: list[tuple[str, Loc]] | None  # None: import everything


@dataclass
class Param(Node):
    name: str
    type: TypeRef | None
    default: Expr
    doc: str | None


@dataclass
class Input(Node):
    name: str
    type: TypeRef
    column: str | None


@dataclass
class Let(Node):
    name: str
    value: Expr


@dataclass
class Component(Node):
    name: str
    range: tuple[Expr, Expr] | None
    value: Expr
    on_error: Expr | None = None
    timeout: Expr | None = None
    spans: Expr | None = None
    tokens: Expr | None = None  # token attribution (checked in the checker: last, over, spans, ends, split)
    clause_locs: dict[str, Loc] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Audit(Node):
    """``audit NAME [in [LO, HI]] = EXPR [every N steps] [window N steps] [margin X] [on_error V] [timeout S]``:
    a second verifier scored on the policy's samples at its period, never part of the reward."""

    name: str
    range: tuple[Expr, Expr] | None
    value: Expr
    on_error: Expr | None = None
    timeout: Expr | None = None
    every: Expr | None = None
    window: Expr | None = None
    margin: Expr | None = None
    clause_locs: dict[str, Loc] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Weight(Node):
    component: str
    value: Expr


@dataclass
class Reward(Node):
    value: Expr


@dataclass
class Scope(Node):
    kind: str  # "group" or "batch"
    key: str | None


@dataclass
class Stage(Node):
    scope: Scope | None
    value: Expr


@dataclass
class Advantage(Node):
    scope: Scope
    each_component: bool
    stages: list[Stage]


@dataclass
class ExampleInput(Node):
    name: str
    value: Expr


@dataclass
class ExampleExpect(Node):
    name: str
    value: Expr
    tolerance: Expr | None


@dataclass
class Example(Node):
    name: str | None
    inputs: list[ExampleInput]
    expects: list[ExampleExpect]


@dataclass
class SectionItem(Node):
    name: str
    value: Expr


@dataclass
class Section(Node):
    kind: str
    items: list[SectionItem]


Stmt = Union[SpecStmt, Import, Param, Input, Let, Component, Audit, Weight, Reward, Advantage, Example, Section]


@dataclass
class Comment:
    line: int
    column: int
    text: str
    own_line: bool  # the comment is alone on its line (not trailing code)


@dataclass
class Module:
    file: str
    source: str
    body: list[Stmt]
    comments: list[Comment] = field(default_factory=list)
