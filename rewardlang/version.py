"""The package's version, in a module of its own: the code generator stamps it into every compiled module, and
importing it imports nothing else.

    >>> from rewardlang.version import __version__
    >>> __version__.count(".") >= 1
    True
"""

__version__ = "0.1.0"
