"""Process helpers shared by the sandbox slots and the batched tool runners (at the package's top: the sandbox
uses them without importing the runtime)."""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["kill_group"]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group ``proc`` leads (it was started with ``start_new_session=True``), then ``proc``.

    The group holds exactly the process and its children (pylint's --jobs workers, a slot's bootstrap and
    bwrap), so nothing else is ever signalled; a group or process already gone is fine.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
