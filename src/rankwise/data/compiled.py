"""The compiled walks of ``rankwise/data/_walk.c``, or None where they were not built.

setup.py builds the extension where a C compiler is found; without it every caller takes its
pure-Python path, which gives the same results (tests/data/test_walk.py holds them equal).

Example:
    >>> from rankwise.data.compiled import walk
    >>> walk is None or callable(walk.items)
    True
"""

from __future__ import annotations

import os

__all__ = ["walk", "byte_census", "line_census", "HAS_CR", "HAS_HIGH", "HAS_TAB", "HAS_SPACE", "HAS_VT_FF", "SPACE_PAIR",
           "TAB_PAIR"]

try:
    from rankwise.data import _walk as walk
except ImportError:  # not built
    walk = None

# what byte_census finds (the flags of _walk.c's census): bytes ...
HAS_CR, HAS_HIGH, HAS_TAB, HAS_SPACE, HAS_VT_FF = 1, 2, 4, 8, 16
# ... and pairs of bytes: a space (a tab) beside another, or beside an LF
SPACE_PAIR, TAB_PAIR = 32, 64


def byte_census(data) -> int | None:
    r"""Which bytes and pairs of bytes ``data`` holds, as the flags above, in one C pass (two
    threads from 1 MiB); None where the extension was not built.

    Example:
        >>> flags = byte_census(b"q1 Q0  d1\r\n")  # a CR, spaces, two of them side by side
        >>> flags is None or flags == HAS_CR | HAS_SPACE | SPACE_PAIR
        True
    """
    census = line_census(data)
    return None if census is None else census[0]


def line_census(data) -> tuple[int, int] | None:
    r""":func:`byte_census`'s flags and, from the same pass, the LF bytes of ``data``; None where
    the extension was not built.

    Example:
        >>> census = line_census(b"q1 Q0 d1\nq1 Q0 d2\n")
        >>> census is None or census == (HAS_SPACE, 2)
        True
    """
    return None if walk is None else walk.census(data, min(2, os.cpu_count() or 1))
