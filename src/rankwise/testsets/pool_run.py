"""Pooling: completing a generated test set's labels with the LLM judge, TREC style.

A generated question has one known source, but other chunks may answer it too; a system that finds
them is punished unless they are labelled. For each question, the union of the top ``k`` chunks of
several systems (RAG test sets with retrieved spans, as ``rankwise run --rag-out`` writes) is taken;
chunks that overlap a reference span already are labelled; every other chunk is judged by the LLM
judge (reference mode: question, reference answer, chunk; cached) and the relevant ones are added to
``reference_contexts`` as spans. ``judged@k`` (share of a system's top k that carries a label) is
reported per system before and after, so users see how complete the labels are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._words import system_stem
from rankwise.data.text import iter_json_lines
from rankwise.errors import InputError
from rankwise.llm.config import LLMConfig

__all__ = ["PoolSummary", "pool", "read_span_runs", "judged_at"]


@dataclass
class PoolSummary:
    """What pooling did: chunks in the pools, already labelled, judged, found relevant; judged@k per
    system."""

    questions: int = 0
    pooled: int = 0
    labelled: int = 0
    judged: int = 0
    relevant: int = 0
    failed: int = 0
    calls: int = 0
    cached: int = 0
    cost: float | None = None
    k: int = 10
    judged_before: dict[str, float] = field(default_factory=dict)
    judged_after: dict[str, float] = field(default_factory=dict)
    out: str = ""
    plan: dict[str, Any] | None = None  # --dry-run: what judging would cost

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rows(path: str | PathLike) -> list[tuple[int, dict]]:
    out = []
    for number, obj in iter_json_lines(Path(path)):
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", source=path, line=number)
        out.append((number, obj))
    return out


def _case_id(obj: dict, path: Any, number: int) -> str:
    for key in ("id", "query_id", "qid", "question_id", "case_id"):
        if obj.get(key) is not None:
            return str(obj[key])
    raise InputError("no id", source=path, line=number, field="id")


def read_span_runs(path: str | PathLike, k: int) -> dict[str, list[tuple[str, int, int, str]]]:
    """``{case id: [(doc_id, start, end, text), ...]}``: the top ``k`` retrieved spans of each case
    of a RAG test set (``retrieved_contexts`` objects with ``doc_id``, ``start``, ``end``)."""
    out: dict[str, list[tuple[str, int, int, str]]] = {}
    for number, obj in _rows(path):
        cid = _case_id(obj, path, number)
        spans = []
        for i, c in enumerate((obj.get("retrieved_contexts") or [])[:k]):
            if not isinstance(c, dict) or not all(isinstance(c.get(f), int) for f in ("start", "end")) \
                    or not isinstance(c.get("doc_id"), str):
                raise InputError("pooling needs retrieved spans: objects with doc_id, start and end (as "
                                 "`rankwise run --rag-out` writes)", source=path, line=number,
                                 field=f"retrieved_contexts[{i}]")
            spans.append((c["doc_id"], c["start"], c["end"], str(c.get("text") or "")))
        out[cid] = spans
    return out


def _overlaps(span: tuple[str, int, int], refs: list[tuple[str, int, int]]) -> bool:
    return any(d == span[0] and s < span[2] and span[1] < e for d, s, e in refs)


def judged_at(runs: dict[str, dict[str, list[tuple]]], labelled: dict[str, list[tuple[str, int, int]]],
              k: int) -> dict[str, float]:
    """Per system, the registered ``judged@k``: a retrieved span counts as judged when it overlaps a
    labelled span of its case (a reference span, or a span the judge has seen).

    Example:
        >>> judged_at(
        ...     {"bm25": {"q": [("d", 0, 10, "t"), ("d", 50, 60, "u")]}}, {"q": [("d", 5, 8)]}, 10
        ... )
        {'bm25': 0.5}
    """
    from rankwise.metrics.engine import evaluate

    out = {}
    for name, run in runs.items():
        qrels: dict[str, dict[str, int]] = {}
        ranked: dict[str, list[str]] = {}
        for cid, spans in run.items():
            ids = [f"{d}#{s}-{e}" for d, s, e, *_ in spans[:k]]
            ranked[cid] = list(dict.fromkeys(ids))
            qrels[cid] = {i: 1 for i, sp in zip(ids, spans, strict=True) if _overlaps(sp[:3], labelled.get(cid, []))}
            if not qrels[cid]:
                qrels[cid] = {"<none>": 1}  # a case with no label at all: every retrieved span unjudged
        result = evaluate(qrels, ranked, [f"judged@{k}"])
        out[name] = round(float(result.mean[f"judged@{k}"]), 4)
    return out


def pool(testset: str | PathLike, runs: list[str | PathLike], *, out: str | PathLike, k: int = 10,
         config: LLMConfig | str | PathLike | None = None, max_cost: float | None = None,
         names: list[str] | None = None, quiet: bool = True, dry_run: bool = False, **llm: Any) -> PoolSummary:
    """Judge the unlabelled chunks of the systems' top ``k`` and write ``testset`` with the relevant
    ones added to ``reference_contexts`` (and every judged span in ``pool_judged``) to ``out``.
    ``dry_run``: only count the pool and estimate the judge's calls, tokens and money
    (``summary.plan``), call nothing. Ctrl-C or SIGTERM while judging: ``out`` is written with the
    verdicts had, then ``JudgeInterrupted`` (its ``summary`` set) is raised; the same call again
    judges only the rest (the verdicts are cached). The judge (reference mode, ``prompt``: a
    prompt-template file) and its call policy (``concurrency``, ``rpm``, ``timeout``,
    ``max_retries``, ``max_calls``, ``max_cost`` (needs prices): chunks past a cap stay unjudged,
    are counted as failed, and the next run judges them) come from ``config``: the one
    :class:`~rankwise.llm.config.LLMConfig` (as ``rankwise judge`` resolves it,
    :func:`~rankwise.llm.config.resolve_llm_config`), passed whole; or, for Python callers, a config
    file path with keywords for the rest (``model``, ``base_url``, ``cache``, ``prompt``,
    ``concurrency``, ...).

    Example (``dry_run``: the pool counted and the judging priced, nothing called or written; without it
    the same call judges the one unlabelled span and writes ``pooled.jsonl``):
        >>> import json, os, shutil, tempfile
        >>> tmp = tempfile.mkdtemp()
        >>> def jsonl(name, row):
        ...     with open(os.path.join(tmp, name), "w") as fh:
        ...         fh.write(json.dumps(row))
        ...     return os.path.join(tmp, name)
        >>> bm25_ranks = {
        ...     "doc_id": "d1",
        ...     "start": 0,
        ...     "end": 22,
        ...     "text": "BM25 ranks by term frequency",
        ... }
        >>> dense_embeds = {"doc_id": "d2", "start": 0, "end": 18, "text": "Dense models embed"}
        >>> testset = jsonl(
        ...     "testset.jsonl",
        ...     {
        ...         "id": "q1",
        ...         "question": "What is BM25?",
        ...         "reference": "A ranking function.",
        ...         "reference_contexts": [bm25_ranks],
        ...     },
        ... )
        >>> runs = [
        ...     jsonl("bm25.jsonl", {"id": "q1", "retrieved_contexts": [bm25_ranks, dense_embeds]}),
        ...     jsonl("dense.jsonl", {"id": "q1", "retrieved_contexts": [dense_embeds]}),
        ... ]
        >>> s = pool(
        ...     testset,
        ...     runs,
        ...     out=os.path.join(tmp, "pooled.jsonl"),
        ...     k=10,
        ...     dry_run=True,
        ...     model="m",
        ...     base_url="http://127.0.0.1:9/v1",
        ...     cache=os.path.join(tmp, "judge.sqlite"),
        ...     env={},
        ... )
        >>> s.pooled, s.labelled, s.plan["chunks"], s.plan["calls"], s.judged_before
        (2, 1, 1, 1, {'bm25': 0.5, 'dense': 0.0})
        >>> shutil.rmtree(tmp)
    """
    from rankwise.llm.config import as_llm_config
    from rankwise.relevance.llm_judge import JudgeCase, PromptSettings

    if k < 1:
        raise InputError(f"k must be >= 1, got {k}", field="k")
    if not runs:
        raise InputError("give at least one run (a RAG test set with retrieved spans)")
    cases = _rows(testset)
    labels = list(names) if names else [system_stem(r) for r in runs]
    labels = [n if n not in labels[:i] else f"{n}#{i + 1}" for i, n in enumerate(labels)]
    systems = {name: read_span_runs(r, k) for name, r in zip(labels, runs, strict=True)}
    refs, by_id = _reference_spans(cases, testset)
    summary = PoolSummary(questions=len(cases), k=k, out=str(out))
    summary.judged_before = judged_at(systems, refs, k)
    to_judge = _unlabelled(by_id, systems, refs, summary)
    cfg = as_llm_config(config, **llm)
    settings = PromptSettings(mode="reference", prompt_file=cfg.settings.prompt_file)
    judge_cases = [JudgeCase(cid, by_id[cid].get("user_input") or by_id[cid].get("question"),
                             [t for *_, t in spans], reference=by_id[cid].get("reference"))
                   for cid, spans in to_judge.items()]
    if dry_run:
        summary.plan = _plan_judging(cfg, settings, judge_cases)
        return summary
    labelled = {cid: list(spans) for cid, spans in refs.items()}
    extra: dict[str, list[dict]] = {}
    judged: dict[str, list[dict]] = {}
    interrupted = None
    if judge_cases:
        interrupted = _judge_pool(cfg, settings, judge_cases, to_judge, summary, labelled, extra, judged,
                                  max_cost=max_cost, quiet=quiet)
    summary.judged_after = judged_at(systems, labelled, k)
    provenance = {"k": k, "systems": labels, "judge_model": cfg.endpoint.model}
    _write_pooled(cases, testset, out, extra, judged, provenance)
    if interrupted is not None:
        interrupted.summary = summary
        raise interrupted
    return summary


def _reference_spans(cases: list[tuple[int, dict]], testset: Any
                     ) -> tuple[dict[str, list[tuple[str, int, int]]], dict[str, dict]]:
    """Each case's reference spans ``(doc_id, start, end)`` and its row, by case id."""
    refs: dict[str, list[tuple[str, int, int]]] = {}
    by_id: dict[str, dict] = {}
    for number, obj in cases:
        cid = _case_id(obj, testset, number)
        spans = []
        for i, r in enumerate(obj.get("reference_contexts") or []):
            if not isinstance(r, dict) or not isinstance(r.get("start"), int) or not isinstance(r.get("doc_id"), str):
                raise InputError("pooling needs reference spans ({text, doc_id, start, end}), as rankwise synth "
                                 "writes", source=testset, line=number, field=f"reference_contexts[{i}]")
            spans.append((r["doc_id"], r["start"], r["end"]))
        refs[cid] = spans
        by_id[cid] = obj
    return refs, by_id


def _unlabelled(by_id: dict[str, dict], systems: dict[str, dict[str, list[tuple]]],
                refs: dict[str, list[tuple[str, int, int]]], summary: PoolSummary
                ) -> dict[str, list[tuple[str, int, int, str]]]:
    """The pooled spans no reference span overlaps, by case (``summary.pooled`` and ``labelled``
    counted)."""
    to_judge: dict[str, list[tuple[str, int, int, str]]] = {}
    for cid in by_id:
        seen: dict[tuple[str, int, int], str] = {}
        for run in systems.values():
            for d, s, e, text in run.get(cid, []):
                seen.setdefault((d, s, e), text)
        summary.pooled += len(seen)
        for span, text in seen.items():
            if _overlaps(span, refs[cid]):
                summary.labelled += 1
            else:
                to_judge.setdefault(cid, []).append((*span, text))
    return to_judge


def _plan_judging(cfg: LLMConfig, settings: Any, judge_cases: list) -> dict[str, Any]:
    """``dry_run``: what judging the pool would take (chunks, cached, calls, tokens, cost); nothing
    is called."""
    from rankwise.llm.cache import ResponseCache
    from rankwise.relevance.llm_judge import Judge

    with ResponseCache(cfg.cache) as store:
        plan = Judge.from_config(cfg, store, settings=settings).plan(judge_cases)
    return {"chunks": plan.chunks, "cached": plan.cached, "calls": plan.calls,
            "prompt_tokens": plan.prompt_tokens, "completion_tokens": plan.completion_tokens, "cost": plan.cost}


def _judge_pool(cfg: LLMConfig, settings: Any, judge_cases: list, to_judge: dict[str, list[tuple]],
                summary: PoolSummary, labelled: dict[str, list], extra: dict[str, list[dict]],
                judged: dict[str, list[dict]], *, max_cost: float | None, quiet: bool) -> Any:
    """Judge the unlabelled spans; the verdicts go to ``labelled``, ``extra`` (relevant ones) and
    ``judged``, the counts to ``summary``. Returns the ``JudgeInterrupted`` caught (Ctrl-C /
    SIGTERM), else None."""
    from rankwise.llm.cache import ResponseCache
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import Judge, JudgeInterrupted

    interrupted: JudgeInterrupted | None = None
    with ResponseCache(cfg.cache) as store:
        judge = Judge.from_config(cfg, store, settings=settings, max_cost=max_cost)
        total = sum(len(c.chunks) for c in judge_cases)
        try:
            with progress("pool: judging", total, quiet=quiet, transient=True) as advance:
                result = judge.run(judge_cases, advance)
        except JudgeInterrupted as exc:  # Ctrl-C / SIGTERM: the verdicts had go to OUT, then it is raised
            interrupted, result = exc, exc.result
    s = result.summary
    summary.calls, summary.cached, summary.cost = s.requests - s.retries, s.cached, s.cost
    summary.failed = s.failed + s.missing
    for cid, spans in to_judge.items():
        for (d, st, en, text), v in zip(spans, result.verdicts[cid], strict=True):
            if v.status != "ok":
                continue
            summary.judged += 1
            labelled[cid].append((d, st, en))
            judged.setdefault(cid, []).append({"doc_id": d, "start": st, "end": en, "verdict": v.verdict,
                                               "reason": v.reason})
            if v.verdict:
                summary.relevant += 1
                extra.setdefault(cid, []).append({"text": text, "doc_id": d, "start": st, "end": en})
    return interrupted


def _write_pooled(cases: list[tuple[int, dict]], testset: Any, out: str | PathLike, extra: dict[str, list[dict]],
                  judged: dict[str, list[dict]], provenance: dict[str, Any]) -> None:
    """The test set with the relevant spans added and the judged ones listed, written to ``out``
    atomically."""
    from rankwise._atomic import atomic_write

    with atomic_write(out) as fh:
        for _, obj in cases:
            cid = _case_id(obj, testset, 0)
            row = dict(obj)
            if cid in extra:
                row["reference_contexts"] = list(obj.get("reference_contexts") or []) + extra[cid]
            if cid in judged:
                row["pool_judged"] = judged[cid]
                row.setdefault("provenance", {})
                row["provenance"] = {**row["provenance"], "pooled": provenance}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
