"""``rankwise demo``: the whole job on the bundled Kestrel DB manual, offline.

Chunk the bundled knowledge base, run BM25, dense and hybrid retrieval, score every system with span
ground truth at K = 1, 3, 5, 10, compare them with paired tests, and write runs, per-case records, a
summary JSON and an HTML report. This module only orchestrates: every step is a public library call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["DemoResult", "run_demo", "DEMO_SYSTEMS", "DEMO_KS", "demo_metrics"]

DEMO_SYSTEMS = ("bm25", "dense", "hybrid")
DEMO_KS = (1, 3, 5, 10)
DEMO_BASE_METRICS = ("hit_rate", "precision", "recall", "f1", "mrr", "ndcg", "wcp", "wcp(decay=linear)", "acp",
                     "context_recall")
PRIMARY_METRIC = "ndcg@10"


def demo_metrics(ks: Sequence[int] = DEMO_KS) -> list[str]:
    """Every demo metric at every K, metric-major (``hit_rate@1``, ``hit_rate@3``, ...).

    Example:
        >>> demo_metrics([5])[:3]
        ['hit_rate@5', 'precision@5', 'recall@5']
    """
    return [f"{m}@{k}" for m in DEMO_BASE_METRICS for k in ks]


@dataclass
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes:
        systems: retriever labels, in run order.
        means: system -> {metric: mean over the questions}.
        best: system -> number of table rows where it is best (ties count for all).
        winner: the system with the best :data:`PRIMARY_METRIC`.
        comparison: paired comparison of the systems (baseline = first system).
        files: what was written, by role.
        settings: knowledge base, chunking and cutoffs used.
        timings: seconds per step.
    """

    systems: list[str]
    metrics: list[str]
    means: dict[str, dict[str, float]]
    summaries: dict[str, dict]
    comparison: Any
    winner: str
    files: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def best_systems(self, metric: str, tol: float = 1e-12) -> list[str]:
        """The systems with the highest mean of ``metric`` (all of them when tied)."""
        top = max(self.means[s][metric] for s in self.systems)
        return [s for s in self.systems if self.means[s][metric] >= top - tol]


def _cases(testset, result) -> list[dict]:
    """Test-set rows (rich form) holding one retriever's chunks for every question."""
    rows = []
    for case in testset:
        rows.append({
            "id": case.id,
            "question": case.question,
            "reference": case.reference,
            "reference_contexts": [p.to_dict() for p in case.reference_contexts],
            "retrieved_contexts": result.contexts(case.id),
        })
    return rows


def run_demo(out: str | PathLike = "rankwise-demo", *, dataset: str = "kestrel", chunk_size: int = 500,
             chunk_overlap: int = 50, ks: Sequence[int] = DEMO_KS, systems: Sequence[str] = DEMO_SYSTEMS,
             html: bool = True, quiet: bool = False, permutations: int = 10_000) -> DemoResult:
    """Run the demo and write its files to ``out``; returns the numbers behind the printed table.

    Example:
        >>> result = run_demo("rankwise-demo", quiet=True)  # doctest: +SKIP
        >>> result.winner  # doctest: +SKIP
        'hybrid'
    """
    from rankwise.analysis.compare import compare_records
    from rankwise.datasets import load_bundled_corpus, load_bundled_testset
    from rankwise.metrics.rag import evaluate_rag
    from rankwise.retrieval import run_retrievers
    from rankwise.retrieval.pipeline import save_run

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out = Path(out)
    docs = load_bundled_corpus(dataset)
    testset = load_bundled_testset(dataset)
    queries = {case.id: case.question for case in testset}
    depth = max(ks)

    t = time.perf_counter()
    retrieved = run_retrievers(docs, queries, list(systems), k=depth, chunk_size=chunk_size,
                               chunk_overlap=chunk_overlap, quiet=quiet)
    timings["retrieval"] = time.perf_counter() - t

    t = time.perf_counter()
    metrics = demo_metrics(ks)
    results = {}
    for label, res in retrieved.items():
        results[label] = evaluate_rag(_cases(testset, res), "span", k=list(ks), metrics=metrics)
    timings["evaluation"] = time.perf_counter() - t

    t = time.perf_counter()
    records = {label: r.records for label, r in results.items()}
    comparison = compare_records(records, "span", [PRIMARY_METRIC, f"wcp@{min(5, depth)}", f"recall@{depth}"],
                                 permutations=permutations, seed=42)
    timings["comparison"] = time.perf_counter() - t

    labels = list(retrieved)
    means = {label: dict(r.mean) for label, r in results.items()}
    winner = max(labels, key=lambda s: means[s][PRIMARY_METRIC])

    files: dict[str, Any] = {"runs": {}, "chunks": {}, "records": {}}
    out.mkdir(parents=True, exist_ok=True)
    for label, res in retrieved.items():
        run_path, chunks_path = save_run(res, out / "runs" / f"{label}.trec")
        files["runs"][label] = str(run_path)
        files["chunks"][label] = str(chunks_path)
        files["records"][label] = str(results[label].write_records(out / "records" / f"{label}.jsonl"))

    first = next(iter(retrieved.values()))
    settings = {
        "dataset": dataset, "documents": len(docs), "questions": len(testset),
        "chunks": len(first.chunks), "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
        "ks": list(ks), "relevance": "span", "primary_metric": PRIMARY_METRIC,
    }
    summaries = {label: r.summary for label, r in results.items()}

    if html:
        t = time.perf_counter()
        from rankwise.analysis.ksweep import ksweep_records
        from rankwise.report.html import write_html_report

        sweeps = [ksweep_records(records, "span", m, max_k=depth) for m in ("wcp", "recall", "ndcg")]
        files["html"] = str(write_html_report(
            out / "report.html", comparison, sweeps=sweeps, records=records,
            title=f"rankwise demo: {dataset} ({len(testset)} questions)",
            notes=[f"{len(docs)} documents chunked into {len(first.chunks)} chunks of <= {chunk_size} characters "
                   f"(overlap {chunk_overlap}); relevance: span overlap >= 50% with a ground-truth passage.",
                   "acp divides by relevant chunks retrieved, not by all relevant passages: read it with recall."],
        ))
        timings["report"] = time.perf_counter() - t

    timings["total"] = time.perf_counter() - t0
    result = DemoResult(labels, metrics, means, summaries, comparison, winner, files, settings, timings)
    summary_path = out / "summary.json"
    summary_path.write_text(json.dumps(_summary_json(result, retrieved), indent=2), encoding="utf-8")
    files["summary"] = str(summary_path)
    return result


def _summary_json(result: DemoResult, retrieved) -> dict:
    best = {m: result.best_systems(m) for m in result.metrics}
    return {
        "settings": result.settings,
        "winner": {"system": result.winner, "by": PRIMARY_METRIC},
        "mean": result.means,
        "best_per_metric": best,
        "comparison": result.comparison.to_json(),
        "summary": result.summaries,
        "retrieval_seconds": {label: r.timings for label, r in retrieved.items()},
        "timings": result.timings,
        "files": result.files,
    }
