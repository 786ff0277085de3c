"""Asking a generator: one cached, resumable, counted call per request, for answers and answer
checks.

The prompts, the cache and what is counted: docs/calibrate.md, "Generating answers".

Example::

    from rankwise.llm.client import Endpoint
    from rankwise.llm.generate import GenRequest, Generator, load_gen_prompt
    prompt = load_gen_prompt("answer")
    gen = Generator(Endpoint("qwen2.5:7b", "http://localhost:11434/v1"), prompt, cache="gen.sqlite")
    result = gen.run([GenRequest("q1", prompt.render_answer("Capital of France?", ["Paris is the capital."]))])
    result.replies["q1"].text
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import ClassVar

from rankwise.errors import GenerationInterrupted, GenerationStopped, InputError
from rankwise.llm.cache import CacheWriter, ResponseCache, cache_key
from rankwise.llm.client import BudgetExhausted, CallError, CallPolicy, Endpoint, utf8_safe
from rankwise.llm.config import LLMConfig
from rankwise.llm.cost import Prices, estimate_prompt_tokens
from rankwise.llm.parse import answer_refusal, parse_verdict, verdict_schema
from rankwise.llm.prompts import data_boundary, fence, fill, load_toml, shipped_toml, template_version
from rankwise.llm.runner import Job, Runner, RunPlan, RunSummary

__all__ = ["GenPrompt", "load_gen_prompt", "GenRequest", "GenReply", "GenPlan", "GenSummary", "GenResult",
           "Generator", "GenerationStopped", "GenerationInterrupted", "TASKS", "ANSWER_MAX_TOKENS"]

TASKS = ("answer", "correctness")
ANSWER_MAX_TOKENS = 256
CHECK_MAX_TOKENS = 300
_OUTPUT_ESTIMATE = {"answer": 40, "correctness": 40}


@dataclass(frozen=True)
class GenPrompt:
    """One task's prompt (``answer``: text; ``correctness``: binary or graded verdict), versioned.

    Example:
        >>> p = load_gen_prompt("answer")
        >>> p.prompt_version.startswith("answer-text-v3+")
        True
        >>> "Paris is the capital." in p.render_answer("Capital?", ["Paris is the capital."])[1][
        ...     "content"
        ... ]
        True
    """

    task: str
    scale: str  # "text" (answers), "binary" or "graded" (correctness)
    version: str
    system: str
    user: str
    item: str
    repair: str
    source: str

    @property
    def graded(self) -> bool:
        return self.scale == "graded"

    @property
    def prompt_version(self) -> str:
        """``<task>-<scale>-v<version>+<8 hex of the template text>``."""
        return template_version(self.task, self.scale, self.version, (self.system, self.user, self.item, self.repair))

    def render_answer(self, question: str, chunks: Sequence[str]) -> list[dict]:
        """System + user message asking for an answer from ``chunks``, numbered 1..n in the order
        given (question and chunks fenced: :func:`~rankwise.llm.prompts.fence`)."""
        boundary = data_boundary(*chunks, shared=[question])
        items = "\n\n".join(fill(self.item, {"index": i + 1, "chunk": fence(c, boundary)})
                            for i, c in enumerate(chunks))
        values = {"question": fence(question, boundary), "contexts": items, "n": len(chunks)}
        return [{"role": "system", "content": fill(self.system, values)},
                {"role": "user", "content": fill(self.user, values)}]

    def render_repair(self, messages: list[dict], reply: str | None, error: str) -> list[dict]:
        """The conversation so far plus the unusable reply (its first 4,000 characters) and the
        repair request (``repair`` with ``{error}``)."""
        return [*messages, {"role": "assistant", "content": (reply or "")[:4000]},
                {"role": "user", "content": fill(self.repair, {"error": error})}]

    def render_check(self, question: str, reference: str, response: str) -> list[dict]:
        """System + user message asking whether ``response`` answers ``question`` as ``reference``
        does (each text fenced)."""
        boundary = data_boundary(response, shared=[question, reference])
        values = {"question": fence(question, boundary), "reference": fence(reference, boundary),
                  "response": fence(response, boundary)}
        return [{"role": "system", "content": fill(self.system, values)},
                {"role": "user", "content": fill(self.user, values)}]


def load_gen_prompt(task: str, *, graded: bool = False, path: str | PathLike | None = None) -> GenPrompt:
    """The shipped template of ``task`` (``answer`` or ``correctness``), or a user TOML file laid
    out like it (``prompts/answer.toml``: a ``[text]`` table with ``system``, ``user``, ``item``;
    correctness: ``[binary]``/``[graded]`` tables with ``system``, ``user``, and a top-level
    ``repair``).

    Example:
        >>> load_gen_prompt("correctness", graded=True).scale
        'graded'
    """
    if task not in TASKS:
        raise InputError(f"unknown generator task {task!r}; choose one of {', '.join(TASKS)}", field="task")
    data, source = shipped_toml("rankwise.llm", f"{task}.toml")
    scale = "text" if task == "answer" else ("graded" if graded else "binary")
    version, repair = str(data.get("version", "1")), data.get("repair", "")
    parts = dict(data.get(scale) or {})
    if path is not None:
        user = load_toml(Path(path))
        source, version = str(path), str(user.get("version", "custom"))
        repair = user.get("repair", repair)
        section = user.get(scale) or {}
        if not isinstance(section, dict):
            raise InputError(f"[{scale}] must be a table", source=path, field=scale)
        parts.update(section)
    needs = {"system": [], "user": ["{question}", "{contexts}"] if task == "answer"
             else ["{question}", "{reference}", "{response}"]}
    if task == "answer":
        needs["item"] = ["{index}", "{chunk}"]
    for key, tokens in needs.items():
        if not isinstance(parts.get(key), str) or not parts[key].strip():
            raise InputError(f"missing prompt text '{key}'", source=source, field=f"{scale}.{key}")
        for token in tokens:
            if token not in parts[key]:
                raise InputError(f"prompt text '{key}' of task {task} must hold {token}", source=source,
                                 field=f"{scale}.{key}")
    if task == "correctness" and (not isinstance(repair, str) or "{error}" not in repair):
        raise InputError("'repair' must be a string holding {error}", source=source, field="repair")
    return GenPrompt(task, scale, version, parts["system"], parts["user"], parts.get("item", ""), repair or "",
                     source)


@dataclass(frozen=True)
class GenRequest:
    """One call: an id (unique in the run) and the messages to send."""

    id: str
    messages: list[dict]


@dataclass
class GenReply:
    """The outcome of one request: ``text`` (answers) or ``verdict``/``grade``/``reason`` (checks).
    """

    text: str | None = None
    verdict: int | None = None
    grade: int | None = None
    reason: str | None = None
    status: str = "missing"
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None
    kind: str | None = None  # what kind of failure (the key the run's summary counts it under)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(kw_only=True)
class GenPlan(RunPlan):
    """What a run would do (``--dry-run``): requests, cache hits, calls, estimated tokens and cost.
    """

    requests: int


@dataclass
class GenSummary(RunSummary):
    """What a run did: outcomes, requests, retries, tokens, cost, time, and why it stopped early if
    it did (the counters of :class:`~rankwise.llm.runner.RunSummary`, and the task's own)."""

    task: str
    items: int = 0

    FIELDS: ClassVar[tuple[str, ...]] = (
        "model", "task", "prompt_version", "items", "ok", "cached", "failed", "missing", "requests", "retries",
        "repairs", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "response_format", "cost", "seconds", "concurrency", "failures",
        "http_errors", "stopped", "capped", "bad_cache_rows")

    def lines(self, url: str) -> list[str]:
        """A few plain lines for the console."""
        cost = "cost unknown (give --price-in/--price-out)" if self.cost is None else f"cost ${self.cost:.4f}"
        out = [f"{self.task} ({self.prompt_version}) with {self.model} at {url}: {self.items} requests, "
               f"{self.ok} ok ({self.cached} from the cache), {self.failed} failed, {self.missing} missing",
               f"{self.requests} HTTP requests ({self.retries} retries), {self.prompt_tokens:,} prompt + "
               f"{self.completion_tokens:,} completion tokens, {cost}, {self.seconds:.1f} s"]
        if self.failures:
            out.append("failures: " + ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items())))
        if self.bad_cache_rows:
            out.append(f"cache: {self.bad_cache_rows} unusable rows not served (asked again)")
        if self.capped:
            out.append(self.capped)
        return out


@dataclass
class GenResult:
    """Per request id, one :class:`GenReply`; and the run's :class:`GenSummary`."""

    replies: dict[str, GenReply]
    summary: GenSummary


class Generator:
    """Sends :class:`GenRequest` s through one endpoint with one prompt; reads and fills the cache.

    ``max_cost`` (needs ``prices``) stops sending new requests once the run has spent that much; the
    requests not sent end ``missing``.
    """

    def __init__(self, endpoint: Endpoint, prompt: GenPrompt, policy: CallPolicy | None = None,
                 cache: ResponseCache | str | PathLike | None = None, prices: Prices | None = None,
                 max_cost: float | None = None, max_tokens: int | None = None) -> None:
        self.endpoint = endpoint
        self.prompt = prompt
        self.policy = policy or CallPolicy()
        self._own_cache = cache is not None and not isinstance(cache, ResponseCache)
        self.cache = ResponseCache(cache) if self._own_cache else cache  # type: ignore[arg-type]
        self.prices = prices or Prices()
        if max_cost is not None and (max_cost < 0 or not self.prices.known):
            raise InputError("--max-cost needs prices (--price-in/--price-out) and a cost >= 0", field="max_cost")
        self.max_cost = max_cost
        self.max_tokens = max_tokens or (ANSWER_MAX_TOKENS if prompt.task == "answer" else CHECK_MAX_TOKENS)
        self._params = {"temperature": self.policy.temperature, "max_tokens": self.max_tokens}

    @classmethod
    def from_config(cls, config: LLMConfig, prompt: GenPrompt, *, endpoint: Endpoint | None = None,
                    cache: ResponseCache | str | PathLike | None = None, max_cost: float | None = None,
                    max_tokens: int | None = None) -> Generator:
        """The generator of one resolved :class:`~rankwise.llm.config.LLMConfig`, passed whole: its
        endpoint (or ``endpoint``, e.g. a separate grader's), call policy, prices and cache file (or
        ``cache``)."""
        return cls(endpoint or config.endpoint, prompt, config.policy, cache if cache is not None else config.cache,
                   config.prices, max_cost=max_cost, max_tokens=max_tokens)

    def close(self) -> None:
        if self._own_cache and self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def key(self, request: GenRequest) -> str:
        """The cache key: model, task, scale, prompt version, sampling parameters, the exact
        messages."""
        return cache_key(model=self.endpoint.model, mode=self.prompt.task, scale=self.prompt.scale,
                         prompt_version=self.prompt.prompt_version, style="generate", question="",
                         chunk=json.dumps(request.messages, ensure_ascii=False, sort_keys=True), context=None,
                         params=self._params)

    def _lookup(self, requests: Sequence[GenRequest]) -> tuple[dict[str, GenReply], list[GenRequest],
                                                                dict[str, str], dict[str, list[str]]]:
        """Cache lookups: replies so far, the requests to send (one per distinct key), the keys, and
        per request sent the ids of the requests with the same messages (they get its reply)."""
        requests = [_sendable(r) for r in requests]
        seen: set[str] = set()
        for r in requests:
            if r.id in seen:
                raise InputError(f"request id {r.id!r} appears twice", field="id")
            seen.add(r.id)
        keys = {r.id: self.key(r) for r in requests}
        hits = self.cache.get_many(list(set(keys.values()))) if self.cache is not None else {}
        replies: dict[str, GenReply] = {}
        todo: list[GenRequest] = []
        first: dict[str, str] = {}  # cache key -> id of the request that asks it (the same messages: one call)
        copies: dict[str, list[str]] = {}
        for r in requests:
            hit = hits.get(keys[r.id])
            if hit is None:
                replies[r.id] = GenReply()
                if keys[r.id] in first:
                    copies.setdefault(first[keys[r.id]], []).append(r.id)
                else:
                    first[keys[r.id]] = r.id
                    todo.append(r)
            elif self.prompt.task == "answer":
                replies[r.id] = GenReply(text=hit.reason or "", status="ok", cached=True)
            else:
                replies[r.id] = GenReply(verdict=hit.verdict, grade=hit.grade, reason=hit.reason, status="ok",
                                         cached=True)
        return replies, todo, keys, copies

    def plan(self, requests: Sequence[GenRequest]) -> GenPlan:
        """What :meth:`run` would do, without calling: calls needed, estimated tokens and cost."""
        replies, todo, _, _ = self._lookup(requests)
        return GenPlan.estimate(len(todo), sum(estimate_prompt_tokens(r.messages) for r in todo),
                                _OUTPUT_ESTIMATE[self.prompt.task] * len(todo), max_calls=self.policy.max_calls,
                                prices=self.prices, model=self.endpoint.model,
                                prompt_version=self.prompt.prompt_version, requests=len(requests),
                                cached=sum(1 for r in replies.values() if r.cached))

    # ------------------------------------------------------------------------------------------ run
    def _runner(self) -> Runner:
        return Runner(self.endpoint, self.policy, self.prices, self.cache, max_cost=self.max_cost,
                      name="rankwise-generate")

    def run(self, requests: Sequence[GenRequest], progress: Callable[[int], None] | None = None) -> GenResult:
        """Every request answered from the cache or the endpoint (blocking); ``progress(n)`` as
        ``n`` more settle. Ctrl-C stops promptly with :class:`GenerationInterrupted`; rerun to
        resume."""
        return self._runner().run(lambda runner: _GenJob(self, runner, requests), progress)

    async def arun(self, requests: Sequence[GenRequest],
                   progress: Callable[[int], None] | None = None) -> GenResult:
        """:meth:`run` for callers already inside an event loop."""
        return await self._runner().arun(lambda runner: _GenJob(self, runner, requests), progress)


class _GenJob(Job):
    """One generator run for the :class:`Runner`: a unit is one request (requests with the same
    messages share its call and its reply)."""

    stopped, interrupted = GenerationStopped, GenerationInterrupted

    def __init__(self, gen: Generator, runner: Runner, requests: Sequence[GenRequest]) -> None:
        self.gen, self.runner = gen, runner
        bad_before = gen.cache.bad_rows if gen.cache is not None else 0
        self.replies, self.units, self.keys, self.copies = gen._lookup(requests)
        self.summary = GenSummary(model=gen.endpoint.model, task=gen.prompt.task,
                                  prompt_version=gen.prompt.prompt_version, items=len(requests))
        if gen.cache is not None:
            self.summary.bad_cache_rows = gen.cache.bad_rows - bad_before

    def outcomes(self) -> Iterable[GenReply]:
        return self.replies.values()

    def result(self) -> GenResult:
        return GenResult(self.replies, self.summary)

    def settle_rest(self, unit: GenRequest, status: str, error: str, kind: str) -> None:
        if self.replies[unit.id].status == "missing":
            self._settle(unit, GenReply(status=status, error=error, kind=kind))

    def _settle(self, req: GenRequest, reply: GenReply, pt: int = 0, ct: int = 0) -> None:
        self.replies[req.id] = reply
        for other in self.copies.get(req.id, ()):
            self.replies[other] = GenReply(**{**reply.__dict__, "cached": False})
        self.runner.record(reply.ok, lambda writer: self._put(writer, req, reply, pt, ct),
                           1 + len(self.copies.get(req.id, ())))

    def _put(self, writer: CacheWriter, req: GenRequest, reply: GenReply, pt: int, ct: int) -> None:
        g, prompt = self.gen, self.gen.prompt
        writer.put(self.keys[req.id], verdict=reply.verdict if reply.verdict is not None else 1, grade=reply.grade,
                   reason=reply.text if prompt.task == "answer" else reply.reason, model=g.endpoint.model,
                   mode=prompt.task, scale=prompt.scale, prompt_version=prompt.prompt_version, style="generate",
                   call="single", prompt_tokens=pt, completion_tokens=ct)

    async def do(self, unit: GenRequest) -> None:
        try:
            reply, pt, ct = await self._one(unit)
        except BudgetExhausted as exc:
            reply, pt, ct = GenReply(status="missing", error=str(exc), kind=exc.kind), 0, 0
        except CallError as exc:  # after retries; a refusal; an unreadable verdict after the repair
            reply, pt, ct = GenReply(status="failed", error=str(exc), kind=exc.kind), 0, 0
        self._settle(unit, reply, pt, ct)

    async def _one(self, req: GenRequest) -> tuple[GenReply, int, int]:
        gen = self.gen
        if gen.prompt.task == "answer":
            reply = await self.runner.chat(req.messages, gen.max_tokens)
            pt, ct = reply.prompt_tokens, reply.completion_tokens
            refused = answer_refusal(reply.content, reply.refusal, reply.finish_reason)
            if refused is not None or reply.content is None or not reply.content.strip():
                kind = "refused" if refused is not None else "empty reply"
                why = f"refused: {refused}" if refused is not None else "empty reply (no answer text)"
                return GenReply(status="failed", error=why, finish_reason=reply.finish_reason, kind=kind), pt, ct
            return GenReply(text=reply.content.strip(), status="ok", finish_reason=reply.finish_reason), pt, ct
        graded = gen.prompt.graded
        j, pt, ct = await self.runner.ask(req.messages, gen.max_tokens, lambda text: parse_verdict(text, graded=graded),
                                          gen.prompt.render_repair, schema=verdict_schema(graded))
        return GenReply(verdict=j.verdict, grade=j.grade, reason=j.reason, status="ok"), pt, ct


def _sendable(req: GenRequest) -> GenRequest:
    msgs = [dict(m, content=utf8_safe(m.get("content"))) for m in req.messages]
    return GenRequest(req.id, msgs)
