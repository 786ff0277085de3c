"""Run retrieval setups end to end: chunk a corpus once, index, search, fuse, rerank, keep the chunk
table.

:func:`run_retrievers` runs several setups over the same chunks and shares their parts: with
``["bm25", "dense", "hybrid"]`` BM25 and dense are indexed and searched once and the hybrid fuses
their runs. :func:`run_retrieval` runs one. Each setup gives a :class:`RetrievalResult`: the run of
chunk ids, the chunk table (text and offsets of every chunk), document-level lifting and timings.

Example:
    >>> from rankwise.retrieval import Corpus, run_retrievers
    >>> corpus = Corpus.from_dict(
    ...     {"d1": "Wings stall at high angles of attack.", "d2": "Heat flows in slabs."}
    ... )
    >>> results = run_retrievers(corpus, {"q1": "when do wings stall"}, ["bm25"], k=5, quiet=True)
    >>> results["bm25"].run.ranking("q1"), results["bm25"].chunk("d1").text[:5]
    (['d1'], 'Wings')
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from rankwise._atomic import atomic_write
from rankwise.data import Run, write_jsonl_run, write_trec_run
from rankwise.data.corpus import Corpus, Document
from rankwise.errors import InputError
from rankwise.retrieval.base import Retriever, check_k, check_queries, import_extra
from rankwise.retrieval.chunking import DEFAULT_SEPARATORS, CorpusChunk, chunk_corpus, write_chunks
from rankwise.retrieval.hybrid import FusionMethod, fuse
from rankwise.retrieval.lifting import lift_to_documents

__all__ = ["RetrieverSpec", "RetrievalResult", "run_retrieval", "run_retrievers", "save_run", "as_corpus",
           "RETRIEVER_KINDS", "write_rag_testset", "chunk_depth", "run_defaults"]

RETRIEVER_KINDS = ("bm25", "dense", "hybrid")
Kind = Literal["bm25", "dense", "hybrid"]


@dataclass(frozen=True)
class RetrieverSpec:
    """A retrieval setup to run.

    ``kind``: "bm25", "dense", or "hybrid" (BM25 + dense fused by ``fusion``: "rrf" with ``rrf_k``,
    or "weighted" min-max score fusion with ``weights`` for (bm25, dense)). ``model``: embedding
    model (name or folder; default the bundled all-MiniLM-L6-v2). ``rerank``: cross-encoder
    name/folder or a callable ``(query, text) -> float`` applied to the top ``rerank_top_n``.
    ``bm25``: options for :class:`~rankwise.retrieval.bm25.BM25Retriever` (k1, b, stemmer,
    stopwords).

    Example:
        >>> RetrieverSpec.parse("hybrid").label
        'hybrid'
        >>> RetrieverSpec("dense", rerank=lambda q, t: 0.0).label
        'dense+rerank'
    """

    kind: Kind = "bm25"
    model: str | None = None
    rerank: Any = None
    rerank_top_n: int = 100
    fusion: FusionMethod = "rrf"
    weights: tuple[float, ...] | None = None
    rrf_k: int = 60
    fusion_depth: int = 100
    bm25: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in RETRIEVER_KINDS:
            raise InputError(f"unknown retriever {self.kind!r}; expected one of {', '.join(RETRIEVER_KINDS)}",
                             field="retriever")
        if self.fusion not in ("rrf", "weighted"):
            raise InputError(f"unknown fusion {self.fusion!r}; expected 'rrf' or 'weighted'", field="fusion")
        check_k(self.rerank_top_n)
        check_k(self.fusion_depth)

    @classmethod
    def parse(cls, text: str, **options) -> RetrieverSpec:
        """"bm25", "dense", "hybrid" (= "hybrid-rrf") or "hybrid-weighted"."""
        key = text.strip().lower()
        if key in ("hybrid-rrf", "rrf"):
            return cls("hybrid", fusion="rrf", **options)
        if key in ("hybrid-weighted", "weighted"):
            return cls("hybrid", fusion="weighted", **options)
        return cls(key, **options)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        base = self.kind if self.kind != "hybrid" or self.fusion == "rrf" else "hybrid-weighted"
        return f"{base}+rerank" if self.rerank is not None else base


@dataclass
class RetrievalResult:
    """What one setup retrieved: ``run`` of chunk ids (best first), the chunk table, timings in
    seconds.

    ``timings``: "chunking", "index", "search", "fusion", "rerank", "total". Parts shared between
    setups (the BM25 and dense indexes a hybrid reuses) count in full for each, so ``total`` is what
    the setup costs on its own given the same embedding cache.
    """

    name: str
    run: Run
    chunks: list[CorpusChunk]
    timings: dict[str, float]
    spec: RetrieverSpec | None = None

    @cached_property
    def _chunk_index(self) -> dict[str, CorpusChunk]:
        return {c.id: c for c in self.chunks}

    def chunk(self, chunk_id: str) -> CorpusChunk:
        """The chunk with this id (text, doc_id, start, end)."""
        try:
            return self._chunk_index[chunk_id]
        except KeyError:
            raise KeyError(f"no chunk '{chunk_id}'") from None

    @cached_property
    def _per_query(self) -> dict:
        return self.run.to_dict()

    def ranked_chunks(self, query_id: str) -> list[tuple[CorpusChunk, float | None]]:
        """The retrieved chunks of one query with their scores, best first."""
        scores = self._per_query.get(query_id, {})
        if isinstance(scores, list):
            return [(self.chunk(c), None) for c in scores]
        return [(self.chunk(c), s) for c, s in scores.items()]

    def contexts(self, query_id: str) -> list[dict]:
        """The retrieved chunks of one query as RAG test-set contexts: ``id``, ``text``, ``doc_id``,
        ``start``, ``end``, ``score`` (the rich ``retrieved_contexts`` form ``rankwise eval-rag``
        reads)."""
        return [{**c.to_json(), "score": s} for c, s in self.ranked_chunks(query_id)]

    def retrieved_chunks(self) -> list[CorpusChunk]:
        """Every chunk the run holds at least once, in chunk-table order."""
        wanted = set(self.run.doc_ids.to_pylist())
        return [c for c in self.chunks if c.id in wanted]

    def documents(self, k: int | None = None) -> Run:
        """The run lifted to documents (a document ranks where its best chunk ranks), top ``k``
        kept."""
        return lift_to_documents(self.run, self.chunks, depth=k, name=self.name)


def as_corpus(corpus: Corpus | Mapping[str, str] | Iterable[Document]) -> Corpus:
    """A :class:`Corpus` from a Corpus, ``{doc_id: text}`` or Documents."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, Mapping):
        return Corpus.from_dict(corpus)
    return Corpus.from_documents(corpus)


def _as_specs(retrievers) -> list[tuple[str, RetrieverSpec | Retriever]]:
    if isinstance(retrievers, (str, RetrieverSpec, Retriever)):
        retrievers = [retrievers]
    items = list(retrievers.items()) if isinstance(retrievers, Mapping) else [(None, r) for r in retrievers]
    out: list[tuple[str, RetrieverSpec | Retriever]] = []
    for label, r in items:
        if isinstance(r, str):
            r = RetrieverSpec.parse(r)
        if isinstance(r, RetrieverSpec):
            out.append((label or r.label, r))
        elif isinstance(r, Retriever):
            out.append((label or r.name, r))
        else:
            raise InputError(f"a retriever is a name ({', '.join(RETRIEVER_KINDS)}), a RetrieverSpec or a "
                             f"Retriever; got {type(r).__name__}", field="retriever")
    labels = [lab for lab, _ in out]
    dup = next((lab for lab in labels if labels.count(lab) > 1), None)
    if dup is not None:
        raise InputError(f"two retrievers are named '{dup}'; name them (a mapping or RetrieverSpec(name=...))",
                         field="retriever")
    if not out:
        raise InputError("no retriever given", field="retriever")
    return out


class _Shared:
    """Component retrievers built, indexed and searched once, reused by every setup that needs them.
    """

    def __init__(self, chunks: list[CorpusChunk], queries: Mapping[str, str], depth: int, *, cache_dir, quiet: bool,
                 threads: int | None):
        self.chunks, self.queries, self.depth = chunks, queries, depth
        self.cache_dir, self.quiet, self.threads = cache_dir, quiet, threads
        self._runs: dict[Any, tuple[Run, float, float]] = {}
        self._scorers: dict[str, Any] = {}

    def _build(self, key) -> Retriever:
        kind, opts = key[0], dict(key[1])
        if kind == "bm25":
            from rankwise.retrieval.bm25 import BM25Retriever

            return BM25Retriever(quiet=self.quiet, **opts)
        from rankwise.retrieval.dense import DenseRetriever

        return DenseRetriever(opts.get("model"), cache_dir=self.cache_dir, threads=self.threads, quiet=self.quiet)

    def component(self, key, retriever: Retriever | None = None) -> tuple[Run, float, float]:
        """(run at the shared depth, index seconds, search seconds) of one component."""
        if key not in self._runs:
            retriever = retriever or self._build(key)
            t0 = time.perf_counter()
            retriever.index(self.chunks)
            t1 = time.perf_counter()
            run = retriever.search(self.queries, self.depth)
            t2 = time.perf_counter()
            self._runs[key] = (run, t1 - t0, t2 - t1)
        return self._runs[key]

    def scorer(self, rerank):
        if not isinstance(rerank, (str, PathLike)):
            from rankwise.retrieval.reranking import make_scorer

            return make_scorer(rerank)
        if str(rerank) not in self._scorers:
            from rankwise.retrieval.reranking import CrossEncoderScorer

            self._scorers[str(rerank)] = CrossEncoderScorer(rerank, threads=self.threads)
        return self._scorers[str(rerank)]


def _bm25_key(spec: RetrieverSpec):
    opts = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.bm25.items()}
    return ("bm25", tuple(sorted(opts.items())))


def _dense_key(spec: RetrieverSpec):
    return ("dense", (("model", spec.model),))


def run_retrievers(
    corpus: Corpus | Mapping[str, str] | Iterable[Document] | None,
    queries: Mapping[str, str],
    retrievers: Sequence[str | RetrieverSpec | Retriever] | Mapping[str, str | RetrieverSpec | Retriever]
    = ("bm25",),
    *,
    k: int = 100,
    chunk_size: int = 0,
    chunk_overlap: int = 0,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
    titles: bool = True,
    chunks: Sequence[CorpusChunk] | None = None,
    cache_dir: str | PathLike | bool | None = None,
    threads: int | None = None,
    quiet: bool = False,
) -> dict[str, RetrievalResult]:
    """Chunk ``corpus`` once and run every retriever over the chunks; results keyed by label.

    ``retrievers``: names ("bm25", "dense", "hybrid", "hybrid-weighted"), :class:`RetrieverSpec`
    objects, or any :class:`Retriever` (a mapping gives the labels). ``k``: chunks kept per query.
    ``chunk_size`` 0 keeps whole documents (chunk id = doc id); ``chunks`` skips chunking.
    ``titles``: index each document's title with its chunks. ``cache_dir``: embedding cache (False:
    none).

    Example:
        >>> corpus = {"d1": "BM25 ranks by term frequency.", "d2": "Dense models embed text."}
        >>> res = run_retrievers(corpus, {"q": "term frequency"}, ["bm25"], k=3, quiet=True)
        >>> res["bm25"].run.ranking("q")
        ['d1']
    """
    k = check_k(k)
    check_queries(queries)
    t0 = time.perf_counter()
    chunk_list = _chunk_list(corpus, chunks, chunk_size, chunk_overlap, separators, titles)
    chunking = time.perf_counter() - t0
    specs = _as_specs(retrievers)
    depth = k
    for _, s in specs:
        if isinstance(s, RetrieverSpec):
            if s.kind == "hybrid":
                depth = max(depth, s.fusion_depth)
            if s.rerank is not None:
                depth = max(depth, s.rerank_top_n)
    _check_libraries(specs)
    shared = _Shared(chunk_list, queries, depth, cache_dir=cache_dir, quiet=quiet, threads=threads)
    for _, s in specs:  # load rerankers first: a model that cannot load fails before any indexing
        if isinstance(s, RetrieverSpec) and s.rerank is not None:
            shared.scorer(s.rerank)
    texts = {c.id: c.indexed_text for c in chunk_list}
    results: dict[str, RetrievalResult] = {}
    for label, spec in specs:
        timings = {"chunking": chunking, "index": 0.0, "search": 0.0, "fusion": 0.0, "rerank": 0.0}
        if isinstance(spec, Retriever):
            run, ti, ts = shared.component(("custom", label), spec)
            timings["index"], timings["search"] = ti, ts
            results[label] = _result(label, run.truncate(k), chunk_list, timings, None)
            continue
        run = _run_spec(label, spec, shared, queries, texts, k, timings, quiet)
        results[label] = _result(label, run, chunk_list, timings, spec)
    return results


def _check_libraries(specs: list) -> None:
    """The optional libraries the specs need, imported before any model loads or index is built: a
    missing one is one line naming the extra to install (``pip install 'rankwise[retrieval]'``), not
    a traceback."""
    kinds = {s.kind for _, s in specs if isinstance(s, RetrieverSpec)}
    if kinds & {"bm25", "hybrid"}:
        from rankwise.retrieval.bm25 import load_bm25s

        load_bm25s()
    if kinds & {"dense", "hybrid"}:
        import_extra("faiss", "dense retrieval", package="faiss-cpu")


def _chunk_list(corpus: Corpus | Mapping[str, str] | Iterable[Document] | None, chunks: Sequence[CorpusChunk] | None,
                chunk_size: int, chunk_overlap: int, separators: Sequence[str], titles: bool) -> list[CorpusChunk]:
    """The chunks given, else the corpus chunked; no text at all raises."""
    if chunks is None:
        if corpus is None:
            raise InputError("give a corpus or chunks", field="corpus")
        chunk_list = chunk_corpus(as_corpus(corpus), chunk_size, chunk_overlap, separators=separators,
                                  titles=titles)
    else:
        chunk_list = list(chunks)
    if not chunk_list:
        raise InputError("the corpus has no text to retrieve from (every document is empty)", field="corpus")
    return chunk_list


def _run_spec(label: str, spec: RetrieverSpec, shared: _Shared, queries: Mapping[str, str],
              texts: Mapping[str, str], k: int, timings: dict[str, float], quiet: bool) -> Run:
    """One retriever spec's run (its components shared with the other specs; fused, reranked), cut
    at ``k``; index, search, fusion and rerank seconds go to ``timings``."""
    keys = {"bm25": [_bm25_key(spec)], "dense": [_dense_key(spec)],
            "hybrid": [_bm25_key(spec), _dense_key(spec)]}[spec.kind]
    parts = [shared.component(key) for key in keys]
    timings["index"] = sum(p[1] for p in parts)
    timings["search"] = sum(p[2] for p in parts)
    if spec.kind == "hybrid":
        t = time.perf_counter()
        run = fuse([p[0] for p in parts], spec.fusion, weights=spec.weights, rrf_k=spec.rrf_k,
                   depth=max(spec.fusion_depth, k), name=label)
        timings["fusion"] = time.perf_counter() - t
    else:
        run = parts[0][0]
    if spec.rerank is not None:
        from rankwise.retrieval.reranking import rerank

        t = time.perf_counter()
        run = rerank(run, queries, texts, shared.scorer(spec.rerank), top_n=spec.rerank_top_n, name=label,
                     quiet=quiet)
        timings["rerank"] = time.perf_counter() - t
    return replace(run.truncate(k), name=label)


def _result(label: str, run: Run, chunks: list[CorpusChunk], timings: dict[str, float], spec) -> RetrievalResult:
    timings["total"] = sum(v for key, v in timings.items() if key != "total")
    return RetrievalResult(label, replace(run, name=label), chunks, timings, spec)


def run_retrieval(
    corpus: Corpus | Mapping[str, str] | Iterable[Document] | None,
    queries: Mapping[str, str],
    retriever: str | RetrieverSpec | Retriever = "bm25",
    **options,
) -> RetrievalResult:
    """Run one retrieval setup (options as :func:`run_retrievers`).

    Example:
        >>> res = run_retrieval(
        ...     {"d1": "alpha beta", "d2": "gamma"}, {"q": "gamma"}, "bm25", quiet=True
        ... )
        >>> res.run.ranking("q")
        ['d2']
    """
    return next(iter(run_retrievers(corpus, queries, [retriever], **options).values()))


_WHITESPACE = re.compile(r"\s")


def save_run(result: RetrievalResult, path: str | PathLike, *, doc_level: bool = False, k: int | None = None,
             all_chunks: bool = False) -> tuple[Path, Path]:
    """Write the run (TREC, or JSONL when ``path`` ends in .jsonl) and ``<path>.chunks.jsonl``
    beside it.

    ``doc_level`` writes documents (each at its best chunk's rank), top ``k``; otherwise chunk ids.
    The chunks file holds every chunk the run retrieved (``all_chunks``: the whole chunk table),
    with ``id``, ``doc_id``, ``start``, ``end``, ``text``. Returns both paths.

    Example:
        >>> save_run(result, "bm25.trec", doc_level=True)  # doctest: +SKIP
        (PosixPath('bm25.trec'), PosixPath('bm25.trec.chunks.jsonl'))
    """
    out = Path(path)
    run = result.documents(k) if doc_level else (result.run.truncate(k) if k else result.run)
    jsonl = out.suffix.lower() in (".jsonl", ".ndjson")
    if not jsonl:
        for label, ids in (("query", run.queries), ("document" if doc_level else "chunk",
                                                    run.doc_ids.unique().to_pylist())):
            bad = next((i for i in ids if _WHITESPACE.search(i)), None)
            if bad is not None:
                raise InputError(f"{label} id {bad!r} contains whitespace, which a TREC run cannot hold; "
                                 "write a JSONL run instead (an output path ending in .jsonl)", source=out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        (write_jsonl_run if jsonl else write_trec_run)(run, out)
        chunks_path = out.with_name(out.name + ".chunks.jsonl")
        write_chunks(result.chunks if all_chunks else result.retrieved_chunks(), chunks_path)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", source=exc.filename or out) from None
    return out, chunks_path


def run_defaults(*, beir: bool, chunk_size: int | None = None, chunk_overlap: int | None = None,
                 doc_level: bool | None = None) -> tuple[int, int, bool]:
    """Chunking and output level for a run, defaults filled in: a BEIR collection is retrieved as
    whole documents and written as documents; a corpus is cut into 1000-character chunks (overlap
    min(100, size/2)) and written as chunks.

    Example:
        >>> (
        ...     run_defaults(beir=True),
        ...     run_defaults(beir=False),
        ...     run_defaults(beir=False, chunk_size=300),
        ... )
        ((0, 0, True), (1000, 100, False), (300, 100, False))
    """
    size = (0 if beir else 1000) if chunk_size is None else chunk_size
    overlap = (0 if size == 0 else min(100, size // 2)) if chunk_overlap is None else chunk_overlap
    return size, overlap, bool(beir) if doc_level is None else doc_level


def chunk_depth(k: int, *, doc_level: bool, chunk_size: int, factor: int = 10) -> int:
    """How many chunks to retrieve per query: ``k``, or ``factor * k`` when chunks are lifted to k
    documents (several chunks of one document may rank high, so k chunks would give fewer than k
    documents).

    Example:
        >>> (
        ...     chunk_depth(100, doc_level=True, chunk_size=500),
        ...     chunk_depth(100, doc_level=True, chunk_size=0),
        ... )
        (1000, 100)
    """
    return check_k(k) * factor if doc_level and chunk_size else check_k(k)


def write_rag_testset(result: RetrievalResult, queries_path: str | PathLike, path: str | PathLike) -> int:
    """Copy a JSONL query file / RAG test set, filling each case's ``retrieved_contexts`` with the
    chunks retrieved for it (``id``, ``text``, ``doc_id``, ``start``, ``end``, ``score``); other
    fields are kept.

    The result is a test set ``rankwise eval-rag`` scores directly. Returns the number of cases.
    """
    import json

    from rankwise.data.corpus import query_rows

    count = 0
    with atomic_write(path) as fh:
        for _, qid, _, obj in query_rows(queries_path):
            row = {key: value for key, value in obj.items() if key != "retrieved_context_ids"}
            if not any(key in row for key in ("id", "query_id", "qid", "question_id", "case_id")):
                row = {"id": qid, **row}
            if not any(key in row for key in ("question", "user_input", "query")):
                row["question"] = row.get("text")
            row["retrieved_contexts"] = result.contexts(qid)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count
