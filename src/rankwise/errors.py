"""The exceptions rankwise raises on bad input, and its one way of warning.

Every problem with a user's file or object is an :class:`InputError` whose message names where the
problem is (file, line, field) and what is wrong, so the CLI can print it as one line and exit 2.
Something odd but usable is a :class:`RankwiseWarning`, given once with a count by :func:`warn`.
"""

from __future__ import annotations

import warnings
from os import PathLike

__all__ = ["RankwiseError", "InputError", "RankwiseWarning", "warn"]


class RankwiseWarning(UserWarning):
    """Input that rankwise can use but that is probably not what the user meant (the CLI prints one line)."""


def warn(message: str, *, summary: dict | None = None) -> None:
    """Warn once (category :class:`RankwiseWarning`) and keep the message in ``summary["warnings"]``.

    Example:
        >>> import warnings
        >>> summary = {}
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn("3 cases list a chunk id twice", summary=summary)
        >>> summary["warnings"], caught[0].category.__name__
        (['3 cases list a chunk id twice'], 'RankwiseWarning')
    """
    if summary is not None:
        summary.setdefault("warnings", [])
        if message not in summary["warnings"]:
            summary["warnings"].append(message)
    warnings.warn(message, RankwiseWarning, stacklevel=2)


class RankwiseError(Exception):
    """Base class of every error rankwise raises on purpose."""


class InputError(RankwiseError, ValueError):
    """Bad input: names the source (file or object), the 1-based line and the field at fault.

    Example:
        >>> str(InputError("not a number: 'x'", source="run.trec", line=3, field="score"))
        "run.trec:3: field 'score': not a number: 'x'"
    """

    def __init__(
        self,
        problem: str,
        *,
        source: str | PathLike | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = None if source is None else str(source)
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.source or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}: {what}{self.problem}"
