"""BM25 over chunks with ``bm25s`` (Lucene's BM25 variant), optional Snowball stemming and
stopwords.

Tokens: lower-cased runs of two or more word characters (scikit-learn's / bm25s' pattern). A chunk
that shares no term with a query scores 0 and is not returned, so a run may hold fewer than k
chunks.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

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
    id_order,
    import_extra,
    require_index,
    top_k,
)
from rankwise.retrieval.chunking import CorpusChunk

__all__ = ["BM25Retriever", "Tokenizer", "load_bm25s"]

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


class _Unused:
    """An import finder that refuses the named top-level packages in the thread that installed it.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path=None, target=None):
        if name.partition(".")[0] in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r} (not needed by rankwise's BM25)", name=name)
        return None


def load_bm25s():
    """``bm25s``, imported without numba and scipy, which it would otherwise import whenever
    installed.

    rankwise's BM25 uses bm25s' default numpy backends only (``backend="numpy"``,
    ``csc_backend="numpy"``, scores from ``get_scores_from_ids``), so numba (and the scipy it checks
    for) and ``scipy.sparse`` would cost a ``rankwise run`` about 0.2 s of imports for nothing.
    Packages already imported are not hidden. A missing bm25s is one line naming the extra to
    install.

    Example:
        >>> load_bm25s().BM25().backend
        'numpy'
    """
    if sys.modules.get("bm25s") is not None:
        return sys.modules["bm25s"]
    hidden = _Unused(n for n in ("numba", "scipy") if n not in sys.modules)
    sys.meta_path.insert(0, hidden)
    try:
        return import_extra("bm25s", "BM25 retrieval")
    finally:
        sys.meta_path.remove(hidden)


class Tokenizer:
    """Lower-case, split into words, drop stopwords, stem (PyStemmer's Snowball stemmers).

    ``stemmer``: a Snowball language name ("english"), None, or any callable list[str] -> list[str].
    ``stopwords``: "en" (Lucene's 33 English stopwords, as bm25s), None, or an iterable of words.

    Example:
        >>> Tokenizer().tokenize("The wings are tested")
        ['wing', 'test']
    """

    def __init__(self, stemmer: str | Callable[[list[str]], list[str]] | None = "english",
                 stopwords: str | Iterable[str] | None = "en") -> None:
        self._stem_fn = _stemmer(stemmer)
        self._stopwords = _stopwords(stopwords)
        self._stems: dict[str, str] = {}

    def tokenize(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self._stopwords]
        if self._stem_fn is None:
            return words
        new = [w for w in dict.fromkeys(words) if w not in self._stems]
        if new:
            self._stems.update(zip(new, self._stem_fn(new), strict=True))
        return [self._stems[w] for w in words]


def _stemmer(stemmer):
    if stemmer is None or callable(stemmer):
        return stemmer
    try:
        import Stemmer
    except ImportError:
        raise InputError("stemming needs PyStemmer: pip install PyStemmer (or pass stemmer=None)",
                         field="stemmer") from None
    try:
        return Stemmer.Stemmer(stemmer).stemWords
    except KeyError:
        raise InputError(f"no Snowball stemmer for {stemmer!r}; languages: "
                         f"{', '.join(Stemmer.algorithms())}", field="stemmer") from None


def _stopwords(stopwords) -> frozenset[str]:
    if stopwords is None:
        return frozenset()
    if isinstance(stopwords, str):
        if stopwords.lower() not in ("en", "english"):
            raise InputError(f"built-in stopwords exist for 'en' only, got {stopwords!r}; pass a list of words",
                             field="stopwords")
        return frozenset(load_bm25s().stopwords.STOPWORDS_EN)
    return frozenset(w.lower() for w in stopwords)


class BM25Retriever(Retriever):
    """BM25 (``bm25s``, Lucene variant) over chunk texts, with the title prepended when chunks carry
    one.

    Example:
        >>> r = BM25Retriever(quiet=True)
        >>> r.index(
        ...     [
        ...         CorpusChunk("a", "a", 0, 18, "wing in slipstream"),
        ...         CorpusChunk("b", "b", 0, 14, "heat in slabs"),
        ...     ]
        ... )
        >>> r.search({"q1": "slipstream wings"}, k=10).ranking("q1")
        ['a']
    """

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stemmer: str | Callable | None = "english", stopwords: str | Iterable[str] | None = "en",
                 name: str = "bm25", quiet: bool = False) -> None:
        self.k1, self.b, self.method = k1, b, method
        self.tokenizer = Tokenizer(stemmer, stopwords)
        self.name = name
        self.quiet = quiet
        self._model = None
        self._indexed = False
        self._vocab: dict[str, int] = {}
        self._chunk_ids: list[str] = []
        self._tie_order = np.zeros(0, dtype=np.int64)

    def index(self, chunks: Sequence[CorpusChunk]) -> None:
        bm25s = load_bm25s()
        chunks = check_chunks(chunks)
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        with progress(f"{self.name}: tokenizing", len(chunks), quiet=self.quiet) as advance:
            for c in chunks:
                corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in self.tokenizer.tokenize(c.indexed_text)])
                advance(1)
        model = None
        if vocab:  # a corpus without a single token matches nothing
            model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            model.index((corpus_ids, dict(vocab)), show_progress=False)
        self._model = model
        self._indexed = True
        self._vocab = vocab
        self._chunk_ids = [c.id for c in chunks]
        self._tie_order = id_order(self._chunk_ids)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        require_index(self._indexed, self.name)
        k = check_k(k)
        qids, texts = check_queries(queries)
        rows = []
        empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        with progress(f"{self.name}: searching", len(qids), quiet=self.quiet) as advance:
            for text in texts:
                ids = [self._vocab[t] for t in self.tokenizer.tokenize(text) if t in self._vocab]
                if ids and self._model is not None:
                    scores = self._model.get_scores_from_ids(ids)
                    rows.append(top_k(scores, k, self._tie_order, positive_only=True))
                else:
                    rows.append(empty)
                advance(1)
        return hits_to_run(qids, rows, self._chunk_ids, name=self.name)
