"""Retrieval pipelines to evaluate: corpora, chunking with exact offsets, BM25, dense, hybrid,
reranking.

Heavy libraries (bm25s, faiss, sentence-transformers, torch) load only when a retriever indexes or a
model loads, so importing this package is cheap.

Example:
    >>> from rankwise.retrieval import run_retrievers
    >>> res = run_retrievers(
    ...     {"d1": "red apple", "d2": "green pear"}, {"q": "apple"}, ["bm25"], quiet=True
    ... )
    >>> res["bm25"].run.ranking("q")
    ['d1']
"""

from rankwise.data.corpus import BeirDataset, Corpus, Document, load_beir, load_corpus, load_queries
from rankwise.retrieval.base import Retriever
from rankwise.retrieval.bm25 import BM25Retriever
from rankwise.retrieval.chunking import (
    CorpusChunk,
    chunk_corpus,
    chunk_document,
    read_chunks,
    split_text,
    write_chunks,
)
from rankwise.retrieval.dense import DenseRetriever, Embedder, EmbeddingCache
from rankwise.retrieval.hybrid import HybridRetriever, fuse, reciprocal_rank_fusion, score_fusion
from rankwise.retrieval.lifting import lift_to_documents
from rankwise.retrieval.models import DEFAULT_EMBEDDING_MODEL
from rankwise.retrieval.pipeline import (
    RetrievalResult,
    RetrieverSpec,
    run_retrieval,
    run_retrievers,
    save_run,
)
from rankwise.retrieval.reranking import CrossEncoderScorer, RerankRetriever, rerank

__all__ = [
    "BM25Retriever", "BeirDataset", "CorpusChunk", "Corpus", "CrossEncoderScorer", "DEFAULT_EMBEDDING_MODEL",
    "DenseRetriever", "Document", "Embedder", "EmbeddingCache", "HybridRetriever", "RerankRetriever",
    "RetrievalResult", "Retriever", "RetrieverSpec", "chunk_corpus", "chunk_document", "fuse",
    "lift_to_documents", "load_beir", "load_corpus", "load_queries", "read_chunks", "reciprocal_rank_fusion",
    "rerank", "run_retrieval", "run_retrievers", "save_run", "score_fusion", "split_text", "write_chunks",
]
