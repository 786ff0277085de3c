"""Generated test sets whose labels are exact character spans, so they survive re-chunking.

How a run works, its checks, cost and resume: docs/testsets.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar

from rankwise.data.corpus import Corpus, load_corpus
from rankwise.errors import InputError, SynthInterrupted, SynthStopped
from rankwise.llm.client import BudgetExhausted, CallError, EndpointError
from rankwise.llm.config import LLMConfig
from rankwise.llm.cost import estimate_prompt_tokens
from rankwise.llm.parse import ANY_OBJECT
from rankwise.llm.runner import Job, Runner, RunSummary
from rankwise.retrieval.chunking import CorpusChunk
from rankwise.testsets.synth_checks import (
    REASONS,
    check_reply,
    jaccard,
    lexical_overlap,
    near_duplicate,
    reply_question,
    shingles,
    unusable_critic,
    unusable_reply,
)
from rankwise.testsets.synth_plan import (
    STYLES,
    Slot,
    SynthSettings,
    parse_styles,
    plan_passages,
    plan_samples,
)
from rankwise.testsets.synth_prompts import (
    OUTPUT_TOKENS,
    SynthPrompts,
    load_synth_prompts,
    render_critic,
    render_slot,
    reply_key,
)
from rankwise.testsets.synth_resume import (
    drop_failed_calls,
    fingerprint,
    read_done,
    rejected_path,
    truncate_partial,
)

# re-exported: the names users import from rankwise.testsets.synth_run (each defined in the module
# named above)
__all__ = ["STYLES", "REASONS", "SynthSettings", "Slot", "SynthSummary", "SynthEstimate", "SynthStopped",
           "SynthInterrupted", "reply_key", "SynthPrompts", "load_synth_prompts", "parse_styles", "plan_samples",
           "estimate_synth", "synth", "lexical_overlap", "shingles", "jaccard", "reply_question",
           "near_duplicate", "render_slot", "render_critic", "check_reply", "unusable_reply", "unusable_critic",
           "rejected_path"]


@dataclass
class SynthEstimate:
    """What a run would cost, per phase: calls (those not in the cache), tokens and money."""

    phases: dict[str, dict[str, Any]]
    samples: int
    already_done: int

    @property
    def calls(self) -> int:
        return sum(p["calls"] for p in self.phases.values())


@dataclass(kw_only=True)
class SynthSummary(RunSummary):
    """What a run did: samples planned, accepted and rejected by reason, labels (synth's own
    fields), and the counters every LLM run keeps (:class:`~rankwise.llm.runner.RunSummary`:
    requests, tokens, cost, why it stopped). ``calls``: replies had from the endpoint; ``cached``:
    replies served from the cache."""

    planned: int
    requested: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    resumed: int = 0
    calls: int = 0
    difficulty: Counter = field(default_factory=Counter)
    styles: Counter = field(default_factory=Counter)
    languages: Counter = field(default_factory=Counter)
    max_per_document: int = 0
    documents: int = 0
    out: str = ""
    rejected_out: str = ""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "planned", "requested", "accepted", "rejected", "resumed", "calls", "requests", "cached", "prompt_tokens",
        "completion_tokens", "cached_prompt_tokens", "cost", "difficulty", "styles", "languages", "max_per_document", "documents",
        "stopped", "out", "rejected_out", "model", "prompt_version")

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for k in ("rejected", "difficulty", "styles", "languages"):
            d[k] = dict(sorted(d[k].items()))
        return d


def estimate_synth(corpus: Corpus, settings: SynthSettings, *, config: LLMConfig | None = None,
                   model: str | None = None, prices: Any = None, cache: str | PathLike | None = None,
                   prompts: SynthPrompts | None = None, temperature: float | None = 0.0,
                   out: str | PathLike | None = None) -> SynthEstimate:
    """The calls, tokens and money a run would spend, per phase (plan and BM25 cost no call; the
    critic phase is an upper bound: it only sees samples that passed the other checks). Calls
    already in the cache, and samples already in ``out``, are not counted. ``config`` (the run's
    :class:`~rankwise.llm.config.LLMConfig`) gives the model, prices, cache and temperature; without
    it, ``model`` (and the others) say them.

    Example:
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 20})
        >>> est = estimate_synth(corpus, SynthSettings(n=2, passage_chars=300), model="m")
        >>> est.samples, est.phases["generate"]["calls"], est.calls
        (2, 2, 2)
    """
    from rankwise.llm.cache import ResponseCache

    if config is not None:
        model, prices, cache, temperature = (config.endpoint.model, config.prices, config.cache,
                                             config.policy.temperature)
    if model is None:
        raise InputError("estimate_synth needs the model (or the run's LLMConfig)", field="model")
    prompts = prompts or load_synth_prompts()
    slots = plan_samples(corpus, settings)
    done: set[int] = set()
    if out is not None:
        plan = fingerprint(corpus, settings, model, prompts.prompt_version)
        for path in (Path(out), rejected_path(out)):
            done |= {int(r["provenance"]["slot"]) for r in read_done(path, plan)}
    store = ResponseCache(cache) if cache is not None and Path(cache).exists() else None
    version = prompts.prompt_version
    phases = {"plan": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
              "generate": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached": 0}}
    if settings.critic:
        phases["critic"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "upper_bound": True}
    phases["bm25 difficulty"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    try:
        for slot in slots:
            if slot.index in done:
                continue
            messages = render_slot(slot, prompts, corpus)
            key = reply_key(model, version, "generation", messages, temperature, settings.max_tokens)
            hit = store.get(key) if store is not None else None
            if hit is not None and unusable_reply(hit.reason, slot.style) is None:
                phases["generate"]["cached"] += 1
                continue
            phases["generate"]["calls"] += 1
            phases["generate"]["prompt_tokens"] += estimate_prompt_tokens(messages)
            phases["generate"]["completion_tokens"] += OUTPUT_TOKENS[slot.style]
            if settings.critic:
                critic = render_critic(prompts, "?" * 80, "?" * 120, ["?" * 150] * (len(slot.passages)))
                phases["critic"]["calls"] += 1
                phases["critic"]["prompt_tokens"] += estimate_prompt_tokens(critic)
                phases["critic"]["completion_tokens"] += OUTPUT_TOKENS["critic"]
    finally:
        if store is not None:
            store.close()
    for p in phases.values():
        p["cost"] = prices.cost(p["prompt_tokens"], p["completion_tokens"]) if prices is not None else None
    return SynthEstimate(phases, len(slots), len(done))


def synth(corpus: Corpus | str | PathLike, *, out: str | PathLike, config: LLMConfig | str | PathLike | None = None,
          settings: SynthSettings | None = None, max_cost: float | None = None,
          prompt: str | PathLike | None = None, quiet: bool = True,
          on_progress: Callable[[SynthSummary], None] | None = None, **llm: Any) -> SynthSummary:
    """Generate a test set from ``corpus`` into ``out`` (JSON Lines, appended sample by sample;
    rejected samples go to ``OUT.rejected.jsonl``); a rerun with the same arguments resumes.

    ``config`` is the one :class:`~rankwise.llm.config.LLMConfig` (endpoint, call policy, prices,
    cache file; :func:`~rankwise.llm.config.resolve_llm_config`), passed whole; or, for Python
    callers, a config file path with keywords for the rest (``model``, ``base_url``, ``cache``,
    ``price_in``, ``concurrency``, ``max_calls``, ...). ``max_calls`` caps the calls of this run,
    counted with the calls in flight, so it stops between samples; ``max_cost`` (needs prices)
    likewise with the money.

    Example (offline: the run planned and priced by :func:`estimate_synth`, as ``rankwise synth --dry-run``;
    with an endpoint up, ``synth(corpus, out="testset.jsonl", config=cfg, settings=settings)`` generates the
    samples and ``summary.accepted`` counts them):
        >>> from rankwise.llm.config import resolve_llm_config
        >>> corpus = Corpus.from_dict({"a": "Alpha text about ranges and copies. " * 20,
        ...                            "b": "Beta text about nodes and leases. " * 20})
        >>> cfg = resolve_llm_config(model="qwen2.5:7b", base_url="http://127.0.0.1:9/v1", env={},
        ...                          cache="no-such-synth-cache.sqlite")
        >>> settings = SynthSettings(
        ...     n=4, styles={"factual": 0.5, "paraphrase": 0.5}, passage_chars=300
        ... )
        >>> est = estimate_synth(corpus, settings, config=cfg)
        >>> est.samples, est.phases["generate"]["calls"]
        (4, 4)
    """
    from rankwise.llm.config import as_llm_config

    settings = settings or SynthSettings()
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    cfg = as_llm_config(config, **llm)
    if max_cost is not None and not cfg.prices.known:
        raise InputError("--max-cost needs prices: give --price-in/--price-out (per 1M tokens) or put price_in, "
                         "price_out in the [llm] table", field="max_cost")
    run = _SynthRun(corpus, settings, cfg, load_synth_prompts(prompt), Path(out), max_cost, on_progress)
    try:
        return run.go(quiet)
    except SynthStopped as exc:
        s = exc.result
        raise EndpointError(f"{exc}; the {s.accepted + sum(s.rejected.values())} samples decided are in {out} and "
                            f"{run.rej_out}, every reply had is in the cache ({cfg.cache}): rerun the same command "
                            f"to resume") from None


class _SynthRun:
    """One synth run: the plan, what earlier runs decided, the ordered writing of samples."""

    def __init__(self, corpus: Corpus, settings: SynthSettings, cfg: LLMConfig, prompts: SynthPrompts, out: Path,
                 max_cost: float | None, on_progress: Callable | None) -> None:
        self.corpus, self.settings, self.cfg, self.prompts, self.out = corpus, settings, cfg, prompts, out
        self.max_cost, self.max_calls, self.on_progress = max_cost, cfg.policy.max_calls, on_progress
        self.model, self.version = cfg.endpoint.model, prompts.prompt_version
        self.plan = fingerprint(corpus, settings, self.model, self.version)
        self.slots = plan_samples(corpus, settings)
        self.rej_out = rejected_path(out)
        self.summary = SynthSummary(planned=len(self.slots), requested=settings.n, out=str(out),
                                    rejected_out=str(self.rej_out), model=self.model, prompt_version=self.version,
                                    documents=len({s.passages[0].doc_id for s in self.slots}))
        self.summary.max_per_document = max(Counter(s.passages[0].doc_id for s in self.slots).values())
        self.norms: dict[str, tuple[str, list[int]]] = {}
        self.seen_questions: list[tuple[frozenset[str], str, str]] = []  # accepted: shingles, id, question
        self.done = self._resume()

    def _resume(self) -> set[int]:
        """The slots decided by earlier runs (their rows counted), files ready to append to."""
        accepted_rows = read_done(self.out, self.plan)
        rejected_rows = drop_failed_calls(self.rej_out, read_done(self.rej_out, self.plan))
        s = self.summary
        for r in accepted_rows:
            s.accepted += 1
            s.difficulty[r.get("difficulty")] += 1
            s.styles[r.get("style")] += 1
            s.languages[r.get("language")] += 1
            self.seen_questions.append((shingles(r["user_input"]), str(r.get("id")), r["user_input"]))
        for r in rejected_rows:
            s.rejected[r["reason"]] += 1
        done = {int(r["provenance"]["slot"]) for r in accepted_rows + rejected_rows}
        s.resumed = len(done)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        truncate_partial(self.out)
        truncate_partial(self.rej_out)
        return done

    def key(self, kind: str, messages: list[dict], max_tokens: int) -> str:
        return reply_key(self.model, self.version, kind, messages, self.cfg.policy.temperature, max_tokens)

    def go(self, quiet: bool) -> SynthSummary:
        """Run the slots not decided yet on the one :class:`~rankwise.llm.runner.Runner` and cache.
        """
        from rankwise.llm.cache import ResponseCache
        from rankwise.progress import progress
        from rankwise.retrieval.bm25 import BM25Retriever

        todo = [s for s in self.slots if s.index not in self.done]
        passages = plan_passages(self.corpus, self.settings)
        self.bm25 = BM25Retriever(quiet=True, name="bm25-difficulty")
        self.bm25.index(passages)
        self.passage_by_id = {c.id: c for c in passages}
        cache = ResponseCache(self.cfg.cache)
        runner = Runner(self.cfg.endpoint, self.cfg.policy, self.cfg.prices, cache, name="rankwise-synth")
        self.cpu = _Background()
        try:
            with open(self.out, "a", encoding="utf-8") as self.fh_ok, \
                    open(self.rej_out, "a", encoding="utf-8") as self.fh_rej, \
                    progress("synth", len(self.slots), quiet=quiet) as self.advance:
                self.advance(len(self.done))
                if not todo:  # all decided by earlier runs: nothing to call, nothing spent
                    self.summary.cost = self.cfg.prices.cost(0, 0)
                    return self.summary
                return runner.run(lambda r: _SynthJob(self, r, todo))
        finally:
            self.cpu.close()
            cache.close()

    def show(self, n: int, cost: float | None) -> None:
        s = self.summary
        money = f" ${cost:.4f}" if cost is not None else ""
        self.advance(n, description=f"synth: {s.accepted} kept, {s.calls} calls{money}")
        if self.on_progress is not None:
            s.cost = cost
            self.on_progress(s)

    def write(self, slot: Slot, sample: dict[str, Any] | None, reason: str | None, detail: str | None,
              question: str | None) -> None:
        """Write one decided sample (in plan order): a near-duplicate of an accepted question is
        rejected here, an accepted one gets its BM25 difficulty; a rejected one keeps the question
        its reply asked."""
        s = self.summary
        prov = {"model": self.model, "prompt_version": self.version, "style": slot.style, "seed": self.settings.seed,
                "slot": slot.index, "plan": self.plan,
                "passages": [{"doc_id": p.doc_id, "start": p.start, "end": p.end} for p in slot.passages]}
        if sample is not None:
            same = near_duplicate(sample["user_input"], self.seen_questions, self.settings.duplicate_threshold)
            if same is not None:
                sample, reason, detail = None, "duplicate", same
        if sample is None:
            s.rejected[reason] += 1
            self.fh_rej.write(json.dumps({"id": slot.id, "question": question, "reason": reason, "detail": detail,
                                          "provenance": prov}, ensure_ascii=False) + "\n")
            self.fh_rej.flush()
            return
        self.seen_questions.append((shingles(sample["user_input"]), slot.id, sample["user_input"]))
        rank = sample.pop("bm25_rank")
        difficulty = "easy" if rank == 1 else "hard" if rank is not None else "unretrieved"
        prov["located"] = sample.pop("located")
        row = {"id": slot.id, **sample, "style": slot.style, "language": slot.language, "difficulty": difficulty,
               "bm25_rank": rank, "provenance": prov}
        self.fh_ok.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.fh_ok.flush()
        s.accepted += 1
        s.difficulty[difficulty] += 1
        s.styles[slot.style] += 1
        s.languages[slot.language] += 1


@dataclass
class _Outcome:
    """A slot's outcome for the runner: ``ok`` (decided), ``failed`` (its call failed) or
    ``missing``."""

    status: str = "missing"
    error: str | None = None
    cached: bool = False
    kind: str | None = None  # what kind of failure (the key the run's summary counts it under)


_Decision = tuple[dict[str, Any] | None, str | None, str | None, str | None]  # sample, reason, detail, question


class _SynthJob(Job):
    """Synth's task for the :class:`~rankwise.llm.runner.Runner`: a unit is one slot (its generation
    call, then its critic call); decided slots are written in plan order as they settle.
    :meth:`admit` holds the caps: a slot starts only if the calls made, the calls the slots in
    flight still hold and its own stay within ``max_calls`` (and their estimated cost within
    ``max_cost``); once one is refused, the run starts no more and ends the calls in flight, so
    every call made decides a sample."""

    stopped, interrupted = SynthStopped, SynthInterrupted

    def __init__(self, run: _SynthRun, runner: Runner, todo: list[Slot]) -> None:
        self.run, self.runner, self.units = run, runner, todo
        self.summary = run.summary
        self.outcome = {s.index: _Outcome() for s in todo}
        self.messages = {s.index: render_slot(s, run.prompts, run.corpus) for s in todo}
        self.keys = {i: run.key("generation", m, run.settings.max_tokens) for i, m in self.messages.items()}
        hits = runner.cache.get_many(list(self.keys.values())) if runner.cache is not None else {}
        # a reply that was no answer (cached by an older rankwise) is asked again, not reused
        self.hits = {k: hits[k] for s in todo if (k := self.keys[s.index]) in hits
                     and unusable_reply(hits[k].reason, s.style) is None}
        self.held: dict[int, int] = {}  # calls reserved by each slot in flight
        self.decided: dict[int, _Decision] = {}
        self.order = [s.index for s in todo]
        self.by_index = {s.index: s for s in todo}
        self.next = 0
        self.cached_calls = 0
        self.exhausted = False  # max_calls ran out under a retry: start no more slots
        self.in_flight = 0  # calls sent, their reply (and its cost) not had yet

    def outcomes(self) -> Iterable[_Outcome]:
        return self.outcome.values()

    def admit(self, slot: Slot) -> str | None:
        run = self.run
        need = int(self.keys[slot.index] not in self.hits) + int(run.settings.critic)
        held = sum(self.held.values())
        if self.exhausted or (need and run.max_calls is not None
                              and self.runner.requests_sent() + held + need > run.max_calls):
            return f"max calls reached ({run.max_calls} calls)"
        if need and run.max_cost is not None:
            spent = self.runner.spent() or 0.0
            planned = run.cfg.prices.cost(estimate_prompt_tokens(self.messages[slot.index]),
                                          OUTPUT_TOKENS[slot.style]) or 0.0
            per_call = max(planned, spent / self.summary.calls if self.summary.calls else 0.0)
            if spent + per_call * (held + self.in_flight + need) > run.max_cost:
                return f"max cost reached (${spent:.4f} spent of ${run.max_cost:g})"
        self.held[slot.index] = need
        return None

    def settle_rest(self, unit: Slot, status: str, error: str, kind: str) -> None:
        o = self.outcome[unit.index]
        if o.status == "missing" and unit.index not in self.decided:
            o.status, o.error, o.kind = status, error, kind
            if status == "failed":  # a defect: no answer, like a failed call; a rerun asks again
                self.decided[unit.index] = (None, "call_failed", error[:200], None)
                self._commit()

    async def do(self, unit: Slot) -> None:
        try:
            decision = await self._decide(unit)
        finally:
            self.held.pop(unit.index, None)
        if decision is not None:
            o = self.outcome[unit.index]
            o.status, o.error = ("failed", decision[2]) if decision[1] == "call_failed" else ("ok", None)
            self.decided[unit.index] = decision
        self._commit()

    async def _call(self, slot: Slot, kind: str, messages: list[dict], max_tokens: int) -> str | None:
        """One reply: from the cache, else from the endpoint (stored in the cache as it arrives,
        unless it is no answer: :func:`unusable_reply`, :func:`unusable_critic`; a rerun asks that
        one again)."""
        run = self.run
        key = run.key(kind, messages, max_tokens)
        unusable = (lambda c: unusable_reply(c, slot.style)) if kind == "generation" else unusable_critic
        hit = self.hits.get(key) if kind == "generation" else self.runner.cache.get(key)  # type: ignore[union-attr]
        if hit is not None and unusable(hit.reason) is not None:
            hit = None
        reserved = kind == "critic" or hit is None
        if hit is not None:
            self.cached_calls += 1
            self.outcome[slot.index].cached = True
            if reserved:
                self.held[slot.index] -= 1
            return hit.reason
        self.held[slot.index] -= 1  # counted from here on by the requests sent (no await in between)
        self.in_flight += 1  # and, until its reply is priced, as a call in flight
        try:
            reply = await self.runner.chat(messages, max_tokens, ANY_OBJECT)  # every synth prompt asks for JSON
        finally:
            self.in_flight -= 1
        self.summary.calls += 1
        content = reply.content if reply.content is not None else (reply.refusal and f"REFUSAL: {reply.refusal}")
        self.runner.record(unusable(content) is None, lambda w: w.put(key, verdict=1, grade=None, reason=content, model=run.model,
                                                 mode="synth", scale=kind, prompt_version=run.version,
                                                 style="generate", call="single", prompt_tokens=reply.prompt_tokens,
                                                 completion_tokens=reply.completion_tokens), 0)
        return content

    async def _decide(self, slot: Slot) -> _Decision | None:
        """The slot's decision; None when ``max_calls`` ran out under it (undecided: a rerun goes
        on)."""
        run = self.run
        try:
            content = await self._call(slot, "generation", self.messages[slot.index], run.settings.max_tokens)
        except BudgetExhausted:
            self.exhausted = True
            return None
        except CallError as exc:
            self.outcome[slot.index].kind = exc.kind
            return None, "call_failed", str(exc)[:200], None
        # the checks (quotes located in whole documents, BM25 rank) off the event loop: Ctrl-C is
        # taken at once
        sample, reason, detail = await run.cpu(_checked, content, slot, run)
        question = sample["user_input"] if sample is not None else reply_question(content)
        if sample is None or not run.settings.critic:
            return sample, reason, detail, question
        messages = render_critic(run.prompts, sample["user_input"], sample["reference"],
                                 [r["text"] for r in sample["reference_contexts"]])
        try:
            verdict = await self._call(slot, "critic", messages, 120)
        except BudgetExhausted:
            self.exhausted = True
            return None
        except CallError as exc:  # no answer, not a rejection: a rerun asks again
            self.outcome[slot.index].kind = exc.kind
            return None, "call_failed", f"critic call: {str(exc)[:200]}", question
        return (*_criticised(sample, verdict, run.settings.critic_min), question)

    def _commit(self) -> None:
        """Write the decided slots in plan order, up to the first one not decided yet."""
        before = self.next
        while self.next < len(self.order) and self.order[self.next] in self.decided:
            index = self.order[self.next]
            self.run.write(self.by_index[index], *self.decided.pop(index))
            self.next += 1
        if self.next > before:
            self.run.show(self.next - before, self.runner.spent())

    def result(self) -> SynthSummary:
        self._commit()
        s = self.summary
        s.cached = self.cached_calls
        if s.stopped is None:
            s.stopped = self.runner.capped or (f"max calls reached ({self.run.max_calls} calls)"
                                               if self.exhausted else None)
        return s


def _checked(content: str | None, slot: Slot,
             run: _SynthRun) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """:func:`check_reply`, and an accepted sample's BM25 rank (``bm25_rank``: the one thing
    :meth:`_SynthRun.write` does that takes time)."""
    sample, reason, detail = check_reply(content, slot, run.corpus, run.settings, run.norms)
    if sample is not None:
        sample["bm25_rank"] = _bm25_rank(run.bm25, run.passage_by_id, sample)
    return sample, reason, detail


class _Background:
    """One daemon thread for a run's CPU-bound steps (quotes located in whole documents, BM25
    ranks), so the event loop stays free to take Ctrl-C at once: a step still running when the run
    stops is abandoned (its sample decided nothing; its reply is in the cache), and the process does
    not wait for it to end."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="rankwise-synth-checks", daemon=True).start()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, args, loop, future = item
            if future.cancelled():
                continue
            try:
                result, failed = fn(*args), False
            except Exception as exc:  # noqa: BLE001 - raised in the awaiting task, as if called there
                result, failed = exc, True
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run has ended
                loop.call_soon_threadsafe(_settle, future, result, failed)

    async def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((fn, args, loop, future))
        return await future

    def close(self) -> None:
        self._queue.put(None)


def _settle(future: asyncio.Future, result: Any, failed: bool) -> None:
    if not future.done():
        future.set_exception(result) if failed else future.set_result(result)


def _criticised(sample: dict[str, Any], verdict: str | None,
                minimum: int) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """The sample with the critic's score, rejected (``critic``) for a low score, or (``bad_reply``)
    for a reply without one."""
    from rankwise.llm.parse import extract_json

    problem = unusable_critic(verdict)
    if problem is not None:  # no score: decided nothing, a rerun asks the critic again
        return None, *problem
    obj = extract_json(verdict)
    score = obj["score"]
    sample["critic"] = {"score": score, "reason": str(obj.get("reason") or "")[:300]}
    if score < minimum:
        return None, "critic", f"score {score}: {obj.get('reason')}"
    return sample, None, None


def _bm25_rank(bm25: Any, by_id: dict[str, CorpusChunk], sample: dict[str, Any]) -> int | None:
    """Rank (1-based, within the top 10) of the first passage overlapping a reference span, else
    None."""
    run = bm25.search({"q": sample["user_input"]}, k=10)
    for rank, chunk_id in enumerate(run.ranking("q"), 1):
        c = by_id[chunk_id]
        for r in sample["reference_contexts"]:
            if r["doc_id"] == c.doc_id and r["start"] < c.end and c.start < r["end"]:
                return rank
    return None
