"""The types of rewardlang expressions.

Every expression has exactly one type. Types are small immutable values, compared structurally::

    >>> from rewardlang.types import NUMBER, TEXT, CODE, ListOf, parse_type
    >>> CODE.is_assignable_to(TEXT)
    True
    >>> str(ListOf(TEXT).optional())
    'list[text]?'
    >>> parse_type("list[text]") == ListOf(TEXT)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Type", "Scalar", "ListOf", "TupleOf", "NUMBER", "BOOL", "TEXT", "CODE", "SPANS", "GROUP",
    "REGEX", "NONE", "ANY", "parse_type",
]


@dataclass(frozen=True)
class Type:
    """Base of all types. ``nullable`` means the value may be ``none`` for some samples."""

    nullable: bool = False

    def optional(self) -> "Type":
        return self._with(True)

    def required(self) -> "Type":
        return self._with(False)

    def _with(self, nullable: bool) -> "Type":  # pragma: no cover - overridden
        raise NotImplementedError

    def base_name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def __str__(self) -> str:
        return self.base_name() + ("?" if self.nullable else "")

    def is_assignable_to(self, other: "Type") -> bool:
        """True if a value of this type may be used where ``other`` is expected."""
        if isinstance(other, Scalar) and other.name == "any":
            return other.nullable or not self.nullable
        if isinstance(self, Scalar) and self.name == "any":  # unknown (already reported): no cascade of errors
            return True
        if self.nullable and not other.nullable:
            return False
        if isinstance(self, Scalar) and self.name == "none":
            return other.nullable
        return self.required()._assignable_base(other.required())

    def _assignable_base(self, other: "Type") -> bool:
        return self == other


@dataclass(frozen=True)
class Scalar(Type):
    name: str = "number"

    def _with(self, nullable: bool) -> "Scalar":
        return Scalar(nullable=nullable, name=self.name)

    def base_name(self) -> str:
        return self.name

    def _assignable_base(self, other: Type) -> bool:
        if isinstance(other, Scalar):
            if self.name == other.name:
                return True
            # code is text with the promise that it is source code; bool counts as 0/1 in arithmetic.
            return (self.name, other.name) in {("code", "text"), ("text", "code"), ("bool", "number")}
        return False


@dataclass(frozen=True)
class ListOf(Type):
    item: Type = Scalar(name="any")

    def __init__(self, item: Type, nullable: bool = False) -> None:
        object.__setattr__(self, "item", item)
        object.__setattr__(self, "nullable", nullable)

    def _with(self, nullable: bool) -> "ListOf":
        return ListOf(self.item, nullable)

    def base_name(self) -> str:
        return f"list[{self.item}]"

    def _assignable_base(self, other: Type) -> bool:
        return isinstance(other, ListOf) and (
            self.item.is_assignable_to(other.item) or _is_any(self.item) or _is_any(other.item)
        )


@dataclass(frozen=True)
class TupleOf(Type):
    items: tuple[Type, ...] = ()

    def __init__(self, items: tuple[Type, ...], nullable: bool = False) -> None:
        object.__setattr__(self, "items", tuple(items))
        object.__setattr__(self, "nullable", nullable)

    def _with(self, nullable: bool) -> "TupleOf":
        return TupleOf(self.items, nullable)

    def base_name(self) -> str:
        return "(" + ", ".join(str(t) for t in self.items) + ")"

    def _assignable_base(self, other: Type) -> bool:
        if isinstance(other, TupleOf):
            return len(self.items) == len(other.items) and all(
                a.is_assignable_to(b) for a, b in zip(self.items, other.items)
            )
        if isinstance(other, ListOf):  # a literal tuple of numbers passes where a list is asked
            return all(a.is_assignable_to(other.item) for a in self.items)
        return False


def _is_any(t: Type) -> bool:
    return isinstance(t, Scalar) and t.name == "any"


NUMBER = Scalar(name="number")
BOOL = Scalar(name="bool")
TEXT = Scalar(name="text")
CODE = Scalar(name="code")
SPANS = Scalar(name="spans")   # character ranges of the completion, each with a value and a label
GROUP = Scalar(name="group")   # a group id (e.g. a prompt id); only compared for equality
REGEX = Scalar(name="regex")   # compile-time constant pattern
NONE = Scalar(name="none", nullable=True)
ANY = Scalar(name="any")

_SCALARS = {t.name: t for t in (NUMBER, BOOL, TEXT, CODE, SPANS, GROUP, REGEX, ANY)}
INPUT_TYPE_NAMES = ("text", "code", "number", "bool", "group", "list[text]", "list[number]", "list[code]")


def parse_type(text: str) -> Type:
    """Parse a type written in a spec (``text``, ``list[text]``, ``number?``).

    Raises ``ValueError`` for unknown type names.
    """
    s = text.replace(" ", "")
    nullable = s.endswith("?")
    if nullable:
        s = s[:-1]
    if s.startswith("list[") and s.endswith("]"):
        t: Type = ListOf(parse_type(s[5:-1]))
    elif s in _SCALARS:
        t = _SCALARS[s]
    else:
        raise ValueError(f"unknown type {text!r}")
    return t.optional() if nullable else t
