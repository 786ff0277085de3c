"""The one progress bar of rankwise: on stderr, never on stdout, and nothing at all when ``quiet``.

Every long loop (judging, embedding, indexing, reranking, LLM calls) shows its progress through
:func:`progress` (a bar advanced by hand) or :func:`track` (a bar over an iterable), so the look and
the ``--quiet`` switch are the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["progress", "track"]

T = TypeVar("T")


@contextmanager
def progress(description: str, total: int | None, *, quiet: bool = False, transient: bool = False,
             eta: bool = False) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr; yields ``advance(n=1)``. ``quiet`` shows nothing; ``transient``
    removes the bar when done; ``eta`` adds the time remaining. ``advance(n, description=...)`` may
    also change the text shown (e.g. the cost so far).

    Example:
        >>> with progress("embedding", 10, quiet=True) as advance:
        ...     advance(10)
    """
    if quiet:
        yield lambda n=1, description=None: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    if eta:
        columns.append(TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=transient) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1, description=None: bar.update(task, advance=n, **(
            {"description": description} if description else {}))


def track(items: Iterable[T], description: str, *, quiet: bool = False, total: int | None = None,
          min_items: int = 0) -> Iterator[T]:
    """Iterate ``items`` with a transient bar on stderr (none when ``quiet`` or fewer than
    ``min_items``).

    Example:
        >>> list(track([1, 2, 3], "counting", quiet=True))
        [1, 2, 3]
    """
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if quiet or (total is not None and total < min_items):
        yield from items
        return
    with progress(description, total, transient=True) as advance:
        for item in items:
            yield item
            advance(1)
