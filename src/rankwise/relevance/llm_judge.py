"""The LLM relevance judge: one verdict and reason per retrieved chunk, cached, resumable, counted.

For every chunk of every case the judge first looks in the cache; what is not there is sent to the
endpoint (one call per chunk, or one call per question with ``batch=True``), parsed, and committed
to the cache as soon as it arrives. Every chunk ends with a verdict (``ok``), an explicit failure
(``failed``: refusal, unparseable reply after one repair, timeout or HTTP error after retries) or
``missing`` (``max_calls`` reached first, or the run stopped first); the summary counts each.

Nothing one reply does stops the run: a reply that is not a chat completion, a reset connection, a
refusal or an unreadable verdict fails that chunk only. The run stops early only when the endpoint
is gone or refuses the key or model (:class:`JudgeStopped`) or on Ctrl-C
(:class:`JudgeInterrupted`); both carry the partial :class:`JudgeResult`, and every verdict had is
in the cache before they are raised.

Batch mode sends all chunks of a question in one call (``batch_size`` at most) and checks that the
reply holds exactly one verdict per chunk; any other reply falls back to per-chunk calls for that
question.

Example::

    from rankwise.data.records import records_from_testset
    from rankwise.relevance.llm_judge import judge_records
    records = records_from_testset("testset.jsonl")
    summary = judge_records(records, model="qwen2.5:7b", base_url="http://localhost:11434/v1",
                            mode="reference", cache="judge.sqlite")
    print(summary.requests, summary.cached, summary.failed)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from rankwise.errors import InputError, JudgeInterrupted, JudgeStopped
from rankwise.llm.cache import CacheWriter, ResponseCache, cache_key
from rankwise.llm.client import (
    BudgetExhausted,
    CallError,
    CallPolicy,
    ChatClient,
    ContextOverflow,
    Endpoint,
    utf8_safe,
)
from rankwise.llm.config import LLMConfig, PromptSettings, as_llm_config
from rankwise.llm.cost import (
    OUTPUT_TOKENS_PER_VERDICT,
    SINGLE_MAX_TOKENS,
    Prices,
    estimate_prompt_tokens,
    estimate_tokens,
)
from rankwise.llm.parse import CountMismatch, Judgement, parse_batch, parse_verdict, verdict_schema
from rankwise.llm.prompts import PromptTemplate, load_prompt
from rankwise.llm.runner import Job, Runner, RunPlan, RunSummary

__all__ = ["JudgeCase", "ChunkVerdict", "PromptSettings", "JudgePlan", "JudgeSummary", "JudgeResult", "Judge",
           "JudgeUnit", "Prepared",
           "JudgeStopped", "JudgeInterrupted", "judge_records", "cases_from_records", "attach_verdicts",
           "load_for_judging"]


@dataclass(frozen=True)
class JudgeCase:
    """What the judge reads of one case: question, chunk texts in rank order, reference, response.
    """

    id: str
    question: str | None
    chunks: Sequence[str | None]
    reference: str | None = None
    response: str | None = None


@dataclass
class ChunkVerdict:
    """The judge's outcome for one chunk (``status`` ok / failed / missing, ``error`` says why)."""

    verdict: int | None = None
    grade: int | None = None
    reason: str | None = None
    status: str = "missing"
    error: str | None = None
    call: str | None = None  # "single" | "batch": the call that produced the verdict
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    kind: str | None = None  # what kind of failure (the key the run's summary counts it under)


@dataclass(kw_only=True)
class JudgePlan(RunPlan):
    """What a run would do (``--dry-run``): chunks, cache hits, calls, estimated tokens and cost."""

    cases: int
    chunks: int
    unjudgeable: int


@dataclass
class JudgeSummary(RunSummary):
    """What a run did: counts of verdicts by outcome, requests, retries, tokens, cost, wall time
    (the counters of :class:`~rankwise.llm.runner.RunSummary`, and the judge's own)."""

    mode: str
    scale: str
    cases: int = 0
    chunks: int = 0
    fresh_calls: int = 0
    batch_calls: int = 0
    batch_fallbacks: int = 0
    transport: str = "aiohttp"
    concurrency_lowest: int = 0

    FIELDS: ClassVar[tuple[str, ...]] = (
        "model", "mode", "scale", "prompt_version", "cases", "chunks", "ok", "cached", "failed", "missing",
        "requests", "retries", "repairs", "fresh_calls", "batch_calls", "batch_fallbacks", "prompt_tokens",
        "completion_tokens", "cached_prompt_tokens", "response_format", "cost", "seconds", "transport", "concurrency", "concurrency_lowest", "failures",
        "http_errors", "stopped", "capped", "bad_cache_rows")

    def take_stats(self, client: ChatClient) -> None:
        super().take_stats(client)
        self.transport = client.transport
        self.concurrency_lowest = int(client.gate.lowest)


@dataclass
class JudgeResult:
    """Per case id, one :class:`ChunkVerdict` per rank; and the run's :class:`JudgeSummary`."""

    verdicts: dict[str, list[ChunkVerdict]]
    summary: JudgeSummary


@dataclass
class JudgeUnit:
    """One call of the judge: a case's chunks at ``ranks`` (0-based), one per call or several
    (``batch``)."""

    case: JudgeCase
    ranks: list[int]  # 0-based positions in case.chunks
    batch: bool

    @property
    def size(self) -> int:
        """The chunks this call judges."""
        return len(self.ranks)


class Prepared(NamedTuple):
    """What :meth:`Judge.prepare` finds: the verdicts so far (cache hits, unjudgeable chunks), the
    calls still to make, how many chunks cannot be judged, and each judgeable chunk's cache key."""

    verdicts: dict[str, list[ChunkVerdict]]
    units: list[JudgeUnit]
    unjudgeable: int
    keys: dict[tuple[str, int], str]


class Judge:
    """Judges chunks through one endpoint with one prompt; holds the cache open for the run.

    ``tag`` (e.g. ``"repeat#2"``) is part of every cache key: a judging under another tag, or none,
    is never served from this one's verdicts, and the same tag again is (``rankwise judge-retest``'s
    repetitions).

    Example::

        judge = Judge(Endpoint("m", "http://127.0.0.1:8000/v1", "unused"), PromptSettings(mode="question"),
                      cache=ResponseCache("judge.sqlite"))
        result = judge.run([JudgeCase("q1", "Capital of France?", ["Paris is the capital.", "Rome."])])
        [v.verdict for v in result.verdicts["q1"]]
    """

    @classmethod
    def from_config(cls, config: LLMConfig, cache: ResponseCache | None, *, settings: PromptSettings | None = None,
                    max_cost: float | None = None, tag: str | None = None) -> Judge:
        """The judge of one resolved :class:`~rankwise.llm.config.LLMConfig`, passed whole
        (``settings``: what is asked, when the task fixes it, e.g. the pool's reference mode;
        ``tag``: see :class:`Judge`)."""
        return cls(config.endpoint, settings or config.settings, config.policy, cache, config.prices,
                   max_cost=max_cost, tag=tag)

    def __init__(self, endpoint: Endpoint, settings: PromptSettings | None = None,
                 policy: CallPolicy | None = None, cache: ResponseCache | None = None,
                 prices: Prices | None = None, max_cost: float | None = None, tag: str | None = None) -> None:
        self.endpoint = endpoint
        self.settings = settings or PromptSettings()
        self.policy = policy or CallPolicy()
        self.cache = cache
        self.prices = prices or Prices()
        if max_cost is not None and (max_cost < 0 or not self.prices.known):
            raise InputError("--max-cost needs prices (--price-in/--price-out) and a cost >= 0", field="max_cost")
        self.max_cost = max_cost  # no new call once the run has spent this much: the rest is missing
        self.prompt: PromptTemplate = load_prompt(self.settings.mode, graded=self.settings.graded,
                                                  path=self.settings.prompt_file)
        self.style = "batch" if self.settings.batch else "single"
        self._params: dict[str, Any] = {"temperature": self.policy.temperature}
        self.tag = tag
        if tag is not None:  # a re-judging's own verdicts (judge-retest): cached apart, never served to another
            self._params["tag"] = tag

    # -------------------------------------------------------------------------------------- inputs
    def _context(self, case: JudgeCase) -> str | None:
        mode = self.settings.mode
        return case.reference if mode == "reference" else case.response if mode == "response" else None

    def _unjudgeable(self, case: JudgeCase, text: str | None) -> tuple[str, str] | None:
        """(kind, why) when the chunk cannot be judged: its question, its mode's context or its text
        missing."""
        mode = self.settings.mode
        if not case.question:
            return "no question", "no question in the case"
        if mode != "question" and not self._context(case):
            return f"no {mode}", f"no {mode} in the case (mode {mode!r} needs one)"
        if not text:
            return "no text", "no text for the chunk (only an id)"
        return None

    def _key(self, case: JudgeCase, text: str) -> str:
        return cache_key(model=self.endpoint.model, mode=self.settings.mode, scale=self.prompt.scale,
                         prompt_version=self.prompt.prompt_version, style=self.style,
                         question=case.question or "", chunk=text, context=self._context(case),
                         params=self._params)

    def check(self, cases: Sequence[JudgeCase], source: str | PathLike | None = None) -> None:
        """Raise :class:`InputError` when no case has what the mode needs (before any call)."""
        mode = self.settings.mode
        if mode != "question" and cases and not any(self._context(c) for c in cases):
            field_name = "reference" if mode == "reference" else "response"
            none = "the only case has none" if len(cases) == 1 else f"none of the {len(cases)} cases has one"
            raise InputError(f"mode {mode!r} needs a {field_name} per case and {none}; add '{field_name}' to the test set or judge in mode 'question'",
                             source=source, field=field_name)

    def prepare(self, cases: Sequence[JudgeCase]) -> Prepared:
        """Cache lookups: the verdicts so far, the calls (units) still to make, the unjudgeable
        count, the keys."""
        self.check(cases)
        cases = [_sendable(c) for c in cases]
        verdicts: dict[str, list[ChunkVerdict]] = {}
        todo: list[tuple[JudgeCase, int, str]] = []
        unjudgeable = 0
        keys: dict[tuple[str, int], str] = {}
        for case in cases:
            if case.id in verdicts:
                raise InputError(f"case id {case.id!r} appears twice", field="id")
            verdicts[case.id] = [ChunkVerdict() for _ in case.chunks]
            for i, text in enumerate(case.chunks):
                unjudgeable_why = self._unjudgeable(case, text)
                if unjudgeable_why:
                    kind, why = unjudgeable_why
                    verdicts[case.id][i] = ChunkVerdict(status="failed", error=why, kind=kind)
                    unjudgeable += 1
                    continue
                keys[(case.id, i)] = self._key(case, text)  # type: ignore[arg-type]
                todo.append((case, i, keys[(case.id, i)]))
        hits = self.cache.get_many(list(keys.values())) if self.cache is not None else {}
        units: list[JudgeUnit] = []
        pending: dict[str, tuple[JudgeCase, list[int]]] = {}
        for case, i, key in todo:
            hit = hits.get(key)
            if hit is not None:
                verdicts[case.id][i] = ChunkVerdict(hit.verdict, hit.grade, hit.reason, "ok", None, hit.call,
                                                    cached=True)
                continue
            if self.settings.batch:
                pending.setdefault(case.id, (case, []))[1].append(i)
            else:
                units.append(JudgeUnit(case, [i], False))
        for case, ranks in pending.values():
            size = self.settings.batch_size
            for start in range(0, len(ranks), size):
                part = ranks[start:start + size]
                units.append(JudgeUnit(case, part, len(part) > 1))
        return Prepared(verdicts, units, unjudgeable, keys)

    # -------------------------------------------------------------------------------------- dry run
    def plan(self, cases: Sequence[JudgeCase]) -> JudgePlan:
        """What :meth:`run` would do, without calling: calls needed and estimated tokens and cost.
        """
        verdicts, units, unjudgeable, _ = self.prepare(cases)
        pt = ct = 0
        for unit in units:
            pt += estimate_prompt_tokens(self.messages(unit))
            ct += OUTPUT_TOKENS_PER_VERDICT * len(unit.ranks)
        return JudgePlan.estimate(len(units), pt, ct, max_calls=self.policy.max_calls, prices=self.prices,
                                  model=self.endpoint.model, prompt_version=self.prompt.prompt_version,
                                  cases=len(cases), chunks=sum(len(v) for v in verdicts.values()),
                                  cached=sum(1 for vs in verdicts.values() for v in vs if v.cached),
                                  unjudgeable=unjudgeable)

    def messages(self, unit: JudgeUnit) -> list[dict]:
        """The chat messages of one call."""
        case = unit.case
        if unit.batch:
            return self.prompt.render_batch(question=case.question or "",
                                            chunks=[case.chunks[i] or "" for i in unit.ranks],
                                            reference=case.reference, response=case.response)
        return self.prompt.render(question=case.question or "", chunk=case.chunks[unit.ranks[0]] or "",
                                  reference=case.reference, response=case.response)

    def max_tokens(self, unit: JudgeUnit) -> int:
        """The completion tokens one call may take (a batch: 100 more per chunk)."""
        return SINGLE_MAX_TOKENS + 100 * unit.size if unit.batch else SINGLE_MAX_TOKENS

    def reply_schema(self, unit: JudgeUnit) -> dict:
        """The JSON schema the reply to one call must follow."""
        return verdict_schema(self.prompt.graded, unit.size if unit.batch else None)

    def cache_rows(self, unit: JudgeUnit, content: str | None, prompt_tokens: int, completion_tokens: int,
                   keys: dict[tuple[str, int], str], call: str) -> list[tuple[str, dict[str, Any]]]:
        """The cache rows of one call's reply (raises :class:`~rankwise.errors.ParseError` when it
        holds no usable verdicts); the tokens are shared out among its chunks."""
        graded, rel = self.prompt.graded, self.settings.relevant_from
        if unit.batch:
            judgements = parse_batch(content, unit.size, graded=graded, relevant_from=rel)
        else:
            judgements = [parse_verdict(content, graded=graded, relevant_from=rel)]
        k = unit.size
        return [(keys[(unit.case.id, i)], {
            "verdict": j.verdict, "grade": j.grade, "reason": j.reason, "model": self.endpoint.model,
            "mode": self.settings.mode, "scale": self.prompt.scale, "prompt_version": self.prompt.prompt_version,
            "style": self.style, "call": call, "prompt_tokens": prompt_tokens // k,
            "completion_tokens": completion_tokens // k}) for i, j in zip(unit.ranks, judgements, strict=True)]

    # ------------------------------------------------------------------------------------------ run
    def _runner(self) -> Runner:
        return Runner(self.endpoint, self.policy, self.prices, self.cache, max_cost=self.max_cost,
                      name="rankwise-judge")

    def run(self, cases: Sequence[JudgeCase], progress: Callable[[int], None] | None = None) -> JudgeResult:
        """Judge every chunk (blocking). ``progress(n)`` is called as ``n`` more chunks are settled.

        Ctrl-C stops promptly: calls in flight are dropped, every verdict had is written to the
        cache, and :class:`JudgeInterrupted` (a ``KeyboardInterrupt``) carries the partial result;
        the same call resumes. A lost endpoint raises :class:`JudgeStopped` the same way. Called
        where an event loop already runs (Jupyter), it runs in a helper thread; ``await arun()``
        there.
        """
        return self._runner().run(lambda runner: _JudgeJob(self, runner, cases), progress)

    async def arun(self, cases: Sequence[JudgeCase],
                   progress: Callable[[int], None] | None = None) -> JudgeResult:
        """:meth:`run` for callers already inside an event loop."""
        return await self._runner().arun(lambda runner: _JudgeJob(self, runner, cases), progress)


class _JudgeJob(Job):
    """One judge run for the :class:`Runner`: a unit is one chunk, or several chunks of one question
    in one batch call (a batch reply that does not hold one verdict per chunk falls back to
    per-chunk calls)."""

    stopped, interrupted = JudgeStopped, JudgeInterrupted

    def __init__(self, judge: Judge, runner: Runner, cases: Sequence[JudgeCase]) -> None:
        self.judge, self.runner = judge, runner
        bad_before = judge.cache.bad_rows if judge.cache is not None else 0
        self.verdicts, self.units, _unjudgeable, self.keys = judge.prepare(cases)
        prompt = judge.prompt
        self.summary = JudgeSummary(model=judge.endpoint.model, mode=judge.settings.mode, scale=prompt.scale,
                                    prompt_version=prompt.prompt_version, cases=len(cases),
                                    chunks=sum(len(v) for v in self.verdicts.values()))
        if judge.cache is not None:
            self.summary.bad_cache_rows = judge.cache.bad_rows - bad_before
        self.workers = judge.policy.concurrency if judge.settings.batch else None

    def outcomes(self) -> Iterable[ChunkVerdict]:
        return (v for vs in self.verdicts.values() for v in vs)

    def result(self) -> JudgeResult:
        self.summary.fresh_calls = self.runner.fresh_calls
        return JudgeResult(self.verdicts, self.summary)

    def settle_rest(self, unit: JudgeUnit, status: str, error: str, kind: str) -> None:
        for i in unit.ranks:
            if self.verdicts[unit.case.id][i].status == "missing":
                self._settle(unit.case, i, ChunkVerdict(status=status, error=error, kind=kind))

    def _settle(self, case: JudgeCase, i: int, outcome: ChunkVerdict) -> None:
        self.verdicts[case.id][i] = outcome
        self.runner.record(outcome.status == "ok", lambda writer: self._put(writer, case, i, outcome))

    def _put(self, writer: CacheWriter, case: JudgeCase, i: int, outcome: ChunkVerdict) -> None:
        j = self.judge
        writer.put(self.keys[(case.id, i)], verdict=outcome.verdict, grade=outcome.grade,  # type: ignore[arg-type]
                   reason=outcome.reason, model=j.endpoint.model, mode=j.settings.mode, scale=j.prompt.scale,
                   prompt_version=j.prompt.prompt_version, style=j.style, call=outcome.call or j.style,
                   prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens)

    async def do(self, unit: JudgeUnit) -> None:
        if unit.batch:
            await self._do_batch(unit)
        else:
            await self._do_single(unit.case, unit.ranks[0])

    async def _do_single(self, case: JudgeCase, i: int) -> None:
        j = self.judge
        graded, rel = j.prompt.graded, j.settings.relevant_from
        call = "single"
        try:
            got, pt, ct = await self.runner.ask(j.messages(JudgeUnit(case, [i], False)), SINGLE_MAX_TOKENS,
                                                lambda text: parse_verdict(text, graded=graded, relevant_from=rel),
                                                j.prompt.render_repair, fresh=True, schema=verdict_schema(graded))
        except BudgetExhausted as exc:
            self._settle(case, i, ChunkVerdict(status="missing", error=str(exc), call=call, kind=exc.kind))
            return
        except ContextOverflow as exc:  # this chunk's prompt does not fit: nothing was cut, nothing retried
            chunk = case.chunks[i] or ""
            why = (f"{exc}; the chunk is {len(chunk):,} characters (~{estimate_tokens(chunk):,} tokens) and the "
                   "judge sends chunks whole, cutting nothing: shorten the chunk or use a model with a longer context")
            self._settle(case, i, ChunkVerdict(status="failed", error=why, call=call, kind=exc.kind))
            return
        except CallError as exc:  # after retries; a refusal; an unreadable reply after the repair
            self._settle(case, i, ChunkVerdict(status="failed", error=str(exc), call=call, kind=exc.kind))
            return
        self._settle(case, i, _ok(got, call, pt, ct))

    async def _do_batch(self, unit: JudgeUnit) -> None:
        j = self.judge
        self.summary.batch_calls += 1
        graded, rel, n = j.prompt.graded, j.settings.relevant_from, len(unit.ranks)
        try:
            judgements, pt, ct = await self.runner.ask(
                j.messages(unit), SINGLE_MAX_TOKENS + 100 * n,
                lambda text: parse_batch(text, n, graded=graded, relevant_from=rel), j.prompt.render_repair,
                schema=verdict_schema(graded, n))
        except BudgetExhausted as exc:
            for i in unit.ranks:
                self._settle(unit.case, i, ChunkVerdict(status="missing", error=str(exc), call="batch",
                                                        kind=exc.kind))
            return
        except (CountMismatch, CallError):
            self.summary.batch_fallbacks += 1
            for i in unit.ranks:  # one call per chunk, spread over the workers
                self.runner.enqueue(JudgeUnit(unit.case, [i], False))
            return
        share_p, share_c = pt // n, ct // n
        for i, got in zip(unit.ranks, judgements, strict=True):
            self._settle(unit.case, i, _ok(got, "batch", share_p, share_c))


def _sendable(case: JudgeCase) -> JudgeCase:
    texts = [case.question, case.reference, case.response, *case.chunks]
    if all(utf8_safe(t) is t for t in texts):
        return case
    return JudgeCase(case.id, utf8_safe(case.question), [utf8_safe(c) for c in case.chunks],
                     utf8_safe(case.reference), utf8_safe(case.response))


def _ok(j: Judgement, call: str, pt: int, ct: int) -> ChunkVerdict:
    return ChunkVerdict(j.verdict, j.grade, j.reason, "ok", None, call, prompt_tokens=pt, completion_tokens=ct)


# -------------------------------------------------------------------------------------------
# records


def load_for_judging(testset: Any) -> list[Any]:
    """Per-case records to judge: a records file (``eval-rag``/``judge --records``; its other
    verdicts, e.g. human ones, are kept) or any test set :func:`~rankwise.data.testset.load_testset`
    reads."""
    from pathlib import Path

    from rankwise.data.records import as_records

    if isinstance(testset, (str, PathLike)) and not Path(testset).is_file():
        raise InputError("test set file not found", source=testset)
    return as_records(testset, copy=False)


def cases_from_records(records: Sequence[Any]) -> list[JudgeCase]:
    """:class:`JudgeCase` per :class:`~rankwise.data.records.CaseRecord` (chunk texts in rank
    order)."""
    return [JudgeCase(r.id, r.question, [c.text for c in r.chunks], r.reference, r.response) for r in records]


def attach_verdicts(records: Sequence[Any], result: JudgeResult, judge: Judge, source: str = "llm") -> None:
    """Write the judge's verdicts into the records (``chunk.verdicts[source]``) and each case's
    status."""
    from rankwise.data.records import Verdict
    from rankwise.relevance.truth import case_status

    meta_base = {"model": judge.endpoint.model, "mode": judge.settings.mode, "scale": judge.prompt.scale,
                 "prompt_version": judge.prompt.prompt_version}
    for r in records:
        for chunk, v in zip(r.chunks, result.verdicts[r.id], strict=True):
            meta = dict(meta_base)
            if v.call:
                meta["call"] = v.call
            chunk.verdicts[source] = Verdict(verdict=v.verdict, grade=v.grade, reason=v.reason, status=v.status,
                                             error=v.error, meta=meta)
        r.status[source] = case_status(r, source)


def judge_records(records: Sequence[Any], *, config: LLMConfig | str | PathLike | None = None,
                  cache: str | PathLike | ResponseCache | None = None, max_cost: float | None = None,
                  source: str = "llm", progress: Callable[[int], None] | None = None,
                  **llm: Any) -> JudgeSummary:
    """Judge every chunk of the records in place (``chunk.verdicts[source]``); returns the summary.

    ``config`` is the one :class:`~rankwise.llm.config.LLMConfig` (endpoint, what is asked, call
    policy, prices, cache file) passed whole, as the CLI does; or, for Python callers, a config file
    path with keywords for the rest (``model``, ``base_url``, ``mode``, ``graded``, ``batch``,
    ``endpoint``, ...), resolved as ``rankwise judge`` resolves them
    (:func:`~rankwise.llm.config.resolve_llm_config`: the environment, then the ``[llm]`` table of
    ``config`` / ``./rankwise.toml``, then the defaults). ``cache`` is a path or an open
    :class:`ResponseCache` (it replaces the config's). ``max_cost`` (needs prices) starts no new
    call once the run has spent that much; the chunks left are ``missing`` and a rerun judges them.

    When the run stops early (:class:`JudgeStopped`: endpoint gone; :class:`JudgeInterrupted`:
    Ctrl-C) the verdicts had are written into the records before the exception is raised on.

    Example (offline: the records' plan, as ``rankwise judge --dry-run`` prints it; with an endpoint up,
    ``judge_records(records, config=cfg)`` judges them and returns the :class:`JudgeSummary`):
        >>> import os, shutil, tempfile
        >>> import rankwise
        >>> from rankwise.data.records import as_records
        >>> from rankwise.llm.config import resolve_llm_config
        >>> tmp = tempfile.mkdtemp()
        >>> cfg = resolve_llm_config(
        ...     model="gpt-4o-mini",
        ...     base_url="http://127.0.0.1:9/v1",
        ...     mode="question",
        ...     cache=os.path.join(tmp, "judge.sqlite"),
        ...     env={},
        ... )
        >>> records = as_records(
        ...     [
        ...         {
        ...             "id": "q1",
        ...             "question": "What is BM25?",
        ...             "retrieved_contexts": [
        ...                 "BM25 ranks by term frequency.",
        ...                 "Paris is in France.",
        ...             ],
        ...         }
        ...     ]
        ... )
        >>> plan = rankwise.judge(records, cfg, dry_run=True).plan
        >>> plan.chunks, plan.calls, plan.cost is None  # no prices given: no cost estimate
        (2, 2, True)
        >>> shutil.rmtree(tmp)
    """
    from dataclasses import replace

    own = not isinstance(cache, ResponseCache)
    resolved = as_llm_config(config, **llm)
    if own and cache is not None:
        resolved = replace(resolved, cache=Path(cache))  # type: ignore[arg-type]
    store = ResponseCache(resolved.cache) if own else cache  # type: ignore[arg-type]
    try:
        judge = Judge.from_config(resolved, store, max_cost=max_cost)  # type: ignore[arg-type]
        try:
            result = judge.run(cases_from_records(records), progress)
        except (JudgeStopped, JudgeInterrupted) as exc:
            attach_verdicts(records, exc.result, judge, source)
            raise
        attach_verdicts(records, result, judge, source)
        return result.summary
    finally:
        if own:
            store.close()  # type: ignore[union-attr]
