"""A small thread-safe bounded cache, shared by the runtime (verdicts and analyser results per step) and the
sandbox (its own verdict cache): a module of its own at the package's top, so that the sandbox uses it without
importing the runtime.

    >>> c = LRUCache(maxsize=2)
    >>> c.put("a", 1); c.put("b", 2); c.put("c", 3)
    >>> "a" in c, c.get("c"), len(c)
    (False, 3, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

__all__ = ["LRUCache"]


class LRUCache:
    """A small thread-safe bounded cache shared by the functions of one process.

    Keys must be hashable and should include everything the value depends on (the function name, its
    parameters, the inputs). ``maxsize`` counts entries.
    """

    def __init__(self, maxsize: int = 100_000) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return default

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
