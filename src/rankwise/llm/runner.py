"""The one runner behind every LLM task: the judge's verdicts, the generator's answers, checks and
grades, and synth's generated samples.

A task says what differs (:class:`Job`): its units of work, how a unit is asked and its reply
parsed, what its cache rows are, how a unit's outcome maps back to chunks or requests, its summary
and its stop exceptions. The :class:`Runner` does the rest the same way for every task.

Workers, retries, the cache and stopping: docs/llm-judge.md, "Robust calls" and "Cache and resume".

Example::

    runner = Runner(endpoint, policy, prices, cache, name="rankwise-judge")
    result = runner.run(lambda run: MyJob(run, items), progress)
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeVar

from rankwise._signals import Terminated, note_signal, runner_takes_sigterm
from rankwise.errors import RunInterrupted, RunStopped, Unusable
from rankwise.llm.cache import CacheWriteError, CacheWriter, ResponseCache
from rankwise.llm.client import (
    CallPolicy,
    ChatClient,
    ChatReply,
    Endpoint,
    EndpointError,
    FormatMemory,
)
from rankwise.llm.cost import Prices
from rankwise.llm.parse import CountMismatch, ParseError, refusal_of

__all__ = ["RunPlan", "RunSummary", "Job", "Runner", "RunStopped", "RunInterrupted", "Unusable", "failure_kind",
           "Outcome"]

_KINDS = ("context length exceeded", "refused", "unparseable", "timeout", "max-calls", "max-cost", "connection", "bad reply", "empty reply",
          "run stopped", "interrupted", "internal error", "no text", "no question", "no reference", "no response")


def failure_kind(error: str) -> str:
    """The kind of a failure told only by its text: a job's own cap message (:meth:`Job.admit`), or
    an outcome made without a ``kind``. Every failure rankwise raises carries its kind
    (``CallError.kind``) and every outcome the jobs make keeps it, so a run's ``summary.failures``
    is counted from those.

    Example:
        >>> failure_kind("HTTP 500: boom"), failure_kind("unparseable reply after one repair: x")
        ('HTTP 500', 'unparseable')
    """
    if error.startswith("HTTP "):
        return error.split(":")[0]
    for prefix in _KINDS:
        if error.startswith(prefix):
            return prefix
    return error.split(":")[0][:40]


_Plan = TypeVar("_Plan", bound="RunPlan")
FORMATS_FILE = "rankwise-endpoints.json"  # beside the LLM cache: the response_format each endpoint took


@dataclass(kw_only=True)
class RunPlan:
    """What a run would do (``--dry-run``): cache hits, calls, estimated tokens and cost. Tasks
    subclass it with what they count (the judge's cases and chunks, the generator's requests).

    Example:
        >>> p = RunPlan.estimate(
        ...     10, 1000, 100, max_calls=4, prices=Prices(), model="m", prompt_version="v", cached=2
        ... )
        >>> p.calls, p.prompt_tokens, p.completion_tokens, p.cost
        (4, 400, 40, None)
    """

    cached: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    model: str
    prompt_version: str
    max_calls: int | None = None

    @classmethod
    def estimate(cls: type[_Plan], calls: int, prompt_tokens: int, completion_tokens: int, *,
                 max_calls: int | None, prices: Prices, **counts: Any) -> _Plan:
        """The plan of ``calls`` calls, cut to ``max_calls`` (the token estimates in proportion),
        priced."""
        if max_calls is not None and calls > max_calls:
            share = max_calls / calls if calls else 0
            calls, prompt_tokens, completion_tokens = (max_calls, round(prompt_tokens * share),
                                                       round(completion_tokens * share))
        return cls(calls=calls, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                   cost=prices.cost(prompt_tokens, completion_tokens), max_calls=max_calls, **counts)


@dataclass(kw_only=True)
class RunSummary:
    """The counters every LLM run keeps: outcomes, requests, retries, repairs, tokens, cost, wall
    time.

    Tasks subclass it with only their own names (the judge's mode, cases and chunks, the generator's
    task and items, synth's samples); ``FIELDS`` orders :meth:`to_dict`. ``capped`` is set by the
    runner when a cap (``max_cost``, or the job's own :meth:`Job.admit`) stopped starting units.

    Example:
        >>> s = RunSummary(ok=3, failed=1)
        >>> s.complete, s.to_dict()["ok"]
        (False, 3)
    """

    model: str = ""
    prompt_version: str = ""
    ok: int = 0
    cached: int = 0
    failed: int = 0
    missing: int = 0
    requests: int = 0
    retries: int = 0
    repairs: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the server took from its prompt cache (where it says)
    response_format: str = ""  # what JSON replies were asked with in the end: json_schema, json_object or text
    cost: float | None = None
    seconds: float = 0.0
    concurrency: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    http_errors: dict[str, int] = field(default_factory=dict)
    stopped: str | None = None  # why the run stopped before the end (endpoint gone, Ctrl-C), else None
    bad_cache_rows: int = 0  # cache rows no run could have written (a verdict of 7): not served, asked again
    capped: str | None = None  # "max-cost reached (...)" when a cap ended the run

    FIELDS: ClassVar[tuple[str, ...]] = ()

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.missing == 0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.FIELDS or [f.name for f in fields(self)]}

    def take_stats(self, client: ChatClient) -> None:
        """Copy the client's counters (requests, retries, errors, tokens, concurrency)."""
        self.concurrency = client.gate.maximum
        self.requests = client.stats.requests
        self.retries = client.stats.retries
        self.http_errors = dict(client.stats.errors)
        self.prompt_tokens = client.stats.usage.prompt_tokens
        self.completion_tokens = client.stats.usage.completion_tokens
        self.cached_prompt_tokens = client.stats.usage.cached_prompt_tokens
        self.response_format = client.response_format


class Outcome(Protocol):
    """What the runner reads of a settled item (a chunk's verdict, a request's reply)."""

    status: str  # ok / failed / missing
    error: str | None
    cached: bool


class Job(ABC):
    """What one task's run is made of; the runner calls it, it calls the runner back.

    ``units`` are the pieces of work still to call after the cache lookups; ``outcomes()`` yields
    every item of the run (settled or not, cache hits too), each with ``status``, ``error`` and
    ``cached``; ``stopped`` and ``interrupted`` are the task's exception types, raised with the
    partial result. :meth:`do` asks one unit (through :meth:`Runner.ask` / :meth:`Runner.chat`) and
    settles its items (through :meth:`Runner.record`); :meth:`settle_rest` ends a unit's unsettled
    items with one status and error (a defect, or ``max_cost`` reached).
    """

    units: list[Any]
    summary: RunSummary
    workers: int | None = None  # how many workers; None: one per unit up to the concurrency
    stopped: ClassVar[type[RunStopped]]
    interrupted: ClassVar[type[RunInterrupted]]

    @abstractmethod
    def outcomes(self) -> Iterable[Outcome]: ...

    @abstractmethod
    async def do(self, unit: Any) -> None: ...

    @abstractmethod
    def settle_rest(self, unit: Any, status: str, error: str, kind: str) -> None: ...

    @abstractmethod
    def result(self) -> Any: ...

    def admit(self, unit: Any) -> str | None:
        """Whether ``unit`` may start now: None, or why not (a cap of the task's own, e.g. synth's
        ``max_calls`` counted with the calls in flight). Once a unit is refused, no later unit
        starts: each ends ``missing`` with that reason, uncalled, and :attr:`RunSummary.capped` says
        why."""
        return None


class Runner:
    """Runs one :class:`Job` through one endpoint; one runner per run.

    ``max_cost`` (needs ``prices``) stops starting new units once the run has spent that much.

    Example::

        runner = Runner(Endpoint("m", "http://127.0.0.1:8000/v1"), CallPolicy(), Prices(), None)
        result = runner.run(lambda run: MyJob(run, items))
    """

    def __init__(self, endpoint: Endpoint, policy: CallPolicy, prices: Prices, cache: ResponseCache | None, *,
                 max_cost: float | None = None, name: str = "rankwise-llm") -> None:
        self.endpoint = endpoint
        self.policy = policy
        self.prices = prices
        self.cache = cache
        self.max_cost = max_cost
        self.name = name
        self.stop_reason: str | None = None
        self.stop_cause: BaseException | None = None
        self.interrupted = False
        self.capped: str | None = None  # "max-cost reached (...)" when the cost cap ended the run
        self._closed: str | None = None  # why Job.admit refused a unit: no later unit starts
        self.repairs = 0
        self.fresh_calls = 0
        self._progress: Callable[[int], None] | None = None
        self._writer: CacheWriter | None = None
        self._writer_ok = True
        self._client: ChatClient | None = None

    # ------------------------------------------------------------------------------------ driving
    def run(self, prepare: Callable[[Runner], Job], progress: Callable[[int], None] | None = None) -> Any:
        """Blocking: the job's result. Called where an event loop already runs (Jupyter), it runs in
        a helper thread (without the Ctrl-C handler)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(prepare, progress, handle_sigint=True))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix=self.name) as pool:
            return pool.submit(asyncio.run, self.arun(prepare, progress)).result()

    async def arun(self, prepare: Callable[[Runner], Job], progress: Callable[[int], None] | None = None,
                   handle_sigint: bool = False) -> Any:
        """:meth:`run` inside an event loop. ``prepare(runner)`` makes the job (cache lookups
        included) once the Ctrl-C handler is in place."""
        started = time.perf_counter()
        self._stop_event = asyncio.Event()
        loop = asyncio.get_running_loop()
        taken: dict[int, Any] = {}  # signal -> the Python handler to put back
        if handle_sigint and threading.current_thread() is threading.main_thread():
            wanted = [signal.SIGINT] + ([signal.SIGTERM] if runner_takes_sigterm() else [])
            for signum in wanted:  # SIGTERM (timeout, CI, container stop) is handled like Ctrl-C
                try:
                    previous = signal.getsignal(signum)
                    loop.add_signal_handler(signum, self._on_signal, signum)
                    taken[signum] = previous
                except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, a thread)
                    pass
        try:
            return await self._execute(prepare(self), progress, started)
        finally:
            for signum, previous in taken.items():
                loop.remove_signal_handler(signum)
                if previous is not None:
                    signal.signal(signum, previous)

    def _on_signal(self, signum: int = signal.SIGINT) -> None:
        note_signal(signum)
        if self.interrupted:  # a second Ctrl-C / SIGTERM: stop at once
            raise Terminated("terminated") if signum == signal.SIGTERM else KeyboardInterrupt
        self.interrupted = True
        self.stop("interrupted (Ctrl-C)" if signum == signal.SIGINT else "interrupted (SIGTERM)")

    def stop(self, reason: str, cause: BaseException | None = None) -> None:
        """Stop the run (the first reason is kept): no new unit starts, calls in flight are dropped.
        """
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_cause = cause
        self._stop_event.set()

    async def _execute(self, job: Job, progress: Callable[[int], None] | None, started: float) -> Any:
        settled = sum(1 for o in job.outcomes() if o.status != "missing")
        if progress and settled:
            progress(settled)
        self._progress = progress
        self._writer = CacheWriter(self.cache.path) if self.cache is not None and job.units else None
        self._writer_ok = True
        try:
            if job.units and self.stop_reason is None:
                await self._call_all(job)
        finally:
            if self._writer is not None:
                try:
                    self._writer.close()  # everything had is on disk before we return or raise
                except CacheWriteError as exc:
                    self.stop(str(exc), exc)  # what was had is still in the result, for the records
        self._count(job, started)
        result = job.result()
        if self.interrupted:
            raise job.interrupted(result)
        if self.stop_reason is not None:
            raise job.stopped(self.stop_reason, result, self.stop_cause)
        return result

    def _count(self, job: Job, started: float) -> None:
        summary = job.summary
        failures: Counter = Counter()
        why = None
        if self.stop_reason is not None:
            why = "interrupted" if self.interrupted else f"run stopped: {self.stop_reason}"
            summary.stopped = self.stop_reason
        for o in job.outcomes():
            if o.status == "missing" and not o.error and why:
                o.error, o.kind = why, why.split(":")[0]
            if o.status == "ok":
                summary.ok += 1
                summary.cached += o.cached
            elif o.status == "failed":
                summary.failed += 1
                failures[o.kind or failure_kind(o.error or "")] += 1
            else:
                summary.missing += 1
                if o.error:
                    failures[o.kind or failure_kind(o.error)] += 1
        summary.failures = dict(failures)
        summary.repairs = self.repairs
        summary.capped = self.capped
        summary.cost = self.prices.cost(summary.prompt_tokens, summary.completion_tokens)
        summary.seconds = time.perf_counter() - started

    async def _call_all(self, job: Job) -> None:
        memory = FormatMemory(self.cache.path.parent / FORMATS_FILE if self.cache is not None else None)
        async with ChatClient(self.endpoint, self.policy, formats=memory) as client:
            self._client = client
            try:
                await self._work(job)
            finally:
                job.summary.take_stats(client)

    # -------------------------------------------------------------------------------------- workers
    def enqueue(self, unit: Any) -> None:
        """Queue one more unit (e.g. the per-chunk fallback of a failed batch call)."""
        self._outstanding += 1
        self._queue.put_nowait(unit)

    async def _work(self, job: Job) -> None:
        """Workers take units from a queue until every unit (and every unit queued meanwhile) is
        settled, or the run stops. Nothing a unit raises reaches the queue machinery: a worker
        settles its unit whatever happens, and a stop cancels the workers, cancelling again any that
        swallowed a cancellation."""
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._outstanding = 0
        all_done = asyncio.Event()
        for u in job.units:
            self.enqueue(u)

        async def worker() -> None:
            while self.stop_reason is None:
                unit = await self._queue.get()
                if unit is None:
                    return
                try:
                    await self._do_safely(job, unit)
                finally:
                    self._outstanding -= 1
                    if self._outstanding == 0:
                        all_done.set()

        n = job.workers if job.workers is not None else min(self.policy.concurrency, len(job.units))
        workers = [asyncio.ensure_future(worker()) for _ in range(max(1, n))]
        waiters = [asyncio.ensure_future(all_done.wait()), asyncio.ensure_future(self._stop_event.wait())]
        finished = False
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if self.stop_reason is None:
                for _ in workers:
                    self._queue.put_nowait(None)  # all settled: let each worker return
                finished = True
        finally:
            await _reap(waiters, cancel=True)
            await _reap(workers, cancel=not finished, grace=5.0)

    async def _do_safely(self, job: Job, unit: Any) -> None:
        """``job.do(unit)``, turning whatever escapes it into a stop (endpoint gone, cache
        unwritable) or failed items; a unit started once ``max_cost`` is spent ends ``missing``
        uncalled."""
        if self.max_cost is not None and (self.spent() or 0.0) >= self.max_cost:
            if self.capped is None:
                self.capped = (f"max-cost reached (${self.max_cost:g} spent): the rest is missing; "
                               f"rerun with a higher --max-cost to go on")
            job.settle_rest(unit, "missing", f"max-cost reached (${self.max_cost:g})", "max-cost")
            return
        refused = self._closed or job.admit(unit)
        if refused is not None:  # the job's own cap: this unit and every later one stay uncalled
            self._closed = self.capped = refused
            job.settle_rest(unit, "missing", refused, failure_kind(refused))
            return
        try:
            await job.do(unit)
        except (EndpointError, CacheWriteError) as exc:  # endpoint gone / outcomes cannot be kept: stop
            self.stop(str(exc), exc)
        except Exception as exc:  # noqa: BLE001 - a defect must fail its items, not hang or kill the run
            job.settle_rest(unit, "failed", f"internal error: {type(exc).__name__}: {exc}", "internal error")

    def requests_sent(self) -> int:
        """Requests this run has sent so far (retries included): what ``max_calls`` caps. Counted as
        a request starts, so a job that holds calls back for :meth:`Job.admit` can count exactly."""
        return self._client.budget.used if self._client is not None else 0

    def spent(self) -> float | None:
        """The money the run's replies cost so far (None: no prices)."""
        usage = self._client.stats.usage if self._client is not None else None
        return self.prices.cost(usage.prompt_tokens, usage.completion_tokens) if usage is not None else 0.0

    # ------------------------------------------------------------------------------- for the job
    def record(self, ok: bool, put: Callable[[CacheWriter], None], n: int = 1) -> None:
        """One unit's outcome is settled (``n`` items): an ``ok`` one goes to the cache now
        (``put``); a cache that cannot be written stops the run (the outcome is kept, for the
        records)."""
        if ok and self._writer is not None and self._writer_ok:
            try:
                put(self._writer)
            except CacheWriteError as exc:  # keep the outcome, stop paying for more
                self._writer_ok = False
                self.stop(str(exc), exc)
        if self._progress:
            self._progress(n)

    async def chat(self, messages: list[dict], max_tokens: int, schema: dict[str, Any] | None = None) -> ChatReply:
        """One completion through the run's client (retries, limits and breaker included);
        ``schema``: the reply is JSON of that schema (asked for with ``response_format`` where the
        endpoint takes it)."""
        assert self._client is not None, "chat() is for Job.do, inside a run"
        return await self._client.chat(messages, max_tokens=max_tokens, schema=schema)

    async def ask(self, messages: list[dict], max_tokens: int, parse: Callable[[str | None], Any],
                  repair: Callable[[list[dict], str | None, str], list[dict]], fresh: bool = False,
                  schema: dict[str, Any] | None = None):
        """Call and parse; if the reply is unreadable, send one repair request (``repair(messages,
        reply, error)``), and if that reply is unreadable too, one fresh call (``fresh``) before
        giving up. ``schema``: the JSON schema of the reply, sent as ``response_format`` where the
        endpoint takes it.

        Returns (parsed, prompt_tokens, completion_tokens); raises CallError (:class:`Unusable`: a
        refusal or an unreadable reply), or ``CountMismatch`` (a batch reply with the wrong count:
        no repair).
        """
        reply = await self.chat(messages, max_tokens, schema)
        pt, ct = reply.prompt_tokens, reply.completion_tokens
        _check_refusal(reply)
        try:
            return parse(reply.content), pt, ct
        except CountMismatch:
            raise
        except ParseError as exc:
            first = str(exc)
            if reply.finish_reason == "length":
                first += " (the reply hit the token limit)"
        self.repairs += 1
        reply = await self.chat(repair(messages, reply.content, first), max_tokens, schema)
        pt, ct = pt + reply.prompt_tokens, ct + reply.completion_tokens
        _check_refusal(reply)
        try:
            return parse(reply.content), pt, ct
        except ParseError as exc:
            second = str(exc)
            if not fresh:
                raise Unusable(f"unparseable reply after one repair: {second} (first reply: {first}); "
                               f"reply: {(reply.content or '')[:200]!r}", kind="unparseable") from None
        self.fresh_calls += 1
        reply = await self.chat(messages, max_tokens, schema)
        pt, ct = pt + reply.prompt_tokens, ct + reply.completion_tokens
        _check_refusal(reply)
        try:
            return parse(reply.content), pt, ct
        except ParseError as exc:
            raise Unusable(f"unparseable reply after one repair and one fresh call: {exc} (first reply: "
                           f"{first}; repair: {second}); reply: {(reply.content or '')[:200]!r}",
                           kind="unparseable") from None


def _check_refusal(reply: ChatReply) -> None:
    refused = refusal_of(reply.content, reply.refusal, reply.finish_reason)
    if refused:
        raise Unusable(f"refused: {refused}", kind="refused")


async def _reap(tasks: list[asyncio.Future], cancel: bool, grace: float = 0.0) -> None:
    """Wait for tasks to end; cancel them (now, or after ``grace`` seconds), and cancel again any
    that ignored it (``asyncio.wait_for`` of Python <= 3.11 can swallow a cancellation)."""
    pending = {t for t in tasks if not t.done()}
    if pending and not cancel and grace:
        _, pending = await asyncio.wait(pending, timeout=grace)
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.2)
    for t in tasks:
        if not t.cancelled():
            t.exception()  # retrieved: no "exception was never retrieved" warnings
