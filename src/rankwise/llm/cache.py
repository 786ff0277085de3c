"""The LLM response cache: one SQLite file (WAL), one row per reply had (a chunk's verdict, an
answer, a sample), written as each arrives; every task that calls a model (judge, synth, pool,
answer, utility, rerank) reads and fills it.

The key is a SHA-256 of everything that decides a reply: model, mode, scale, prompt version, call
style (per chunk or batch), sampling parameters, question, chunk text, and the reference answer or
the response when the mode reads it. Each reply is committed as it arrives (by a writer thread, so
the event loop never waits on the disk), so a killed run loses at most the calls in flight, and
rerunning a finished job makes no call at all. Only replies that were had are stored; failures are
tried again on the next run.

Default location: ``$RANKWISE_CACHE``, else ``llm-cache.sqlite`` in ``$RANKWISE_CACHE_DIR``, else
``$XDG_CACHE_HOME/rankwise/llm-cache.sqlite`` (``~/.cache``); a cache kept under the former name
(``llm-judge.sqlite``) in that folder is used while no ``llm-cache.sqlite`` exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import CacheWriteError, InputError

__all__ = ["ResponseCache", "DEFAULT_NAME", "FORMER_NAME", "CacheWriter", "CacheWriteError", "CachedVerdict", "CacheStats", "cache_key", "default_cache_path",
           "row_problem"]

SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    mode TEXT NOT NULL,
    scale TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    style TEXT NOT NULL,
    verdict INTEGER NOT NULL,
    grade INTEGER,
    reason TEXT,
    call TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
"""
_COLUMNS = {"key", "model", "mode", "scale", "prompt_version", "style", "verdict", "grade", "reason", "call",
            "prompt_tokens", "completion_tokens", "created"}


DEFAULT_NAME = "llm-cache.sqlite"
FORMER_NAME = "llm-judge.sqlite"  # the default file's name before every LLM task shared it


def default_cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$RANKWISE_CACHE`` (a file), else ``llm-cache.sqlite`` in ``$RANKWISE_CACHE_DIR`` (the
    folder the embedding cache obeys too), else in ``$XDG_CACHE_HOME/rankwise``
    (``~/.cache/rankwise`` by default); in that folder, a cache under the former name
    ``llm-judge.sqlite`` while no ``llm-cache.sqlite`` exists (its replies are not paid for twice).

    ``environ``: the variables to read (default ``os.environ``).

    Example:
        >>> str(default_cache_path({"RANKWISE_CACHE_DIR": "/tmp/rw-cache-none"}))
        '/tmp/rw-cache-none/llm-cache.sqlite'
    """
    environ = os.environ if environ is None else environ
    env = environ.get("RANKWISE_CACHE")
    if env:
        return Path(env)
    folder = environ.get("RANKWISE_CACHE_DIR")
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    home = Path(folder).expanduser() if folder else Path(base) / "rankwise"
    if not (home / DEFAULT_NAME).exists() and (home / FORMER_NAME).is_file():
        return home / FORMER_NAME
    return home / DEFAULT_NAME


def cache_key(*, model: str, mode: str, scale: str, prompt_version: str, style: str, question: str,
              chunk: str, context: str | None, params: dict[str, Any] | None = None) -> str:
    """SHA-256 hex of the fields that decide a verdict (``context``: reference or response, or
    None).

    Example:
        >>> k = cache_key(
        ...     model="m",
        ...     mode="question",
        ...     scale="binary",
        ...     prompt_version="v1",
        ...     style="single",
        ...     question="q?",
        ...     chunk="text",
        ...     context=None,
        ... )
        >>> len(k)
        64
    """
    payload = json.dumps([model, mode, scale, prompt_version, style, question, chunk, context,
                          sorted((params or {}).items())], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def row_problem(verdict: Any, grade: Any, reason: Any, prompt_version: Any, call: Any, created: Any,
                scale: Any) -> str | None:
    """Why a stored row cannot be a verdict (None when it can).

    Example:
        >>> row_problem(7, None, "r", "v1", "single", 1.0, "binary")
        'verdict 7 (not 0 or 1)'
        >>> row_problem(1, 3, "r", "v1", "single", 1.0, "graded") is None
        True
    """
    if not _is_int(verdict) or verdict not in (0, 1):
        return f"verdict {verdict!r} (not 0 or 1)"
    if grade is not None and (not _is_int(grade) or not 0 <= grade <= 3):
        return f"grade {grade!r} (not 0-3)"
    if scale == "graded" and grade is None:
        return "a graded verdict without a grade"
    if reason is not None and not isinstance(reason, str):
        return f"reason {reason!r} (not text)"
    if not isinstance(prompt_version, str) or not isinstance(call, str):
        return "prompt_version or call not text"
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        return f"created {created!r} (not a time)"
    return None


@dataclass(frozen=True)
class CachedVerdict:
    """A verdict as stored: ``call`` is ``single`` or ``batch`` (what produced it)."""

    verdict: int
    grade: int | None
    reason: str | None
    prompt_version: str
    call: str
    created: float


@dataclass
class CacheStats:
    """What a cache file holds: total verdicts, and counts per (model, mode, scale, prompt version).
    """

    path: str
    size_bytes: int
    verdicts: int
    prompt_tokens: int
    completion_tokens: int
    groups: list[dict[str, Any]] = field(default_factory=list)


class ResponseCache:
    """SQLite verdict store; use as a context manager or call :meth:`close`.

    Example:
        >>> with ResponseCache("/tmp/doctest-cache.sqlite") as cache:  # doctest: +SKIP
        ...     cache.put("k", verdict=1, grade=None, reason="r", model="m", mode="question",
        ...               scale="binary", prompt_version="v1", style="single", call="single")
        ...     cache.get("k").verdict
        1
    """

    def __init__(self, path: str | PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.bad_rows = 0  # rows read that no judge could have written (served as misses)
        self.bad_example: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
            self._check_foreign()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise InputError(f"cache schema {row[0]} is not the supported {SCHEMA_VERSION}; use another "
                                 f"cache file or clear it", source=self.path)
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a usable rankwise cache (SQLite) file: {exc}", source=self.path) from None
        except OSError as exc:
            raise InputError(f"cannot create the cache file: {exc.strerror}", source=self.path) from None

    def _check_foreign(self) -> None:
        """Refuse, before changing anything, an SQLite file that is not a rankwise cache."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return
        if not {"meta", "verdicts"} <= tables and not tables <= {"generations"}:
            # someone else's database (the generations table of synth before prompt v2 is ours):
            # leave it alone
            self._db.close()
            raise InputError(f"not a rankwise cache: an SQLite file with the tables {sorted(tables)[:5]}; "
                             "use another --cache file", source=self.path)
        if "verdicts" not in tables:  # an old synth cache (generations only): the verdicts table is made next
            return
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(verdicts)")}
        if not columns >= _COLUMNS:
            self._db.close()
            raise InputError(f"not a rankwise cache: its verdicts table lacks {sorted(_COLUMNS - columns)}; "
                             "use another --cache file", source=self.path)

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def get(self, key: str) -> CachedVerdict | None:
        """The stored verdict for ``key``, or None."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: list[str]) -> dict[str, CachedVerdict]:
        """Stored verdicts for the keys that have one. A row that no judge could have written (a
        verdict other than 0/1, a grade outside 0-3, a graded row without a grade, text where a
        number belongs) is not served: it is a miss (asked again, and overwritten), counted in
        :attr:`bad_rows` with the first problem in :attr:`bad_example`."""
        out: dict[str, CachedVerdict] = {}
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            try:
                rows = self._db.execute(
                    "SELECT key, verdict, grade, reason, prompt_version, call, created, scale FROM verdicts "
                    f"WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
            except sqlite3.DatabaseError as exc:  # a damaged file
                raise InputError(f"not a usable rankwise cache (SQLite) file: {exc}", source=self.path) from None
            for key, verdict, grade, reason, pv, call, created, scale in rows:
                problem = row_problem(verdict, grade, reason, pv, call, created, scale)
                if problem is not None:
                    self.bad_rows += 1
                    self.bad_example = self.bad_example or problem
                    continue
                out[key] = CachedVerdict(verdict, grade, reason, pv, call, created)
        return out

    def put(self, key: str, *, verdict: int, grade: int | None, reason: str | None, model: str, mode: str,
            scale: str, prompt_version: str, style: str, call: str, prompt_tokens: int = 0,
            completion_tokens: int = 0) -> None:
        """Store one verdict, committed at once (autocommit)."""
        self._db.execute(
            "INSERT OR REPLACE INTO verdicts (key, model, mode, scale, prompt_version, style, verdict, grade, "
            "reason, call, prompt_tokens, completion_tokens, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (key, model, mode, scale, prompt_version, style, int(verdict), grade, reason, call,
             int(prompt_tokens), int(completion_tokens), time.time()))

    def put_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Store several verdicts (``(key, fields of put)``) in one transaction."""
        now = time.time()
        rows = [(key, f["model"], f["mode"], f["scale"], f["prompt_version"], f["style"], int(f["verdict"]),
                 f.get("grade"), f.get("reason"), f["call"], int(f.get("prompt_tokens", 0)),
                 int(f.get("completion_tokens", 0)), now) for key, f in items]
        self._db.execute("BEGIN")
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO verdicts (key, model, mode, scale, prompt_version, style, verdict, "
                "grade, reason, call, prompt_tokens, completion_tokens, created) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def stats(self) -> CacheStats:
        """Counts per model, mode, scale and prompt version, and the tokens those verdicts cost."""
        try:
            return self._stats()
        except sqlite3.DatabaseError as exc:  # a damaged file
            raise InputError(f"not a usable rankwise cache (SQLite) file: {exc}", source=self.path) from None

    def _stats(self) -> CacheStats:
        rows = self._db.execute(
            "SELECT model, mode, scale, prompt_version, style, COUNT(*), SUM(verdict), "
            "SUM(prompt_tokens), SUM(completion_tokens), MIN(created), MAX(created) FROM verdicts "
            "GROUP BY model, mode, scale, prompt_version, style ORDER BY model, mode, scale, prompt_version, "
            "style").fetchall()
        groups = [{"model": m, "mode": mode, "scale": sc, "prompt_version": pv, "style": st, "verdicts": n,
                   "relevant": int(rel or 0), "prompt_tokens": int(pt or 0), "completion_tokens": int(ct or 0),
                   "first": first, "last": last}
                  for m, mode, sc, pv, st, n, rel, pt, ct, first, last in rows]
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return CacheStats(str(self.path), size, sum(g["verdicts"] for g in groups),
                          sum(g["prompt_tokens"] for g in groups), sum(g["completion_tokens"] for g in groups),
                          groups)

    def clear(self, *, model: str | None = None, prompt_version: str | None = None) -> int:
        """Delete stored verdicts (all, or those of one model and/or prompt version); returns how
        many."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if prompt_version is not None:
            where.append("prompt_version = ?")
            args.append(prompt_version)
        sql = "DELETE FROM verdicts" + (" WHERE " + " AND ".join(where) if where else "")
        n = self._db.execute(sql, args).rowcount
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if not where:
            self._db.execute("VACUUM")
        return n


class CacheWriter:
    """Commits verdicts from a background thread, so the judge's event loop never waits on the disk.

    Each verdict is committed as soon as the thread takes it; verdicts that arrive while a commit is
    running go into the next one (at most ``max_batch``). :meth:`close` writes everything queued.

    Example::

        writer = CacheWriter("judge.sqlite")
        writer.put("key", verdict=1, grade=None, reason="r", model="m", mode="question", scale="binary",
                   prompt_version="v1", style="single", call="single")
        writer.close()
    """

    def __init__(self, path: str | PathLike, max_batch: int = 256) -> None:
        import queue
        import threading

        self.path = Path(path)
        self.max_batch = max_batch
        self.written = 0
        self._queue: Any = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._cache = ResponseCache(self.path)  # opened here, so a bad path fails before any call
        self._thread = threading.Thread(target=self._run, name="rankwise-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, **fields: Any) -> None:
        """Queue one verdict (fields as :meth:`ResponseCache.put`)."""
        if self._error is not None:
            raise CacheWriteError(f"cannot write the verdict cache {self.path}: {_why(self._error)}")
        self._queue.put((key, fields))

    def _run(self) -> None:
        import queue

        try:
            while True:
                item = self._queue.get()
                stop = item is None
                batch = [] if stop else [item]
                while not stop and len(batch) < self.max_batch:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                    else:
                        batch.append(nxt)
                if batch:
                    self._cache.put_many(batch)
                    self.written += len(batch)
                if stop:
                    return
        except BaseException as exc:  # reported by put() / close()
            self._error = exc
        finally:
            self._cache.close()

    def close(self) -> None:
        """Write what is queued and stop the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise CacheWriteError(f"cannot write the verdict cache {self.path}: {_why(self._error)}")


def _why(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]
