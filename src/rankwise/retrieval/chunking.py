"""Chunking with exact character offsets: ``chunk.text == document.text[chunk.start:chunk.end]``.

The recursive splitter cuts a document at the coarsest separator that gives pieces no longer than
``chunk_size`` (blank lines, then line breaks, then sentence ends, then whitespace, then a hard
cut), and packs consecutive pieces greedily into chunks of at most ``chunk_size`` characters.
Separators stay attached to the end of the piece before them, so the chunks of a document cover
**every** character of it, whitespace included: no gaps, nothing dropped. Each chunk after the first
starts at most ``chunk_overlap`` characters before the previous one ends, at a word start, and never
cuts into the middle of a word to make room for overlap. Offsets count Python string characters
(code points), not bytes.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from rankwise._atomic import atomic_write
from rankwise.data.corpus import Corpus, Document
from rankwise.data.text import iter_json_lines
from rankwise.errors import InputError

__all__ = [
    "CorpusChunk", "SEPARATORS", "DEFAULT_SEPARATORS", "split_text", "chunk_document", "chunk_corpus", "write_chunks",
    "read_chunks", "check_chunking",
]

#: Named separator levels, coarsest first. A match's end is a cut point (the separator ends the
#: piece).
SEPARATORS: dict[str, str] = {
    "paragraph": r"\n[^\S\n]*\n\s*",
    "line": r"\n\s*",
    "sentence": r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|(?<=[\u3002\uff01\uff1f])\s*",
    "word": r"\s+",
}
DEFAULT_SEPARATORS: tuple[str, ...] = ("paragraph", "line", "sentence", "word")
_WORD_START = re.compile(r"(?<=\s)\S")


@dataclass(frozen=True)
class CorpusChunk:
    """A span of a document: ``text == document.text[start:end]``.

    ``id`` is ``"{doc_id}#{start}-{end}"`` for a split document and the document id itself in
    whole-document mode, so a chunk id names one exact span whatever chunk size produced it.
    ``title`` (the document's title) is prepended for indexing when set, never part of ``text``.

    Example:
        >>> CorpusChunk("d1#0-5", "d1", 0, 5, "Hello").to_json()
        {'id': 'd1#0-5', 'doc_id': 'd1', 'start': 0, 'end': 5, 'text': 'Hello'}
    """

    id: str
    doc_id: str
    start: int
    end: int
    text: str
    title: str | None = None

    @property
    def indexed_text(self) -> str:
        """What a retriever indexes: the title (if any) on its own line, then the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    def to_json(self) -> dict:
        """The chunk as a JSON object: ``id``, ``doc_id``, ``start``, ``end``, ``text``."""
        return {"id": self.id, "doc_id": self.doc_id, "start": self.start, "end": self.end, "text": self.text}


def _check_sizes(chunk_size: int, chunk_overlap: int) -> None:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 0:
        raise InputError(f"must be a whole number >= 0 (0 = whole documents), got {chunk_size!r}",
                         field="chunk_size")
    if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int) or chunk_overlap < 0:
        raise InputError(f"must be a whole number >= 0, got {chunk_overlap!r}", field="chunk_overlap")
    if chunk_size == 0 and chunk_overlap:
        raise InputError("overlap needs chunking: set chunk_size > 0 or chunk_overlap 0", field="chunk_overlap")
    if chunk_size and chunk_overlap >= chunk_size:
        raise InputError(f"must be smaller than chunk_size ({chunk_size}), got {chunk_overlap}",
                         field="chunk_overlap")


def _compile(separators: Sequence[str]) -> list[re.Pattern]:
    out = []
    for sep in separators:
        pattern = SEPARATORS.get(sep, sep)
        try:
            out.append(re.compile(pattern))
        except re.error as exc:
            raise InputError(f"not a separator name ({', '.join(SEPARATORS)}) nor a valid regex: {exc}",
                             field="separators") from None
    return out


def _pieces(text: str, a: int, b: int, size: int, levels: list[re.Pattern]) -> list[tuple[int, int]]:
    """Cut ``text[a:b]`` into contiguous pieces of at most ``size`` characters, coarsest separators
    first."""
    if b - a <= size:
        return [(a, b)]
    for depth, pattern in enumerate(levels):
        cuts = sorted({m.end() for m in pattern.finditer(text, a, b) if a < m.end() < b})
        if not cuts:
            continue
        out: list[tuple[int, int]] = []
        for s, e in zip([a, *cuts], [*cuts, b], strict=True):
            if e - s <= size:
                out.append((s, e))
            else:
                out.extend(_pieces(text, s, e, size, levels[depth + 1:]))
        return out
    return [(s, min(s + size, b)) for s in range(a, b, size)]


def split_text(
    text: str,
    chunk_size: int,
    chunk_overlap: int = 0,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the chunks of ``text``; ``chunk_size`` 0 gives the whole text.

    Spans are at most ``chunk_size`` long, start at 0, end at ``len(text)``, and each starts at or
    before the previous one's end (overlap at most ``chunk_overlap``), so every character is
    covered. ``separators``: names from :data:`SEPARATORS` or regular expressions, coarsest first.

    Example:
        >>> split_text("One two. Three four five.", 20)
        [(0, 9), (9, 25)]
        >>> split_text("aaa bbb ccc ddd", 8, 4)
        [(0, 8), (4, 12), (8, 15)]
    """
    _check_sizes(chunk_size, chunk_overlap)
    if not text:
        return []
    if chunk_size == 0 or len(text) <= chunk_size:
        return [(0, len(text))]
    pieces = _pieces(text, 0, len(text), chunk_size, _compile(separators))
    bounds = sorted({s for s, _ in pieces} | {m.start() for m in _WORD_START.finditer(text)})
    spans: list[tuple[int, int]] = []
    start, i, n = 0, 0, len(pieces)
    while i < n:
        end = pieces[i][1]
        i += 1
        while i < n and pieces[i][1] - start <= chunk_size:
            end = pieces[i][1]
            i += 1
        spans.append((start, end))
        if i >= n:
            break
        low = max(end - chunk_overlap, pieces[i][1] - chunk_size, start + 1)
        start = bounds[bisect.bisect_left(bounds, low)] if low < end else end
        start = min(start, end)
    return spans


def chunk_document(
    doc: Document,
    chunk_size: int = 0,
    chunk_overlap: int = 0,
    *,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
    titles: bool = True,
) -> list[CorpusChunk]:
    """The chunks of one document (none for an empty text); ``chunk_size`` 0 = one whole-document
    chunk.

    Example:
        >>> [c.id for c in chunk_document(Document("d1", "One two. Three four five."), 20)]
        ['d1#0-9', 'd1#9-25']
    """
    spans = split_text(doc.text, chunk_size, chunk_overlap, separators)
    title = doc.title if titles else None
    if chunk_size == 0:
        return [CorpusChunk(doc.id, doc.id, s, e, doc.text[s:e], title) for s, e in spans]
    return [CorpusChunk(f"{doc.id}#{s}-{e}", doc.id, s, e, doc.text[s:e], title) for s, e in spans]


def chunk_corpus(
    corpus: Corpus | Iterable[Document],
    chunk_size: int = 0,
    chunk_overlap: int = 0,
    *,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
    titles: bool = True,
) -> list[CorpusChunk]:
    """Chunk every document, in corpus order. Empty documents give no chunk (nothing to retrieve).

    ``titles``: carry each document's title on its chunks so retrievers index it with the text.

    Example:
        >>> chunks = chunk_corpus(Corpus.from_dict({"d1": "alpha beta", "d2": "gamma"}))
        >>> [(c.id, c.text) for c in chunks]
        [('d1', 'alpha beta'), ('d2', 'gamma')]
    """
    _check_sizes(chunk_size, chunk_overlap)
    seps = tuple(separators)
    _compile(seps)
    out: list[CorpusChunk] = []
    for doc in corpus:
        out.extend(chunk_document(doc, chunk_size, chunk_overlap, separators=seps, titles=titles))
    return out


def check_chunking(chunks: Sequence[CorpusChunk], corpus: Corpus, *, source: str = "<chunks>") -> None:
    """Raise :class:`InputError` unless every chunk's text is exactly its document's
    ``text[start:end]``.

    Example:
        >>> corpus = Corpus.from_dict({"d1": "alpha beta"})
        >>> check_chunking(chunk_corpus(corpus, 6), corpus)
    """
    for n, c in enumerate(chunks, start=1):
        if c.doc_id not in corpus:
            raise InputError(f"chunk '{c.id}' names document '{c.doc_id}', not in {corpus.source}", source=source,
                             line=n, field="doc_id")
        doc = corpus[c.doc_id].text
        if not (0 <= c.start <= c.end <= len(doc)) or doc[c.start:c.end] != c.text:
            raise InputError(f"chunk '{c.id}': text differs from document '{c.doc_id}'[{c.start}:{c.end}]",
                             source=source, line=n, field="text")


def write_chunks(chunks: Iterable[CorpusChunk], path: str | PathLike) -> int:
    """Write chunks as JSON Lines (``id``, ``doc_id``, ``start``, ``end``, ``text``); returns the
    count."""
    count = 0
    with atomic_write(path) as fh:
        for c in chunks:
            fh.write(json.dumps(c.to_json(), ensure_ascii=False) + "\n")
            count += 1
    return count


def read_chunks(path: str | PathLike, corpus: Corpus | None = None) -> list[CorpusChunk]:
    """Read a chunks JSONL written by :func:`write_chunks`; with ``corpus``, check every offset.

    Example:
        >>> chunks = read_chunks("run.trec.chunks.jsonl")  # doctest: +SKIP
    """
    p = Path(path)
    out: list[CorpusChunk] = []
    seen: dict[str, int] = {}
    for number, obj in iter_json_lines(p):
        for name, kind in (("id", str), ("doc_id", str), ("start", int), ("end", int), ("text", str)):
            if name not in obj:
                raise InputError("missing", source=p, line=number, field=name)
            if not isinstance(obj[name], kind) or isinstance(obj[name], bool):
                raise InputError(f"must be a {kind.__name__}, got {obj[name]!r}", source=p, line=number,
                                 field=name)
        if obj["id"] in seen:
            raise InputError(f"chunk id '{obj['id']}' appears twice (first at line {seen[obj['id']]})",
                             source=p, line=number, field="id")
        if not 0 <= obj["start"] <= obj["end"] or obj["end"] - obj["start"] != len(obj["text"]):
            raise InputError(f"offsets {obj['start']}-{obj['end']} do not fit a text of {len(obj['text'])} "
                             "characters", source=p, line=number, field="end")
        seen[obj["id"]] = number
        out.append(CorpusChunk(obj["id"], obj["doc_id"], obj["start"], obj["end"], obj["text"]))
    if corpus is not None:
        check_chunking(out, corpus, source=str(p))
    return out
