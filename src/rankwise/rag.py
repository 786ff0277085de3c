"""``evaluate_rag``: score the retrieved contexts of a RAG test set with verdicts from any source.

Verdicts come from ids, ground-truth text (containment, span, fuzzy), human labels or an LLM judge
(read from records written by ``rankwise judge``). Every verdict is kept per chunk in per-case records
(SPEC §6); metrics are computed from those stored verdicts by the same engine as ``rankwise eval``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.data.checks import case_warnings
from rankwise.data.records import CaseRecord, as_records, load_records, write_records
from rankwise.errors import InputError, warn
from rankwise.metrics.evaluate import EvalResult, evaluate_matrix
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.metrics.registry import Measure, Metric, parse_measures
from rankwise.relevance import SOURCES, TEXT_SOURCES, GroundTruth, judge

__all__ = ["evaluate_rag", "RagResult", "load_records", "write_records", "default_rag_metrics",
           "ACP_NOTE"]

ACP_NOTE = ("acp divides by the relevant chunks retrieved, not by the passages that exist: one relevant "
            "chunk at rank 1 scores 1.0 however much was missed. Read it with recall / context_recall.")


def default_rag_metrics(k: Sequence[int], relevance: str) -> list[str]:
    """hit_rate, precision, recall, f1 at each k; mrr; ndcg, wcp (log), acp, context_recall at the largest k.

    ids mode adds set_precision / set_recall; span mode adds char_recall at each k.
    """
    ks = sorted(set(k))
    top = ks[-1]
    names = [f"{m}@{x}" for m in ("hit_rate", "precision", "recall", "f1") for x in ks]
    names += ["mrr", f"ndcg@{top}", f"wcp@{top}", f"acp@{top}", f"context_recall@{top}"]
    if relevance == "ids":
        names += ["set_precision", "set_recall"]
    if relevance == "span":
        names += [f"char_recall@{x}" for x in ks]
    return names


@dataclass
class RagResult(EvalResult):
    """What :func:`evaluate_rag` returns: an :class:`~rankwise.metrics.EvalResult` plus the records.

    Attributes:
        records: one :class:`~rankwise.data.records.CaseRecord` per case, with every chunk's verdict,
            the passages each chunk matched, each metric's score and the case's status.
        relevance: the verdict source scored.
    """

    records: list[CaseRecord] = field(default_factory=list)
    relevance: str = "containment"

    def write_records(self, path: str | PathLike) -> Path:
        """Write the per-case records as JSON Lines (readable by :func:`load_records`)."""
        return write_records(self.records, path)


def _char_recall_measure(name: str, truth: dict[str, GroundTruth]) -> Measure:
    base, _, k_text = name.partition("@")
    if base != "char_recall" or (k_text and not k_text.isdigit()):
        raise InputError(f"cannot parse {name!r}; write char_recall or char_recall@5", field="metric")
    k = int(k_text) if k_text else None

    def compute(m: RelevanceMatrix, k=None) -> np.ndarray:
        return np.array([truth[q].char_recall.get(k, 0.0) for q in m.query_ids], dtype=np.float64)

    metric = Metric("char_recall", compute, "share of reference-passage characters covered by the top k "
                    "(span mode)")
    return Measure(metric, k)


def _set_measure(measure: Measure, dedup: RelevanceMatrix) -> Measure:
    """The registry's set metric, computed on the duplicate-free id matrix instead of the ranking."""
    inner = measure.metric.compute

    def compute(m: RelevanceMatrix, k=None) -> np.ndarray:
        order = {q: i for i, q in enumerate(dedup.query_ids)}
        values = inner(dedup, None)
        return np.array([values[order[q]] for q in m.query_ids], dtype=np.float64)

    metric = Metric(measure.metric.name, compute, measure.metric.description, cutoff="none",
                    undefined_is_nan=True)
    return Measure(metric, None)


def _grade(v, source: str) -> int:
    if v is None or not v.ok:
        return 0
    if source == "ids":
        return int(v.grade if v.grade is not None else v.verdict)
    if v.verdict != 1:
        return 0
    return int(v.grade) if v.grade is not None and v.grade > 0 else 1


def _matrix(records: list[CaseRecord], source: str, truth: dict[str, GroundTruth],
            relevance_level: int) -> RelevanceMatrix:
    n = len(records)
    depth = max((len(r.chunks) for r in records), default=0)
    width = max((len(truth[r.id].ideal_gains) for r in records), default=0)
    grades = np.zeros((n, depth), dtype=np.int64)
    judged = np.zeros((n, depth), dtype=bool)
    found = np.zeros((n, depth), dtype=np.int64)
    ideal = np.zeros((n, width), dtype=np.int64)
    lengths = np.array([len(r.chunks) for r in records], dtype=np.int64)
    n_rel = np.array([truth[r.id].n_relevant for r in records], dtype=np.int64)
    for i, r in enumerate(records):
        g = [_grade(c.verdicts.get(source), source) for c in r.chunks]
        grades[i, : len(g)] = g
        judged[i, : len(g)] = True
        lists = r.passages_found.get(source)
        if lists is not None and not truth[r.id].pooled:
            seen: set = set()
            for j, items in enumerate(lists):
                new = [x for x in items if x not in seen]
                seen.update(new)
                found[i, j] = len(new)
        else:
            found[i, : len(g)] = [1 if x >= relevance_level else 0 for x in g]
        gains = truth[r.id].ideal_gains
        ideal[i, : len(gains)] = gains
    rel = judged & (grades >= relevance_level)
    return RelevanceMatrix([r.id for r in records], grades, judged, lengths, n_rel,
                           (judged & ~rel).sum(axis=1), ideal, relevance_level, found, lengths > 0)


def _dedup_matrix(records: list[CaseRecord], truth: dict[str, GroundTruth], relevance_level: int) -> RelevanceMatrix:
    rows = []
    for r in records:
        seen: dict[str, int] = {}
        for c in r.chunks:
            v = c.verdicts.get("ids")
            key = (v.meta.get("key") if v is not None else None) or c.id or c.doc_id
            if key is None or key in seen:
                continue
            seen[key] = _grade(v, "ids")
        rows.append(list(seen.values()))
    m = RelevanceMatrix.from_verdicts({r.id: row for r, row in zip(records, rows, strict=True)},
                                      n_relevant=[truth[r.id].n_relevant for r in records],
                                      relevance_level=relevance_level)
    return m


def evaluate_rag(testset: Any, relevance: str = "containment", *, labels: Any = None,
                 k: int | Iterable[int] = (1, 3, 5, 10), metrics: Iterable[str] | str | None = None,
                 min_overlap: float = 0.5, threshold: float = 0.8, id_field: str | None = None,
                 relevance_level: int = 1, unscorable: str = "zero", incomplete: str = "zero",
                 progress: bool = False) -> RagResult:
    """Score a RAG test set's retrieved contexts against verdicts from one source.

    Args:
        testset: a test set (path, DataFrame, dict of lists, list of dicts, :class:`TestSet`) or per-case
            records (a records JSONL path or a list of :class:`CaseRecord`, e.g. from ``rankwise judge``).
        relevance: ``containment`` (default), ``span``, ``fuzzy``, ``ids``, ``human`` (needs ``labels``
            unless the records hold human verdicts), ``llm`` (verdicts already in the records) or any
            other source name present in the records.
        labels: human labels (CSV/JSONL path or rows) for ``human``; graded qrels for ``ids``.
        k: cutoffs for the default metrics.
        metrics: metric names (``wcp@5``, ``acp(ragas_compat=true)@5``, ``char_recall@5`` ...); default
            :func:`default_rag_metrics`.
        min_overlap: span mode: share of the passage (or of the chunk) a chunk must overlap.
        threshold: fuzzy mode: similarity from which a chunk matches a passage.
        id_field: ids mode: compare ``id`` or ``doc_id`` of chunks (default: id, else doc_id).
        relevance_level: grade from which an id/qrels grade counts as relevant.
        unscorable: cases with no ground truth or no retrieved chunk: ``zero`` (score 0, kept in the means,
            SPEC §1) or ``skip`` (left out of the means). Listed in the summary either way.
        incomplete: cases with failed or missing verdicts: ``zero`` (those chunks count as not relevant,
            the case stays in the means) or ``skip``. Listed in the summary either way.
        progress: show a progress bar (stderr) while judging long test sets.

    Example:
        >>> r = evaluate_rag([{"id": "q1", "retrieved_contexts": ["Paris is the capital.", "Rome."],
        ...                    "reference_contexts": ["paris is the capital"]}], k=2)
        >>> r.mean["precision@2"], r.records[0].verdicts("containment")
        (0.5, [1, 0])
    """
    for name, value in (("unscorable", unscorable), ("incomplete", incomplete)):
        if value not in ("zero", "skip"):
            raise InputError(f"{name} must be 'zero' or 'skip', not {value!r}", field=name)
    ks = [k] if isinstance(k, int) else sorted({int(x) for x in k})
    if not ks or min(ks) < 1:
        raise InputError("cutoffs k must be integers >= 1", field="k")
    records = as_records(testset)
    if not records:
        raise InputError("the test set holds no case")
    present = {s for r in records for s in r.sources()}
    if relevance not in SOURCES and relevance not in present:
        raise InputError(f"unknown relevance {relevance!r}; use one of {list(SOURCES)} or a verdict source "
                         f"present in the records ({sorted(present) or 'none'})", field="relevance")
    if relevance == "human" and labels is None and "human" not in present:
        raise InputError("relevance 'human' needs labels (--labels FILE: CSV/JSONL of query_id, chunk_id or "
                         "rank, verdict, type)", field="labels")
    if relevance not in TEXT_SOURCES and relevance not in ("ids", "human") and relevance not in present:
        raise InputError(f"no {relevance!r} verdicts in the records; produce them first (for the LLM judge: "
                         f"`rankwise judge TESTSET --records OUT.jsonl`, then `rankwise eval-rag OUT.jsonl "
                         f"--relevance llm`)", field="relevance")

    metric_names = ([metrics] if isinstance(metrics, str) else list(metrics)) if metrics else \
        default_rag_metrics(ks, relevance)
    char_names = [m for m in metric_names if str(m).startswith("char_recall")]
    if char_names and relevance != "span":
        raise InputError("char_recall needs span relevance (--relevance span)", field="metric")
    char_ks = sorted({int(n.partition("@")[2]) for n in char_names if n.partition("@")[2].isdigit()})

    truth = judge(records, relevance, labels=labels, min_overlap=min_overlap, threshold=threshold,
                  id_field=id_field, relevance_level=relevance_level, ks=char_ks, progress=progress)

    # which cases enter the means
    unscorable_cases: dict[str, str] = {}
    incomplete_cases: dict[str, str] = {}
    for r in records:
        status = r.status.get(relevance, "ok")
        if status.startswith("unscorable"):
            unscorable_cases[r.id] = status.split(": ", 1)[1]
        elif status.startswith("incomplete"):
            incomplete_cases[r.id] = status.split(": ", 1)[1]
    if len(unscorable_cases) == len(records):
        reasons = sorted(set(unscorable_cases.values()))
        hint = (" (span needs doc_id/start/end on chunks and reference passages; try containment or fuzzy)"
                if relevance == "span" else "")
        raise InputError(f"no case can be scored with relevance {relevance!r}: {'; '.join(reasons)}{hint}",
                         source=testset if isinstance(testset, (str, PathLike)) else None, field="relevance")
    skip = set()
    if unscorable == "skip":
        skip |= set(unscorable_cases)
    if incomplete == "skip":
        skip |= set(incomplete_cases)
    scored = sorted((r for r in records if r.id not in skip), key=lambda r: r.id.encode("utf-8"))
    if not scored:
        raise InputError(f"no case can be scored with relevance {relevance!r}: "
                         f"{len(unscorable_cases)} unscorable, {len(incomplete_cases)} incomplete")

    matrix = _matrix(scored, relevance, truth, relevance_level)
    measures: list[Measure] = []
    dedup = None
    for name in metric_names:
        if str(name).startswith("char_recall"):
            measures.append(_char_recall_measure(str(name), truth))
            continue
        (measure,) = parse_measures([name])
        if relevance == "ids" and measure.metric.name in ("set_precision", "set_recall"):
            if dedup is None:
                dedup = _dedup_matrix(scored, truth, relevance_level)
            measure = _set_measure(measure, dedup)
        measures.append(measure)

    summary = _summary(records, relevance, scored, unscorable_cases, incomplete_cases, unscorable, incomplete,
                       truth, min_overlap=min_overlap, threshold=threshold, id_field=id_field,
                       relevance_level=relevance_level)
    for message in case_warnings(records, [*ks, *(m.k for m in measures)]):
        warn(message, summary=summary)
    result = evaluate_matrix(matrix, measures, summary, run_name=f"eval-rag ({relevance})")

    for r in records:
        if r.id in skip:
            r.scores[relevance] = {m.name: None for m in measures}
        else:
            r.scores[relevance] = result.per_query[r.id]
    return RagResult(result.measures, result.per_query, result.mean, result.summary, result.run_name,
                     records=records, relevance=relevance)


def _summary(records, relevance, scored, unscorable_cases, incomplete_cases, unscorable, incomplete, truth,
             **params) -> dict:
    counts = {"ok": 0, "failed": 0, "missing": 0}
    for r in records:
        for c in r.chunks:
            v = c.verdicts.get(relevance)
            counts["missing" if v is None else v.status] = counts.get("missing" if v is None else v.status, 0) + 1
    if relevance in TEXT_SOURCES:
        basis = "reference passages (a passage counts once, however many chunks match it)"
    elif relevance == "ids":
        basis = "reference ids / qrels entries at or above the relevance level"
    else:
        basis = ("the chunks judged relevant (pooled, as trec_eval qrels): recall shows how near the top the "
                 "relevant chunks sit, not coverage of a reference")
    kept = {k: v for k, v in params.items() if v is not None}
    if relevance != "span":
        kept.pop("min_overlap", None)
    if relevance != "fuzzy":
        kept.pop("threshold", None)
    if relevance != "ids":
        kept.pop("id_field", None)
        kept.pop("relevance_level", None)
    return {
        "relevance": relevance,
        "cases": len(records),
        "evaluated": len(scored),
        "unscorable": len(unscorable_cases),
        "unscorable_cases": unscorable_cases,
        "unscorable_treatment": ("scored 0 on every metric and kept in the means (SPEC §1)" if unscorable == "zero"
                                 else "left out of the means"),
        "incomplete": len(incomplete_cases),
        "incomplete_cases": incomplete_cases,
        "incomplete_treatment": ("failed/missing verdicts counted as not relevant; the case stays in the means"
                                 if incomplete == "zero" else "left out of the means"),
        "verdicts": counts,
        "recall_basis": basis,
        "parameters": kept,
        "notes": [ACP_NOTE],
    }
