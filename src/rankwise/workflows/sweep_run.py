"""``rankwise sweep``: which chunking and which retriever? A grid of chunk size x overlap x splitter
x retriever over one corpus and one test set, every configuration scored by the same verdicts, one
table with the best configuration per metric and paired tests against a baseline configuration.

Two levels. With a span-labelled test set (the bundled Kestrel set, or one from ``rankwise synth``)
each configuration's top ``k`` chunks are judged against the reference passages (``span`` by
default). With document-level judgements (``qrels``, or a BEIR folder such as Cranfield) each
configuration's chunks are lifted to documents (a document ranks where its best chunk ranks, as
``rankwise run --doc-level`` writes them), the top ``k`` documents are judged by id against the
graded qrels (``ids``), and the numbers are those ``rankwise eval`` prints for that run: a chunking
is judged by how well it ranks the documents the qrels know.

The grid, the splitters and retrievers, and the two levels of scoring: docs/adapters.md, "`rankwise
    sweep`".

Example:
    >>> from rankwise.workflows.sweep_run import sweep
    >>> res = sweep("kestrel", chunk_sizes=[400, 800], retrievers=["bm25"], progress=False,
    ...             permutations=1000)  # doctest: +SKIP
    >>> res.best["mrr"]  # doctest: +SKIP
    ('bm25 recursive 400/50', 0.61)
    >>> cran = sweep(
    ...     "tests/fixtures/cranfield", chunk_sizes=[0, 300], overlaps=[0], progress=False
    ... )  # doctest: +SKIP
    >>> cran.means["bm25 whole documents"]["ndcg@10"]  # doctest: +SKIP
    0.3729788661496664
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._atomic import atomic_write_text
from rankwise.data.finite import finite_json
from rankwise.data.records import CaseRecord, ChunkRecord, write_records
from rankwise.errors import InputError, warn

__all__ = ["SPLITTERS", "SWEEP_RETRIEVERS", "SweepConfig", "SweepResult", "SweepSpec", "run_sweep", "sweep", "sweep_metrics"]

SPLITTERS: dict[str, tuple[str, ...]] = {
    "recursive": ("paragraph", "line", "sentence", "word"),
    "sentence": ("sentence", "word"),
    "fixed": (),
}
SWEEP_RETRIEVERS = ("bm25", "dense", "hybrid", "bm25+rerank", "dense+rerank", "hybrid+rerank")


@dataclass(frozen=True)
class SweepConfig:
    """One cell of the grid.

    Example:
        >>> SweepConfig(500, 50, "recursive", "bm25").label
        'bm25 recursive 500/50'
    """

    chunk_size: int
    chunk_overlap: int
    splitter: str
    retriever: str

    @property
    def label(self) -> str:
        """``retriever splitter size/overlap``, or ``retriever whole documents`` for chunk size 0.
        """
        if self.chunk_size == 0:
            return f"{self.retriever} whole documents"
        return f"{self.retriever} {self.splitter} {self.chunk_size}/{self.chunk_overlap}"

    @property
    def chunking(self) -> tuple[int, int, str]:
        return (self.chunk_size, self.chunk_overlap, self.splitter)

    @property
    def chunking_label(self) -> str:
        """The label without the retriever: ``splitter size/overlap`` or ``whole documents``."""
        return self.label[len(self.retriever) + 1:]

    def to_dict(self) -> dict:
        return {"label": self.label, "chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap,
                "splitter": self.splitter, "retriever": self.retriever}


def sweep_metrics(k: int = 10, relevance: str = "span", *, documents: bool = False) -> list[str]:
    """The default metrics of a sweep: hit_rate@1, mrr, precision@5, recall@k, ndcg@k (+
    char_recall@k in span); for documents judged by qrels, trec_eval's usual ndcg@10, map, mrr,
    precision@10 and recall@k.

    Example:
        >>> sweep_metrics(10)
        ['hit_rate@1', 'mrr', 'precision@5', 'recall@10', 'ndcg@10', 'char_recall@10']
        >>> sweep_metrics(100, "ids", documents=True)
        ['ndcg@10', 'map', 'mrr', 'precision@10', 'recall@100']
    """
    if documents:
        return [f"ndcg@{min(10, k)}", "map", "mrr", f"precision@{min(10, k)}", f"recall@{k}"]
    names = ["hit_rate@1", "mrr", f"precision@{min(5, k)}", f"recall@{k}", f"ndcg@{k}"]
    return names + ([f"char_recall@{k}"] if relevance == "span" else [])


@dataclass
class SweepResult:
    """What :func:`sweep` gives.

    Attributes:
        configs: the configurations run, grid order (the first is the default baseline).
        metrics: metric names, table columns.
        means: label -> {metric: mean over the cases}.
        best: metric -> (label, mean) of the best configuration (first in grid order on a tie).
        comparison: the paired comparison against the baseline (None with one configuration).
        baseline: the baseline's label.
        records: label -> per-case records (chunks, verdicts, scores).
        info: label -> {"chunks", "reused_from", "timings"}; ``skipped``: configurations left out
            and why.
        settings, timings: what was run, seconds per step.
        diagnoses: label -> {"failure_classes", "headroom"} of the cell (docs/failures.md).
    """

    configs: list[SweepConfig]
    metrics: list[str]
    means: dict[str, dict[str, float]]
    best: dict[str, tuple[str, float]]
    comparison: Any
    baseline: str
    records: dict[str, list[CaseRecord]]
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    diagnoses: dict[str, dict[str, Any]] = field(default_factory=dict)

    def significance(self, label: str, metric: str) -> tuple[float | None, float | None, bool]:
        """(delta vs baseline, adjusted p-value, significant) of one cell; (None, None, False) for
        the baseline."""
        if self.comparison is None or label == self.baseline:
            return None, None, False
        c = self.comparison.comparison(label, metric)
        p = None if c.p_adjusted is None or (isinstance(c.p_adjusted, float) and math.isnan(c.p_adjusted)) \
            else float(c.p_adjusted)
        return float(c.delta), p, bool(c.significant)

    def rows(self) -> list[dict[str, Any]]:
        """One row per configuration: its settings, chunks, seconds, and per metric mean, delta, p,
        significant."""
        out = []
        for cfg in self.configs:
            row: dict[str, Any] = {**cfg.to_dict(), "chunks": self.info[cfg.label]["chunks"],
                                   "seconds": round(self.info[cfg.label]["timings"].get("total", 0.0), 3),
                                   "reused_from": self.info[cfg.label].get("reused_from")}
            for m in self.metrics:
                delta, p, sig = self.significance(cfg.label, m)
                row[m] = self.means[cfg.label][m]
                row[f"{m} delta"] = delta
                row[f"{m} p"] = p
                row[f"{m} significant"] = sig
            out.append(row)
        return out

    def grid(self) -> dict[str, Any]:
        """The configurations as a grid: rows = chunkings, columns = retrievers (grid order), cells
        = the configuration labels (a cell skipped or never run is absent), for the report's heat
        map."""
        rows = list(dict.fromkeys(c.chunking_label for c in self.configs))
        cols = list(dict.fromkeys(c.retriever for c in self.configs))
        cells: dict[str, dict[str, str]] = {r: {} for r in rows}
        for c in self.configs:
            cells[c.chunking_label][c.retriever] = c.label
        return {"title": "Chunking \u00d7 retriever", "row_title": "chunking", "column_title": "retriever",
                "rows": rows, "columns": cols, "cells": cells}

    def to_json(self) -> dict[str, Any]:
        """What ``sweep.json`` holds (``generator`` first: the file is recognisably rankwise's)."""
        return {"generator": "rankwise sweep", "settings": self.settings, "baseline": self.baseline,
                "metrics": self.metrics,
                "best": {m: {"config": lab, "mean": v} for m, (lab, v) in self.best.items()},
                "rows": self.rows(), "skipped": [{"config": c, "reason": r} for c, r in self.skipped],
                "timings": self.timings, "files": self.files, **self.failure_summary(),
                **({"budget": self.budget_summary()} if self.settings.get("budgets") else {})}

    def budget_curves(self, metric: str) -> dict[str, dict[int, float]]:
        """Label -> {budget: mean of ``metric`` at that budget} (``sweep(budgets=...)``), grid
        order."""
        unit, budgets = self.settings.get("budget_unit"), self.settings.get("budgets") or []
        return {c.label: {b: self.means[c.label][f"{metric}@{b}{unit}"] for b in budgets} for c in self.configs}

    def budget_summary(self) -> dict[str, Any]:
        """Per budget metric: each configuration's curve, the best configuration at each budget and
        the Pareto front of (budget, quality); empty without budgets."""
        from rankwise.analysis.budget_front import best_at_each_budget, pareto_front

        out: dict[str, Any] = {}
        short = self.short_lists()
        for metric in self.settings.get("budget_metrics") or []:
            curves = self.budget_curves(metric)
            out[metric] = {"curves": {lab: {str(b): v for b, v in c.items()} for lab, c in curves.items()},
                           "best": {str(b): {"config": lab, "mean": v}
                                    for b, (lab, v) in best_at_each_budget(curves).items()},
                           "pareto": [p.__dict__ for p in pareto_front(curves)], "short_lists": short}
        return out

    def short_lists(self) -> dict[str, dict[str, int]]:
        """Label -> {budget: questions whose retrieved list holds less than the budget} (only where
        some do): past a list's end the prompt is empty, which a deeper ``k`` would fill."""
        import math

        unit, budgets = self.settings.get("budget_unit"), self.settings.get("budgets") or []
        out: dict[str, dict[str, int]] = {}
        for c in self.configs:
            sizes = [sum(len(ch.text or "") if unit == "c" else math.ceil(len(ch.text or "") / 4) for ch in r.chunks)
                     for r in self.records[c.label]]
            counts = {str(b): sum(1 for n in sizes if n < b) for b in budgets}
            if any(counts.values()):
                out[c.label] = {b: n for b, n in counts.items() if n}
        return out

    def failure_summary(self) -> dict[str, dict[str, Any]]:
        """``{"failure_classes": {label: ...}, "headroom": {label: ...}}``: each cell's
        (docs/failures.md)."""
        return {"failure_classes": {lab: d["failure_classes"] for lab, d in self.diagnoses.items()},
                "headroom": {lab: d["headroom"] for lab, d in self.diagnoses.items()}}

    def table_text(self) -> str:
        """The grid as plain text: one line per configuration, ``*`` marks the best per metric,
        ``+``/``-`` a significant gain/loss against the baseline (adjusted p < alpha)."""
        width = max(len(c.label) + (11 if c.label == self.baseline else 0) for c in self.configs) + 2
        head = "config".ljust(width) + "".join(m.rjust(16) for m in self.metrics)
        lines = [head, "-" * len(head)]
        for cfg in self.configs:
            cells = []
            for m in self.metrics:
                v = self.means[cfg.label][m]
                _, _, sig = self.significance(cfg.label, m)
                delta, _, _ = self.significance(cfg.label, m)
                mark = ("+" if delta and delta > 0 else "-") if sig else " "
                best = "*" if self.best[m][0] == cfg.label else " "
                cells.append(f"{v:.4f}{mark}{best}".rjust(16))
            name = cfg.label + (" (baseline)" if cfg.label == self.baseline else "")
            lines.append(name.ljust(width) + "".join(cells))
        return "\n".join(lines)


def _load_inputs(corpus: Any, testset: Any, qrels: Any, split: str):
    """(corpus, empty case records, qrels or None, questions left out for want of judgements)."""
    from rankwise.data.questions import records_queries
    from rankwise.retrieval.pipeline import as_corpus

    if testset is None and isinstance(corpus, (str, PathLike)) and Path(corpus).is_dir():
        # a folder without a test set: a BEIR folder, or an error saying what it lacks
        from rankwise.data.corpus import load_beir

        data = load_beir(corpus, split=split)
        if data.qrels is None and qrels is None:
            raise InputError(f"the BEIR folder has no qrels/{split}.tsv; give qrels", source=corpus, field="qrels")
        corpus, testset, qrels = data.corpus, data.queries, data.qrels if qrels is None else qrels
    elif testset is None and isinstance(corpus, (str, PathLike)) and not Path(corpus).exists():
        if isinstance(corpus, PathLike) or any(sep in corpus for sep in ("/", "\\", ".")):
            raise InputError("no such file or folder", source=corpus)
        from rankwise.datasets import bundled_files

        files = bundled_files(corpus)
        corpus, testset = files.corpus, files.questions
    if testset is None:
        raise InputError("give a test set with span-labelled reference passages, a BEIR folder as corpus, or a "
                         "bundled name as corpus", field="testset")
    if isinstance(corpus, (str, PathLike)):
        from rankwise.data.corpus import load_corpus

        corpus = load_corpus(corpus)
    else:
        corpus = as_corpus(corpus)
    if qrels is not None and isinstance(testset, (str, PathLike)):
        from rankwise.data.corpus import load_queries

        testset = load_queries(testset)  # queries JSONL (_id/id, text), a test set's questions, or TSV
    records = records_queries(testset)
    if not records:
        raise InputError("the test set holds no case", field="testset")
    unjudged: list[str] = []
    if qrels is not None:
        from rankwise.data.load import load_qrels

        qrels = load_qrels(qrels)
        judged = set(qrels.queries)
        unjudged = [r.id for r in records if r.id not in judged]
        records = [r for r in records if r.id in judged]
        if not records:
            raise InputError(f"the qrels judge none of the test set's questions (e.g. {unjudged[0]!r})",
                             field="query_id")
    return corpus, records, qrels, unjudged


def _grid(chunk_sizes, overlaps, splitters, retrievers) -> tuple[list[SweepConfig], list[tuple[str, str]]]:
    for s in splitters:
        if s not in SPLITTERS:
            raise InputError(f"unknown splitter {s!r}; use {', '.join(SPLITTERS)}", field="splitter")
    for r in retrievers:
        if r not in SWEEP_RETRIEVERS:
            raise InputError(f"unknown retriever {r!r}; use {', '.join(SWEEP_RETRIEVERS)}", field="retriever")
    for name, values in (("chunk_size", chunk_sizes), ("chunk_overlap", overlaps)):
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"{name} values must be whole numbers >= 0, got {v!r}", field=name)
    configs, skipped = [], []
    for size, overlap, splitter, retriever in itertools.product(chunk_sizes, overlaps, splitters, retrievers):
        cfg = SweepConfig(size, overlap, splitter, retriever)
        if size == 0 and overlap:
            skipped.append((f"{retriever} 0/{overlap}", "whole documents (chunk size 0) take no overlap"))
        elif size == 0 and splitter != splitters[0]:
            skipped.append((f"{retriever} {splitter} 0/0", "whole documents (chunk size 0) take no splitter"))
        elif size and overlap >= size:
            skipped.append((cfg.label, f"overlap {overlap} is not smaller than chunk size {size}"))
        else:
            configs.append(cfg)
    labels = [c.label for c in configs]
    if len(set(labels)) != len(labels):
        raise InputError("the grid repeats a configuration (a value given twice)", field="grid")
    if not configs:
        raise InputError("the grid holds no valid configuration: " + "; ".join(r for _, r in skipped), field="grid")
    return configs, skipped


def _spec(retriever: str, *, model, scorer, rerank_top_n):
    from rankwise.retrieval.pipeline import RetrieverSpec

    base, _, rr = retriever.partition("+")
    if rr and scorer is None:
        raise InputError(f"{retriever!r} needs a reranker: give rerank_model (a cross-encoder folder or cached "
                         "name, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2, or llm:MODEL)", field="rerank_model")
    return RetrieverSpec(base, model=model, rerank=scorer if rr else None, rerank_top_n=rerank_top_n,
                         name=retriever)


def _records(base: list[CaseRecord], result) -> list[CaseRecord]:
    out = []
    for r in base:
        chunks = [ChunkRecord(rank=i + 1, id=c.id, text=c.text, doc_id=c.doc_id, start=c.start, end=c.end, score=s)
                  for i, (c, s) in enumerate(result.ranked_chunks(r.id))]
        out.append(CaseRecord(id=r.id, question=r.question, reference=r.reference, response=r.response,
                              reference_contexts=list(r.reference_contexts),
                              reference_context_ids=None if r.reference_context_ids is None
                              else list(r.reference_context_ids), chunks=chunks, fields=dict(r.fields)))
    return out


def _document_records(base: list[CaseRecord], result, k: int) -> list[CaseRecord]:
    """Per case the top ``k`` documents (each at its best chunk's rank and score, in the order
    ``rankwise eval`` ranks that run: score descending, ties by document id descending); a
    document's text and span are its best chunk's."""
    run = result.documents(k)
    scores = run.to_dict()
    out = []
    for r in base:
        best: dict[str, Any] = {}
        for c, _ in result.ranked_chunks(r.id):
            best.setdefault(c.doc_id, c)
        doc_scores = scores.get(r.id, {})
        chunks = []
        for i, doc in enumerate(run.ranking(r.id)):
            c = best[doc]
            chunks.append(ChunkRecord(rank=i + 1, id=doc, text=c.text, doc_id=doc, start=c.start, end=c.end,
                                      score=doc_scores.get(doc) if isinstance(doc_scores, Mapping) else None))
        out.append(CaseRecord(id=r.id, question=r.question, reference=r.reference, response=r.response,
                              chunks=chunks, fields=dict(r.fields)))
    return out


@dataclass(frozen=True)
class SweepSpec:
    """What a :func:`sweep` runs: the grid, what is retrieved and scored, how the configurations are
    compared, and what is written. Every field is described in :func:`sweep`'s docstring.

    Example:
        >>> SweepSpec(chunk_sizes=(300, 500), retrievers=("bm25", "hybrid")).overlaps
        (50,)
    """

    chunk_sizes: Sequence[int] = (500,)
    overlaps: Sequence[int] = (50,)
    splitters: Sequence[str] = ("recursive",)
    retrievers: Sequence[str] = ("bm25",)
    k: int | None = None
    relevance: str | None = None
    metrics: Sequence[str] | None = None
    baseline: str | int = 0
    relevance_level: int = 1
    model: str | None = None
    rerank_model: Any = None
    rerank_top_n: int = 20
    llm_base_url: str | None = None
    llm_config: str | PathLike | None = None
    cache_dir: str | PathLike | bool | None = None
    titles: bool = True
    permutations: int = 10_000
    seed: int | None = 42
    correction: str = "holm"
    alpha: float = 0.05
    out: str | PathLike | None = None
    html: bool = True
    progress: bool = True
    budgets: Sequence[int] = ()
    budget_unit: str = "c"
    budget_metrics: Sequence[str] = ("recall", "ndcg")


@dataclass
class _Plan:
    """A sweep's inputs, resolved: corpus, cases, qrels, scoring, the grid's cells and its
    chunkings."""

    corpus: Any
    cases: list[CaseRecord]
    qrels: Any
    unjudged: list
    documents: bool
    k: int
    relevance: str
    configs: list[SweepConfig]
    skipped: list
    names: list[str]
    chunkings: dict[tuple, list[SweepConfig]] = field(default_factory=dict)


_S = SweepSpec  # the defaults below are SweepSpec's own (a test holds the two lists equal)


def sweep(corpus: Any, testset: Any = None, *, qrels: Any = None, split: str = "test",
          chunk_sizes: Sequence[int] = _S.chunk_sizes, overlaps: Sequence[int] = _S.overlaps,
          splitters: Sequence[str] = _S.splitters, retrievers: Sequence[str] = _S.retrievers,
          k: int | None = _S.k, relevance: str | None = _S.relevance, metrics: Sequence[str] | None = _S.metrics,
          baseline: str | int = _S.baseline, relevance_level: int = _S.relevance_level,
          model: str | None = _S.model, rerank_model: Any = _S.rerank_model, rerank_top_n: int = _S.rerank_top_n,
          llm_base_url: str | None = _S.llm_base_url, llm_config: str | PathLike | None = _S.llm_config,
          cache_dir: str | PathLike | bool | None = _S.cache_dir, titles: bool = _S.titles,
          permutations: int = _S.permutations, seed: int | None = _S.seed, correction: str = _S.correction,
          alpha: float = _S.alpha, out: str | PathLike | None = _S.out, html: bool = _S.html,
          progress: bool = _S.progress, budgets: Sequence[int] = _S.budgets, budget_unit: str = _S.budget_unit,
          budget_metrics: Sequence[str] = _S.budget_metrics) -> SweepResult:
    """Run every configuration of the grid and compare them on the same test set.

    Every keyword after ``split`` is a field of :class:`SweepSpec`; :func:`run_sweep` takes a built
    spec.

    Args:
        corpus: a corpus (path, :class:`~rankwise.retrieval.Corpus`, ``{doc_id: text}``), a BEIR
            folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``: corpus, questions
            and qrels), or a bundled benchmark name (``"kestrel"``: corpus and test set).
        testset: the test set with reference passages (``doc_id``, ``start``, ``end`` for ``span``),
            or, with ``qrels``, the questions (a test set, a queries JSONL/TSV, ``{query_id:
            text}``).
        qrels: graded document-level judgements (path, :class:`~rankwise.data.Qrels`, dict): the
            sweep then scores documents (module docstring); questions the qrels do not judge are
            left out, as trec_eval leaves them out, and counted in ``settings["unjudged"]``.
        split: the BEIR qrels split.
        chunk_sizes, overlaps, splitters, retrievers: the grid (see the module docstring); invalid
            cells (overlap >= size) are skipped and listed. Chunk size 0 keeps whole documents.
        k: chunks (or, with qrels, documents) kept per question; default 10 (100 for documents).
        relevance: verdict source: ``span`` by default (``containment``/``fuzzy`` work without
            offsets); ``ids`` with qrels (the only source there).
        metrics: metric names (default :func:`sweep_metrics`).
        baseline: the configuration the others are tested against: a label or a grid index (default
            the first).
        relevance_level: with qrels, the grade from which a document counts as relevant.
        model: embedding model for dense/hybrid.
        rerank_model: the reranker of ``+rerank`` cells, applied to the top ``rerank_top_n`` chunks:
            a cross-encoder (folder or cached name), ``"llm:MODEL"`` (an OpenAI-compatible chat
            model at ``llm_base_url``, settings from ``llm_config``'s ``[llm]`` table; graded 0-3
            per chunk, cached, failures counted and kept in place;
            :class:`~rankwise.retrieval.llm_rerank.LLMReranker`), or any pair scorer / ``(query,
            text) -> float`` callable.
        permutations, seed, correction, alpha: the paired randomization test (Holm-corrected over
            all cells).
        budgets, budget_unit, budget_metrics: context budgets (``budgets=[500, 1000, 2000]``, unit
            ``c`` characters or ``t`` tokens): each of ``budget_metrics`` (default recall, ndcg) is
            also scored at each budget (``recall@1000c``, :mod:`rankwise.metrics.budget`), so
            chunkings are compared at the same prompt size; the paired test runs at each budget like
            any metric, and :meth:`SweepResult.budget_summary` gives each configuration's curve and
            the Pareto front.
        out: a folder for ``sweep.json``, per-configuration records and ``report.html`` (with
            ``html``).
        progress: a progress bar with ETA on stderr.

    Example:
        >>> res = sweep(
        ...     {"d1": "BM25 ranks by term frequency.", "d2": "Dense models embed text."},
        ...     {"q1": "term frequency", "q2": "embed"},
        ...     qrels={"q1": {"d1": 1}, "q2": {"d2": 2}},
        ...     chunk_sizes=[0, 12],
        ...     overlaps=[0],
        ...     progress=False,
        ... )
        >>> [(c.label, res.means[c.label]["ndcg@10"]) for c in res.configs]
        [('bm25 whole documents', 1.0), ('bm25 recursive 12/0', 1.0)]
    """
    spec = SweepSpec(chunk_sizes=chunk_sizes, overlaps=overlaps, splitters=splitters, retrievers=retrievers, k=k,
                     relevance=relevance, metrics=metrics, baseline=baseline, relevance_level=relevance_level,
                     model=model, rerank_model=rerank_model, rerank_top_n=rerank_top_n, llm_base_url=llm_base_url,
                     llm_config=llm_config, cache_dir=cache_dir, titles=titles, permutations=permutations,
                     seed=seed, correction=correction, alpha=alpha, out=out, html=html, progress=progress,
                     budgets=budgets, budget_unit=budget_unit, budget_metrics=budget_metrics)
    return run_sweep(corpus, testset, spec, qrels=qrels, split=split)


def run_sweep(corpus: Any, testset: Any, spec: SweepSpec, *, qrels: Any = None, split: str = "test") -> SweepResult:
    """Run the grid a :class:`SweepSpec` describes (:func:`sweep` with its keywords gathered in one
    object).

    Example:
        >>> spec = SweepSpec(chunk_sizes=(0,), overlaps=(0,), progress=False)
        >>> res = run_sweep({"d1": "BM25 ranks by term frequency."}, {"q1": "term frequency"}, spec,
        ...                 qrels={"q1": {"d1": 1}})
        >>> res.means["bm25 whole documents"]["ndcg@10"]
        1.0
    """
    t_start = time.perf_counter()
    plan = _plan(corpus, testset, qrels, split, spec)
    scorer, llm_reranker = _reranker(spec, plan.configs)
    owned = llm_reranker is not None and llm_reranker is not spec.rerank_model  # made from "llm:MODEL": closed here
    try:
        scored, info, means, warned, builds = _run_grid(plan, spec, scorer)
    finally:
        if owned:
            llm_reranker.close()  # every grade received is on disk, whatever stopped the grid
    labels = [c.label for c in plan.configs]
    base_label = _baseline_label(labels, spec.baseline)
    from rankwise.analysis.diagnosis import diagnose

    diagnoses = {}
    for lab, res in scored.items():  # each cell's failure classes and headroom (the comparison reuses them)
        diagnose(res)
        diagnoses[lab] = {"failure_classes": res.summary["failure_classes"], "headroom": res.summary["headroom"]}
    t0 = time.perf_counter()
    comparison = _compare_grid(plan, spec, scored, warned, labels, base_label)
    records = {lab: res.records for lab, res in scored.items()}
    t_compare = time.perf_counter() - t0
    from rankwise.analysis.system_warnings import name_warnings

    notes = name_warnings(warned)
    if comparison is None:  # the comparison warns with the same named lines
        for note in notes:
            warn(note)
    best = {}
    for m in plan.names:
        lab = max(labels, key=lambda x, m=m: (means[x][m], -labels.index(x)))
        best[m] = (lab, means[lab][m])
    settings = _settings(plan, spec, llm_reranker, builds, notes)
    result = SweepResult(plan.configs, plan.names, means, best, comparison, base_label, records, info, plan.skipped,
                         settings, {"compare": t_compare, "total": time.perf_counter() - t_start},
                         diagnoses=diagnoses)
    if spec.out is not None:
        _write(result, Path(spec.out), html=spec.html)
    return result


def _compare_grid(plan: _Plan, spec: SweepSpec, scored: dict[str, Any], warned: dict[str, list[str]],
                  labels: list[str], base_label: str):
    """The cells compared with the baseline (paired randomization test, corrected), or None for one
    cell: from the cells' own results (what ``compare_records`` on their records would compute
    again)."""
    if len(labels) < 2:
        return None
    from rankwise.analysis.compare import compare_results

    return compare_results({lab: scored[lab] for lab in labels}, plan.relevance,
                           {lab: warned.get(lab, []) for lab in labels}, baseline=base_label,
                           permutations=spec.permutations, seed=spec.seed, correction=spec.correction,
                           alpha=spec.alpha)


def _plan(corpus: Any, testset: Any, qrels: Any, split: str, spec: SweepSpec) -> _Plan:
    corpus, cases, qrels, unjudged = _load_inputs(corpus, testset, qrels, split)
    documents = qrels is not None
    k = (100 if documents else 10) if spec.k is None else spec.k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a whole number >= 1, got {k!r}", field="k")
    relevance = ("ids" if documents else "span") if spec.relevance is None else spec.relevance
    if documents and relevance != "ids":
        raise InputError(f"documents judged by qrels are scored by id: relevance must be 'ids', not {relevance!r}",
                         field="relevance")
    configs, skipped = _grid(list(spec.chunk_sizes), list(spec.overlaps), list(spec.splitters),
                             list(spec.retrievers))
    names = list(spec.metrics) if spec.metrics else sweep_metrics(k, relevance, documents=documents)
    names += _budget_names(spec, documents)
    plan = _Plan(corpus, cases, qrels, unjudged, documents, k, relevance, configs, skipped, names)
    for c in configs:
        plan.chunkings.setdefault(c.chunking, []).append(c)
    return plan


def _reranker(spec: SweepSpec, configs: list[SweepConfig]) -> tuple[Any, Any]:
    """The reranker of the ``+rerank`` cells, loaded once before any indexing (a model that cannot
    load fails fast), and the LLM reranker among them (None when it is not one)."""
    if not any("+rerank" in c.retriever for c in configs) or spec.rerank_model is None:
        return None, None
    from rankwise.retrieval.llm_rerank import LLMReranker, resolve_reranker

    scorer = resolve_reranker(spec.rerank_model, base_url=spec.llm_base_url, config=spec.llm_config,
                              quiet=not spec.progress)
    if isinstance(scorer, (str, PathLike)):
        from rankwise.retrieval.reranking import CrossEncoderScorer

        scorer = CrossEncoderScorer(scorer)
    return scorer, scorer if isinstance(scorer, LLMReranker) else None


def _run_grid(plan: _Plan, spec: SweepSpec, scorer: Any):
    """Chunk once per chunking, retrieve once per (chunk set, retriever), score every cell. Returns
    the :func:`~rankwise.metrics.rag.evaluate_rag` result, info and means per configuration, the
    warnings collected per configuration and the index builds."""
    from rankwise.analysis.system_warnings import collect_warnings
    from rankwise.progress import progress as progress_bar
    from rankwise.retrieval.chunking import chunk_corpus
    from rankwise.retrieval.pipeline import chunk_depth, run_retrievers

    specs = {c.retriever: _spec(c.retriever, model=spec.model, scorer=scorer, rerank_top_n=spec.rerank_top_n)
             for c in plan.configs}
    queries = {r.id: r.question for r in plan.cases}
    scored_cells: dict[str, Any] = {}
    info: dict[str, dict[str, Any]] = {}
    means: dict[str, dict[str, float]] = {}
    by_spans: dict[tuple, tuple[tuple, dict]] = {}
    warned: dict[str, list[str]] = {}
    with progress_bar(f"sweep: {len(plan.configs)} configurations, {len(plan.chunkings)} chunkings",
                      len(plan.configs), quiet=not spec.progress, eta=True) as advance:
        for chunking, cells in plan.chunkings.items():
            size, overlap, splitter = chunking
            t0 = time.perf_counter()
            chunks = chunk_corpus(plan.corpus, size, overlap, separators=SPLITTERS[splitter], titles=spec.titles)
            t_chunk = time.perf_counter() - t0
            key = tuple(c.id for c in chunks)
            wanted = [c.retriever for c in cells]
            reused_from = None
            if key in by_spans and all(r in by_spans[key][1] for r in wanted):
                reused_from, results = by_spans[key]
                reused_from = f"{reused_from[2]} {reused_from[0]}/{reused_from[1]}"
            else:
                depth = chunk_depth(plan.k, doc_level=plan.documents, chunk_size=size)
                results = run_retrievers(None, queries, {r: specs[r] for r in wanted}, k=depth, chunks=chunks,
                                         cache_dir=spec.cache_dir, quiet=True)
                by_spans.setdefault(key, (chunking, {}))[1].update(results)
            for cell in cells:
                res = results[cell.retriever]
                with collect_warnings() as warned[cell.label]:  # named by configuration later
                    scored = _score_cell(plan, spec, res)
                scored_cells[cell.label] = scored
                means[cell.label] = {m: float(scored.mean[m]) for m in plan.names}
                timings = dict(res.timings)
                timings["chunking"] = t_chunk
                info[cell.label] = {"chunks": len(chunks), "reused_from": reused_from, "timings": timings,
                                    "summary": {k_: v for k_, v in scored.summary.items()
                                                if k_ in ("cases", "evaluated", "unscorable", "r_basis")}}
                advance(1)
    return scored_cells, info, means, warned, len(by_spans)


def _score_cell(plan: _Plan, spec: SweepSpec, res: Any) -> Any:
    from rankwise.metrics.rag import evaluate_rag

    if plan.documents:
        recs = _document_records(plan.cases, res, plan.k)
        return evaluate_rag(recs, "ids", labels=plan.qrels, metrics=plan.names,
                            relevance_level=spec.relevance_level, copy=False)  # records made for this cell
    return evaluate_rag(_records(plan.cases, res), plan.relevance, metrics=plan.names, copy=False)


def _baseline_label(labels: list[str], baseline: str | int) -> str:
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        if not -len(labels) <= baseline < len(labels):
            raise InputError(f"baseline index {baseline} out of range for {len(labels)} configurations",
                             field="baseline")
        return labels[baseline]
    if baseline in labels:
        return str(baseline)
    raise InputError(f"baseline {baseline!r} is not a configuration of the grid (e.g. {labels[0]!r})",
                     field="baseline")


def _budget_names(spec: SweepSpec, documents: bool) -> list[str]:
    """The metrics at each context budget (``recall@1000c``): every configuration scored at the same
    prompt size."""
    if not spec.budgets:
        return []
    from rankwise.metrics.budget import BUDGET_METRICS, UNITS

    if documents:
        raise InputError("a budget compares chunkings at the same prompt size: it needs chunks scored against "
                         "reference passages (a span or containment test set), not documents judged by qrels",
                         field="budgets")
    if spec.budget_unit not in UNITS:
        raise InputError(f"a budget's unit is c (characters) or t (tokens), not {spec.budget_unit!r}",
                         field="budgets")
    bad = [m for m in spec.budget_metrics if m not in BUDGET_METRICS]
    if bad or not spec.budget_metrics:
        raise InputError(f"budget metrics are among {', '.join(BUDGET_METRICS)}, not {', '.join(bad) or 'none'}",
                         field="budget_metrics")
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in spec.budgets):
        raise InputError(f"budgets are whole numbers >= 1, got {list(spec.budgets)}", field="budgets")
    return [f"{m}@{b}{spec.budget_unit}" for m in spec.budget_metrics for b in sorted(set(spec.budgets))]


def _settings(plan: _Plan, spec: SweepSpec, llm_reranker: Any, builds: int, notes: list[str]) -> dict[str, Any]:
    rerank = spec.rerank_model
    rerank_info = None
    if llm_reranker is not None:
        rerank_info = {**llm_reranker.summary(), "cache": str(llm_reranker.cache_path)}
    return {"documents": len(plan.corpus), "cases": len(plan.cases), "k": plan.k, "relevance": plan.relevance,
            "level": "documents" if plan.documents else "chunks", "unjudged": len(plan.unjudged),
            "relevance_level": spec.relevance_level if plan.documents else None,
            "chunk_sizes": list(spec.chunk_sizes), "overlaps": list(spec.overlaps),
            "splitters": list(spec.splitters), "retrievers": list(spec.retrievers), "model": spec.model,
            "rerank_model": str(rerank) if isinstance(rerank, (str, PathLike)) else
            (None if rerank is None else getattr(rerank, "name", "callable")),
            "rerank_top_n": spec.rerank_top_n, "llm_rerank": rerank_info,
            "test": "paired randomization", "permutations": spec.permutations, "seed": spec.seed,
            "correction": spec.correction, "alpha": spec.alpha,
            "index_builds": builds, "chunkings": len(plan.chunkings), "warnings": notes,
            "budgets": sorted(set(spec.budgets)), "budget_unit": spec.budget_unit if spec.budgets else None,
            "budget_metrics": list(spec.budget_metrics) if spec.budgets else []}


def _write(result: SweepResult, out: Path, *, html: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for cfg in result.configs:
        safe = cfg.label.replace(" ", "_").replace("/", "-").replace("+", "_")
        result.files[f"records:{cfg.label}"] = str(write_records(result.records[cfg.label],
                                                                 out / "records" / f"{safe}.jsonl"))
    if html and result.comparison is not None:
        from rankwise.report.html import write_html_report

        s = result.settings
        # drill-down for the baseline and the best configurations only: 48 configurations x 73 cases
        # of chunk text would make a report of tens of MB; every configuration is in the tables and
        # plots
        shown = [result.baseline] + [lab for lab, _ in result.best.values() if lab != result.baseline]
        shown = list(dict.fromkeys(shown))
        result.files["html"] = str(write_html_report(
            out / "report.html", result.comparison, records={lab: result.records[lab] for lab in shown},
            grid=result.grid(),
            title=f"rankwise sweep: {len(result.configs)} configurations, {s['cases']} questions",
            notes=[f"Grid: chunk sizes {s['chunk_sizes']} x overlaps {s['overlaps']} x splitters {s['splitters']} x "
                   f"retrievers {s['retrievers']}; top {s['k']} {s['level']}; relevance {s['relevance']}; "
                   f"{s['index_builds']} index builds for {s['chunkings']} chunkings.",
                   "Best per metric: " + "; ".join(f"{m}: {lab} ({v:.4f})" for m, (lab, v) in result.best.items()),
                   ("Document-level drill-down (each document shown by its best chunk): "
                    if s["level"] == "documents" else "Chunk-level drill-down: ")
                   + ", ".join(shown) + " (the baseline and the best per metric)."],
        ))
    if result.settings.get("budgets"):
        from rankwise.report.sweep_budget import write_budget_plot

        result.files["budget_plot"] = str(write_budget_plot(result.budget_summary(), result.settings["budget_unit"],
                                                            out / "budget.png"))
    path = out / "sweep.json"
    result.files["json"] = str(path)
    atomic_write_text(path, json.dumps(finite_json(result.to_json()), indent=2))
