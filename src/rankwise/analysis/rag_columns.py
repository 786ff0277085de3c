"""``eval-rag`` by columns: a JSON Lines test set scored and diagnosed a block of cases at a time.

:func:`evaluate_rag_diagnosed` is what ``rankwise eval-rag`` calls: the scores of
:func:`~rankwise.metrics.rag.evaluate_rag` with the unanswerable-case view
(:func:`~rankwise.analysis.no_answer.with_no_answer`), the failure classes and the headroom
(:func:`~rankwise.analysis.diagnosis.diagnose`). When nothing asks for per-case records and the
source is ``ids`` or ``span``, it first tries :func:`evaluate_rag_columns`: the file read as
columns (:mod:`rankwise.data.testset_columns`), verdicts as array operations, the matrix built from
the arrays, per-case values kept and the means taken as ``evaluate_rag`` takes them — the same
numbers to the last digit, in memory bounded by a block of the file (plus a few numbers per case).
Anything that path does not read exactly (another format or field, a bad line, a case the rules
would need texts for) or that ``evaluate_rag`` would refuse or explain goes to the object path,
which reads it, says it, and names file, line and field.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> rows = [{"id": "q1", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]},
    ...         {"id": "q2", "retrieved_context_ids": ["c"], "reference_context_ids": ["d"]}]
    >>> _ = path.write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> r = evaluate_rag_columns(path, "ids", metrics=["mrr", "hit_rate@1"])
    >>> r.mean, r.summary["failure_classes"]["by_case"]
    ({'mrr': 0.25, 'hit_rate@1': 0.0}, {'q1': 'ranked too low', 'q2': 'not retrieved'})
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.analysis.failures import FAILURE_CLASSES
from rankwise.analysis.failures_columns import classify_columns
from rankwise.analysis.headroom import Headroom
from rankwise.analysis.headroom_columns import best_ranks, moved_cases
from rankwise.analysis.no_answer import no_answer_view
from rankwise.data.testset_columns import DEFAULT_BLOCK_BYTES, NotColumnar, iter_case_columns
from rankwise.errors import InputError
from rankwise.metrics.matrix_columns import matrix_from_columns
from rankwise.metrics.rag import RagResult, checked_cutoffs, default_rag_metrics
from rankwise.metrics.rag_columns import RagColumns, RunningMeans, case_values, columns_measures
from rankwise.relevance.column_sources import COLUMN_SOURCES, judge_columns

__all__ = ["evaluate_rag_diagnosed", "evaluate_rag_columns", "columns_apply"]


def columns_apply(testset: Any, relevance: str, *, labels: Any = None, id_field: str | None = None,
                  relevance_level: int = 1, min_overlap: float = 0.5, threshold: float = 0.8,
                  min_evidence_chars: int | None = None, first_stage: Any = None) -> bool:
    """Whether the columnar path may try this run: a JSON Lines file, scored by ids or spans judged
    now, with the default relevance level, no labels and no first stage, and options the object
    path would accept (a bad one is the object path's to report).

    Example:
        >>> columns_apply("cases.jsonl", "ids"), columns_apply("cases.jsonl", "containment")
        (True, False)
    """
    return (isinstance(testset, (str, os.PathLike)) and relevance in COLUMN_SOURCES and labels is None
            and first_stage is None and relevance_level == 1 and min_evidence_chars is None
            and id_field in (None, "id", "doc_id") and 0 < min_overlap <= 1 and 0 < threshold <= 1
            and Path(testset).suffix.lower() not in (".csv", ".tsv", ".json", ".parquet"))


def evaluate_rag_columns(testset: str | os.PathLike, relevance: str, *, k: int | Iterable[int] | None = None,
                         metrics: Iterable[str] | str | None = None, min_overlap: float = 0.5,
                         threshold: float = 0.8, id_field: str | None = None, unscorable: str = "skip",
                         incomplete: str = "zero", progress: bool = False,
                         block_bytes: int = DEFAULT_BLOCK_BYTES) -> RagResult | None:
    """The diagnosed ``evaluate_rag`` result by columns (module docstring), or None when the object
    path must run. Its ``records`` are empty: a command that writes or reads them takes the object
    path. ``block_bytes``: how much of the file is read at a time."""
    if not columns_apply(testset, relevance, id_field=id_field, min_overlap=min_overlap, threshold=threshold):
        return None
    try:
        ks = checked_cutoffs(k, unscorable, incomplete)
        measures = columns_measures(metrics or default_rag_metrics(ks, relevance))
    except InputError:  # the object path says it
        return None
    if measures is None:
        return None
    params = {"min_overlap": min_overlap, "threshold": threshold, "id_field": id_field, "relevance_level": 1,
              "min_evidence_chars": None}
    run = RagColumns(relevance, measures, unscorable=unscorable, incomplete=incomplete, **params)
    cut = max((m.k for m in measures if getattr(m, "k", None)), default=10)  # diagnosis_k
    diagnosis = _Diagnosis(relevance, measures, cut, id_field)
    try:
        for cases in _blocks(testset, block_bytes, progress):
            verdicts = judge_columns(cases, relevance, id_field=id_field, min_overlap=min_overlap)
            scores = run.add(cases, verdicts)
            if run.refused:
                return None
            diagnosis.add(cases, verdicts, scores.scored, scores.values)
    except NotColumnar:
        return None
    result = run.result()
    if result is None:
        return None
    return diagnosis.attach(result, run)


def _blocks(path, block_bytes: int, progress: bool):
    """The file's blocks, with a bar over its bytes for a large file."""
    blocks = iter_case_columns(path, block_bytes=block_bytes)
    try:
        size = os.path.getsize(path)
    except OSError:  # the reader says it is not one it reads; the object reader names the problem
        size = 0
    if not progress or size < 4 * block_bytes:
        yield from blocks
        return
    from rankwise.progress import progress as bar

    done = 0
    with bar("reading cases", size, transient=True) as advance:
        for cases in blocks:
            yield cases
            step = min(block_bytes, size - done)
            done += step
            advance(step)


class _Diagnosis:
    """Failure classes, headroom and the unanswerable view, gathered a block at a time."""

    def __init__(self, source: str, measures: list, k: int, id_field: str | None):
        self.source, self.measures, self.k, self.id_field = source, measures, k, id_field
        self.classes: list[np.ndarray] = []
        self.best = RunningMeans(measures)  # a perfect reranker's means, summed in file order
        self.tops: list[np.ndarray] = []
        self.depth = self.nothing = self.split = self.scored = 0

    def add(self, cases, verdicts, scored: np.ndarray, values: np.ndarray) -> None:
        classes = classify_columns(cases, verdicts, self.k, id_field=self.id_field)
        self.classes.append(classes)
        case = cases.chunk_case()
        score = np.where(np.isnan(cases.chunk_score), -np.inf, cases.chunk_score)
        top = np.full(cases.n, -np.inf)
        np.maximum.at(top, case, score)
        scoreless = np.bincount(case[~np.isnan(cases.chunk_score)], minlength=cases.n) == 0
        top[scoreless & (verdicts.lengths > 0)] = np.nan  # chunks, none with a score: unknown
        self.tops.append(top)
        self.scored += len(scored)
        if not len(scored):
            return
        lengths = verdicts.lengths[scored]
        self.depth = max(self.depth, int(lengths.max()))
        relevant = np.bincount(case[verdicts.grade >= 1], minlength=cases.n) > 0
        self.nothing += int((~relevant[scored]).sum())
        self.split += int((classes[scored] == FAILURE_CLASSES.index("split by chunking")).sum())
        ranks = best_ranks(cases, verdicts)
        moved = np.flatnonzero(moved_cases(cases, ranks)[scored])
        best = values.copy()
        if len(moved):
            matrix = matrix_from_columns(cases, verdicts, scored[moved], rank=ranks, id_field=self.id_field)
            best[moved] = case_values(matrix, self.measures)
        self.best.add(best)

    def attach(self, result: RagResult, run: RagColumns) -> RagResult:
        """``with_no_answer`` and ``diagnose``'s entries in the result's summary."""
        ids = run.ids
        status = np.concatenate(run.status)
        why = np.concatenate(run.why)
        unanswerable = (status == 1) & (why == 1)
        if unanswerable.any():
            tops = np.concatenate(self.tops).tolist()
            tops = [None if math.isnan(t) else t for t in tops]
            flags = unanswerable.tolist()
            view = no_answer_view({q: t for q, t, u in zip(ids, tops, flags, strict=True) if not u},
                                  {q: t for q, t, u in zip(ids, tops, flags, strict=True) if u})
            result.summary["no_answer"] = view.to_json()
        codes = np.concatenate(self.classes)
        by_case = dict(zip(ids, (FAILURE_CLASSES[c] for c in codes.tolist()), strict=True))
        tally = np.bincount(codes, minlength=len(FAILURE_CLASSES))
        result.summary["failure_classes"] = {"k": self.k, "counts": dict(zip(FAILURE_CLASSES, tally.tolist(),
                                                                             strict=True)), "by_case": by_case}
        result.summary["headroom"] = self._headroom(result).to_json()
        return result

    def _headroom(self, result: RagResult) -> Headroom:
        measures = [m for m in result.measures if result.mean.get(m.name) is not None]
        reranked = self.best.result()[0]
        n = self.scored
        return Headroom(self.source, self.depth, {m.name: float(result.mean[m.name]) for m in measures},
                        {m.name: float(reranked[m.name]) for m in measures if reranked[m.name] is not None},
                        self.nothing / n if n else 0.0, self.split / n if n else 0.0, n)


def evaluate_rag_diagnosed(testset: Any, relevance: str = "containment", *, labels: Any = None,
                           k: int | Iterable[int] | None = None, metrics: Iterable[str] | str | None = None,
                           min_overlap: float = 0.5, threshold: float = 0.8, id_field: str | None = None,
                           unscorable: str = "skip", incomplete: str = "zero", progress: bool = False,
                           min_evidence_chars: int | None = None, first_stage: Any = None,
                           records: bool = False, columns: bool = True) -> RagResult:
    """``eval-rag``'s result: :func:`~rankwise.metrics.rag.evaluate_rag`, the unanswerable view, the
    failure classes and the headroom. By columns when it applies (module docstring) and neither
    ``records`` (per-case records wanted: written, sliced or logged) nor ``columns=False`` says
    otherwise; the object path else.

    Example:
        >>> r = evaluate_rag_diagnosed([{"id": "q", "retrieved_context_ids": ["a", "b"],
        ...                              "reference_context_ids": ["b"]}], "ids", k=[1, 2])
        >>> r.mean["mrr"], r.summary["failure_classes"]["by_case"]
        (0.5, {'q': 'hit'})
    """
    if columns and not records and columns_apply(testset, relevance, labels=labels, id_field=id_field,
                                                 min_overlap=min_overlap, threshold=threshold,
                                                 min_evidence_chars=min_evidence_chars, first_stage=first_stage):
        result = evaluate_rag_columns(testset, relevance, k=k, metrics=metrics, min_overlap=min_overlap,
                                      threshold=threshold, id_field=id_field, unscorable=unscorable,
                                      incomplete=incomplete, progress=progress)
        if result is not None:
            return result
    from rankwise.analysis.diagnosis import diagnose
    from rankwise.analysis.no_answer import with_no_answer
    from rankwise.metrics.rag import evaluate_rag

    result = evaluate_rag(testset, relevance, labels=labels, k=k, metrics=metrics, min_overlap=min_overlap,
                          threshold=threshold, id_field=id_field, unscorable=unscorable, incomplete=incomplete,
                          progress=progress, min_evidence_chars=min_evidence_chars)
    with_no_answer(result)  # unanswerable cases: how well the top score tells them apart (summary["no_answer"])
    diagnose(result, first_stage=first_stage)
    return result
