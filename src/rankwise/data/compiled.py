"""The compiled walks of ``rankwise/data/_walk.c``, or None where they were not built.

setup.py builds the extension where a C compiler is found; without it every caller takes its
pure-Python path, which gives the same results (tests/data/test_walk.py holds them equal).

Example:
    >>> from rankwise.data.compiled import walk
    >>> walk is None or callable(walk.items)
    True
"""

from __future__ import annotations

__all__ = ["walk"]

try:
    from rankwise.data import _walk as walk
except ImportError:  # not built
    walk = None
