"""Words in messages: counts (``1 case``, ``2 cases``, never "1 cases") and a system's name from its
file."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

__all__ = ["count", "system_stem"]

# file-name endings that say what a file holds, not which system made it (bm25.rec.jsonl -> bm25)
_SUFFIXES = (".gz", ".jsonl", ".json", ".ndjson", ".trec", ".run", ".tsv", ".csv", ".txt", ".records", ".rec", ".rag",
             ".results", ".parquet")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural (``plural``, default ``noun + "s"``) unless ``n`` is 1.

    Example:
        >>> count(1, "case"), count(3, "case"), count(0, "query", "queries")
        ('1 case', '3 cases', '0 queries')
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def system_stem(path: str | PathLike) -> str:
    """A system's name from its file: the file name without the endings that name a format or a role
    (``.jsonl``, ``.rec``, ``.records``, ``.trec``, ``.gz`` ...); the whole name when nothing else
    is left.

    Example:
        >>> (
        ...     system_stem("runs/bm25.rec.jsonl"),
        ...     system_stem("dense.records.jsonl"),
        ...     system_stem("x/.jsonl"),
        ... )
        ('bm25', 'dense', '.jsonl')
    """
    name = Path(path).name
    stripped = True
    while stripped:
        stripped = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, stripped = name[: -len(suffix)], True
    return name
