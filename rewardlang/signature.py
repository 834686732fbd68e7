"""Signatures of the functions a spec may call.

The checker knows nothing about any particular function: it receives a table of :class:`Signature` values
(built by :mod:`rewardlang.runtime.registry` from the registered implementations) and type-checks calls
against it. A signature says which arguments vary per sample, which must be compile-time constants, the
keyword options (a pydantic model, validated when the spec is compiled), the result type and its range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from rewardlang.types import Type

__all__ = ["Arg", "Signature", "MISSING", "literal"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def literal(v: Any) -> str:
    """A default value as a ``.reward`` literal, the way a spec writes it (hints and docs show what to type).

    >>> [literal(x) for x in (None, True, "py", 1.0, ("x", 2))]
    ['none', 'true', '"py"', '1.0', '["x", 2]']
    """
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    if v is True or v is False or v is None:
        return "true" if v is True else "false" if v is False else "none"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


@dataclass(frozen=True)
class Arg:
    """One positional argument.

    ``static`` arguments must be constants (a literal or a ``param``) and reach the implementation as plain
    Python values; the others reach it as one value per sample. ``variadic`` takes all remaining positional
    arguments (all of this type).
    """

    name: str
    type: Type
    static: bool = False
    default: Any = MISSING
    variadic: bool = False
    #: for an argument given as a constant: ``check(value)`` returns ``(message, hint)`` when the value is
    #: not accepted (e.g. an unknown language name), so the checker reports it at the argument; values that
    #: vary per sample are checked per row by the implementation
    check: Any = field(default=None, compare=False, repr=False)
    #: trusted code or data of the task (the tests' ``prelude``): the checker refuses a value computed from the
    #: completion (the program under test would write it)
    trusted: bool = field(default=False, compare=False)

    @property
    def required(self) -> bool:
        return self.default is MISSING and not self.variadic


@dataclass(frozen=True)
class Signature:
    """What the checker needs to know about a callable function."""

    name: str
    args: tuple[Arg, ...]
    returns: Type
    params: type[BaseModel] | None = None
    range: tuple[float, float] | None = None
    doc: str = ""
    #: name of the text argument that returned spans are relative to
    spans_of: str | None = None
    #: the function receives ``None`` for missing values instead of the runtime propagating ``none``
    accepts_none: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)

    def usage(self, name: str | None = None) -> str:
        """How a spec calls the function, defaults written as the language writes them (``name``: another name
        for it, such as an alias)."""
        parts = []
        for a in self.args:
            s = f"{a.name}: {a.type}"
            if a.variadic:
                s = "*" + s
            elif a.default is not MISSING:
                s += f" = {literal(a.default)}"
            parts.append(s)
        if self.params is not None:
            for opt, f in self.params.model_fields.items():
                default = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
                parts.append(f"{opt}={literal(default)}")
        return f"{name or self.name}({', '.join(parts)}) -> {self.returns}"
