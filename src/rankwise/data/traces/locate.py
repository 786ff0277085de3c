"""Offsets for traced chunks that carry none: each chunk's text located in the corpus it was cut
from.

The LlamaIndex and Haystack instrumentors (and hand-made traces) write a document's text, id and
metadata but not where in its source document it sits, so span verdicts have nothing to compare.
Given the documents, each chunk without offsets is looked for in its own document (the one its
metadata names, by id or file name) first, then in every document: exactly, then with whitespace,
case, quotes and dashes normalised — the locator ``rankwise synth`` places its passages with
(:mod:`rankwise.data.locate`). A located chunk takes the corpus's document id and the span; one not
found keeps no offsets and is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from os import PathLike
from typing import Any

__all__ = ["Locator", "PassageLocator", "corpus_documents"]
_INT64_MAX = 2**63 - 1  # the largest offset a test set holds


def corpus_documents(corpus: Any) -> dict[str, str]:
    """``{doc_id: text}`` from a corpus path (a ``.jsonl`` file, a BEIR folder, a folder of text
    files), a mapping, or a :class:`rankwise.data.corpus.Corpus`.

    Example:
        >>> corpus_documents({"d1": "alpha"})
        {'d1': 'alpha'}
    """
    if isinstance(corpus, Mapping):
        return {str(k): str(v) for k, v in corpus.items()}
    if isinstance(corpus, (str, PathLike)):
        from rankwise.data.corpus import load_corpus

        corpus = load_corpus(corpus)
    return {d.id: d.text for d in corpus}


class Locator:
    """Places chunks without offsets in a set of documents, counting how (``exact``, ``normalised``,
    ``not found``; ``had offsets`` for chunks that came with theirs).

    Example:
        >>> from rankwise.data.items import to_item
        >>> loc = Locator({"rules.md": "Setup.  Each player\\ndraws five cards."})
        >>> item = to_item(
        ...     {"text": "Each player draws five cards.", "metadata": {"file_name": "rules.md"}}
        ... )
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
        """The corpus id a chunk's document id names: itself, else the one document with its file
        name.

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
        from rankwise.data.locate import normalise

        if doc_id not in self._norm:
            self._norm[doc_id] = normalise(self.documents[doc_id])
        return self._norm[doc_id]

    def find(self, text: str, doc_id: str | None = None) -> tuple[str, int, int, str] | None:
        """``(corpus doc id, start, end, how)`` of ``text``: in its own document first, then in the
        others; exactly (as written, then without its outer whitespace), then normalised.

        Example:
            >>> Locator({"a": "one two", "b": "three  four"}).find("three four")
            ('b', 0, 11, 'normalised')
        """
        from rankwise.data.locate import locate

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
        """Give a :class:`rankwise.data.items.RawItem` without offsets its document and span (True
        when located); an item that has offsets, or no text, is left as it is."""
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


OVERLAP = 16  #: characters a chunk and a passage must share at an end to place the chunk by it


def _aligned(text: str, piece: str) -> int | None:
    """Where ``text`` starts relative to ``piece`` when the two agree on where they overlap: one
    inside the other, or an end of one the start of the other over :data:`OVERLAP` characters or
    more."""
    for head, other, sign in ((text, piece, 1), (piece, text, -1)):
        m = min(OVERLAP, len(head))
        at = other.find(head[:m])
        while at >= 0:
            n = min(len(head), len(other) - at)
            if n >= m and other[at:at + n] == head[:n]:
                return sign * at
            at = other.find(head[:m], at + 1)
    return None


class PassageLocator(Locator):
    """Without a corpus, the test set's own documents where it has them: its reference passages that
    say where they sit (``doc_id``, ``start``, ``end`` and their text) are pieces of their
    documents. A chunk whose text lies inside such a piece, holds one, or overlaps one at an end
    (exactly, over :data:`OVERLAP` characters or more) is placed (counted ``in reference
    passages``); the others keep no offsets (``not found``: a corpus would place them).

    Example:
        >>> from rankwise.data.items import to_item
        >>> loc = PassageLocator([("rules.md", 100, "Each player draws five cards.")])
        >>> item = to_item({"text": "Setup. Each player draws five cards."})
        >>> loc.place(item, None), item.doc_id, item.start, item.end
        (True, 'rules.md', 93, 129)
    """

    def __init__(self, pieces: list[tuple[str, int, str]]):
        super().__init__({})
        self.pieces = [(d, s, t) for d, s, t in dict.fromkeys(pieces) if t]

    def find(self, text: str, doc_id: str | None = None) -> tuple[str, int, int, str] | None:
        """``(doc id, start, end, "in reference passages")`` of ``text`` from a passage it lies in,
        holds, or overlaps by at least :attr:`OVERLAP` characters at one end.

        Example:
            >>> loc = PassageLocator([("d", 10, "alpha beta gamma delta epsilon")])
            >>> loc.find("beta"), loc.find("gamma delta epsilon zeta eta theta")
            (('d', 16, 20, 'in reference passages'), ('d', 21, 55, 'in reference passages'))
        """
        own = [p for p in self.pieces if p[0] == doc_id] + [p for p in self.pieces if p[0] != doc_id]
        for d, start, piece in own:
            at = _aligned(text, piece)
            if at is not None and 0 <= start + at <= _INT64_MAX - len(text):
                return d, start + at, start + at + len(text), "in reference passages"
        return None

    @classmethod
    def from_testset(cls, testset: Any) -> PassageLocator | None:
        """The locator of a test set's located reference passages (None when it has none)."""
        pieces = [(p.doc_id, p.start, p.text) for case in testset for p in case.reference_contexts
                  if p.doc_id is not None and p.start is not None and p.text
                  and (p.end is None or p.end - p.start == len(p.text))]
        return cls(pieces) if pieces else None
