"""Reranking: rescore the top n of a run with a cross-encoder or any ``(query, text) -> float``
scorer.

The top ``top_n`` items of each query are re-ordered by the scorer's score (higher = better). Items
below ``top_n`` keep their order under them, with scores ``lowest reranked score - 1, - 2, ...`` so
the run stays a consistent scored ranking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from typing import Protocol, runtime_checkable

import numpy as np

from rankwise.data import Run
from rankwise.errors import InputError, RankwiseError
from rankwise.progress import progress
from rankwise.retrieval.base import Retriever, check_k
from rankwise.retrieval.chunking import CorpusChunk
from rankwise.retrieval.models import load_cross_encoder

__all__ = ["CrossEncoderScorer", "PairScorer", "RerankRetriever", "rerank", "make_scorer", "checked_scores"]

Scorer = Callable[[str, str], float]


@runtime_checkable
class PairScorer(Protocol):
    """A scorer that scores many (query, text) pairs at once (faster than one call per pair)."""

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> Sequence[float]: ...


class CrossEncoderScorer:
    """A sentence-transformers ``CrossEncoder`` loaded offline by name or folder (fails fast,
    clearly).

    Example:
        >>> scorer = CrossEncoderScorer("/models/ms-marco-MiniLM-L-6-v2")  # doctest: +SKIP
        >>> scorer("what is bm25?", "BM25 is a ranking function.")  # doctest: +SKIP
        8.1
    """

    def __init__(self, model: str | PathLike, *, batch_size: int = 32, device: str = "cpu",
                 threads: int | None = None, allow_download: bool | None = None, max_length: int | None = 512):
        self.name = str(model)
        self.batch_size = batch_size
        self.model = load_cross_encoder(self.name, device=device, threads=threads, allow_download=allow_download,
                                        max_length=max_length)

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        scores = self.model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False,
                                    convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64).reshape(len(pairs), -1)[:, -1].tolist()

    def __call__(self, query: str, text: str) -> float:
        return self.score_pairs([(query, text)])[0]


def make_scorer(scorer: str | PathLike | Scorer | PairScorer, **kwargs) -> Scorer | PairScorer:
    """A model name or folder becomes a :class:`CrossEncoderScorer`; a callable or pair scorer is
    kept."""
    if isinstance(scorer, PairScorer) or callable(scorer):
        return scorer
    if isinstance(scorer, (str, PathLike)):
        return CrossEncoderScorer(scorer, **kwargs)
    raise InputError(f"a reranker is a model name, a folder or a callable (query, text) -> float; got "
                     f"{type(scorer).__name__}", field="rerank")


def checked_scores(scorer: Scorer | PairScorer, pairs: list[tuple[str, str]]) -> list[float]:
    """The scorer's score for each (query, text) pair, each checked to be a finite number, one per
    pair; anything else is a one-line :class:`RankwiseError` naming the query.

    Example:
        >>> checked_scores(lambda q, t: len(t), [("q", "ab"), ("q", "abc")])
        [2.0, 3.0]
    """
    if isinstance(scorer, PairScorer):
        values = list(scorer.score_pairs(pairs))
        if len(values) != len(pairs):
            raise RankwiseError(f"reranker returned {len(values)} scores for {len(pairs)} pairs")
    else:
        values = [scorer(q, t) for q, t in pairs]
    out = []
    for (q, _), v in zip(pairs, values, strict=True):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise RankwiseError(f"reranker returned {v!r}, not a number, for query {q[:60]!r}") from None
        if not math.isfinite(f):
            raise RankwiseError(f"reranker returned {f!r} for query {q[:60]!r}")
        out.append(f)
    return out


def rerank(run: Run, queries: Mapping[str, str], texts: Mapping[str, str], scorer: Scorer | PairScorer, *,
           top_n: int = 100, name: str | None = None, quiet: bool = False) -> Run:
    """Re-order the top ``top_n`` of every query of ``run`` by ``scorer(query text, item text)``.

    ``texts`` maps each item id of the run to the text the scorer reads.

    Example:
        >>> run = Run.from_dict({"q": {"a": 2.0, "b": 1.0, "c": 0.5}})
        >>> texts = {"a": "x", "b": "xxx", "c": "xx"}
        >>> rerank(run, {"q": "?"}, texts, lambda q, t: len(t), top_n=2).to_dict()["q"]
        {'b': 3.0, 'a': 1.0, 'c': 0.0}
    """
    top_n = check_k(top_n)
    qcodes = run.query_codes()
    docs = run.doc_ids.to_pylist()
    ranks = run.ranks()
    head = np.flatnonzero(ranks <= top_n)
    pairs = []
    for row in head.tolist():
        qid = run.queries[qcodes[row]]
        if qid not in queries:
            raise InputError(f"no text for query '{qid}' of run '{run.name}'", field="queries")
        if docs[row] not in texts:
            raise InputError(f"no text for item '{docs[row]}' of run '{run.name}'", field="texts")
        pairs.append((queries[qid], texts[docs[row]]))
    scores = np.zeros(len(run), dtype=np.float64)
    batch = int(getattr(scorer, "pairs_per_call", 256))  # an LLM reranker takes all pairs at once
    with progress(f"{name or 'rerank'}: reranking", len(pairs), quiet=quiet) as advance:
        for i in range(0, len(pairs), batch):
            part = pairs[i:i + batch]
            scores[head[i:i + batch]] = checked_scores(scorer, part)
            advance(len(part))
    for q in range(run.n_queries):
        a, b = int(run.offsets[q]), int(run.offsets[q + 1])
        if b - a > top_n:
            floor = scores[a:a + top_n].min()
            scores[a + top_n:b] = floor - np.arange(1, b - a - top_n + 1)
    return Run.from_columns([run.queries[c] for c in qcodes.tolist()], docs, scores,
                            kind="scored", name=name or run.name, source=f"<{name or 'rerank'}>")


class RerankRetriever(Retriever):
    """A retriever whose top ``top_n`` are reranked: search ``base`` to max(k, top_n), rerank, keep
    k.

    Example:
        >>> from rankwise.retrieval.bm25 import BM25Retriever
        >>> chunks = [
        ...     CorpusChunk("a", "a", 0, 9, "red apple"),
        ...     CorpusChunk("b", "b", 0, 15, "red apple juice"),
        ... ]
        >>> r = RerankRetriever(BM25Retriever(quiet=True), lambda q, t: len(t), quiet=True)
        >>> r.index(chunks); r.search({"q": "red apple"}, k=2).ranking("q")
        ['b', 'a']
    """

    def __init__(self, base: Retriever, scorer: str | PathLike | Scorer | PairScorer, *, top_n: int = 100,
                 name: str | None = None, quiet: bool = False, **model_kwargs) -> None:
        self.base = base
        self.scorer = make_scorer(scorer, **model_kwargs)
        self.top_n = check_k(top_n)
        self.name = name or f"{base.name}+rerank"
        self.quiet = quiet
        self._texts: dict[str, str] = {}

    def index(self, chunks: Sequence[CorpusChunk]) -> None:
        chunks = list(chunks)
        self.base.index(chunks)
        self._texts = {c.id: c.indexed_text for c in chunks}

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        k = check_k(k)
        run = self.base.search(queries, max(k, self.top_n))
        return self.rerank(run, queries).truncate(k)

    def rerank(self, run: Run, queries: Mapping[str, str]) -> Run:
        """Rerank a run of the base retriever computed already."""
        return rerank(run, queries, self._texts, self.scorer, top_n=self.top_n, name=self.name, quiet=self.quiet)
