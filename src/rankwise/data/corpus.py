"""Corpora and query sets: a folder of text files, JSON Lines, or a BEIR folder.

A :class:`Document` keeps its text exactly as read (no stripping, no normalisation), so character
offsets into it stay valid for span ground truth and chunking.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from rankwise.data.qrels import Qrels
from rankwise.data.tabular import read_beir_qrels
from rankwise.data.text import iter_json_lines, iter_lines, read_bytes
from rankwise.errors import InputError

__all__ = [
    "Document", "Corpus", "BeirDataset", "load_corpus", "load_queries", "load_beir", "read_text_folder",
    "read_jsonl_corpus", "query_rows", "TEXT_SUFFIXES",
]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
_ID_FIELDS = ("_id", "id")


@dataclass(frozen=True)
class Document:
    """One document: its id, its text (offsets index into it) and an optional title.

    Example:
        >>> Document("manual/intro.md", "Hello.").text[0:5]
        'Hello'
    """

    id: str
    text: str
    title: str | None = None


@dataclass(frozen=True, eq=False)
class Corpus:
    """Documents in a fixed order, looked up by id.

    Example:
        >>> corpus = Corpus.from_dict({"d1": "alpha beta", "d2": "gamma"})
        >>> len(corpus), corpus["d2"].text
        (2, 'gamma')
    """

    documents: tuple[Document, ...]
    source: str = "<corpus>"
    _by_id: dict[str, Document] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, Document] = {}
        for doc in self.documents:
            if not isinstance(doc.id, str) or not doc.id:
                raise InputError(f"document id must be a non-empty string, got {doc.id!r}", source=self.source,
                                 field="id")
            if not isinstance(doc.text, str):
                raise InputError(f"text of document '{doc.id}' is not a string", source=self.source,
                                 field="text")
            if doc.id in index:
                raise InputError(f"document id '{doc.id}' appears twice", source=self.source, field="id")
            index[doc.id] = doc
        self._by_id.update(index)

    @classmethod
    def from_documents(cls, documents: Iterable[Document], *, source: str = "<corpus>") -> Corpus:
        """A corpus from :class:`Document` objects (ids must be unique)."""
        return cls(tuple(documents), source)

    @classmethod
    def from_dict(cls, texts: Mapping[str, str], *, source: str = "<dict>") -> Corpus:
        """A corpus from ``{doc_id: text}``."""
        return cls(tuple(Document(str(k), v) for k, v in texts.items()), source)

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def __getitem__(self, doc_id: str) -> Document:
        try:
            return self._by_id[doc_id]
        except KeyError:
            raise KeyError(f"no document '{doc_id}' in {self.source}") from None

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.documents]

    @property
    def n_chars(self) -> int:
        return sum(len(d.text) for d in self.documents)

    def __repr__(self) -> str:
        return f"Corpus(source={self.source!r}, documents={len(self)})"


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR folder: corpus, queries and the qrels of one split (None if the folder has none)."""

    corpus: Corpus
    queries: dict[str, str]
    qrels: Qrels | None
    qrels_path: Path | None
    root: Path


# --------------------------------------------------------------------------- readers
def _json_objects(path: Path) -> Iterator[tuple[int, dict]]:
    return iter_json_lines(path)


def _id_of(obj: dict, path: Path, number: int) -> str:
    for name in _ID_FIELDS:
        if name in obj:
            value = obj[name]
            if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
                raise InputError(f"must be a non-empty string or integer, got {value!r}", source=path,
                                 line=number, field=name)
            return str(value)
    raise InputError("missing; expected '_id' or 'id'", source=path, line=number, field="id")


def _text_of(obj: dict, name: str, path: Path, number: int, *, required: bool = True) -> str | None:
    if name not in obj or obj[name] is None:
        if required:
            raise InputError("missing", source=path, line=number, field=name)
        return None
    value = obj[name]
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type(value).__name__}", source=path, line=number, field=name)
    return value


def read_jsonl_corpus(path: str | PathLike) -> Corpus:
    """Read a JSON Lines corpus: one ``{"id" or "_id", "text", "title"?}`` object a line.

    Example:
        >>> corpus = read_jsonl_corpus("corpus.jsonl")  # doctest: +SKIP
    """
    path = Path(path)
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for number, obj in _json_objects(path):
        doc_id = _id_of(obj, path, number)
        if doc_id in seen:
            raise InputError(f"document id '{doc_id}' appears twice (first at line {seen[doc_id]})",
                             source=path, line=number, field="id")
        seen[doc_id] = number
        title = _text_of(obj, "title", path, number, required=False)
        docs.append(Document(doc_id, _text_of(obj, "text", path, number), title or None))
    if not docs:
        raise InputError("no documents", source=path)
    return Corpus(tuple(docs), str(path))


def read_text_folder(path: str | PathLike, *, suffixes: Iterable[str] = TEXT_SUFFIXES) -> Corpus:
    """Read every text file under a folder (recursively); the doc id is the path relative to it,
    with ``/``.

    Files are read as UTF-8 exactly (a byte-order mark is dropped); CRLF is kept, so offsets match
    the file.

    Example:
        >>> corpus = read_text_folder("docs/")  # doctest: +SKIP
    """
    root = Path(path)
    wanted = {s.lower() for s in suffixes}
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in wanted
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise InputError(f"no text files ({', '.join(sorted(wanted))}) in folder", source=root)
    docs = [_read_text_file(file, file.relative_to(root).as_posix()) for file in files]
    return Corpus(tuple(docs), str(root))


def _read_text_file(file: Path, doc_id: str) -> Document:
    data = file.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"bytes that are not UTF-8 at byte {exc.start}", source=file, line=line) from None
    return Document(doc_id, text.removeprefix("\ufeff"))


def load_corpus(path: str | PathLike) -> Corpus:
    """A corpus from a path: a ``.jsonl`` file, a BEIR folder (has ``corpus.jsonl``) or a folder of
    text files.

    Example:
        >>> corpus = load_corpus("tests/fixtures/cranfield")  # doctest: +SKIP
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", source=p)
    if p.is_dir():
        if (p / "corpus.jsonl").is_file():
            return read_jsonl_corpus(p / "corpus.jsonl")
        return read_text_folder(p)
    if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return read_jsonl_corpus(p)
    if p.suffix.lower() in TEXT_SUFFIXES:
        return Corpus((_read_text_file(p, p.name),), str(p))
    raise InputError("expected a .jsonl corpus, a BEIR folder or a folder of .txt/.md files", source=p)


QUERY_ID_FIELDS = ("_id", "id", "query_id", "qid", "question_id", "case_id")
QUERY_TEXT_FIELDS = ("text", "question", "user_input", "query")


def query_rows(path: str | PathLike) -> Iterator[tuple[int, str, str, dict]]:
    """``(line, query id, text, object)`` per line of a JSONL query file or RAG test set.

    The id is the first of ``_id``, ``id``, ``query_id``, ``qid``, ``question_id``, ``case_id``,
    else the 1-based position among the cases (as RAG test sets number cases); the text is the first
    of ``text``, ``question``, ``user_input``, ``query``.
    """
    p = Path(path)
    for position, (number, obj) in enumerate(_json_objects(p), start=1):
        qid = None
        for name in QUERY_ID_FIELDS:
            if obj.get(name) is not None:
                value = obj[name]
                if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
                    raise InputError(f"must be a non-empty string or integer, got {value!r}", source=p,
                                     line=number, field=name)
                qid = str(value)
                break
        text_field = next((n for n in QUERY_TEXT_FIELDS if obj.get(n) is not None), None)
        if text_field is None:
            raise InputError(f"missing; expected one of {list(QUERY_TEXT_FIELDS)}", source=p, line=number,
                             field="text")
        yield number, qid if qid is not None else str(position), _text_of(obj, text_field, p, number), obj


def load_queries(path: str | PathLike) -> dict[str, str]:
    """Queries from JSON Lines (``{"_id" or "id", "text"}``, or a RAG test set with ``question``) or
    a TSV/text file of ``query_id<TAB>text`` lines.

    Example:
        >>> queries = load_queries("queries.jsonl")  # doctest: +SKIP
    """
    p = Path(path)
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}

    def add(qid: str, text: str, number: int, field_name: str) -> None:
        if qid in queries:
            raise InputError(f"query id '{qid}' appears twice (first at line {lines[qid]})", source=p,
                             line=number, field=field_name)
        if not text.strip():
            raise InputError(f"query '{qid}' has an empty text", source=p, line=number, field="text")
        queries[qid] = text
        lines[qid] = number

    if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        for number, qid, text, _ in query_rows(p):
            add(qid, text, number, "id")
    else:
        for number, line in iter_lines(read_bytes(p), p):
            if not line.strip():
                continue
            qid, sep, text = line.partition("\t")
            if not sep:
                raise InputError("expected 'query_id<TAB>text'", source=p, line=number, field="text")
            if number == 1 and qid.strip().lower() in ("query_id", "query-id", "qid", "_id", "id"):
                continue
            add(qid.strip(), text, number, "query_id")
    if not queries:
        raise InputError("no queries", source=p)
    return queries


def load_beir(path: str | PathLike, *, split: str = "test") -> BeirDataset:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (qrels
    optional).

    Example:
        >>> data = load_beir("tests/fixtures/cranfield")  # doctest: +SKIP
        >>> len(data.corpus), len(data.queries)  # doctest: +SKIP
        (1400, 225)
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError("not a folder (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/)", source=root)
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).is_file():
            raise InputError(f"BEIR folder has no {name}", source=root)
    corpus = read_jsonl_corpus(root / "corpus.jsonl")
    queries = load_queries(root / "queries.jsonl")
    qrels_path = root / "qrels" / f"{split}.tsv"
    qrels = read_beir_qrels(qrels_path) if qrels_path.is_file() else None
    if qrels is None and (root / "qrels").is_dir():
        found = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        raise InputError(f"no qrels for split '{split}'; splits found: {', '.join(found) or 'none'}",
                         source=root / "qrels")
    return BeirDataset(corpus, queries, qrels, qrels_path if qrels is not None else None, root)
