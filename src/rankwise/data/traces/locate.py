"""Offsets for traced chunks that carry none: each chunk's text located in the corpus it was cut from.

The LlamaIndex and Haystack instrumentors (and hand-made traces) write a document's text, id and metadata but
not where in its source document it sits, so span verdicts have nothing to compare. Given the documents, each
chunk without offsets is looked for in its own document (the one its metadata names, by id or file name)
first, then in every document: exactly, then with whitespace, case, quotes and dashes normalised — the locator
``rankwise synth`` places its passages with (:mod:`rankwise.testsets.locate`). A located chunk takes the
corpus's document id and the span; one not found keeps no offsets and is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from os import PathLike
from typing import Any

__all__ = ["Locator", "corpus_documents"]


def corpus_documents(corpus: Any) -> dict[str, str]:
    """``{doc_id: text}`` from a corpus path (a ``.jsonl`` file, a BEIR folder, a folder of text files), a
    mapping, or a :class:`rankwise.retrieval.corpus.Corpus`.

    Example:
        >>> corpus_documents({"d1": "alpha"})
        {'d1': 'alpha'}
    """
    if isinstance(corpus, Mapping):
        return {str(k): str(v) for k, v in corpus.items()}
    if isinstance(corpus, (str, PathLike)):
        from rankwise.retrieval.corpus import load_corpus

        corpus = load_corpus(corpus)
    return {d.id: d.text for d in corpus}


class Locator:
    """Places chunks without offsets in a set of documents, counting how (``exact``, ``normalised``, ``not
    found``; ``had offsets`` for chunks that came with theirs).

    Example:
        >>> from rankwise.data.items import to_item
        >>> loc = Locator({"rules.md": "Setup.  Each player\\ndraws five cards."})
        >>> item = to_item({"text": "Each player draws five cards.", "metadata": {"file_name": "rules.md"}})
        >>> loc.place(item, "rules.md"), item.doc_id, item.start, item.end, dict(loc.counts)
        (True, 'rules.md', 8, 37, {'normalised': 1})
    """

    def __init__(self, documents: Mapping[str, str]):
        self.documents = dict(documents)
        self.counts: Counter = Counter()
        self._norm: dict[str, tuple[str, list[int]]] = {}
        names: dict[str, list[str]] = {}
        for doc_id in self.documents:
            names.setdefault(doc_id.replace("\\", "/").rsplit("/", 1)[-1], []).append(doc_id)
        self._by_name = {k: v[0] for k, v in names.items() if len(v) == 1}

    def document_of(self, doc_id: str | None) -> str | None:
        """The corpus id a chunk's document id names: itself, else the one document with its file name.

        Example:
            >>> Locator({"guide/rules.md": "x"}).document_of("/home/me/guide/rules.md")
            'guide/rules.md'
        """
        if doc_id is None:
            return None
        if doc_id in self.documents:
            return doc_id
        return self._by_name.get(doc_id.replace("\\", "/").rsplit("/", 1)[-1])

    def _normalised(self, doc_id: str) -> tuple[str, list[int]]:
        from rankwise.testsets.locate import normalise

        if doc_id not in self._norm:
            self._norm[doc_id] = normalise(self.documents[doc_id])
        return self._norm[doc_id]

    def find(self, text: str, doc_id: str | None = None) -> tuple[str, int, int, str] | None:
        """``(corpus doc id, start, end, how)`` of ``text``: in its own document first, then in the others;
        exactly (as written, then without its outer whitespace), then normalised.

        Example:
            >>> Locator({"a": "one two", "b": "three  four"}).find("three four")
            ('b', 0, 11, 'normalised')
        """
        from rankwise.testsets.locate import locate

        quote = text.strip()
        if not quote:
            return None
        own = self.document_of(doc_id)
        order = ([own] if own is not None else []) + [d for d in self.documents if d != own]
        for exact in dict.fromkeys((text, quote)):  # as written (its spaces are the chunk's), then stripped
            for d in order:
                hit = self.documents[d].find(exact)
                if hit >= 0:
                    return d, hit, hit + len(exact), "exact"
        for d in order:
            found = locate(quote, self.documents[d], _norm=self._normalised(d))
            if found is not None:
                return d, found.start, found.end, found.how
        return None

    def place(self, item: Any, doc_id: str | None) -> bool:
        """Give a :class:`rankwise.data.items.RawItem` without offsets its document and span (True when
        located); an item that has offsets, or no text, is left as it is."""
        if item.start is not None:
            self.counts["had offsets"] += 1
            return False
        if not item.text or not item.text.strip():
            self.counts["not found"] += 1
            return False
        found = self.find(item.text, doc_id)
        if found is None:
            self.counts["not found"] += 1
            return False
        item.doc_id, item.start, item.end, how = found
        self.counts[how] += 1
        return True
