"""The exceptions rankwise raises on bad input.

Every problem with a user's file or object is an :class:`InputError` whose message names where the
problem is (file, line, field) and what is wrong, so the CLI can print it as one line and exit 2.
"""

from __future__ import annotations

from os import PathLike

__all__ = ["RankwiseError", "InputError"]


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
