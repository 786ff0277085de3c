"""Answers from a generator, and their scores (docs/calibrate.md): what ``rankwise answer`` does.

:func:`fed_context` picks what the generator reads of a case: its top-K chunks in rank order, cut to
a token budget (estimated at 4 characters a token; the chunk that crosses the budget is cut, later
ones are dropped). :func:`answer_records` asks the generator
(:class:`~rankwise.llm.generate.Generator`, cached and resumable) and writes, per record,
``response`` and ``extra["answer"]``: the model, prompt version, the chunk ranks fed in the order
fed, any truncation, and the request's status. :func:`score_responses` scores answers against the
reference: token F1 or exact match (:mod:`rankwise.analysis.answers`), or an LLM correctness verdict
(binary, or graded 0-3 read as grade/3) with its reason.

Example:
    >>> from rankwise.data.records import CaseRecord, ChunkRecord
    >>> rec = CaseRecord(
    ...     "q",
    ...     chunks=[
    ...         ChunkRecord(rank=1, text="a" * 40),
    ...         ChunkRecord(rank=2, text="b" * 40),
    ...         ChunkRecord(rank=3, text="c" * 40),
    ...     ],
    ... )
    >>> fc = fed_context(rec, 3, max_context_tokens=15)
    >>> fc.ranks, [len(t) for t in fc.texts], fc.truncated
    ([1, 2], [40, 20], {'rank': 2, 'kept_chars': 20, 'dropped_ranks': [3]})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rankwise.analysis.answers import exact_match, token_f1
from rankwise.errors import InputError
from rankwise.llm.cost import CHARS_PER_TOKEN, estimate_tokens
from rankwise.llm.generate import Generator, GenRequest, GenResult, GenSummary

__all__ = ["FedContext", "fed_context", "answer_records", "score_responses", "apply_scores", "method_source",
           "utility_verdicts", "UtilityRun", "SCORE_METHODS"]

SCORE_METHODS = ("f1", "em", "llm")


@dataclass
class FedContext:
    """What the generator read: chunk ranks (1-based, in the order fed), their texts, any
    truncation."""

    ranks: list[int]
    texts: list[str]
    truncated: dict[str, Any] | None = None
    skipped: list[int] | None = None  # ranks without text (only an id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fed_ranks": self.ranks, "truncated": self.truncated}
        if self.skipped:
            out["no_text_ranks"] = self.skipped
        return out


def fed_context(record: Any, k: int | None, max_context_tokens: int | None = None) -> FedContext:
    """The top ``k`` chunks of ``record`` with text, in rank order, within ``max_context_tokens``.
    """
    if k is not None and k < 1:
        raise InputError(f"-k must be >= 1, got {k}", field="k")
    if max_context_tokens is not None and max_context_tokens < 1:
        raise InputError(f"--max-context-tokens must be >= 1, got {max_context_tokens}", field="max_context_tokens")
    chunks = record.chunks[:k] if k is not None else record.chunks
    ranks, texts, skipped = [], [], []
    used = 0
    truncated = None
    for i, c in enumerate(chunks):
        if not c.text:
            skipped.append(c.rank)
            continue
        cost = estimate_tokens(c.text)
        if max_context_tokens is not None and used + cost > max_context_tokens:
            room = (max_context_tokens - used) * CHARS_PER_TOKEN
            dropped = [x.rank for x in chunks[i + 1:] if x.text]
            if room > 0:
                ranks.append(c.rank)
                texts.append(c.text[:room])
                truncated = {"rank": c.rank, "kept_chars": room, "dropped_ranks": dropped}
            else:
                truncated = {"rank": None, "kept_chars": 0, "dropped_ranks": [c.rank, *dropped]}
            break
        used += cost
        ranks.append(c.rank)
        texts.append(c.text)
    return FedContext(ranks, texts, truncated, skipped or None)


def answer_records(records: Sequence[Any], generator: Generator, k: int | None, *,
                   max_context_tokens: int | None = None, progress: Callable[[int], None] | None = None,
                   plan_only: bool = False) -> GenResult | Any:
    """Answer every record with a question from its fed context; fill ``response`` and
    ``extra["answer"]`` (records whose answer failed get ``response = None``). With ``plan_only``
    return the :class:`~rankwise.llm.generate.GenPlan` and call nothing. Raises what
    :meth:`Generator.run` raises, after writing the answers had into the records.

    Example (``plan_only``: the calls and tokens answering would take, nothing called; without it the
    records get ``response`` and ``extra["answer"]``):
        >>> from rankwise.data.records import as_records
        >>> from rankwise.llm.client import Endpoint
        >>> from rankwise.llm.generate import Generator, load_gen_prompt
        >>> records = as_records(
        ...     [
        ...         {
        ...             "id": "q1",
        ...             "question": "What does BM25 rank by?",
        ...             "reference": "Term frequency.",
        ...             "retrieved_contexts": [
        ...                 "BM25 ranks by term frequency.",
        ...                 "Dense models embed.",
        ...             ],
        ...         }
        ...     ]
        ... )
        >>> gen = Generator(
        ...     Endpoint("qwen2.5:7b", "http://127.0.0.1:9/v1"), load_gen_prompt("answer")
        ... )
        >>> plan = answer_records(records, gen, 2, plan_only=True)
        >>> plan.requests, plan.calls, plan.cached
        (1, 1, 0)
    """
    from rankwise.llm.generate import GenerationInterrupted, GenerationStopped

    requests, fed = [], {}
    for r in records:
        ctx = fed_context(r, k, max_context_tokens)
        fed[r.id] = ctx
        if r.question and ctx.texts:
            requests.append(GenRequest(r.id, generator.prompt.render_answer(r.question, ctx.texts)))
    if plan_only:
        return generator.plan(requests)
    try:
        result = generator.run(requests, progress)
    except (GenerationStopped, GenerationInterrupted) as exc:
        _attach_answers(records, exc.result, fed, generator, k)
        raise
    _attach_answers(records, result, fed, generator, k)
    return result


def _attach_answers(records: Sequence[Any], result: GenResult, fed: dict[str, FedContext], generator: Generator,
                    k: int | None) -> None:
    for r in records:
        reply = result.replies.get(r.id)
        info: dict[str, Any] = {"model": generator.endpoint.model, "prompt_version": generator.prompt.prompt_version,
                                "k": k, **fed[r.id].to_dict()}
        if reply is None:
            info["status"] = "failed"
            info["error"] = "no question in the case" if not r.question else "no chunk text to answer from"
            r.response = None
        else:
            info["status"] = reply.status
            if reply.error:
                info["error"] = reply.error
            r.response = reply.text if reply.ok else None
        r.answer_score, r.answer_score_source = None, None  # a fresh answer: any old score is stale
        r.extra["answer"] = info


def score_responses(items: Sequence[tuple[str, str | None, str | None, str | None]], method: str, *,
                    checker: Generator | None = None,
                    progress: Callable[[int], None] | None = None) -> tuple[dict[str, tuple[float, str | None]],
                                                                           GenSummary | None]:
    """Scores of ``(id, question, reference, response)`` items: ``{id: (score, reason)}`` for the
    items that could be scored (a reference and a response), and the checker's summary (``llm``
    only).

    Example:
        >>> score_responses([("a", "Q?", "Paris", "It is Paris."), ("b", "Q?", None, "x")], "f1")
        ({'a': (0.5, None)}, None)
    """
    if method not in SCORE_METHODS:
        raise InputError(f"--score must be one of {', '.join(SCORE_METHODS)}, not {method!r}", field="score")
    usable = [(i, q, ref, resp) for i, q, ref, resp in items if ref and resp is not None]
    if method in ("f1", "em"):
        fn = token_f1 if method == "f1" else exact_match
        return {i: (fn(resp, ref), None) for i, _q, ref, resp in usable}, None  # type: ignore[arg-type]
    if checker is None:
        raise InputError("--score llm needs a model to check answers with", field="score")
    requests = [GenRequest(i, checker.prompt.render_check(q or "", ref, resp))  # type: ignore[arg-type]
                for i, q, ref, resp in usable]
    result = checker.run(requests, progress)
    out = {}
    for i, reply in result.replies.items():
        if reply.ok:
            value = reply.grade / 3 if checker.prompt.graded and reply.grade is not None else float(reply.verdict or 0)
            out[i] = (float(value), reply.reason)
    return out, result.summary


def method_source(method: str, checker: Generator | None = None) -> str:
    """The ``answer_score_source`` a method writes: ``token_f1``, ``exact_match``,
    ``llm_correctness``.

    Example:
        >>> method_source("f1"), method_source("llm")
        ('token_f1', 'llm_correctness')
    """
    if method == "llm":
        graded = checker is not None and checker.prompt.graded
        return "llm_correctness_graded" if graded else "llm_correctness"
    return "token_f1" if method == "f1" else "exact_match"


def apply_scores(records: Sequence[Any], scores: dict[str, tuple[float, str | None]], source: str) -> dict[str, int]:
    """Write ``answer_score``/``answer_score_source`` (and the reason in ``extra``); returns counts.

    Example:
        >>> from rankwise.data.records import CaseRecord
        >>> recs = [CaseRecord("a"), CaseRecord("b")]
        >>> apply_scores(recs, {"a": (1.0, "states it")}, "llm_correctness"), recs[0].extra
        ({'scored': 1, 'unscored': 1}, {'answer_score_reason': 'states it'})
    """
    counts = {"scored": 0, "unscored": 0}
    for r in records:
        got = scores.get(r.id)
        if got is None:
            counts["unscored"] += 1
            continue
        r.answer_score, r.answer_score_source = got[0], source
        if got[1]:
            r.extra["answer_score_reason"] = got[1]
        counts["scored"] += 1
    return counts


@dataclass
class UtilityRun:
    """What :func:`utility_verdicts` did: verdict counts, and the answer and check calls' summaries.
    """

    counts: dict[str, int]
    answers: GenSummary
    checks: GenSummary | None = None


def utility_verdicts(records: Sequence[Any], generator: Generator, *, score: str = "f1",
                     checker: Generator | None = None, threshold: float = 0.5, graded: bool = False,
                     relevant_from: int = 2, source: str = "utility",
                     progress: Callable[[int], None] | None = None) -> UtilityRun:
    """eRAG utility verdicts into the records (``chunk.verdicts[source]``): the generator answers
    from each chunk alone, the answer is scored (``f1``, ``em``, ``llm``) and the score becomes the
    verdict (:func:`~rankwise.relevance.utility.attach_utility`). When the run stops early (endpoint
    gone, Ctrl-C) the verdicts had are written into the records before the exception goes on (with
    ``score="llm"`` nothing more is called: the answers had are in the cache for the rerun).

    Example (offline: the calls a run would make, one per chunk, as ``rankwise utility --dry-run`` counts
    them; ``utility_verdicts(records, gen, score="em")`` makes them and fills ``verdicts("utility")``):
        >>> from rankwise.data.records import as_records
        >>> from rankwise.llm.client import Endpoint
        >>> from rankwise.llm.generate import Generator, load_gen_prompt
        >>> from rankwise.relevance.utility import utility_requests
        >>> records = as_records(
        ...     [
        ...         {
        ...             "id": "q1",
        ...             "question": "What does BM25 rank by?",
        ...             "reference": "Term frequency.",
        ...             "retrieved_contexts": [
        ...                 "BM25 ranks by term frequency.",
        ...                 "Dense models embed.",
        ...             ],
        ...         }
        ...     ]
        ... )
        >>> gen = Generator(
        ...     Endpoint("qwen2.5:7b", "http://127.0.0.1:9/v1"), load_gen_prompt("answer")
        ... )
        >>> plan = gen.plan(utility_requests(records, gen.prompt))
        >>> plan.requests, plan.calls
        (2, 2)
    """
    from rankwise.llm.generate import GenerationInterrupted, GenerationStopped
    from rankwise.relevance.utility import attach_utility, utility_requests

    requests = utility_requests(records, generator.prompt)
    meta = {"model": generator.endpoint.model, "prompt_version": generator.prompt.prompt_version, "score": score}
    by_case = {r.id: r for r in records}

    def attach(result: GenResult) -> UtilityRun:
        items = []
        for req in requests:
            reply = result.replies[req.id]
            if reply.ok:
                rec = by_case[req.id.rsplit("\x1f", 1)[0]]
                items.append((req.id, rec.question, rec.reference, reply.text))
        scores, checks = score_responses(items, score, checker=checker)
        counts = attach_utility(records, {i: v for i, (v, _) in scores.items()}, threshold=threshold,
                                graded=graded, relevant_from=relevant_from,
                                errors={i: r.error or r.status for i, r in result.replies.items() if not r.ok},
                                answers={i: r.text for i, r in result.replies.items()}, meta=meta, source=source)
        return UtilityRun(counts, result.summary, checks)

    try:
        result = generator.run(requests, progress)
    except (GenerationStopped, GenerationInterrupted) as exc:
        if exc.result.summary.ok and score != "llm":  # no more calls once stopped: LLM checks wait for the rerun
            attach(exc.result)
        raise
    return attach(result)
