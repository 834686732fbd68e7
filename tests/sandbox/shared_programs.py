"""Programs more than one sandbox test file runs (imported by name: pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import textwrap

#: the program that must pass on the same slot right after an attack or a kill: it takes a lock (a POSIX
#: semaphore in /dev/shm) and writes and reads a file in a temporary directory, so a slot whose /tmp, /dev/shm or
#: process limits were left damaged fails it
FOLLOW = textwrap.dedent("""
    import multiprocessing, os, tempfile
    def double(x):
        lock = multiprocessing.Lock()
        with lock, tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "v")
            with open(p, "w") as fh:
                fh.write(str(2 * x))
            with open(p) as fh:
                return int(fh.read())
    """).lstrip("\n")
FOLLOW_TESTS = ["assert double(2) == 4", "assert double(21) == 42"]
