"""rewardlang: a language and runtime for reinforcement-learning rewards of code LLMs.

    >>> import rewardlang
    >>> prog = rewardlang.load("specs/codepo_text.reward")            # doctest: +SKIP
    >>> out = prog.score(completion=["<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>x</answer>"])  # doctest: +SKIP
    >>> float(out.components["reason"][0])                            # doctest: +SKIP
    0.65

Importing this package does not import torch, numba or any tool: those load when first needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rewardlang.version import __version__

__all__ = ["load", "loads", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program


def load(path: str, params: dict[str, Any] | None = None) -> "Program":
    """Compile the spec at ``path`` and return a runnable :class:`~rewardlang.runtime.program.Program`.

    ``params`` overrides parameters, weights and train settings, as ``--set`` does on the command line
    (``{"gamma": 2.0, "acc.weight": 1.5, "train.num_generations": 8}``). Raises
    :class:`rewardlang.diagnostics.SpecError` (carrying located diagnostics) when the spec is invalid.
    """
    from rewardlang.compiler import load_program  # the parser, checker and NumPy load on the first spec, not on import

    return load_program(path, params=params)


def loads(source: str, params: dict[str, Any] | None = None, filename: str = "<string>") -> "Program":
    """Like :func:`load`, for spec source text."""
    from rewardlang.compiler import load_program

    return load_program(filename, params=params, source=source)
