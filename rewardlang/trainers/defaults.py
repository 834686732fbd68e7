"""What the training commands fall back on, shared by the command line (:mod:`rewardlang.trainers.cli`) and the
evaluation it runs (:mod:`rewardlang.trainers.eval_lang`). Light on purpose: ``rewardlang --help`` imports it.

    >>> import os
    >>> default_model() == (os.environ.get("REWARDLANG_DEFAULT_MODEL") or "smollm2")
    True
"""

from __future__ import annotations

import os

__all__ = ["default_model"]


def default_model() -> str:
    """The model of ``train``/``eval`` when ``--model`` is not given: ``$REWARDLANG_DEFAULT_MODEL`` or smollm2."""
    return os.environ.get("REWARDLANG_DEFAULT_MODEL") or "smollm2"
