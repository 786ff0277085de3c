"""Say "did you swap QRELS and RUN?" when a TREC run is read as qrels or qrels as a run.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.trec")
    >>> _ = open(path, "w").write("q1 Q0 d1 1 2.5 bm25\\n")
    >>> swap_hint(path, "qrels")
    ' (did you swap QRELS and RUN? this file has 6 columns with scores, like a run)'
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from typing import TypeVar

from rankwise.errors import InputError

__all__ = ["swap_hint", "with_swap_hint"]

T = TypeVar("T")


def _is_number(text: str, *, integer: bool = False) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return value.is_integer() if integer else True


def swap_hint(path: str | PathLike, expected: str) -> str:
    """The hint to append when ``path`` (read as ``expected``: "run" or "qrels") looks like the
    other kind; "" when it does not (see the module's example)."""
    try:
        with open(path, "rb") as fh:
            fields = fh.readline().decode("utf-8", "replace").split()
    except OSError:
        return ""
    looks_run = len(fields) == 6 and _is_number(fields[3], integer=True) and _is_number(fields[4])
    looks_qrels = len(fields) == 4 and _is_number(fields[3], integer=True)
    if expected == "run" and looks_qrels:
        return " (did you swap QRELS and RUN? this file has 4 columns with integer grades, like qrels)"
    if expected == "qrels" and looks_run:
        return " (did you swap QRELS and RUN? this file has 6 columns with scores, like a run)"
    return ""


def with_swap_hint(read: Callable[[str | PathLike], T], path: str | PathLike, expected: str) -> T:
    """``read(path)``; an :class:`InputError` it raises gets :func:`swap_hint`'s hint when one
    applies.

    Example:
        >>> import tempfile, os
        >>> from rankwise.data.trec import read_trec_run
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels.txt")
        >>> _ = open(path, "w").write("q1 0 d1 1\\n")
        >>> try:
        ...     with_swap_hint(read_trec_run, path, "run")
        ... except InputError as exc:
        ...     print(exc.problem.split(" (")[-1])
        did you swap QRELS and RUN? this file has 4 columns with integer grades, like qrels)
    """
    try:
        return read(path)
    except InputError as exc:
        hint = swap_hint(path, expected)
        if not hint:
            raise
        raise InputError(exc.problem + hint, source=exc.source, line=exc.line, field=exc.field) from None
