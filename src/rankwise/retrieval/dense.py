"""Dense retrieval: sentence-transformers embeddings, L2-normalised, searched by inner product in
FAISS.

Embeddings are cached on disk in SQLite, keyed by the model and the SHA-256 of the exact text
embedded, so a rerun embeds nothing and does not even load the model. Default cache:
``$RANKWISE_CACHE_DIR`` or ``~/.cache/rankwise`` (``$XDG_CACHE_HOME/rankwise``), file
``embeddings.sqlite3``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from rankwise.data import Run
from rankwise.errors import InputError
from rankwise.progress import progress
from rankwise.retrieval.base import (
    Retriever,
    check_chunks,
    check_k,
    check_queries,
    hits_to_run,
    import_extra,
    require_index,
    set_threads,
)
from rankwise.retrieval.chunking import CorpusChunk
from rankwise.retrieval.models import load_embedding_model, resolve_model

__all__ = ["DenseRetriever", "Embedder", "EmbeddingCache", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$RANKWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/rankwise``, else ``~/.cache/rankwise``."""
    if os.environ.get("RANKWISE_CACHE_DIR"):
        return Path(os.environ["RANKWISE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rankwise"


class EmbeddingCache:
    """Vectors on disk in one SQLite file, keyed by (model key, SHA-256 of the text).

    Example:
        >>> import tempfile
        >>> cache = EmbeddingCache(tempfile.mkdtemp())
        >>> cache.put("m", ["hi"], np.ones((1, 2), dtype=np.float32))
        >>> cache.get("m", ["hi", "bye"])[0].tolist(), cache.get("m", ["hi", "bye"])[1] is None
        ([1.0, 1.0], True)
    """

    def __init__(self, directory: str | PathLike) -> None:
        self.directory = Path(directory).expanduser()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.path = self.directory / "embeddings.sqlite3"
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, sha BLOB NOT NULL, "
                             "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, sha)) WITHOUT ROWID")
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot use the embedding cache: {exc}", source=self.directory,
                             field="cache_dir") from None

    @staticmethod
    def digest(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def get(self, model: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text, or None where there is none."""
        shas = [self.digest(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(shas))
        for i in range(0, len(unique), 500):
            part = unique[i:i + 500]
            rows = self._db.execute(
                f"SELECT sha, dim, vector FROM embeddings WHERE model = ? AND sha IN ({','.join('?' * len(part))})",
                [model, *part],
            )
            for sha, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if len(vec) == dim:
                    found[sha] = vec
        return [found.get(s) for s in shas]

    def put(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(model, self.digest(t), int(v.shape[0]), v.tobytes()) for t, v in zip(texts, vectors, strict=True)]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)

    def count(self, model: str | None = None) -> int:
        if model is None:
            return self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM embeddings WHERE model = ?", (model,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()


class Embedder:
    """Texts to L2-normalised float32 vectors, through the on-disk cache; the model loads only when
    needed.

    ``computed`` and ``reused`` count texts embedded by the model and texts found in the cache.
    ``cache_dir=False`` disables the cache. Texts are embedded longest first, ``batch_size`` at a
    time (default: 8 on the CPU, where small batches pad less: the demo's 442 chunks 40 -> 28
    CPU-seconds against batches of 64; 64 on an accelerator).

    Example:
        >>> emb = Embedder(quiet=True)  # doctest: +SKIP
        >>> emb.embed(["a cat", "a dog"]).shape  # doctest: +SKIP
        (2, 384)
    """

    def __init__(self, model: str | None = None, *, cache_dir: str | PathLike | bool | None = None,
                 batch_size: int | None = None, device: str = "cpu", threads: int | None = None,
                 allow_download: bool | None = None, quiet: bool = False) -> None:
        self.ref = resolve_model(model)
        self.batch_size = int(batch_size) if batch_size is not None else (8 if device == "cpu" else 64)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.device = device
        self.threads = threads
        self.allow_download = allow_download
        self.quiet = quiet
        if cache_dir is False:
            self.cache = None
        else:
            self.cache = EmbeddingCache(default_cache_dir() if cache_dir in (None, True) else cache_dir)
        self._model = None
        self.computed = 0
        self.reused = 0

    @property
    def model_key(self) -> str:
        return self.ref.key

    @property
    def model(self):
        if self._model is None:
            self._model = load_embedding_model(self.ref.name if not self.ref.local else self.ref.path,
                                               device=self.device, threads=self.threads,
                                               allow_download=self.allow_download)
        return self._model

    def embed(self, texts: Sequence[str], *, description: str = "embedding") -> np.ndarray:
        """One normalised vector per text (rows in input order)."""
        texts = list(texts)
        cached = self.cache.get(self.model_key, texts) if self.cache is not None else [None] * len(texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, cached, strict=True) if v is None))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            order = sorted(range(len(missing)), key=lambda i: len(missing[i]), reverse=True)
            with progress(f"{description} ({len(missing)} texts)", len(missing), quiet=self.quiet) as advance:
                model = self.model
                for i in range(0, len(order), self.batch_size):
                    batch = [missing[j] for j in order[i:i + self.batch_size]]
                    vecs = model.encode(batch, batch_size=len(batch), convert_to_numpy=True,
                                        normalize_embeddings=False, show_progress_bar=False)
                    vecs = _normalise(np.asarray(vecs, dtype=np.float32))
                    if self.cache is not None:
                        self.cache.put(self.model_key, batch, vecs)
                    fresh.update(zip(batch, vecs, strict=True))
                    advance(len(batch))
        self.computed += len(missing)
        self.reused += len(texts) - sum(v is None for v in cached)
        rows = [v if v is not None else fresh[t] for t, v in zip(texts, cached, strict=True)]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        dims = {len(r) for r in rows}
        if len(dims) > 1:
            raise InputError(f"cached vectors of model '{self.ref.name}' differ in length {sorted(dims)}; "
                             "delete the cache file", source=self.cache.path if self.cache else None)
        return _normalise(np.vstack(rows).astype(np.float32, copy=False))


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


class DenseRetriever(Retriever):
    """Embed chunks (title + text) and queries with one model; rank by cosine similarity (FAISS
    inner product).

    ``query_prefix`` / ``doc_prefix`` are prepended before embedding (e.g. "query: " / "passage: "
    for E5).

    Example:
        >>> r = DenseRetriever(quiet=True)  # doctest: +SKIP
        >>> r.index(chunks); run = r.search({"q1": "how do wings stall?"}, k=10)  # doctest: +SKIP
    """

    def __init__(self, model: str | None = None, *, cache_dir: str | PathLike | bool | None = None,
                 batch_size: int | None = None, query_prefix: str = "", doc_prefix: str = "", device: str = "cpu",
                 threads: int | None = None, allow_download: bool | None = None, name: str = "dense",
                 quiet: bool = False, embedder: Embedder | None = None) -> None:
        self.embedder = embedder or Embedder(model, cache_dir=cache_dir, batch_size=batch_size, device=device,
                                             threads=threads, allow_download=allow_download, quiet=quiet)
        self.query_prefix = query_prefix
        self.doc_prefix = doc_prefix
        self.threads = threads
        self.name = name
        self.quiet = quiet
        self._index = None
        self._chunk_ids: list[str] = []

    def index(self, chunks: Sequence[CorpusChunk]) -> None:
        faiss = import_extra("faiss", "dense retrieval", package="faiss-cpu")
        chunks = check_chunks(chunks)
        vectors = self.embedder.embed([self.doc_prefix + c.indexed_text for c in chunks],
                                      description=f"{self.name}: embedding chunks")
        faiss.omp_set_num_threads(set_threads(self.threads))
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._index = index
        self._chunk_ids = [c.id for c in chunks]

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        require_index(self._index is not None, self.name)
        k = check_k(k)
        qids, texts = check_queries(queries)
        if not qids:
            return hits_to_run([], [], self._chunk_ids, name=self.name)
        vectors = self.embedder.embed([self.query_prefix + t for t in texts],
                                      description=f"{self.name}: embedding queries")
        scores, positions = self._index.search(np.ascontiguousarray(vectors), min(k, len(self._chunk_ids)))
        rows = []
        for pos, val in zip(positions, scores, strict=True):
            keep = pos >= 0
            rows.append((pos[keep], val[keep].astype(np.float64)))
        return hits_to_run(qids, rows, self._chunk_ids, name=self.name)
