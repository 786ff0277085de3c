"""The exceptions rankwise raises on bad input, and its one way of warning.

Every problem with a user's file or object is an :class:`InputError` whose message names where the
problem is (file, line, field) and what is wrong, so the CLI can print it as one line and exit 2.
Something odd but usable is a :class:`RankwiseWarning`, given once with a count by :func:`warn`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from os import PathLike

__all__ = ["RankwiseError", "InputError", "RankwiseWarning", "warn", "in_user_words"]


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
        if self.field and self.field.startswith("--"):  # a command-line option, not a file's field
            what = f"option {self.field}: "
        return f"{where}: {what}{self.problem}"


_IDENTIFIER = re.compile(r"(?<![\w.'-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w'(-])")


def in_user_words(exc: BaseException, names: Mapping[str, str]) -> str:
    """The one-line text of ``exc`` with the library's parameter names as the caller spells them.

    ``names`` maps a keyword argument (``rerank_model``) to the caller's name for it (the CLI flag
    ``--rerank``). An :class:`InputError` about a parameter (no file, no line) is headed by that name (or
    by nothing when it names no field); a parameter named in the text (``give rerank_model``) is renamed;
    files and their fields are left alone.

    Example:
        >>> err = InputError("max K must be at least 1, not 0", field="max_k")
        >>> in_user_words(err, {"max_k": "--max-k"})
        '--max-k: max K must be at least 1, not 0'
        >>> in_user_words(InputError("'llm' needs a reranker: give rerank_model"), {"rerank_model": "--rerank"})
        "'llm' needs a reranker: give --rerank"
    """
    def rename(text: str, keep: str | None = None) -> str:
        return _IDENTIFIER.sub(lambda m: m.group(0) if m.group(0) == keep else names.get(m.group(0), m.group(0)),
                               text)

    if not isinstance(exc, InputError):
        return rename(str(exc))
    # about a file: its own field keeps the file's word (a config key); options the text mentions become flags
    problem = rename(exc.problem, keep=exc.field if exc.source is not None else None)
    if exc.source is None and exc.line is None and (exc.field is None or exc.field in names):
        if exc.field is None or re.search(rf"(?<![\w-]){re.escape(names[exc.field])}(?![\w-])", problem):
            return problem  # no field, or the text names the flag already
        return f"{names[exc.field]}: {problem}"
    return str(InputError(problem, source=exc.source, line=exc.line, field=exc.field))
