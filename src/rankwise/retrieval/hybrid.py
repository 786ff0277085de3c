"""Hybrid retrieval: fuse the runs of two or more retrievers.

- Reciprocal rank fusion (Cormack et al. 2009): ``score(d) = sum_i w_i / (k + rank_i(d))``, k = 60;
  a run that did not return d adds nothing. Needs ranks only, so it fuses any runs.
- Weighted normalised-score fusion: per run and query, scores are min-max normalised to [0, 1]
  (all-equal scores, e.g. a single hit, normalise to 1); ``score(d) = sum_i w_i * norm_i(d)``, a run
  that did not return d adds 0. Weights default to equal shares.
Ties in the fused score rank by doc id in descending byte order, like any scored run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from rankwise.data import Run
from rankwise.errors import InputError
from rankwise.retrieval.base import Retriever, check_k
from rankwise.retrieval.chunking import CorpusChunk

__all__ = ["reciprocal_rank_fusion", "score_fusion", "fuse", "HybridRetriever", "FusionMethod"]

FusionMethod = Literal["rrf", "weighted"]


def _weights(weights: Sequence[float] | None, n: int, default: float) -> list[float]:
    if weights is None:
        return [default] * n
    weights = list(weights)
    if len(weights) != n:
        raise InputError(f"{len(weights)} weights for {n} runs", field="weights")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"weights must be finite numbers >= 0, got {w!r}", field="weights")
    if sum(weights) <= 0:
        raise InputError("weights must not all be 0", field="weights")
    return [float(w) for w in weights]


def _check_runs(runs: Sequence[Run]) -> list[Run]:
    runs = list(runs)
    if len(runs) < 2:
        raise InputError(f"fusion needs two or more runs, got {len(runs)}", field="runs")
    for r in runs:
        if not isinstance(r, Run):
            raise InputError(f"expected a Run, got {type(r).__name__}", field="runs")
    return runs


def _rows(run: Run, depth: int | None):
    """(query id, doc id, rank, score) of the top ``depth`` rows of a run."""
    if depth is not None:
        run = run.truncate(depth)
    qcodes = run.query_codes().tolist()
    ranks = run.ranks().tolist()
    scores = run.scores.tolist() if run.scores is not None else [None] * len(run)
    for q, d, r, s in zip(qcodes, run.doc_ids.to_pylist(), ranks, scores, strict=True):
        yield run.queries[q], d, r, s


def _to_run(fused: Mapping[str, Mapping[str, float]], name: str) -> Run:
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    for qid, items in fused.items():
        qids.extend([qid] * len(items))
        docs.extend(items.keys())
        scores.extend(items.values())
    return Run.from_columns(qids, docs, np.asarray(scores, dtype=np.float64), kind="scored", name=name,
                            source=f"<{name}>")


def reciprocal_rank_fusion(runs: Sequence[Run], *, k: int = 60, weights: Sequence[float] | None = None,
                           depth: int | None = None, name: str = "rrf") -> Run:
    """Fuse runs by reciprocal rank: ``sum_i w_i / (k + rank_i)`` over the top ``depth`` of each
    run.

    Example:
        >>> a = Run.from_dict({"q": ["d1", "d2"]}); b = Run.from_dict({"q": ["d2", "d3"]})
        >>> reciprocal_rank_fusion([a, b]).ranking("q")
        ['d2', 'd1', 'd3']
    """
    runs = _check_runs(runs)
    if isinstance(k, bool) or not isinstance(k, (int, float)) or k < 0:
        raise InputError(f"must be a number >= 0, got {k!r}", field="rrf_k")
    w = _weights(weights, len(runs), 1.0)
    fused: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for weight, run in zip(w, runs, strict=True):
        for qid, doc, rank, _ in _rows(run, depth):
            fused[qid][doc] += weight / (k + rank)
    return _to_run(fused, name)


def score_fusion(runs: Sequence[Run], *, weights: Sequence[float] | None = None, depth: int | None = None,
                 name: str = "weighted") -> Run:
    """Fuse scored runs by a weighted sum of min-max normalised scores (per run and query).

    Example:
        >>> a = Run.from_dict({"q": {"d1": 10.0, "d2": 5.0, "d3": 0.0}})
        >>> b = Run.from_dict({"q": {"d3": 0.9, "d2": 0.8, "d1": 0.1}})
        >>> score_fusion([a, b], weights=[0.5, 0.5]).to_dict()["q"]
        {'d2': 0.6875, 'd3': 0.5, 'd1': 0.5}
    """
    runs = _check_runs(runs)
    w = _weights(weights, len(runs), 1.0 / len(runs))
    fused: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for weight, run in zip(w, runs, strict=True):
        if run.scores is None:
            raise InputError(f"run '{run.name}' has no scores; use reciprocal rank fusion", field="runs")
        per_query: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for qid, doc, _, score in _rows(run, depth):
            per_query[qid].append((doc, score))
        for qid, items in per_query.items():
            values = [s for _, s in items]
            low, high = min(values), max(values)
            span = high - low
            for doc, s in items:
                fused[qid][doc] += weight * ((s - low) / span if span > 0 else 1.0)
    return _to_run(fused, name)


def fuse(runs: Sequence[Run], method: FusionMethod = "rrf", *, weights: Sequence[float] | None = None,
         rrf_k: int = 60, depth: int | None = None, name: str = "hybrid") -> Run:
    """Fuse runs with ``method`` "rrf" (reciprocal rank fusion) or "weighted" (normalised-score
    fusion).

    Example:
        >>> a = Run.from_dict({"q": ["d1", "d2"]}); b = Run.from_dict({"q": ["d2", "d3"]})
        >>> fuse([a, b], "rrf").ranking("q")
        ['d2', 'd1', 'd3']
    """
    if method == "rrf":
        return reciprocal_rank_fusion(runs, k=rrf_k, weights=weights, depth=depth, name=name)
    if method == "weighted":
        return score_fusion(runs, weights=weights, depth=depth, name=name)
    raise InputError(f"unknown fusion method {method!r}; expected 'rrf' or 'weighted'", field="fusion")


class HybridRetriever(Retriever):
    """Search with each retriever to ``depth`` (at least k), fuse, keep the top k.

    Example:
        >>> from rankwise.retrieval.bm25 import BM25Retriever
        >>> chunks = [
        ...     CorpusChunk("a", "a", 0, 9, "red apple"),
        ...     CorpusChunk("b", "b", 0, 11, "green apple"),
        ... ]
        >>> h = HybridRetriever(
        ...     [BM25Retriever(quiet=True), BM25Retriever(stemmer=None, quiet=True)]
        ... )
        >>> h.index(chunks); h.search({"q": "red apples"}, k=2).ranking("q")
        ['a', 'b']
    """

    def __init__(self, retrievers: Sequence[Retriever], *, method: FusionMethod = "rrf",
                 weights: Sequence[float] | None = None, rrf_k: int = 60, depth: int = 100,
                 name: str = "hybrid") -> None:
        self.retrievers = list(retrievers)
        if len(self.retrievers) < 2:
            raise InputError(f"a hybrid needs two or more retrievers, got {len(self.retrievers)}",
                             field="retrievers")
        if method not in ("rrf", "weighted"):
            raise InputError(f"unknown fusion method {method!r}; expected 'rrf' or 'weighted'", field="fusion")
        _weights(weights, len(self.retrievers), 1.0)
        self.method = method
        self.weights = weights
        self.rrf_k = rrf_k
        self.depth = check_k(depth)
        self.name = name

    def index(self, chunks: Sequence[CorpusChunk]) -> None:
        chunks = list(chunks)
        for r in self.retrievers:
            r.index(chunks)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        k = check_k(k)
        depth = max(k, self.depth)
        runs = [r.search(queries, depth) for r in self.retrievers]
        return self.fuse(runs, k)

    def fuse(self, runs: Sequence[Run], k: int) -> Run:
        """Fuse component runs already computed (one per retriever, in order) and keep the top
        ``k``."""
        depth = max(check_k(k), self.depth)
        return fuse(runs, self.method, weights=self.weights, rrf_k=self.rrf_k, depth=depth,
                    name=self.name).truncate(k)
