"""``rankwise demo``: the whole job on the bundled Kestrel DB manual, offline.

Chunk the bundled knowledge base, run BM25, dense and hybrid retrieval, score every system with span
ground truth at K = 1, 3, 5, 10, compare them with paired tests, and write runs, per-case records, a
summary JSON and an HTML report. This module only orchestrates: every step is a public library call.

``rankwise demo --judge local`` (:func:`run_llm_demo`): the LLM judge with no API key. A local
llama.cpp server with the packaged Gemma 3 270M model (:mod:`rankwise.llm.local`) judges the BM25
top K of a slice of the Kestrel questions; the judge's verdicts are compared with the span labels
(agreement, kappa) and the metrics are scored under both, chunk order unchanged, so every difference
is due to the verdicts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._atomic import atomic_write_text

__all__ = ["DemoResult", "run_demo", "DEMO_SYSTEMS", "DEMO_KS", "demo_metrics", "LLMDemoResult", "run_llm_demo",
           "llm_demo_seconds", "agreement_sentence", "JUDGES"]

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

    files = _write_runs(out, retrieved, results)
    first = next(iter(retrieved.values()))
    settings = {
        "dataset": dataset, "documents": len(docs), "questions": len(testset),
        "chunks": len(first.chunks), "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
        "ks": list(ks), "relevance": "span", "primary_metric": PRIMARY_METRIC,
    }
    summaries = {label: r.summary for label, r in results.items()}

    if html:
        t = time.perf_counter()
        files["html"] = str(_write_report(out / "report.html", comparison, records, settings, depth))
        timings["report"] = time.perf_counter() - t

    timings["total"] = time.perf_counter() - t0
    result = DemoResult(labels, metrics, means, summaries, comparison, winner, files, settings, timings)
    summary_path = out / "summary.json"
    atomic_write_text(summary_path, json.dumps(_summary_json(result, retrieved), indent=2))
    files["summary"] = str(summary_path)
    return result


def _write_runs(out: Path, retrieved: dict, results: dict) -> dict[str, Any]:
    """Each system's run (TREC), its chunks and its records under ``out``; their paths."""
    from rankwise.retrieval.pipeline import save_run

    files: dict[str, Any] = {"runs": {}, "chunks": {}, "records": {}}
    out.mkdir(parents=True, exist_ok=True)
    for label, res in retrieved.items():
        run_path, chunks_path = save_run(res, out / "runs" / f"{label}.trec")
        files["runs"][label] = str(run_path)
        files["chunks"][label] = str(chunks_path)
        files["records"][label] = str(results[label].write_records(out / "records" / f"{label}.jsonl"))
    return files


def _write_report(path: Path, comparison, records: dict, settings: dict, depth: int) -> Path:
    """The demo's HTML report: the comparison, three k-sweeps and the per-question records."""
    from rankwise.analysis.ksweep import ksweep_records
    from rankwise.report.html import write_html_report

    sweeps = [ksweep_records(records, "span", m, max_k=depth) for m in ("wcp", "recall", "ndcg")]
    return write_html_report(
        path, comparison, sweeps=sweeps, records=records,
        title=f"rankwise demo: {settings['dataset']} ({settings['questions']} questions)",
        notes=[f"{settings['documents']} documents chunked into {settings['chunks']} chunks of <= "
               f"{settings['chunk_size']} characters (overlap {settings['chunk_overlap']}); relevance: span overlap "
               ">= 50% with a ground-truth passage.",
               "acp divides by relevant chunks retrieved, not by all relevant passages: read it with recall."],
    )


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


# ---------------------------------------------------------------------------------------- the LLM
# demo

JUDGES = ("local",)
LLM_DEMO_METRICS = ("precision", "ndcg", "wcp", "acp", "mrr")
# The local judge's pace on an idle 2-core machine, per verdict, plus the server's start (measured:
# docs/performance.md, "The demo"). Under load it is several times slower; the progress bar shows
# the time left from the pace the run actually gets.
LOCAL_SECONDS_PER_VERDICT = 4.0
LOCAL_STARTUP_SECONDS = 10.0


def llm_demo_seconds(verdicts: int, judge: str = "local") -> float:
    """The demo's expected time: the server's start plus ``verdicts`` at the measured rate.

    Example:
        >>> llm_demo_seconds(20)
        90.0
    """
    return LOCAL_STARTUP_SECONDS + verdicts * LOCAL_SECONDS_PER_VERDICT


@dataclass
class LLMDemoResult:
    """What :func:`run_llm_demo` produced.

    Attributes:
        agreement: the judge's verdicts against the span labels
            (:class:`~rankwise.relevance.agreement.Agreement`).
        effects: metric -> ``{"span": mean, "llm": mean, "verdict_effect": llm - span}`` (same
            chunks, same order: the whole difference is due to the verdicts).
        summary: the judge run's :class:`~rankwise.relevance.llm_judge.JudgeSummary`.
        sentence: what this agreement means, in words.
        expected_seconds / seconds: stated before the run / taken.
    """

    model: str
    base_url: str
    questions: int
    k: int
    agreement: Any
    effects: dict[str, dict[str, float]]
    summary: Any
    sentence: str
    expected_seconds: float
    seconds: float
    files: dict[str, str] = field(default_factory=dict)


def agreement_sentence(agr: Any, model: str = "Gemma 3 270M") -> str:
    """What an agreement of a small judge with the span labels means, in words (never a verdict
    where kappa is undefined).

    Example:
        >>> from rankwise.relevance.agreement import Agreement
        >>> agreement_sentence(
        ...     Agreement("span", "llm", 10, 2, {}, [[0, 7], [0, 3]], None, None, None, 0)
        ... )[:59]
        "Cohen's kappa is undefined: the judge called every compared"
    """
    if agr.b_relevant_rate in (0.0, 1.0):
        said = "relevant" if agr.b_relevant_rate else "not relevant"
        kappa = "undefined" if agr.kappa is None else f"{agr.kappa:.2f}"
        return (f"Cohen's kappa is {kappa}: the judge called every compared chunk {said}, so its verdicts "
                "carry no information about which chunks hold the answer. " + _small(model))
    if agr.kappa is None:  # the labels are all one class: no chance-corrected agreement to give
        return (f"Cohen's kappa is undefined: the span labels call every compared chunk "
                f"{'relevant' if agr.a_relevant_rate else 'not relevant'}, so this slice cannot show whether "
                "the judge tells relevant from not. " + _small(model))
    k = agr.kappa
    band = ("no agreement beyond chance" if k <= 0.0 else "slight agreement" if k < 0.2 else "fair agreement"
            if k < 0.4 else "moderate agreement" if k < 0.6 else "substantial agreement")
    ci = (f" (95% CI {agr.kappa_ci[0]:.2f} to {agr.kappa_ci[1]:.2f}, {agr.n} chunks)" if agr.kappa_ci
          else f" ({agr.n} chunks)")
    return f"Cohen's kappa {k:.2f}{ci}: {band} with the span labels. " + _small(model)


def _small(model: str) -> str:
    return (f"{model} is a 270M-parameter model: it shows the judge's machinery working offline (prompts, "
            "constrained JSON, parsing, caching, agreement), not verdicts to trust. Published agreement of "
            "large LLM judges with human relevance labels is kappa 0.3-0.65; use a strong model, and audit "
            "it against labels like this, before its metrics decide anything.")


def run_llm_demo(out: str | PathLike = "rankwise-demo", *, judge: str = "local", questions: int = 4, k: int = 5,
                 dataset: str = "kestrel", quiet: bool = False, announce: Any = None,
                 server: Any = None) -> LLMDemoResult:
    """Judge the BM25 top ``k`` of the first ``questions`` Kestrel questions with the local model,
    then compare its verdicts with the span labels. ``announce(text)`` receives the time estimate
    before the run starts (and nothing when ``quiet``). ``server``: a running
    :class:`~rankwise.llm.local.LocalServer` to use (default: one is started, and stopped after).
    Writes ``<out>/judge-local/records.jsonl`` (both verdict sources), ``summary.json`` and the
    verdict cache ``judge.sqlite`` (a rerun is answered from it).

    Example:
        >>> result = run_llm_demo("rankwise-demo", questions=2, quiet=True)  # doctest: +SKIP
        >>> result.agreement.n  # doctest: +SKIP
        10
    """
    from rankwise.errors import InputError

    if judge not in JUDGES:
        raise InputError(f"unknown judge {judge!r}; choose one of {', '.join(JUDGES)}", field="judge")
    if questions < 1 or k < 1:
        raise InputError("the slice needs at least 1 question and k >= 1", field="questions" if questions < 1 else "k")
    t0 = time.perf_counter()
    folder = Path(out) / f"judge-{judge}"
    records = _slice_records(dataset, questions, k, quiet)
    n = sum(len(r.chunks) for r in records)
    expected = llm_demo_seconds(n, judge)
    if announce is not None and not quiet:
        asked = f"{len(records)} question{'' if len(records) == 1 else 's'}"
        announce(f"judging {n} chunks ({asked} x top {k}) with the local model: about "
                 f"{_duration(expected)} on an idle 2-core machine ({LOCAL_SECONDS_PER_VERDICT:g} s per verdict "
                 f"measured there, plus the server's start); longer under load: the bar shows the time left")
    summary, model, base_url = _judge_locally(records, folder, quiet, server)
    return _compare(records, folder, summary, model, base_url, k, expected, time.perf_counter() - t0)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _slice_records(dataset: str, questions: int, k: int, quiet: bool) -> list:
    """Per-case records of the BM25 top ``k`` for the first ``questions`` questions, with span
    verdicts."""
    from rankwise.datasets import load_bundled_corpus, load_bundled_testset
    from rankwise.metrics.rag import evaluate_rag
    from rankwise.retrieval import run_retrievers

    docs = load_bundled_corpus(dataset)
    cases = list(load_bundled_testset(dataset))[:questions]
    retrieved = run_retrievers(docs, {c.id: c.question for c in cases}, ["bm25"], k=k, chunk_size=500,
                               chunk_overlap=50, quiet=quiet)["bm25"]
    return list(evaluate_rag(_cases(cases, retrieved), "span", k=[k], metrics=[f"precision@{k}"]).records)


def _judge_locally(records: list, folder: Path, quiet: bool, server: Any = None):
    """Judge every chunk on the local server: reference mode, binary, one request at a time (the
    server runs one at a time anyway, and consecutive requests of a question then reuse their shared
    prompt prefix). The server is started here unless ``server`` is given, and not at all when the
    verdict cache already holds every verdict (a rerun)."""
    import contextlib

    from rankwise.llm.config import as_llm_config
    from rankwise.llm.local import LOCAL_MODEL, local_server
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import judge_records

    folder.mkdir(parents=True, exist_ok=True)

    def config(model: str, base_url: str):
        return as_llm_config(model=model, base_url=base_url, api_key="unused", env={}, mode="reference",
                             concurrency=1, timeout=300.0, cache=folder / "judge.sqlite")

    with contextlib.ExitStack() as stack:
        if server is None and _calls_needed(records, config(LOCAL_MODEL, "http://127.0.0.1:9/v1")) == 0:
            return judge_records(records, config=config(LOCAL_MODEL, "http://127.0.0.1:9/v1")), LOCAL_MODEL, \
                "the local server (not started: every verdict was in the cache)"
        srv = server if server is not None else stack.enter_context(local_server(n_ctx=4096))
        total = sum(len(r.chunks) for r in records)
        with progress("judging", total, quiet=quiet, transient=True, eta=True) as advance:
            summary = judge_records(records, config=config(srv.model, srv.base_url), progress=advance)
    return summary, srv.model, srv.base_url


def _calls_needed(records: list, config: Any) -> int:
    from rankwise.llm.cache import ResponseCache
    from rankwise.relevance.llm_judge import Judge, cases_from_records

    with ResponseCache(config.cache) as store:
        return Judge.from_config(config, store).plan(cases_from_records(records)).calls


def _compare(records: list, folder: Path, summary: Any, model: str, base_url: str, k: int, expected: float,
             seconds: float) -> LLMDemoResult:
    from rankwise.analysis.probe import probe_records
    from rankwise.data.records import write_records
    from rankwise.relevance.agreement import agreement

    agr = agreement(records, "span", "llm")
    comp = probe_records(records, ["span", "llm"], [f"{m}@{k}" if m != "mrr" else m for m in LLM_DEMO_METRICS],
                         k=k)
    effects = {name: {key: row[key] for key in ("span", "llm", "verdict_effect")} for name, row in comp.mean.items()}
    files = {"records": str(write_records(records, folder / "records.jsonl")),
             "cache": str(folder / "judge.sqlite"), "summary": str(folder / "summary.json")}
    result = LLMDemoResult(model, base_url, len(records), k, agr, effects, summary, agreement_sentence(agr),
                           expected, seconds, files)
    atomic_write_text(files["summary"], json.dumps({
        "model": model, "questions": len(records), "k": k, "agreement": agr.to_dict(), "verdict_effect": effects,
        "judge": summary.to_dict() if hasattr(summary, "to_dict") else None, "sentence": result.sentence,
        "expected_seconds": expected, "seconds": seconds}, indent=2, default=str))
    return result
