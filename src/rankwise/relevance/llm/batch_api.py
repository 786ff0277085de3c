"""Judge jobs through a provider Batch API (OpenAI ``/v1/files`` + ``/v1/batches``), resumable.

The requests are exactly the chat requests the online judge would send (same prompts, same model,
``max_tokens`` and temperature), one JSONL line each, with ``custom_id`` ``r<N>``. The file is uploaded
(purpose ``batch``), a batch is created (endpoint ``/v1/chat/completions``, window ``24h``) and its id is
stored in the verdict cache's SQLite file (table ``batch_jobs``, keyed by a SHA-256 of the request file)
*before* polling starts, so a killed or stopped process, rerun with the same command, resumes polling the
same batch instead of submitting (and paying for) it again. When the batch ends (``completed``,
``expired``, ``cancelled`` or ``failed``) its output and error files are read, each line is mapped back to
its chunks by ``custom_id``, parsed with the judge's parser and written to the cache. Items that errored,
expired, were refused or are unparseable are counted; the CLI then sends them through the normal online
path (per-chunk calls with retries), or, with ``--max-calls 0``, leaves them ``missing``.

Cost is shown at the batch price: the online prices times ``discount`` (0.5 by default, as OpenAI and
Anthropic charge; ``$RANKWISE_BATCH_DISCOUNT`` or the ``discount`` argument).

Example::

    from rankwise.relevance.llm.batch_api import run_batch_job
    report = run_batch_job(judge, cases, poll_seconds=30)   # judge: a Judge with a cache
    print(report.batch_id, report.ok, report.failed, report.cost)
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rankwise.errors import RankwiseError
from rankwise.relevance.llm.client import EndpointError, reply_of
from rankwise.relevance.llm.parse import ParseError, parse_batch, parse_verdict, refusal_of

__all__ = ["BatchReport", "run_batch_job", "build_requests", "DEFAULT_DISCOUNT"]

DEFAULT_DISCOUNT = 0.5
FINAL = {"completed", "expired", "cancelled", "failed"}
_TABLE = """CREATE TABLE IF NOT EXISTS batch_jobs (
    fingerprint TEXT PRIMARY KEY, batch_id TEXT NOT NULL, input_file_id TEXT NOT NULL,
    requests INTEGER NOT NULL, status TEXT NOT NULL, created REAL NOT NULL)"""


@dataclass
class BatchReport:
    """What the batch job did: its id, final status, counts of items ok / failed (with why), tokens, cost."""

    batch_id: str | None = None
    status: str = "nothing to do"
    resumed: bool = False
    requests: int = 0
    chunks: int = 0
    ok: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    polls: int = 0

    def lines(self) -> list[str]:
        """Human-readable summary lines for the console."""
        cost = "cost unknown (no prices)" if self.cost is None else f"cost ${self.cost:.4f} at the batch price"
        why = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        return [f"batch {self.batch_id or '-'}: {self.status}{' (resumed)' if self.resumed else ''}; "
                f"{self.requests} requests for {self.chunks} chunks, {self.ok} verdicts, {self.failed} failed"
                + (f" ({why})" if why else ""),
                f"batch tokens: {self.prompt_tokens} prompt + {self.completion_tokens} completion; {cost}"]


def build_requests(judge: Any, units: Sequence[Any]) -> list[dict[str, Any]]:
    """One Batch-API request line per unit: the judge's own chat request, ``custom_id`` ``r<N>``."""
    from rankwise.relevance.llm.judge import SINGLE_MAX_TOKENS

    out = []
    for n, unit in enumerate(units):
        max_tokens = SINGLE_MAX_TOKENS + 100 * len(unit.ranks) if unit.batch else SINGLE_MAX_TOKENS
        body = {"model": judge.endpoint.model, "messages": judge._messages(unit), "max_tokens": max_tokens}
        if judge.policy.temperature is not None:
            body["temperature"] = judge.policy.temperature
        out.append({"custom_id": f"r{n}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return out


class _Api:
    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        self.base = base_url.rstrip("/")
        self.key = api_key
        self.timeout = timeout

    def call(self, method: str, path: str, data: bytes | None = None, ctype: str | None = None) -> bytes:
        headers = {"Authorization": f"Bearer {self.key or 'unused'}"}
        if ctype:
            headers["Content-Type"] = ctype
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()[:300].decode("utf-8", "replace").replace("\n", " ")
            raise EndpointError(f"batch API {method} {path}: HTTP {exc.code}: {body}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EndpointError(f"batch API {method} {path}: cannot reach {self.base}: "
                                f"{getattr(exc, 'reason', exc)}") from None

    def json(self, method: str, path: str, payload: dict | None = None) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        raw = self.call(method, path, data, "application/json" if data is not None else None)
        try:
            obj = json.loads(raw)
        except ValueError:
            raise EndpointError(f"batch API {method} {path}: reply is not JSON: {raw[:120]!r}") from None
        if not isinstance(obj, dict):
            raise EndpointError(f"batch API {method} {path}: reply is not a JSON object")
        return obj

    def upload(self, content: bytes, name: str) -> str:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                f"Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
        raw = self.call("POST", "/files", body, f"multipart/form-data; boundary={boundary}")
        try:
            return str(json.loads(raw)["id"])
        except (ValueError, KeyError, TypeError):
            raise EndpointError(f"batch API POST /files: reply has no file id: {raw[:120]!r}") from None


def _jobs(path: Any) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    db.execute(_TABLE)
    return db


def run_batch_job(judge: Any, cases: Sequence[Any], *, poll_seconds: float | None = None,
                  discount: float | None = None, timeout_hours: float = 48.0,
                  on_status: Callable[[str], None] | None = None) -> BatchReport:
    """Judge the chunks of ``cases`` not yet in ``judge.cache`` through the Batch API; verdicts go to the
    cache (the next :meth:`Judge.run` returns them as cached and calls online only for what failed).

    Resumes the batch recorded for the same requests instead of creating another one.
    """
    if judge.cache is None:
        raise RankwiseError("the batch API needs a verdict cache (it records the batch id there)")
    if poll_seconds is None:
        poll_seconds = float(os.environ.get("RANKWISE_BATCH_POLL", "30"))
    if discount is None:
        discount = float(os.environ.get("RANKWISE_BATCH_DISCOUNT", DEFAULT_DISCOUNT))
    _verdicts, units, _unj, keys = judge._prepare(cases)
    report = BatchReport(chunks=sum(len(u.ranks) for u in units), requests=len(units))
    if not units:
        return report
    lines = build_requests(judge, units)
    payload = "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines).encode()
    fingerprint = hashlib.sha256(payload).hexdigest()
    api = _Api(judge.endpoint.base_url, judge.endpoint.api_key, judge.policy.timeout)
    db = _jobs(judge.cache.path)
    try:
        row = db.execute("SELECT batch_id FROM batch_jobs WHERE fingerprint=? AND status NOT IN "
                         "('ingested')", (fingerprint,)).fetchone()
        if row is not None:
            batch_id, report.resumed = row[0], True
        else:
            file_id = api.upload(payload, f"rankwise-{fingerprint[:12]}.jsonl")
            created = api.json("POST", "/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                    "completion_window": "24h",
                                                    "metadata": {"rankwise": fingerprint[:16]}})
            batch_id = str(created.get("id") or "")
            if not batch_id:
                raise EndpointError("batch API POST /batches: reply has no batch id")
            db.execute("INSERT OR REPLACE INTO batch_jobs VALUES (?,?,?,?,?,?)",
                       (fingerprint, batch_id, file_id, len(units), "submitted", time.time()))
        report.batch_id = batch_id
        if on_status:
            on_status(f"batch {batch_id} {'resumed' if report.resumed else 'submitted'} "
                      f"({len(units)} requests); polling every {poll_seconds:g} s")
        deadline = time.monotonic() + timeout_hours * 3600
        while True:
            info = api.json("GET", f"/batches/{batch_id}")
            report.polls += 1
            status = str(info.get("status"))
            if status in FINAL:
                break
            if time.monotonic() > deadline:
                raise EndpointError(f"batch {batch_id} still {status} after {timeout_hours:g} h; rerun the "
                                    "same command to keep polling")
            time.sleep(poll_seconds)
        report.status = status
        results: dict[str, Any] = {}
        for key in ("output_file_id", "error_file_id"):
            fid = info.get(key)
            if fid:
                for raw in api.call("GET", f"/files/{fid}/content").decode("utf-8", "replace").splitlines():
                    if raw.strip():
                        try:
                            item = json.loads(raw)
                            results.setdefault(str(item["custom_id"]), item)
                        except (ValueError, KeyError, TypeError):
                            report.failures["bad result line"] = report.failures.get("bad result line", 0) + 1
        _ingest(judge, units, keys, results, status, report)
        report.cost = judge.prices.cost(report.prompt_tokens, report.completion_tokens)
        if report.cost is not None:
            report.cost *= discount
        db.execute("UPDATE batch_jobs SET status='ingested' WHERE fingerprint=?", (fingerprint,))
        return report
    finally:
        db.close()


def _ingest(judge: Any, units: Sequence[Any], keys: dict, results: dict[str, Any], status: str,
            report: BatchReport) -> None:
    graded, rel = judge.prompt.graded, judge.settings.relevant_from
    items: list[tuple[str, dict[str, Any]]] = []

    def fail(unit: Any, why: str) -> None:
        report.failed += len(unit.ranks)
        report.failures[why] = report.failures.get(why, 0) + len(unit.ranks)

    for n, unit in enumerate(units):
        item = results.get(f"r{n}")
        if item is None:
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
            if unit.batch:
                judgements = parse_batch(reply.content, len(unit.ranks), graded=graded, relevant_from=rel)
            else:
                judgements = [parse_verdict(reply.content, graded=graded, relevant_from=rel)]
        except ParseError:
            fail(unit, "unparseable")
            continue
        k = len(unit.ranks)
        for i, j in zip(unit.ranks, judgements, strict=True):
            items.append((keys[(unit.case.id, i)], {
                "verdict": j.verdict, "grade": j.grade, "reason": j.reason, "model": judge.endpoint.model,
                "mode": judge.settings.mode, "scale": judge.prompt.scale,
                "prompt_version": judge.prompt.prompt_version, "style": judge.style,
                "call": "batch" if unit.batch else "single", "prompt_tokens": reply.prompt_tokens // k,
                "completion_tokens": reply.completion_tokens // k}))
        report.ok += k
    if items:
        judge.cache.put_many(items)
