"""Warnings about several systems' inputs, each naming the system it concerns.

``evaluate_rag`` warns about the cases it scores (a chunk id listed twice, a cutoff past every list
...) without knowing whose cases they are. ``compare_records`` and ``gate`` score several systems,
so they collect those warnings per system (:func:`collect_warnings`), name them
(:func:`name_warnings`: one line per distinct warning, systems with the same warning merged on one
line) and warn once with the named lines.

Example:
    >>> name_warnings({"bm25": ["K = 20 is too deep", "2 cases list a chunk id twice"],
    ...                "dense": ["K = 20 is too deep"]})
    ["systems 'bm25' and 'dense': K = 20 is too deep", "system 'bm25': 2 cases list a chunk id twice"]
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rankwise.errors import RankwiseWarning

__all__ = ["collect_warnings", "name_warnings", "case_notes"]


@contextmanager
def collect_warnings() -> Iterator[list[str]]:
    """Catch the :class:`~rankwise.errors.RankwiseWarning` messages raised inside the block, in
    order and each once, into the list yielded; other warnings pass through as usual.

    Example:
        >>> from rankwise.errors import warn
        >>> with collect_warnings() as caught:
        ...     warn("one"); warn("two"); warn("one")
        >>> caught
        ['one', 'two']
    """
    caught: list[str] = []
    with warnings.catch_warnings():
        shown = warnings.showwarning
        warnings.simplefilter("always", RankwiseWarning)

        def keep(message, category, *args, **kwargs):
            if issubclass(category, RankwiseWarning):
                if str(message) not in caught:
                    caught.append(str(message))
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = keep
        yield caught


def _names(systems: Sequence[str]) -> str:
    quoted = [repr(str(s)) for s in systems]
    if len(quoted) == 1:
        return f"system {quoted[0]}"
    return f"systems {', '.join(quoted[:-1])} and {quoted[-1]}"


def name_warnings(by_system: Mapping[str, Sequence[str]]) -> list[str]:
    """One line per distinct warning, prefixed by the system(s) that gave it: ``system 'a': ...``,
    or ``systems 'a' and 'b': ...`` when several gave the very same message. Lines come in the order
    the warnings were first given (systems in ``by_system`` order).

    Example:
        >>> name_warnings({"a": ["x"], "b": ["y"], "c": ["x"]})
        ["systems 'a' and 'c': x", "system 'b': y"]
    """
    who: dict[str, list[str]] = {}
    for system, messages in by_system.items():
        for message in messages:
            owners = who.setdefault(message, [])
            if system not in owners:
                owners.append(system)
    return [f"{_names(owners)}: {message}" for message, owners in who.items()]


def case_notes(summary: Mapping[str, Any], shown: int = 3) -> list[str]:
    """Messages for the unscorable and incomplete cases an ``evaluate_rag`` summary counts, and how
    they were treated, and why a verdict source matched nothing (``no_match``): a comparison prints
    no per-system summary, so these would go unseen.

    Example:
        >>> case_notes({"unscorable": 1, "unscorable_cases": {"q2": "no retrieved chunk"},
        ...             "unscorable_treatment": "left out of the means"})
        ['1 unscorable case: q2 (no retrieved chunk) -> left out of the means']
    """
    notes = []
    for kind in ("unscorable", "incomplete"):
        n = int(summary.get(kind) or 0)
        if not n:
            continue
        cases = list((summary.get(f"{kind}_cases") or {}).items())
        listed = ", ".join(f"{q} ({why})" for q, why in cases[:shown])
        more = f" and {n - shown} more" if n > shown else ""
        notes.append(f"{n} {kind} case{'s' if n != 1 else ''}: {listed}{more} -> "
                     f"{summary.get(f'{kind}_treatment')}")
    if summary.get("no_match"):  # a source that matched nothing, and why (rankwise.relevance.diagnose)
        notes.append(str(summary["no_match"]))
    return notes
