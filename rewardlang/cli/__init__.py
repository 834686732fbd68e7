"""The ``rewardlang`` command line, a thin shell over the library: check | compile | score | serve | pairs | explain
| report | fmt | lsp | functions | doctor | prm-data | data | ir-groups | train | plot | eval.

Bad specs and bad data end in located messages and exit code 1, never a Python traceback (``--debug``
shows one). Training commands load torch only when they run.

Entry points: the ``rewardlang`` script (:func:`entry`) and ``python -m rewardlang`` call :func:`main` as the whole process. One module per command family:
:mod:`~rewardlang.cli.spec` (check, compile, fmt), :mod:`~rewardlang.cli.score` (score, serve, pairs),
:mod:`~rewardlang.cli.explain` (explain, report), :mod:`~rewardlang.cli.tools` (lsp, functions, doctor),
:mod:`~rewardlang.cli.data` (prm-data, data), :mod:`~rewardlang.cli.train` (train, plot, eval); the application and
:func:`main` in :mod:`~rewardlang.cli.app`.
"""

from rewardlang.cli.app import app, entry, main

__all__ = ["app", "entry", "main"]
