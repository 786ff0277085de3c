"""Benchmarks bundled with rankwise as package data, used by ``rankwise demo``.

``kestrel`` is the manual of Kestrel DB, an invented distributed SQL database: 38 Markdown documents
(about 131,000 characters) and 73 questions, each with a reference answer and the exact passages
that answer it, located by character offsets into the documents. Questions come in four kinds:
``multi_passage`` (needs two or more passages, often from different documents), ``paraphrase``
(little word overlap with its passages: favours dense retrieval), ``keyword`` (config keys, error
codes, flags, metric names: favours BM25) and ``plain``.

Files: ``<name>/corpus.jsonl`` (``{"id", "title", "text"}`` a line, loadable as is by
``rankwise.data.corpus.load_corpus``) and ``<name>/questions.jsonl`` (``{"id", "question",
"reference", "kind", "reference_contexts": [{"text", "doc_id", "start", "end"}]}`` a line).

This module needs nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rankwise.data.corpus import Document
from rankwise.data.text import iter_json_lines
from rankwise.errors import InputError

if TYPE_CHECKING:
    from rankwise.data.testset import TestSet

__all__ = [
    "QUESTION_KINDS", "BundledFiles", "Document", "Passage", "Question", "bundled_names", "bundled_files",
    "load_bundled_corpus", "load_bundled_questions", "load_bundled_testset",
]

QUESTION_KINDS = ("multi_passage", "paraphrase", "keyword", "plain")
_HERE = Path(__file__).resolve().parent


class BundledFiles(NamedTuple):
    """Where a bundled benchmark's two files are."""

    corpus: Path
    questions: Path


@dataclass(frozen=True)
class Passage:
    """A ground-truth passage: ``corpus[doc_id].text[start:end] == text``.

    Example:
        >>> Passage("Installing", "install.md", 2, 12).to_dict()["end"]
        12
    """

    text: str
    doc_id: str
    start: int
    end: int

    def to_dict(self) -> dict:
        return {"text": self.text, "doc_id": self.doc_id, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Question:
    """A benchmark question with its reference answer, kind and answering passages.

    Example:
        >>> q = load_bundled_questions("kestrel")[0]
        >>> q.kind in QUESTION_KINDS and len(q.reference_contexts) >= 1
        True
    """

    id: str
    question: str
    reference: str
    kind: str
    reference_contexts: tuple[Passage, ...]

    def to_dict(self) -> dict:
        """The test-set row (the field names of docs/metrics.md §6), plus ``kind``."""
        return {"id": self.id, "question": self.question, "reference": self.reference, "kind": self.kind,
                "reference_contexts": [p.to_dict() for p in self.reference_contexts]}


def bundled_names() -> list[str]:
    """Names of the bundled benchmarks.

    Example:
        >>> "kestrel" in bundled_names()
        True
    """
    return sorted(p.name for p in _HERE.iterdir()
                  if p.is_dir() and (p / "corpus.jsonl").is_file() and (p / "questions.jsonl").is_file())


def bundled_files(name: str | PathLike = "kestrel") -> BundledFiles:
    """Paths of a benchmark's ``corpus.jsonl`` and ``questions.jsonl``.

    ``name`` is a bundled benchmark's name, or a folder holding those two files (a benchmark of your
    own in the same layout).

    Example:
        >>> bundled_files("kestrel").corpus.name
        'corpus.jsonl'
    """
    names = bundled_names()
    if isinstance(name, str) and name in names:
        folder = _HERE / name
    elif Path(name).is_dir():
        folder = Path(name)
        for file in ("corpus.jsonl", "questions.jsonl"):
            if not (folder / file).is_file():
                raise InputError(f"benchmark folder has no {file}", source=folder)
    else:
        raise InputError(f"no bundled benchmark {str(name)!r}; available: {', '.join(names) or 'none'}",
                         field="name")
    return BundledFiles(folder / "corpus.jsonl", folder / "questions.jsonl")


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    return iter_json_lines(path)


def _string(obj: dict, key: str, path: Path, number: int, *, optional: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not optional and value == ""):
        raise InputError(f"expected a non-empty string, got {value!r:.60}", source=path, line=number, field=key)
    return value


def load_bundled_corpus(name: str | PathLike = "kestrel") -> list[Document]:
    """The documents of a bundled benchmark, in their fixed order.

    Example:
        >>> docs = load_bundled_corpus("kestrel")
        >>> len(docs) >= 30 and sum(len(d.text) for d in docs) >= 100_000
        True
    """
    path = bundled_files(name).corpus
    docs: list[Document] = []
    seen: set[str] = set()
    for number, obj in _json_lines(path):
        doc_id = _string(obj, "id", path, number)
        if doc_id in seen:
            raise InputError(f"document id {doc_id!r} appears twice", source=path, line=number, field="id")
        seen.add(doc_id)
        docs.append(Document(doc_id, _string(obj, "text", path, number), _string(obj, "title", path, number,
                                                                                  optional=True)))
    return docs


def _passage(item: object, texts: dict[str, str], qid: str, i: int, path: Path, number: int) -> Passage:
    where = f"reference_contexts[{i}]"
    if not isinstance(item, dict):
        raise InputError(f"question {qid}: passage {i} is not an object", source=path, line=number, field=where)
    text, doc_id, start, end = item.get("text"), item.get("doc_id"), item.get("start"), item.get("end")
    if not isinstance(text, str) or not text:
        raise InputError(f"question {qid}: passage {i} has no text", source=path, line=number, field=where)
    if doc_id not in texts:
        raise InputError(f"question {qid}: passage {i} names unknown document {doc_id!r}", source=path,
                         line=number, field=f"{where}.doc_id")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(texts[doc_id])):
        raise InputError(f"question {qid}: passage {i} has invalid offsets {start!r}..{end!r} for {doc_id} "
                         f"({len(texts[doc_id])} characters)", source=path, line=number, field=where)
    found = texts[doc_id][start:end]
    if found != text:
        raise InputError(f"question {qid}: passage {i} ({text[:50]!r}...) is not at {doc_id}[{start}:{end}], "
                         f"which holds {found[:50]!r}...", source=path, line=number, field=where)
    return Passage(text, doc_id, start, end)


def load_bundled_questions(name: str | PathLike = "kestrel") -> list[Question]:
    """The questions of a bundled benchmark, every passage verified against the corpus.

    Raises :class:`~rankwise.errors.InputError` (a ``RankwiseError``) naming the question and the
    passage when a passage is not found at its offsets.

    Example:
        >>> qs = load_bundled_questions("kestrel")
        >>> len(qs) >= 60, sorted({q.kind for q in qs})
        (True, ['keyword', 'multi_passage', 'paraphrase', 'plain'])
    """
    texts = {d.id: d.text for d in load_bundled_corpus(name)}
    path = bundled_files(name).questions
    questions: list[Question] = []
    seen: set[str] = set()
    for number, obj in _json_lines(path):
        qid = _string(obj, "id", path, number)
        if qid in seen:
            raise InputError(f"question id {qid!r} appears twice", source=path, line=number, field="id")
        seen.add(qid)
        kind = _string(obj, "kind", path, number)
        if kind not in QUESTION_KINDS:
            raise InputError(f"question {qid}: kind {kind!r} is not one of {', '.join(QUESTION_KINDS)}",
                             source=path, line=number, field="kind")
        contexts = obj.get("reference_contexts")
        if not isinstance(contexts, list) or not contexts:
            raise InputError(f"question {qid}: no reference passages", source=path, line=number,
                             field="reference_contexts")
        passages = tuple(_passage(item, texts, qid, i, path, number) for i, item in enumerate(contexts))
        questions.append(Question(qid, _string(obj, "question", path, number), _string(obj, "reference", path,
                                                                                       number), kind, passages))
    return questions


def load_bundled_testset(name: str | PathLike = "kestrel") -> TestSet:
    """The questions as a :class:`~rankwise.data.testset.TestSet`: reference answers and passages,
    no chunks.

    Example:
        >>> ts = load_bundled_testset("kestrel")
        >>> ts["q01"].reference_contexts[0].span[0]
        'config-reference.md'
    """
    from rankwise.data.testset import testset_from_rows

    rows = [{k: v for k, v in q.to_dict().items() if k != "kind"} for q in load_bundled_questions(name)]
    return testset_from_rows(rows, source=str(bundled_files(name).questions))
