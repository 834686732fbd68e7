"""The plug-in API: how a reward function becomes callable from a ``.reward`` spec.

A function is registered with :func:`function`. It is vectorized: it receives one Python list (or a NumPy
array for numbers) per per-sample argument, covering every sample of the batch that needs it, and returns
one value per sample. Static arguments (compile-time constants) arrive as plain values, keyword options as a
validated pydantic model.

Example (a complete plug-in; put it in a module of ``rewardlang/runtime/components/`` or expose the module
through the ``rewardlang.components`` entry-point group of your own package)::

    >>> from pydantic import BaseModel
    >>> from rewardlang.runtime.api import function, Context
    >>> class ShoutParams(BaseModel):
    ...     threshold: float = 0.5
    >>> @function("shouting", args={"text": "text"}, params=ShoutParams, returns="bool",
    ...           doc="True when more than `threshold` of the letters are upper case.")
    ... def shouting(text: list[str], *, params: ShoutParams, ctx: Context) -> list[bool]:
    ...     out = []
    ...     for t in text:
    ...         letters = [c for c in t if c.isalpha()]
    ...         out.append(bool(letters) and sum(c.isupper() for c in letters) / len(letters) > params.threshold)
    ...     return out
    >>> shouting.signature.usage()
    'shouting(text: text, threshold=0.5) -> bool'

A spec then writes ``component calm = 0 if shouting(completion, threshold=0.8) else 1``.

Errors: input that is the completion's own doing (code that does not parse, nesting too deep) gets a defined
value, the worst where the result has a range: a failure caused by the completion's text is its outcome, never a
mask. A failure of one sample is reported in ``Result.errors`` (the component's ``on_error`` policy applies); a
failure of the infrastructure (a sandbox slot died, a tool is missing) in ``Result.infra``: such samples are
masked and counted, never scored as 0. An exception is isolated by the runtime: the call is split until each row
that raises by itself is alone, and only those rows fail.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from pydantic import BaseModel

from rewardlang.lru import LRUCache
from rewardlang.signature import MISSING, Arg, Signature
from rewardlang.types import Type, parse_type

__all__ = ["function", "Context", "Result", "Span", "Implementation", "LRUCache", "ComponentError", "per_row"]


def per_row(v: Any, n: int) -> list[Any]:
    """A non-static argument as one value per row: it arrives as a column (a list of ``n``) or, when it is a
    constant or an omitted default, as that one value.

        >>> per_row("cpp", 2), per_row(["c", "go"], 2)
        (['cpp', 'cpp'], ['c', 'go'])
    """
    if isinstance(v, list) and len(v) == n:
        return v
    return [v] * n


class Span(NamedTuple):
    """A character range ``[start, end)`` with a value and a label.

    Functions return spans relative to their ``spans_of`` argument; the runtime shifts them into completion
    coordinates when that argument is a known substring of the completion (``start == -1`` otherwise).
    """

    start: int
    end: int
    value: float = 1.0
    label: str = ""


class ComponentError(Exception):
    """Raise from an implementation to fail one sample with a clean message (no traceback shown)."""


@dataclass
class Result:
    """What an implementation may return instead of a bare list of values."""

    values: Sequence[Any]
    errors: Sequence[str | None] | None = None
    infra: Sequence[bool] | None = None
    details: Sequence[dict[str, Any] | None] | None = None
    #: for text results cut out of the ``spans_of`` argument: where each starts inside it (None: unknown),
    #: so that spans found later in the result land on the right characters of the completion
    offsets: Sequence[int | None] | None = None


@dataclass
class Context:
    """Run-time context handed to every implementation call.

    ``timeout`` is the calling component's per-sample time budget in seconds (``None``: the function's own
    default). ``stats`` is a counter the function may add to (it is reported in ``score``'s summary and in
    training metrics).
    """

    timeout: float | None = None
    step: int = 0
    workers: int = 2
    component: str | None = None
    cache: LRUCache = field(default_factory=LRUCache)
    stats: Counter = field(default_factory=Counter)
    use_cache: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Implementation:
    """A registered function: its signature and its vectorized implementation."""

    signature: Signature
    fn: Callable[..., Any]
    #: may run inside the scoring worker processes; False for functions that manage their own
    #: parallelism or hold external resources (sandbox slots, tool processes)
    in_workers: bool = True
    module: str = ""
    #: internal fast path: the function receives and returns whole columns (rewardlang's own kernels)
    columnar: bool = False
    #: called once when a scoring worker process starts (load compiled kernels, models, tables), so that the
    #: first batch a worker gets does not pay for it
    warm: Callable[[], None] | None = None
    #: called when a program using the function is loaded for scoring, with each call's options: what the call
    #: needs that is not there (a model checkpoint), as ``(what is missing, how to get it)``, or None. A spec that
    #: needs a missing resource is refused (E603) instead of failing every row of every batch.
    requires: Callable[[Any], tuple[str, str] | None] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Implementation] = {}
_LOCK = threading.Lock()


def _to_type(t: str | Type) -> Type:
    return t if isinstance(t, Type) else parse_type(t)


def _to_args(args: dict[str, Any] | Sequence[Arg] | None) -> tuple[Arg, ...]:
    if args is None:
        return ()
    if isinstance(args, dict):
        out = []
        for name, spec in args.items():
            if isinstance(spec, Arg):
                out.append(spec)
            elif isinstance(spec, dict):
                out.append(Arg(name=name, type=_to_type(spec["type"]), static=spec.get("static", False),
                               default=spec.get("default", MISSING), variadic=spec.get("variadic", False)))
            else:
                out.append(Arg(name=name, type=_to_type(spec)))
        return tuple(out)
    return tuple(args)


def function(
    name: str,
    *,
    args: dict[str, Any] | Sequence[Arg] | None = None,
    returns: str | Type = "number",
    params: type[BaseModel] | None = None,
    range: tuple[float, float] | None = None,
    spans_of: str | None = None,
    accepts_none: bool = False,
    in_workers: bool = True,
    doc: str | None = None,
    tags: Sequence[str] = (),
    columnar: bool = False,
    warm: Callable[[], None] | None = None,
    requires: Callable[[Any], tuple[str, str] | None] | None = None,
) -> Callable[[Callable[..., Any]], Implementation]:
    """Register a vectorized implementation under ``name`` (see the module docstring).

    ``args`` maps argument names to type names (``"text"``, ``"code"``, ``"number"``, ``"list[text]"``,
    ``"text?"``) or to :class:`~rewardlang.signature.Arg` values for static/variadic/defaulted arguments.
    ``range`` declares the bounds of the result (checked at run time). ``spans_of`` names the text argument
    that returned spans refer to (only for ``returns="spans"``). ``requires(params)`` says what a call with those
    options needs that is missing, as ``(what, how to get it)`` (see :class:`Implementation`).
    """

    def deco(fn: Callable[..., Any]) -> Implementation:
        sig = Signature(
            name=name, args=_to_args(args), returns=_to_type(returns), params=params, range=range,
            doc=(doc or fn.__doc__ or "").strip(), spans_of=spans_of, accepts_none=accepts_none,
            tags=tuple(tags),
        )
        impl = Implementation(signature=sig, fn=fn, in_workers=in_workers, module=fn.__module__, columnar=columnar,
                              warm=warm, requires=requires)
        with _LOCK:
            prev = _REGISTRY.get(name)
            if prev is not None and prev.module != impl.module:
                raise ValueError(f"reward function {name!r} is registered twice ({prev.module}, {impl.module})")
            _REGISTRY[name] = impl
        return impl

    return deco


def registered() -> dict[str, Implementation]:
    """The functions registered so far (see :func:`rewardlang.runtime.registry.load_all`)."""
    return dict(_REGISTRY)
