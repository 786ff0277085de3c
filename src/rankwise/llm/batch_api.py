"""Judge jobs through a provider Batch API (OpenAI ``/v1/files`` + ``/v1/batches``), resumable.

The requests are exactly the chat requests the online judge would send (same prompts, same model,
``max_tokens`` and temperature), one JSONL line each, with ``custom_id`` ``r<N>`` (numbered over the
whole job). The lines are split into batches of at most ``max_requests`` requests and ``max_bytes``
bytes of input file (OpenAI's limits, 50,000 requests and 200 MB, by default). Each batch's file is
uploaded (purpose ``batch``) and a batch is created (endpoint ``/v1/chat/completions``, window
``24h``).

Splitting, resuming, retries, cost and settings: docs/llm-judge.md, "Provider Batch APIs".

Example::

    from rankwise.llm.batch_api import run_batch_job
    report = run_batch_job(judge, cases, poll_seconds=30, max_requests=10_000)   # judge: a Judge with a cache
    print(report.batch_ids, report.ok, report.failed, report.cost)
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import sqlite3
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Protocol

from rankwise.errors import BatchApiError, InputError, RankwiseError
from rankwise.llm.endpoint import OPENAI_URL, mask_url, split_credentials
from rankwise.llm.limits import backoff_delay, retry_after_seconds
from rankwise.llm.parse import ParseError, refusal_of
from rankwise.llm.replies import reply_of

__all__ = ["BatchApiError", "BatchReport", "BatchSettings", "resolve_batch_settings", "run_batch_job", "BatchTask", "BatchUnit",
           "plan_batches", "BatchPlan", "build_requests", "split_requests", "DEFAULT_DISCOUNT", "DEFAULT_POLL_SECONDS", "DEFAULT_MAX_REQUESTS",
           "DEFAULT_MAX_BYTES"]

DEFAULT_DISCOUNT = 0.5
DEFAULT_POLL_SECONDS = 30.0
DEFAULT_MAX_REQUESTS = 50_000  # OpenAI: requests per batch input file
DEFAULT_MAX_BYTES = 200_000_000  # OpenAI: 200 MB per batch input file
FINAL = {"completed", "expired", "cancelled", "failed"}
_PARTS = """CREATE TABLE IF NOT EXISTS batch_parts (
    fingerprint TEXT NOT NULL, part INTEGER NOT NULL, parts INTEGER NOT NULL, first INTEGER NOT NULL,
    requests INTEGER NOT NULL, bytes INTEGER NOT NULL, input_file_id TEXT, batch_id TEXT,
    state TEXT NOT NULL, batch_status TEXT, created REAL NOT NULL, PRIMARY KEY (fingerprint, part))"""
_RESULTS = """CREATE TABLE IF NOT EXISTS batch_results (
    fingerprint TEXT NOT NULL, part INTEGER NOT NULL, kind TEXT NOT NULL, content BLOB NOT NULL,
    PRIMARY KEY (fingerprint, part, kind))"""
_KINDS = ("output_file_id", "error_file_id")


# ------------------------------------------------------------------------------------------
# settings
@dataclass(frozen=True)
class BatchSettings:
    """How a Batch-API job runs: seconds between polls, the price factor, and the limits of one
    batch.

    Example:
        >>> BatchSettings(max_requests=1000).max_bytes
        200000000
    """

    poll_seconds: float = DEFAULT_POLL_SECONDS
    discount: float = DEFAULT_DISCOUNT
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if not (math.isfinite(self.poll_seconds) and self.poll_seconds > 0):
            raise InputError(f"batch_poll must be > 0 seconds, got {self.poll_seconds}", field="batch_poll")
        if not (math.isfinite(self.discount) and 0 <= self.discount <= 1):
            raise InputError(f"batch_discount must be a fraction from 0 to 1 (0.5: half price), got "
                             f"{self.discount}", field="batch_discount")
        if self.max_requests < 1:
            raise InputError(f"batch_max_requests must be >= 1, got {self.max_requests}",
                             field="batch_max_requests")
        if self.max_bytes < 1:
            raise InputError(f"batch_max_bytes must be >= 1, got {self.max_bytes}", field="batch_max_bytes")


_ENV = {"batch_poll": "RANKWISE_BATCH_POLL", "batch_discount": "RANKWISE_BATCH_DISCOUNT"}


def resolve_batch_settings(*, config: str | PathLike | None = None, env: Mapping[str, str] | None = None,
                           poll_seconds: float | None = None, discount: float | None = None,
                           max_requests: int | None = None, max_bytes: int | None = None) -> BatchSettings:
    """The Batch-API settings: arguments, then the environment (``RANKWISE_BATCH_POLL``,
    ``RANKWISE_BATCH_DISCOUNT``), then the config file's ``[llm]`` table (``batch_poll``,
    ``batch_discount``, ``batch_max_requests``, ``batch_max_bytes``), then the defaults -- as
    :func:`resolve_llm_config` resolves the other settings. ``None`` means "not given". Errors name
    the variable, or the file and the key.

    Example:
        >>> s = resolve_batch_settings(
        ...     poll_seconds=5, env={"RANKWISE_BATCH_DISCOUNT": "0.4"}, config=None
        ... )
        >>> (s.poll_seconds, s.discount, s.max_requests)
        (5.0, 0.4, 50000)
    """
    from rankwise.llm.client import load_config
    from rankwise.llm.config import _check

    env = os.environ if env is None else env
    table, source = load_config(config)
    origin: dict[str, tuple[str | None, str]] = {}  # key -> (source, field) of the value taken

    def pick(key: str, given: Any, default: Any) -> Any:
        if given is not None:
            origin[key] = (None, key)
            return given
        name = _ENV.get(key)
        if name and env.get(name, "").strip():
            origin[key] = (None, name)
            try:
                return float(env[name])
            except ValueError:
                raise InputError(f"${name} must be a number, got {env[name]!r}", field=name) from None
        if key in table:
            origin[key] = (source, key)
            return _check(key, table[key], source)
        return default

    values = {"poll_seconds": float(pick("batch_poll", poll_seconds, DEFAULT_POLL_SECONDS)),
              "discount": float(pick("batch_discount", discount, DEFAULT_DISCOUNT)),
              "max_requests": pick("batch_max_requests", max_requests, DEFAULT_MAX_REQUESTS),
              "max_bytes": pick("batch_max_bytes", max_bytes, DEFAULT_MAX_BYTES)}
    try:
        return BatchSettings(**values)
    except InputError as exc:  # name where the bad value came from: the file, or the variable
        where, name = origin.get(exc.field or "", (None, exc.field))
        raise InputError(exc.problem.replace(str(exc.field), name or "", 1), source=where, field=name) from None


# ------------------------------------------------------------------------------------------ report
@dataclass
class BatchReport:
    """What the batch job did: its batches (ids, final statuses), counts of items ok / failed (with
    why), tokens, cost, polls, and the Batch-API calls retried.

    Example:
        >>> r = BatchReport(
        ...     batch_ids=["b1", "b2"],
        ...     statuses=["completed", "expired"],
        ...     requests=4,
        ...     chunks=4,
        ...     ok=3,
        ...     failed=1,
        ...     failures={"expired": 1},
        ... )
        >>> r.lines()[0]
        '2 batches (b1, b2): completed 1, expired 1; 4 requests for 4 chunks, 3 verdicts, 1 failed (expired 1)'
    """

    batch_ids: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    resumed: bool = False
    created: int = 0
    requests: int = 0
    chunks: int = 0
    ok: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    polls: int = 0
    retries: int = 0

    @property
    def batch_id(self) -> str | None:
        """The first batch's id (None before one exists)."""
        return self.batch_ids[0] if self.batch_ids else None

    @property
    def status(self) -> str:
        """``completed`` when every batch completed, else the count of each final status."""
        if not self.statuses:
            return "nothing to do"
        counts: dict[str, int] = {}
        for s in self.statuses:
            counts[s] = counts.get(s, 0) + 1
        if len(counts) == 1:
            return self.statuses[0]
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))

    def lines(self) -> list[str]:
        """Human-readable summary lines for the console."""
        cost = "cost unknown (no prices)" if self.cost is None else f"cost ${self.cost:.4f} at the batch price"
        why = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        if len(self.batch_ids) > 1:
            head = f"{len(self.batch_ids)} batches ({', '.join(self.batch_ids)})"
        else:
            head = f"batch {self.batch_id or '-'}"
        retried = f"; {self.retries} Batch-API calls retried" if self.retries else ""
        return [f"{head}: {self.status}{' (resumed)' if self.resumed else ''}; "
                f"{self.requests} requests for {self.chunks} chunks, {self.ok} verdicts, {self.failed} failed"
                + (f" ({why})" if why else ""),
                f"batch tokens: {self.prompt_tokens} prompt + {self.completion_tokens} completion; {cost}{retried}"]


# ------------------------------------------------------------------------------------------
# requests
class BatchUnit(Protocol):
    """One call of a :class:`BatchTask`: ``size`` items answered by it, ``batch``: several in one
    call."""

    size: int
    batch: bool


class BatchTask(Protocol):
    """What the Batch API needs of a task, all public (the judge implements it; any task that can be
    asked in batches may): its endpoint, call policy, prices and cache; the calls still to make;
    each call's messages, token cap and reply schema; and the cache rows a reply becomes.

    ``prepare(cases)`` returns an object with ``units`` (the calls not answered by the cache) and
    ``keys``. ``cache_rows`` raises :class:`~rankwise.errors.ParseError` when a reply holds nothing
    usable.
    """

    endpoint: Any
    policy: Any
    prices: Any
    cache: Any

    def prepare(self, cases: Sequence[Any]) -> Any: ...

    def messages(self, unit: Any) -> list[dict]: ...

    def max_tokens(self, unit: Any) -> int: ...

    def reply_schema(self, unit: Any) -> dict: ...

    def cache_rows(self, unit: Any, content: str | None, prompt_tokens: int, completion_tokens: int,
                   keys: dict, call: str) -> list[tuple[str, dict[str, Any]]]: ...


def build_requests(task: BatchTask, units: Sequence[Any], *,
                   response_format: str = "json_schema") -> list[dict[str, Any]]:
    """One Batch-API request line per unit: the task's own chat request, ``custom_id`` ``r<N>``,
    asking for the same reply schema the online path asks for (``response_format``: the level,
    OpenAI's Batch API takes ``json_schema``; ``text`` sends none)."""
    from rankwise.llm.client import response_format_body

    out = []
    for n, unit in enumerate(units):
        body = {"model": task.endpoint.model, "messages": task.messages(unit), "max_tokens": task.max_tokens(unit)}
        schema = task.reply_schema(unit)
        fmt = response_format_body(response_format, schema)
        if fmt is not None:
            body["response_format"] = fmt
        if task.policy.temperature is not None:
            body["temperature"] = task.policy.temperature
        out.append({"custom_id": f"r{n}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return out


def split_requests(lines: Sequence[bytes], max_requests: int, max_bytes: int) -> list[tuple[int, int]]:
    """Split encoded request lines, in order, into batches of at most ``max_requests`` lines and
    ``max_bytes`` bytes: ``(first line, number of lines)`` per batch. A line longer than
    ``max_bytes`` alone is an :class:`InputError` (no provider would take it).

    Example:
        >>> split_requests([b"aaaa\\n"] * 5, max_requests=2, max_bytes=100)
        [(0, 2), (2, 2), (4, 1)]
        >>> split_requests([b"aaaa\\n"] * 5, max_requests=100, max_bytes=12)
        [(0, 2), (2, 2), (4, 1)]
    """
    parts: list[tuple[int, int]] = []
    first = size = 0
    for n, line in enumerate(lines):
        if len(line) > max_bytes:
            raise InputError(f"request r{n} is {len(line)} bytes, more than a whole batch file may hold "
                             f"({max_bytes} bytes): raise batch_max_bytes or judge it online", field="batch_max_bytes")
        if n > first and (n - first >= max_requests or size + len(line) > max_bytes):
            parts.append((first, n - first))
            first, size = n, 0
        size += len(line)
    if len(lines) > first:
        parts.append((first, len(lines) - first))
    return parts


def _encoded(task: BatchTask, units: Sequence[Any]) -> list[bytes]:
    return [(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            for x in build_requests(task, units)]


@dataclass(frozen=True)
class BatchPlan:
    """The batches a job would create: ``(requests, bytes)`` per batch, and the batch discount."""

    sizes: list[tuple[int, int]]
    discount: float

    def line(self, online_cost: float | None = None) -> str:
        """One console line; ``online_cost``: the estimated online cost of the same calls.

        Example:
            >>> BatchPlan([(5, 6488), (2, 2598)], 0.5).line(0.004)
            'batch API: 7 requests in 2 batches of 5, 2 requests (6488, 2598 bytes); estimated cost $0.0020 at the batch price'
        """
        cost = "" if online_cost is None else f"; estimated cost ${online_cost * self.discount:.4f} at the batch price"
        return (f"batch API: {sum(n for n, _ in self.sizes)} requests in {len(self.sizes)} batches of "
                f"{', '.join(str(n) for n, _ in self.sizes) or '-'} requests "
                f"({', '.join(str(b) for _, b in self.sizes) or '-'} bytes){cost}")


def plan_batches(task: BatchTask, cases: Sequence[Any], settings: BatchSettings | None = None) -> BatchPlan:
    """The batches a :func:`run_batch_job` of ``cases`` would create now (none when the cache has
    every verdict). Calls nothing (``--dry-run --batch-api``).

    Example::

        print(plan_batches(judge, cases, BatchSettings(max_requests=10_000)).line())
    """
    opts = settings or BatchSettings()
    _verdicts, units, _unj, _keys = task.prepare(cases)
    lines = _encoded(task, units)
    return BatchPlan([(n, sum(map(len, lines[first:first + n])))
                      for first, n in split_requests(lines, opts.max_requests, opts.max_bytes)], opts.discount)


# ------------------------------------------------------------------------------------------ HTTP,
# with retries
class _Transient(Exception):
    """A failure worth retrying: ``why`` for the message, ``retry_after`` from the reply, ``sent``:
    the request may have reached the server (no reply was read)."""

    def __init__(self, why: str, retry_after: float | None = None, sent: bool = False) -> None:
        super().__init__(why)
        self.why, self.retry_after, self.sent = why, retry_after, sent


class _Api:
    def __init__(self, base_url: str | None, api_key: str | None, policy: Any,
                 on_status: Callable[[str], None] | None = None) -> None:
        # credentials in the URL (user:password@) go in an Authorization: Basic header, as the
        # online client sends them; messages show the URL without them
        url, basic = split_credentials((base_url or OPENAI_URL).rstrip("/"))
        self.base = str(url)
        self.shown = mask_url((base_url or OPENAI_URL).rstrip("/"))
        self.auth = basic or f"Bearer {api_key or 'unused'}"
        self.policy = policy
        self.on_status = on_status
        self.retries = 0

    def _once(self, method: str, path: str, data: bytes | None, ctype: str | None, timeout: float) -> bytes:
        headers = {"Authorization": self.auth}
        if ctype:
            headers["Content-Type"] = ctype
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()[:300].decode("utf-8", "replace").replace("\n", " ")
            except (OSError, http.client.HTTPException):
                body = ""
            why = f"HTTP {exc.code}: {body}".rstrip(": ")
            if exc.code == 429 or exc.code >= 500:
                raise _Transient(why, retry_after_seconds(exc.headers)) \
                    from None
            raise BatchApiError(why) from None
        except urllib.error.URLError as exc:  # raised before the request was sent (refused, DNS ...)
            raise _Transient(f"cannot reach {self.shown}: {exc.reason}") from None
        except TimeoutError:
            raise _Transient(f"no reply within {timeout:g} s", sent=True) from None
        except (OSError, http.client.HTTPException) as exc:  # dropped connection, truncated reply
            raise _Transient(f"connection to {self.shown} broken: {exc.__class__.__name__} {exc}".rstrip(),
                             sent=True) from None

    def call(self, method: str, path: str, what: str, data: bytes | None = None, ctype: str | None = None, *,
             timeout: float | None = None, recover: Callable[[], bytes | None] | None = None,
             min_delay: float = 0.0) -> bytes:
        """The reply's body; retried on 429/5xx/connection errors/timeouts, waiting at least
        ``min_delay``; ``recover`` (called after a request that may have been received but got no
        reply) may supply the reply instead of a resend."""
        p = self.policy
        attempt = 0
        while True:
            try:
                return self._once(method, path, data, ctype, timeout or p.timeout)
            except BatchApiError as exc:
                raise BatchApiError(f"batch API {method} {path} ({what}): {exc}") from None
            except _Transient as exc:
                if exc.sent and recover is not None:
                    found = recover()
                    if found is not None:
                        return found
                if attempt >= p.max_retries:
                    raise BatchApiError(f"batch API {method} {path} ({what}): {exc.why}; gave up after "
                                        f"{attempt + 1} attempts") from None
                if exc.retry_after is not None:
                    delay = min(exc.retry_after, p.max_retry_after)
                else:
                    delay = backoff_delay(attempt + 1, p.backoff_base, p.backoff_max)
                delay = max(delay, min_delay)
                attempt += 1
                self.retries += 1
                if self.on_status:
                    self.on_status(f"batch API {method} {path} ({what}): {exc.why}; retry {attempt}/"
                                   f"{p.max_retries} in {delay:.2g} s")
                time.sleep(delay)

    def json(self, method: str, path: str, what: str, payload: dict | None = None,
             recover: Callable[[], bytes | None] | None = None, min_delay: float = 0.0) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        raw = self.call(method, path, what, data, "application/json" if data is not None else None,
                        recover=recover, min_delay=min_delay)
        try:
            obj = json.loads(raw)
        except ValueError:
            raise BatchApiError(f"batch API {method} {path} ({what}): reply is not JSON: {raw[:120]!r}") from None
        if not isinstance(obj, dict):
            raise BatchApiError(f"batch API {method} {path} ({what}): reply is not a JSON object")
        return obj

    def upload(self, content: bytes, name: str, what: str) -> str:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                f"Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
        # a big file takes its time to send: at least 1 MB/s on top of the per-request timeout
        raw = self.call("POST", "/files", what, body, f"multipart/form-data; boundary={boundary}",
                        timeout=self.policy.timeout + len(body) / 1e6)
        try:
            return str(json.loads(raw)["id"])
        except (ValueError, KeyError, TypeError):
            raise BatchApiError(f"batch API POST /files ({what}): reply has no file id: {raw[:120]!r}") from None

    def create(self, file_id: str, fingerprint: str, part: int, what: str, *, look_first: bool = False) -> str:
        """Create the batch of an uploaded file; ``look_first``: a previous run may have created it
        (its reply lost, or the process killed before the id was stored): look in the batch list
        first."""
        def recover() -> bytes | None:
            """The create may have been received: look for a batch of this input file before sending
            it again."""
            try:
                listing = json.loads(self._once("GET", "/batches?limit=100", None, None, self.policy.timeout))
            except (_Transient, BatchApiError, ValueError):
                return None
            found = listing.get("data") if isinstance(listing, dict) else None
            for batch in found if isinstance(found, list) else []:
                if isinstance(batch, dict) and batch.get("input_file_id") == file_id and batch.get("id"):
                    return json.dumps(batch).encode()
            return None

        known = recover() if look_first else None
        created = json.loads(known) if known is not None else self.json("POST", "/batches", what, {
            "input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "metadata": {"rankwise": fingerprint[:16], "part": str(part + 1)}}, recover=recover)
        batch_id = str(created.get("id") or "")
        if not batch_id:
            raise BatchApiError(f"batch API POST /batches ({what}): reply has no batch id")
        return batch_id


# ------------------------------------------------------------------------------------------ the job
@dataclass
class _Part:
    part: int
    parts: int
    first: int
    requests: int
    bytes: int
    input_file_id: str | None
    batch_id: str | None
    state: str  # pending -> uploaded -> submitted -> done -> ingested
    batch_status: str | None

    @property
    def label(self) -> str:
        return f"batch {self.part + 1}/{self.parts}"


def _open_jobs(path: Any) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    db.execute(_PARTS)
    db.execute(_RESULTS)
    return db


def _load_parts(db: sqlite3.Connection, fingerprint: str) -> list[_Part]:
    rows = db.execute("SELECT part, parts, first, requests, bytes, input_file_id, batch_id, state, batch_status "
                      "FROM batch_parts WHERE fingerprint=? ORDER BY part", (fingerprint,)).fetchall()
    return [_Part(*row) for row in rows]


def _adopt_old_job(db: sqlite3.Connection, fingerprint: str, n_lines: int, n_bytes: int) -> None:
    """A batch submitted by an older rankwise (table ``batch_jobs``, one batch per job) is resumed,
    not resent."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='batch_jobs'").fetchone():
        return
    row = db.execute("SELECT batch_id, input_file_id FROM batch_jobs WHERE fingerprint=? AND status!='ingested'",
                     (fingerprint,)).fetchone()
    if row is not None:
        db.execute("INSERT INTO batch_parts VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (fingerprint, 0, 1, 0, n_lines, n_bytes, row[1], row[0], "submitted", None, time.time()))
        db.execute("UPDATE batch_jobs SET status='ingested' WHERE fingerprint=?", (fingerprint,))


def run_batch_job(task: BatchTask, cases: Sequence[Any], *, poll_seconds: float | None = None,
                  discount: float | None = None, max_requests: int | None = None, max_bytes: int | None = None,
                  config: str | PathLike | None = None, settings: BatchSettings | None = None,
                  timeout_hours: float = 48.0, on_status: Callable[[str], None] | None = None,
                  on_progress: Callable[[int, int, int, int], None] | None = None) -> BatchReport:
    """Ask the calls of ``cases`` not yet answered by ``task.cache`` (the judge's chunks) through
    the Batch API, split into as many batches as the limits need; the replies go to the cache (the
    next :meth:`Judge.run` returns them as cached and calls online only for what failed).

    Resumes the job recorded for the same requests instead of creating other batches. Settings not
    given are resolved by :func:`resolve_batch_settings` (``settings``, when given, is used as it
    is). ``on_status`` gets one line per event (batch submitted, resumed, ended, call retried);
    ``on_progress`` gets (batches ended, batches, requests ended, requests) after every poll. Raises
    :class:`BatchApiError` when a call fails for good (a rerun resumes).

    Example::

        judge = Judge(endpoint, PromptSettings(mode="question"), cache=ResponseCache("judge.sqlite"))
        report = run_batch_job(judge, cases, max_requests=10_000, poll_seconds=60, on_status=print)
        print("\n".join(report.lines()))
        result = judge.run(cases)   # the batch verdicts, from the cache; what failed there, online
    """
    if task.cache is None:
        raise RankwiseError("the batch API needs a verdict cache (it records the batch ids there)")
    opts = settings or resolve_batch_settings(config=config, poll_seconds=poll_seconds, discount=discount,
                                              max_requests=max_requests, max_bytes=max_bytes)
    _verdicts, units, _unj, keys = task.prepare(cases)
    report = BatchReport(chunks=sum(u.size for u in units), requests=len(units))
    if not units:
        return report
    lines = _encoded(task, units)
    fingerprint = hashlib.sha256(b"".join(lines)).hexdigest()
    say = on_status or (lambda _m: None)
    api = _Api(task.endpoint.base_url, task.endpoint.api_key, task.policy, say)
    db = _open_jobs(task.cache.path)
    try:
        try:
            parts = _run_parts(api, db, fingerprint, lines, opts, timeout_hours, report, say,
                               on_progress or (lambda *_a: None))
        except BatchApiError as exc:
            kept, total = db.execute("SELECT COUNT(batch_id), COUNT(*) FROM batch_parts WHERE fingerprint=?",
                                     (fingerprint,)).fetchone()
            raise BatchApiError(f"{exc}; {kept} of {total} batches created, their ids and the results received "
                                f"are kept in {task.cache.path}: rerun the same command to resume") from None
        finally:
            report.retries = api.retries
        results, status_of = _collect_results(db, fingerprint, parts, report)
        _ingest(task, units, keys, results, status_of, report)
        report.cost = task.prices.cost(report.prompt_tokens, report.completion_tokens)
        if report.cost is not None:
            report.cost *= opts.discount
        db.execute("BEGIN")
        db.execute("UPDATE batch_parts SET state='ingested' WHERE fingerprint=?", (fingerprint,))
        db.execute("DELETE FROM batch_results WHERE fingerprint=?", (fingerprint,))
        db.execute("COMMIT")
        return report
    finally:
        db.close()


def _collect_results(db: sqlite3.Connection, fingerprint: str, parts: list[_Part],
                     report: BatchReport) -> tuple[dict[str, Any], dict[int, str]]:
    """The result line of each request (``custom_id`` -> line) and each request's batch status.

    A provider's output is checked, not trusted: a line whose ``custom_id`` is not one of its
    batch's requests is counted (``unknown custom_id``) and dropped; a ``custom_id`` given more than
    once (in the output or error files of its batch) has no trustworthy result: it maps to None, a
    counted failure (``duplicate custom_id``) of its chunks; a request with no line fails as ``no
    result`` (or the batch's status, when it did not complete)."""
    results: dict[str, Any] = {}
    status_of: dict[int, str] = {}

    def count(why: str) -> None:
        report.failures[why] = report.failures.get(why, 0) + 1

    for p in parts:
        ids = {f"r{n}" for n in range(p.first, p.first + p.requests)}
        for n in range(p.first, p.first + p.requests):
            status_of[n] = p.batch_status or "no result"
        for (content,) in db.execute("SELECT content FROM batch_results WHERE fingerprint=? AND part=? "
                                     "ORDER BY kind DESC", (fingerprint, p.part)):  # output before errors
            for raw in bytes(content).decode("utf-8", "replace").splitlines():
                if not raw.strip():
                    continue
                try:
                    item = json.loads(raw)
                    cid = str(item["custom_id"])
                except (ValueError, KeyError, TypeError):
                    count("bad result line")
                    continue
                if cid not in ids:
                    count("unknown custom_id")
                elif cid in results:
                    results[cid] = None  # which line is right cannot be told: neither is used
                else:
                    results[cid] = item
    return results, status_of


def _run_parts(api: _Api, db: sqlite3.Connection, fingerprint: str, lines: list[bytes], opts: BatchSettings,
               timeout_hours: float, report: BatchReport, say: Callable[[str], None],
               progress: Callable[[int, int, int, int], None]) -> list[_Part]:
    """Create what is not created yet, poll until every batch has ended, download the results (all
    kept in the database as they come); the parts, ended."""
    parts = _planned_parts(db, fingerprint, lines, opts, report, say)
    _submit_parts(api, db, fingerprint, parts, lines, report, say)
    _poll_parts(api, db, fingerprint, parts, len(lines), opts, timeout_hours, say, progress, report)
    report.statuses = [str(p.batch_status) for p in parts]
    return parts


def _planned_parts(db: sqlite3.Connection, fingerprint: str, lines: list[bytes], opts: BatchSettings,
                   report: BatchReport, say: Callable[[str], None]) -> list[_Part]:
    """The job's parts: those kept in the database (a resumed job), else the requests split anew."""
    parts = _load_parts(db, fingerprint)
    if not parts:
        _adopt_old_job(db, fingerprint, len(lines), sum(map(len, lines)))
        parts = _load_parts(db, fingerprint)
    if parts and all(p.state == "ingested" for p in parts):  # the same requests again: a new job
        db.execute("DELETE FROM batch_parts WHERE fingerprint=?", (fingerprint,))
        parts = []
    if parts:
        report.resumed = any(p.batch_id for p in parts)
        return parts
    split = split_requests(lines, opts.max_requests, opts.max_bytes)
    now = time.time()
    db.execute("BEGIN")
    db.executemany("INSERT OR IGNORE INTO batch_parts VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   [(fingerprint, k, len(split), first, n, sum(map(len, lines[first:first + n])), None, None,
                     "pending", None, now) for k, (first, n) in enumerate(split)])
    db.execute("COMMIT")
    parts = _load_parts(db, fingerprint)
    if len(parts) > 1:
        say(f"{len(lines)} requests split into {len(parts)} batches (at most {opts.max_requests} requests "
            f"and {opts.max_bytes} bytes each)")
    return parts


def _save_part(db: sqlite3.Connection, fingerprint: str, p: _Part, **cols: Any) -> None:
    """Set ``cols`` on the part and in its database row."""
    for k, v in cols.items():
        setattr(p, k, v)
    db.execute(f"UPDATE batch_parts SET {', '.join(f'{k}=?' for k in cols)} WHERE fingerprint=? AND part=?",
               (*cols.values(), fingerprint, p.part))


def _submit_parts(api: _Api, db: sqlite3.Connection, fingerprint: str, parts: list[_Part], lines: list[bytes],
                  report: BatchReport, say: Callable[[str], None]) -> None:
    """Upload and create every part not created yet (a part uploaded before is looked up first)."""
    uploaded_before = {p.part for p in parts if p.state == "uploaded"}
    for p in parts:
        if p.state == "pending":
            content = b"".join(lines[p.first:p.first + p.requests])
            file_id = api.upload(content, f"rankwise-{fingerprint[:12]}-{p.part + 1}.jsonl", f"upload of {p.label}")
            _save_part(db, fingerprint, p, input_file_id=file_id, state="uploaded")
        if p.state == "uploaded":
            batch_id = api.create(str(p.input_file_id), fingerprint, p.part, f"create of {p.label}",
                                  look_first=p.part in uploaded_before)
            _save_part(db, fingerprint, p, batch_id=batch_id, state="submitted")
            report.created += 1
            say(f"batch {batch_id} submitted ({p.label}, {p.requests} requests, {p.bytes} bytes)")
        elif p.state == "submitted":
            say(f"batch {p.batch_id} resumed ({p.label}, {p.requests} requests)")
    report.batch_ids = [str(p.batch_id) for p in parts]


def _poll_parts(api: _Api, db: sqlite3.Connection, fingerprint: str, parts: list[_Part], n_requests: int,
                opts: BatchSettings, timeout_hours: float, say: Callable[[str], None],
                progress: Callable[[int, int, int, int], None], report: BatchReport) -> None:
    """Poll until every part has ended (or the deadline passes), downloading each ended part's
    files."""
    done = sum(p.state == "done" for p in parts)
    deadline = time.monotonic() + timeout_hours * 3600
    if done < len(parts):
        say(f"polling {len(parts) - done} of {len(parts)} batches every {opts.poll_seconds:g} s")
    running: dict[int, int] = {}  # requests ended so far in the batches still running (as the provider counts)
    while True:
        for p in parts:
            if p.state != "submitted":
                continue
            what = f"batch {p.batch_id}, {p.label}"
            info = api.json("GET", f"/batches/{p.batch_id}", f"poll of {what}", min_delay=opts.poll_seconds)
            report.polls += 1
            status = str(info.get("status"))
            if status not in FINAL:
                counts = info.get("request_counts")
                if isinstance(counts, dict):
                    ended = sum(v for k, v in counts.items() if k in ("completed", "failed") and isinstance(v, int))
                    running[p.part] = max(0, min(ended, p.requests))
                continue
            running.pop(p.part, None)
            _download_part(api, db, fingerprint, p, info, what)
            _save_part(db, fingerprint, p, state="done", batch_status=status)
            done += 1
            say(f"batch {p.batch_id} {status}: {done}/{len(parts)} batches done")
        progress(done, len(parts), sum(p.requests for p in parts if p.state == "done") + sum(running.values()),
                 n_requests)
        if done == len(parts):
            return
        if time.monotonic() > deadline:
            waiting = [str(p.batch_id) for p in parts if p.state == "submitted"]
            raise BatchApiError(f"batches {', '.join(waiting)} not ended after {timeout_hours:g} h")
        time.sleep(opts.poll_seconds)


def _download_part(api: _Api, db: sqlite3.Connection, fingerprint: str, p: _Part, info: dict, what: str) -> None:
    """An ended part's output and error files, each downloaded once into the database."""
    have = {k for (k,) in db.execute("SELECT kind FROM batch_results WHERE fingerprint=? AND part=?",
                                     (fingerprint, p.part))}
    for kind in _KINDS:
        fid = info.get(kind)
        if fid and kind not in have:
            content = api.call("GET", f"/files/{fid}/content", f"download of the "
                               f"{kind.split('_')[0]} file of {what}")
            db.execute("INSERT OR REPLACE INTO batch_results VALUES (?,?,?,?)", (fingerprint, p.part, kind, content))


def _ingest(task: BatchTask, units: Sequence[Any], keys: dict, results: dict[str, Any], status_of: dict[int, str],
            report: BatchReport) -> None:
    items: list[tuple[str, dict[str, Any]]] = []

    def fail(unit: Any, why: str) -> None:
        report.failed += unit.size
        report.failures[why] = report.failures.get(why, 0) + unit.size

    for n, unit in enumerate(units):
        item = results.get(f"r{n}")
        if item is None and f"r{n}" in results:
            fail(unit, "duplicate custom_id")
            continue
        if item is None:
            status = status_of.get(n, "no result")
            fail(unit, status if status != "completed" else "no result")
            continue
        resp = item.get("response") if isinstance(item, dict) else None
        if item.get("error") or not isinstance(resp, dict) or resp.get("status_code") != 200:
            code = resp.get("status_code") if isinstance(resp, dict) else None
            fail(unit, f"HTTP {code}" if code else "error")
            continue
        try:
            reply = reply_of(resp.get("body"))
        except Exception:  # noqa: BLE001 - any malformed body fails its chunks only
            fail(unit, "bad reply")
            continue
        report.prompt_tokens += reply.prompt_tokens
        report.completion_tokens += reply.completion_tokens
        if refusal_of(reply.content, reply.refusal, reply.finish_reason):
            fail(unit, "refused")
            continue
        try:
            rows = task.cache_rows(unit, reply.content, reply.prompt_tokens, reply.completion_tokens, keys,
                                   "batch" if unit.batch else "single")
        except ParseError:
            fail(unit, "unparseable")
            continue
        items += rows
        report.ok += unit.size
    if items:
        task.cache.put_many(items)
