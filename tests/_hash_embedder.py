"""A small deterministic hashed bag-of-words embedder, with wrappers for LangChain, LlamaIndex,
Haystack and rankwise's DenseRetriever, so every framework ranks with the same vectors offline.

Frameworks' fake embeddings give one constant vector (all ties) or random ones; this one gives
meaningful, reproducible rankings: lower-cased word tokens, each hashed (BLAKE2b, not Python's
salted ``hash``) to one of ``DIM`` buckets with a sign, term counts damped by ``1 + log(tf)``,
L2-normalised.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re

import numpy as np

DIM = 1024
_WORD = re.compile(r"[a-z0-9_]+")


def hash_embed(text: str, dim: int = DIM) -> list[float]:
    """The embedding of one text as a list of floats (unit length, or all zeros for a text with no
    word)."""
    return _hash_vector(text, dim).tolist()


@functools.lru_cache(maxsize=8192)
def _hash_vector(text: str, dim: int) -> np.ndarray:
    """The embedding as a read-only float64 array, computed once per text: the frameworks' tests
    embed the same Kestrel chunks many times (each index rebuilt, and rankwise's own pipeline beside
    it)."""
    counts: dict[str, int] = {}
    for w in _WORD.findall(text.lower()):
        counts[w] = counts.get(w, 0) + 1
    vec = [0.0] * dim
    for w, tf in counts.items():
        h = int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little")
        vec[h % dim] += (1.0 + math.log(tf)) * (1.0 if (h >> 32) & 1 else -1.0)
    norm = math.sqrt(sum(x * x for x in vec))
    out = np.array([x / norm for x in vec] if norm else vec, dtype=np.float64)
    out.flags.writeable = False
    return out


class RankwiseHashEmbedder:
    """Drop-in for rankwise's ``Embedder``: ``DenseRetriever(embedder=RankwiseHashEmbedder())``."""

    model_key = "hash-bow"

    def embed(self, texts, *, description: str = "") -> np.ndarray:
        return np.asarray([_hash_vector(t, DIM) for t in texts], dtype=np.float32).reshape(len(texts), DIM)


def langchain_embeddings():
    from langchain_core.embeddings import Embeddings

    class HashEmbeddings(Embeddings):
        def embed_documents(self, texts):
            return [hash_embed(t) for t in texts]

        def embed_query(self, text):
            return hash_embed(text)

    return HashEmbeddings()


def llamaindex_embedding():
    from llama_index.core.embeddings import BaseEmbedding

    class HashEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query):
            return hash_embed(query)

        def _get_text_embedding(self, text):
            return hash_embed(text)

        async def _aget_query_embedding(self, query):
            return hash_embed(query)

    return HashEmbedding(model_name="hash-bow", embed_batch_size=64)
