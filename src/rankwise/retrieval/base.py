"""The retriever interface: index chunks, then search queries to depth k and get a :class:`Run` of
chunk ids.

Also the small helpers every retriever shares: checking arguments, building the run, progress bars.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from rankwise.data import Run
from rankwise.data.columns import arrow_strings, np_values
from rankwise.errors import InputError, RankwiseError
from rankwise.progress import progress
from rankwise.retrieval.chunking import CorpusChunk

__all__ = ["Retriever", "check_chunks", "check_queries", "check_k", "hits_to_run", "id_order", "import_extra",
           "progress", "set_threads", "top_k", "require_index"]


class Retriever(ABC):
    """Anything that can index chunks and rank them for queries.

    Example:
        >>> from rankwise.retrieval.bm25 import BM25Retriever
        >>> r = BM25Retriever(quiet=True)
        >>> r.index(
        ...     [
        ...         CorpusChunk("a", "a", 0, 9, "red apple"),
        ...         CorpusChunk("b", "b", 0, 11, "green grape"),
        ...     ]
        ... )
        >>> r.search({"q1": "apple"}, k=5).ranking("q1")
        ['a']
    """

    #: the run name (TREC run tag) this retriever gives its runs
    name: str = "retriever"

    @abstractmethod
    def index(self, chunks: Sequence[CorpusChunk]) -> None:
        """Index the chunks (replaces any previous index)."""

    @abstractmethod
    def search(self, queries: Mapping[str, str], k: int) -> Run:
        """The top ``k`` chunk ids per query as a scored :class:`Run` (query ids as given)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def check_chunks(chunks: Sequence[CorpusChunk]) -> list[CorpusChunk]:
    """The chunks as a list; an empty list or a repeated chunk id is an :class:`InputError`."""
    chunks = list(chunks)
    if not chunks:
        raise InputError("nothing to index: no chunks (is the corpus empty?)", field="chunks")
    seen: set[str] = set()
    for c in chunks:
        if c.id in seen:
            raise InputError(f"chunk id '{c.id}' appears twice", field="chunks")
        seen.add(c.id)
    return chunks


def check_queries(queries: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Query ids and texts as two lists; a non-string text is an :class:`InputError`."""
    if not isinstance(queries, Mapping):
        raise InputError(f"queries must be a mapping {{query_id: text}}, got {type(queries).__name__}",
                         field="queries")
    ids, texts = [], []
    for qid, text in queries.items():
        if not isinstance(text, str):
            raise InputError(f"text of query '{qid}' is not a string", field="queries")
        ids.append(str(qid))
        texts.append(text)
    return ids, texts


def check_k(k: int) -> int:
    """``k`` as a positive int, else an :class:`InputError`."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"must be a whole number >= 1, got {k!r}", field="k")
    return int(k)


def require_index(indexed: bool, name: str) -> None:
    if not indexed:
        raise RankwiseError(f"{name}: call index(chunks) before search(queries, k)")


def hits_to_run(query_ids: Sequence[str], rows: Sequence[tuple[np.ndarray, np.ndarray]],
                chunk_ids: Sequence[str], *, name: str) -> Run:
    """A scored run from per-query ``(chunk positions, scores)`` pairs (positions index
    ``chunk_ids``)."""
    qids: list[str] = []
    docs: list[str] = []
    scores: list[np.ndarray] = []
    for qid, (positions, values) in zip(query_ids, rows, strict=True):
        qids.extend([qid] * len(positions))
        docs.extend(chunk_ids[int(p)] for p in positions)
        scores.append(np.asarray(values, dtype=np.float64))
    score_arr = np.concatenate(scores) if scores else np.zeros(0)
    # arrow_strings, not pa.array: pyarrow imports pandas to convert Python objects (docs/performance.md,
    # "Startup")
    return Run.from_columns(arrow_strings(qids), arrow_strings(docs), score_arr, kind="scored",
                            name=name, source=f"<{name}>")


def id_order(chunk_ids: Sequence[str]) -> np.ndarray:
    """For each chunk id, its position in byte order (ties in score go to the larger id, as
    trec_eval ranks)."""
    arr = arrow_strings(list(chunk_ids))
    order = np_values(pa.compute.sort_indices(arr)).astype(np.int64, copy=False)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def top_k(scores: np.ndarray, k: int, tie_order: np.ndarray, *, positive_only: bool = False
          ) -> tuple[np.ndarray, np.ndarray]:
    """Positions and scores of the ``k`` best entries, best first; equal scores go to the larger
    ``tie_order``.

    With ``positive_only`` entries scoring 0 or less are left out (a BM25 chunk sharing no query
    term).

    Example:
        >>> top_k(np.array([0.5, 0.9, 0.5, 0.0]), 2, np.array([0, 1, 2, 3]))
        (array([1, 2]), array([0.9, 0.5]))
    """
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(len(scores))
    if len(candidates) > k:
        threshold = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
        candidates = candidates[scores[candidates] >= threshold]
    order = np.lexsort((-tie_order[candidates], -scores[candidates].astype(np.float64)))[:k]
    chosen = candidates[order]
    return chosen, scores[chosen].astype(np.float64)


def set_threads(threads: int | None = None) -> int:
    """Threads for torch and FAISS: ``threads``, else $RANKWISE_THREADS, else the CPU count (at most
    8)."""
    if threads is None:
        env = os.environ.get("RANKWISE_THREADS")
        threads = int(env) if env and env.isdigit() and int(env) > 0 else min(os.cpu_count() or 1, 8)
    return max(1, int(threads))


def import_extra(module: str, needed_by: str, *, package: str | None = None, extra: str = "retrieval"):
    """``import module``; when it is missing (or fails to import), one :class:`RankwiseError` line
    naming the extra and the package to install, never a traceback.

    Example:
        >>> import_extra("math", "counting").__name__
        'math'
        >>> try:
        ...     import_extra("no_such_module_here", "dense retrieval", package="faiss-cpu")
        ... except RankwiseError as exc:
        ...     print(exc)
        dense retrieval needs no_such_module_here, which is not installed: pip install 'rankwise[retrieval]' (or pip install faiss-cpu)
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        fix = f"pip install 'rankwise[{extra}]' (or pip install {package or module})"
        if isinstance(exc, ModuleNotFoundError) and exc.name == module:
            raise RankwiseError(f"{needed_by} needs {module}, which is not installed: {fix}") from None
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise RankwiseError(f"{needed_by} needs {module}, which failed to import ({reason}): {fix}") from None
