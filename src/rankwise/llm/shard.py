"""Sharded judging for many workers: disjoint shards of a test set, one cache file each, merged
after.

``rankwise judge TESTSET --shard i/N --cache part-i.sqlite --records part-i.jsonl`` judges only the
cases whose id falls in shard ``i`` of ``N`` (by a SHA-256 of the case id, so the split does not
depend on the file order and every case is in exactly one shard). N processes (or Spark executors)
each write their own SQLite cache; ``rankwise cache merge part-*.sqlite --into all.sqlite`` merges
them.

Merge rule: a key present in several files with the same verdict, grade and reason is kept once (the
oldest row, so its token counts are not double counted); a key whose rows disagree (a different
verdict, grade or reason: e.g. two workers judged the same chunk and the model answered differently)
keeps the newest row (largest ``created``) and is counted as a conflict. Nothing else is dropped.

Example:
    >>> parse_shard("1/3")
    (1, 3)
    >>> sorted(in_shard(f"q{k}", 0, 2) or in_shard(f"q{k}", 1, 2) for k in range(5))
    [True, True, True, True, True]
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import InputError

__all__ = ["parse_shard", "in_shard", "MergeReport", "merge_caches"]


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` -> ``(i, N)`` with ``0 <= i < N``; anything else is an :class:`InputError`."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise InputError(f"--shard must be i/N (e.g. 0/4), got {text!r}", field="shard") from None
    if n < 1 or not 0 <= i < n:
        raise InputError(f"--shard i/N needs 0 <= i < N, got {text!r}", field="shard")
    return i, n


def in_shard(case_id: str, i: int, n: int) -> bool:
    """Whether the case ``case_id`` belongs to shard ``i`` of ``n`` (stable across runs and
    machines)."""
    return int.from_bytes(hashlib.sha256(str(case_id).encode("utf-8")).digest()[:8], "big") % n == i


@dataclass
class MergeReport:
    """What a merge did: rows read, new keys added, identical duplicates skipped, conflicts
    resolved."""

    read: int = 0
    added: int = 0
    identical: int = 0
    conflicts: int = 0
    replaced: int = 0
    total: int = 0
    bad: int = 0  # rows no judge could have written (a verdict of 7, text for a number): not merged


_COLS = ("key, model, mode, scale, prompt_version, style, verdict, grade, reason, call, prompt_tokens, "
         "completion_tokens, created")


def merge_caches(sources: list[str | PathLike], into: str | PathLike) -> MergeReport:
    """Merge verdict cache files into ``into`` (created if needed; its own rows take part in the
    merge).

    Example::

        report = merge_caches(["part-0.sqlite", "part-1.sqlite"], "all.sqlite")
        print(report.added, report.identical, report.conflicts)
    """
    from rankwise.llm.cache import ResponseCache

    target = Path(into)
    report = MergeReport()
    for src in sources:
        if not Path(src).is_file():
            raise InputError("cache file not found", source=src)
        if Path(src).resolve() == target.resolve():
            raise InputError("a source is the --into file itself", source=src)
        ResponseCache(src).close()  # refuses a file that is not a rankwise cache, with a one-line error
    with ResponseCache(target) as cache:
        for src in sources:
            try:
                other = sqlite3.connect(f"file:{Path(src).resolve()}?mode=ro", uri=True)
                try:
                    rows = other.execute(f"SELECT {_COLS} FROM verdicts").fetchall()
                finally:
                    other.close()
            except sqlite3.DatabaseError as exc:  # a damaged file: named, nothing of it merged
                raise InputError(f"not a usable rankwise cache (SQLite) file: {exc}", source=src) from None
            try:
                _merge_rows(cache, rows, report)
            except sqlite3.DatabaseError as exc:
                raise InputError(f"cannot merge into this cache file: {exc}", source=target) from None
        report.total = len(cache)
    return report


def _merge_rows(cache: Any, rows: list[tuple], report: MergeReport) -> None:
    """Merge one source's rows into ``cache`` in one transaction (rows that cannot be verdicts
    skipped)."""
    from rankwise.llm.cache import row_problem

    db = cache._db
    db.execute("BEGIN")
    try:
        for row in rows:
            report.read += 1
            if row_problem(row[6], row[7], row[8], row[4], row[9], row[12], row[3]) is not None:
                report.bad += 1
                continue
            old = db.execute("SELECT verdict, grade, reason, created FROM verdicts WHERE key=?",
                             (row[0],)).fetchone()
            if old is None:
                db.execute(f"INSERT INTO verdicts ({_COLS}) VALUES ({','.join('?' * 13)})", row)
                report.added += 1
            elif tuple(old[:3]) == (row[6], row[7], row[8]):
                report.identical += 1
                if row[12] < old[3]:  # keep the oldest of identical rows
                    db.execute("UPDATE verdicts SET created=? WHERE key=?", (row[12], row[0]))
            else:
                report.conflicts += 1
                if row[12] > old[3]:
                    db.execute(f"INSERT OR REPLACE INTO verdicts ({_COLS}) VALUES ({','.join('?' * 13)})", row)
                    report.replaced += 1
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")

