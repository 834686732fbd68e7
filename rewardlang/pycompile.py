"""Python source from outside (a policy's completion, a data set's tests or prompt) compiled to a syntax tree the
same way whatever the host's warning filters are.

CPython's compiler *warns* about some valid code: ``"\\d"`` (an invalid escape sequence), ``1if x else 2`` (an
invalid decimal literal), both common in model output. Through the process's warning filters that was, by default,
a line on stderr for each new one (a training run printed a model's mistakes among its logs) and, under ``-W error``
or ``PYTHONWARNINGS=error`` or a test runner's ``filterwarnings = error``, a SyntaxError: valid code judged
unparseable, a reward that depended on the host's configuration (a quality_grpo completion's quality fell from
0.86 to 0). The host side of rewardlang (the runtime, the sandbox's and the domains' trusted parts) parses such
text with :func:`compile_quietly`; the processes it starts for Python tools run without ``PYTHONWARNINGS``
(``rewardlang.runtime.tools.command.tool_environ``) and the sandbox's with ``-I``.
"""

from __future__ import annotations

import ast
import re
import threading
import warnings
from typing import Any

__all__ = ["PROGRAM_FILENAME", "compile_quietly"]

#: the file name under which :func:`compile_quietly` compiles a program's text (the module its warnings name)
PROGRAM_FILENAME = "<rewardlang-program>"
_MODULE = re.escape(PROGRAM_FILENAME) + r"\Z"
#: the filter ``warnings.filterwarnings("ignore", module=_MODULE)`` puts first: every warning CPython's compiler
#: gives about a program compiled under :data:`PROGRAM_FILENAME` is ignored
_QUIET = ("ignore", None, Warning, re.compile(_MODULE), 0)
_QUIET_LOCK = threading.Lock()


def compile_quietly(code: str, flags: int = ast.PyCF_ONLY_AST, mode: str = "exec") -> Any:
    """``compile(code, PROGRAM_FILENAME, mode, flags, dont_inherit=True)`` (an AST by default: nothing runs),
    whatever warning filters the process has (the module's docstring says why). A filter
    that ignores the warnings of this one file name stays first in the process's filters, inserted again when
    someone replaced the list (``warnings.catch_warnings`` restores its copy on exit). Unlike a
    ``catch_warnings`` around each call it is safe from several threads at once: that one saved and restored the
    whole list, so two threads could leave the process ignoring every warning.

        >>> compile_quietly("x = 1if True else 2").body[0].value.body.value
        1
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error")
        ...     tree = compile_quietly('import re; p = re.compile("\\\\d+")')
        >>> type(tree).__name__
        'Module'
    """
    if not warnings.filters or warnings.filters[0] != _QUIET:
        with _QUIET_LOCK:
            if not warnings.filters or warnings.filters[0] != _QUIET:
                warnings.filterwarnings("ignore", module=_MODULE)  # first, and no second copy left behind
    return compile(code, PROGRAM_FILENAME, mode, flags, dont_inherit=True)
