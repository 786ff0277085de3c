"""A JSON Lines test set read as columns: cases, chunks, reference ids and passages as flat arrays.

:func:`iter_case_columns` reads the file a block of lines at a time with Arrow's JSON reader (one
typed column per field, no Python object per chunk) and yields one :class:`CaseColumns` per block:
the case ids, each case's chunks (id, doc_id, start, end, score, text length), its reference ids
and passages, every string interned as an integer code. It reads only what it can prove the
object reader (:func:`rankwise.data.testset.load_testset`) would read to the same cases; anything
else — another file format, a field this reader leaves out (``calls``, ``contexts``,
``ground_truths``, a passage's ``hop``, LangChain documents), a value of another type, a line the
object reader would refuse (bad JSON, two objects on a line, a lone surrogate, bytes that are not
UTF-8, a duplicate key or case id, a negative offset ...) — raises :class:`NotColumnar`, and the
caller reads the file with the object reader, which accepts it or names file, line and field.
Errors therefore have one source.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = path.write_text(json.dumps({"id": "q1", "retrieved_context_ids": ["a", "b"],
    ...                                 "reference_context_ids": ["b"]}) + "\\n")
    >>> batch = next(iter_case_columns(path))
    >>> batch.ids, batch.chunk_offsets.tolist(), batch.string(batch.chunk_id).tolist()
    (['q1'], [0, 2], ['a', 'b'])
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.columns import np_valid, np_values, single_array, string_hashes, take

__all__ = ["CaseColumns", "NotColumnar", "iter_case_columns", "DEFAULT_BLOCK_BYTES", "MAX_OFFSET"]

DEFAULT_BLOCK_BYTES = 16 << 20  # lines read per block (whole lines): bounds the memory of any file size
MAX_OFFSET = 2**40  # larger character offsets go to the object reader (float sums stay exact here)
_ID_FIELDS = ("id", "query_id", "qid", "question_id", "case_id")  # data.testset.ID_FIELDS, in its order
_TEXT_FIELDS = ("user_input", "question", "query", "reference", "ground_truth", "response", "answer")
# known fields only the object reader reads; ``chunks``: a records file (``is_records_file``)
_OBJECT_ONLY = ("contexts", "ground_truths", "calls", "chunks")
_CHUNK = pa.struct([("id", pa.string()), ("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                    ("score", pa.float64()), ("text", pa.string())])
_PASSAGE = pa.struct([("text", pa.string()), ("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64())])
_SCHEMA = pa.schema([(n, pa.string()) for n in _ID_FIELDS + _TEXT_FIELDS]
                    + [("retrieved_context_ids", pa.list_(pa.string())),
                       ("reference_context_ids", pa.list_(pa.string())),
                       ("retrieved_contexts", pa.list_(_CHUNK)), ("reference_contexts", pa.list_(_PASSAGE))])
_TWO_OBJECTS = re.compile(rb"\}[ \t]*\{")  # two objects on one line (Arrow reads both; a line holds one)


class NotColumnar(Exception):  # noqa: N818 - a signal to the caller, not an error a user sees
    """This file is not one the columnar reader reads exactly; the reason says why (read it with
    :func:`~rankwise.data.testset.load_testset`)."""


@dataclass(eq=False)
class CaseColumns:
    """One block of cases as flat arrays. Codes index :attr:`strings` (-1: null); offsets are -1
    when absent; per-chunk arrays are in case order, then rank order.

    Attributes:
        ids: the case ids (a missing or empty id: the case's 1-based position in the file).
        first: the 0-based position in the file of the block's first case.
        chunk_offsets: (cases + 1) where each case's chunks start.
        chunk_id, chunk_doc: each chunk's id and doc_id codes.
        chunk_start, chunk_end: each chunk's offsets.
        chunk_score: each chunk's score (NaN: none).
        chunk_text: each chunk's text length in characters (-1: no text).
        ref_offsets, ref_id: each case's reference ids (codes, in the order given).
        ref_given: the case lists reference ids (an empty list counts: ``[]`` is given, null is
            not).
        passage_offsets, passage_doc, passage_start, passage_end: each case's reference passages.
        passage_text: the passage has a text.
        has_reference: the case has a reference answer (``reference`` / ``ground_truth``).
        pool, pick: every string of the block, and where each code's string is in it
            (:attr:`strings`: code -> string).
        user_fields: the case fields the test set reader keeps as the user's own.
    """

    ids: list[str]
    first: int
    chunk_offsets: np.ndarray
    chunk_id: np.ndarray
    chunk_doc: np.ndarray
    chunk_start: np.ndarray
    chunk_end: np.ndarray
    chunk_score: np.ndarray
    chunk_text: np.ndarray
    ref_offsets: np.ndarray
    ref_id: np.ndarray
    ref_given: np.ndarray
    passage_offsets: np.ndarray
    passage_doc: np.ndarray
    passage_start: np.ndarray
    passage_end: np.ndarray
    passage_text: np.ndarray
    has_reference: np.ndarray
    pool: pa.Array
    pick: np.ndarray
    user_fields: tuple[str, ...] = ()

    @property
    def n_codes(self) -> int:
        """Distinct strings in the block."""
        return len(self.pick)

    @property
    def strings(self) -> pa.Array:
        """Code -> string."""
        return take(self.pool, self.pick)

    @property
    def n(self) -> int:
        """Cases in the block."""
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        """Chunks per case."""
        return np.diff(self.chunk_offsets)

    def chunk_case(self) -> np.ndarray:
        """Each chunk's case (0-based in the block); worked out once per block."""
        return self._case_of("chunk", self.chunk_offsets)

    def passage_case(self) -> np.ndarray:
        """Each reference passage's case."""
        return self._case_of("passage", self.passage_offsets)

    def ref_case(self) -> np.ndarray:
        """Each reference id's case."""
        return self._case_of("ref", self.ref_offsets)

    def chunk_rank(self) -> np.ndarray:
        """Each chunk's 0-based position in its case's list."""
        if "_chunk_rank" not in self.__dict__:
            self.__dict__["_chunk_rank"] = _frozen(np.arange(len(self.chunk_id), dtype=np.int64)
                                                  - self.chunk_offsets[:-1][self.chunk_case()])
        return self.__dict__["_chunk_rank"]

    def _case_of(self, what: str, offsets: np.ndarray) -> np.ndarray:
        key = f"_{what}_case"  # (not the method's own name: it would shadow it)
        if key not in self.__dict__:
            self.__dict__[key] = _frozen(np.repeat(np.arange(self.n, dtype=np.int64), np.diff(offsets)))
        return self.__dict__[key]

    def string(self, codes: np.ndarray) -> np.ndarray:
        """The strings of ``codes`` (None for -1), as a numpy object array."""
        codes = np.asarray(codes, dtype=np.int64)
        out = np.empty(len(codes), dtype=object)
        known = codes >= 0
        out[known] = take(self.pool, self.pick[codes[known]]).to_pylist() if known.any() else []
        return out


def _frozen(values: np.ndarray) -> np.ndarray:
    """``values``, read-only: a block's shared indices cannot be changed in place by one caller."""
    values.flags.writeable = False
    return values


def iter_case_columns(path: str | os.PathLike, *, block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[CaseColumns]:
    """The cases of a JSON Lines test set, a block of whole lines at a time (module docstring);
    :class:`NotColumnar` when the object reader must read it. Case ids are not checked across
    blocks: the caller does (a repeated id is the object reader's to report)."""
    path = Path(path)
    if path.suffix.lower() in (".csv", ".tsv", ".json", ".parquet"):
        raise NotColumnar(f"a {path.suffix} file")
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise NotColumnar(str(exc)) from None
    first = 0
    with fh:
        for block in _blocks(fh, block_bytes):
            batch = _read_block(block, first)
            if batch is not None:
                first += batch.n
                yield batch
    if first == 0:
        raise NotColumnar("no case")


def _blocks(fh, block_bytes: int) -> Iterator[bytes]:
    """Whole lines, about ``block_bytes`` at a time; the file's BOM dropped, CR and CRLF read as LF
    (as the object reader reads them)."""
    rest = b""
    start = True
    while True:
        data = fh.read(block_bytes)
        if not data:
            break
        data = rest + data
        if start:
            data, start = data.removeprefix(b"\xef\xbb\xbf"), False
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if cut == 0:
            rest = data
            continue
        block, rest = data[:cut], data[cut:]
        yield _lf(block)
    if rest:
        yield _lf(rest)


def _lf(block: bytes) -> bytes:
    return block.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in block else block


def _rows_in(block: bytes) -> int:
    """The lines the object reader reads as cases: those holding more than spaces and tabs (any
    other blank line is refused by Arrow, so the counts cannot agree by chance)."""
    arr = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], ends + 1))
    ends = np.concatenate((ends, [len(arr)]))
    filled = ends > starts
    starts, ends = starts[filled], ends[filled]
    padded = (arr[starts] == 32) | (arr[starts] == 9)
    blank = sum(1 for s, e in zip(starts[padded].tolist(), ends[padded].tolist(), strict=True)
                if not block[s:e].strip(b" \t"))
    return int(len(starts) - blank)


def _read_block(block: bytes, first: int) -> CaseColumns | None:
    """One block as columns; None when it holds blank lines only."""
    import pyarrow.json as pj

    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        raise NotColumnar("bytes that are not UTF-8") from None
    if _TWO_OBJECTS.search(block):
        raise NotColumnar("two objects on one line")
    rows = _rows_in(block)
    if rows == 0:
        return None
    table = None
    for size in (1 << 20, len(block) + 1):  # Arrow's 1 MB blocks are its fastest; a longer line needs more
        try:
            table = pj.read_json(pa.BufferReader(block), read_options=pj.ReadOptions(use_threads=False, block_size=size),
                                 parse_options=pj.ParseOptions(explicit_schema=_SCHEMA,
                                                               unexpected_field_behavior="infer"))
            break
        except (pa.ArrowException, ValueError) as exc:
            if "straddling" not in str(exc) or size > len(block):
                raise NotColumnar(f"Arrow cannot read it as typed columns ({exc})") from None
    if table.num_rows != rows:
        raise NotColumnar("a case spread over several lines")
    extra = tuple(n for n in table.column_names if n not in _SCHEMA.names)
    if any(n in _OBJECT_ONLY for n in extra):
        raise NotColumnar(f"fields only the object reader reads ({', '.join(extra)})")
    return _columns(table, first, extra)


def _column(table: pa.Table, name: str) -> pa.Array:
    return single_array(table.column(name))


def _case_ids(table: pa.Table, first: int) -> list[str]:
    """The first id field given and not empty, else the case's position (as the object reader)."""
    ids = pc.coalesce(*[_column(table, n) for n in _ID_FIELDS])
    out = ids.to_pylist()
    for i, value in enumerate(out):
        if not value:
            out[i] = str(first + i + 1)
    return out


def _lists(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """A list column's offsets (a null list: empty) and its values."""
    counts = pc.list_value_length(arr)
    lengths = np.where(np_valid(counts), np_values(counts), 0).astype(np.int64)
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = arr.flatten()
    if len(values) != offsets[-1]:
        raise NotColumnar("a list column Arrow laid out unexpectedly")
    return offsets, values


def _fields(values: pa.Array, kind: pa.StructType, what: str) -> dict[str, pa.Array]:
    """A struct column's children by name; a null item or a key of no known field goes to the
    object reader."""
    names = [values.type.field(i).name for i in range(values.type.num_fields)]
    unknown = sorted(set(names) - {kind.field(i).name for i in range(kind.num_fields)})
    if unknown:
        raise NotColumnar(f"{what} with keys {unknown}")
    if values.null_count:
        raise NotColumnar(f"a null {what}")
    return dict(zip(names, values.flatten(), strict=True))


def _ints(arr: pa.Array, what: str) -> np.ndarray:
    """Offsets as int64 with -1 for null; negative or huge ones go to the object reader."""
    out = np_values(arr).astype(np.int64)
    valid = np_valid(arr)
    if (out[valid] < 0).any() or (out[valid] >= MAX_OFFSET).any():
        raise NotColumnar(f"a {what} offset below 0 or past {MAX_OFFSET}")
    return np.where(valid, out, -1)


def _spans(start: np.ndarray, end: np.ndarray, what: str) -> None:
    if ((start >= 0) & (end >= 0) & (end < start)).any():
        raise NotColumnar(f"a {what} ending before it starts")


def _intern(parts: list[pa.Array]) -> tuple[list[np.ndarray], pa.Array, np.ndarray]:
    """Dense integer codes for the strings of ``parts`` (equal strings, equal codes; -1: null) and
    code -> string. Strings are grouped by a 64-bit hash and every group is confirmed equal byte
    for byte (two strings sharing a hash go to the object reader)."""
    strings = pa.concat_arrays([a.cast(pa.string()) for a in parts])
    n = len(strings)
    hashes = string_hashes(strings) if n else np.zeros(0, dtype=np.uint64)
    present = np.flatnonzero(np_valid(strings)) if n else np.zeros(0, dtype=np.int64)
    order = present[np.argsort(hashes[present])]
    ordered = hashes[order]
    same = ordered[1:] == ordered[:-1]
    if same.any() and not np_values(pc.equal(take(strings, order[:-1][same]), take(strings, order[1:][same]))).all():
        raise NotColumnar("two strings share a hash")
    new = np.concatenate(([True], ~same)) if len(order) else np.zeros(0, dtype=bool)
    codes = np.full(n, -1, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    bounds = np.cumsum([0] + [len(a) for a in parts])
    return [codes[bounds[i]:bounds[i + 1]] for i in range(len(parts))], strings, order[new]


def _spread(values: np.ndarray, where: np.ndarray, fill) -> np.ndarray:
    out = np.full(len(where), fill, dtype=values.dtype)
    out[where] = values
    return out


def _columns(table: pa.Table, first: int, extra: tuple[str, ...]) -> CaseColumns:
    n = table.num_rows
    rc_offsets, chunks = _lists(_column(table, "retrieved_contexts"))
    rid_col = _column(table, "retrieved_context_ids")
    rid_offsets, rid_values = _lists(rid_col)
    both = np_valid(rid_col) & np_valid(_column(table, "retrieved_contexts"))
    if both.any():
        raise NotColumnar("retrieved_contexts beside retrieved_context_ids")
    ref_col = _column(table, "reference_context_ids")
    ref_offsets, ref_values = _lists(ref_col)
    if ref_values.null_count:
        raise NotColumnar("a null reference id")
    passage_offsets, passages = _lists(_column(table, "reference_contexts"))
    c = _fields(chunks, _CHUNK, "chunk")
    p = _fields(passages, _PASSAGE, "reference passage")
    # a case's chunks: its retrieved_contexts objects, else its retrieved_context_ids
    by_objects = np.diff(rc_offsets) > 0
    chunk_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(by_objects, np.diff(rc_offsets), np.diff(rid_offsets)), out=chunk_offsets[1:])
    from_ids = np.repeat(~by_objects, np.where(by_objects, np.diff(rc_offsets), np.diff(rid_offsets)))
    k = int(chunk_offsets[-1])
    # interned strings: chunk ids, chunk doc_ids, reference ids, passage doc_ids
    parts = [c.get("id", pa.nulls(len(chunks), pa.string())), c.get("doc_id", pa.nulls(len(chunks), pa.string())),
             rid_values, ref_values, p.get("doc_id", pa.nulls(len(passages), pa.string()))]
    (obj_id, obj_doc, ids_id, ref_id, passage_doc), pool, pick = _intern(parts)
    if not len(chunks):  # chunks by id only: the other fields absent (constant views, no memory)
        chunk_id = ids_id
        chunk_doc = chunk_start = chunk_end = chunk_text = np.broadcast_to(np.int64(-1), (k,))
        chunk_score = np.broadcast_to(np.float64(np.nan), (k,))
    else:
        start, end = _ints(c["start"], "chunk"), _ints(c["end"], "chunk")
        _spans(start, end, "chunk")
        score = np_values(c["score"])
        valid = np_valid(c["score"])
        if np.isinf(score[valid]).any():
            raise NotColumnar("an infinite chunk score")
        sizes = pc.utf8_length(c["text"])
        text = np.where(np_valid(sizes), np_values(sizes), -1)
        score = np.where(valid, score, np.nan)
        if not ((text >= 0) | (obj_id >= 0) | ((obj_doc >= 0) & (start >= 0) & (end >= 0))).all():
            raise NotColumnar("a chunk with no text, id or span")
        if len(rid_values):  # both kinds of case in the block: lay each chunk where its case has it
            objects = ~from_ids
            chunk_id = np.empty(k, dtype=np.int64)
            chunk_id[from_ids], chunk_id[objects] = ids_id, obj_id
            chunk_doc, chunk_start, chunk_end, chunk_score, chunk_text = (
                _spread(values, objects, fill) for values, fill in
                ((obj_doc, -1), (start, -1), (end, -1), (score, np.nan), (text, -1)))
        else:
            chunk_id, chunk_doc, chunk_start, chunk_end, chunk_score, chunk_text = obj_id, obj_doc, start, end, score, text
    p_start = _ints(p["start"], "passage") if len(passages) else np.zeros(0, dtype=np.int64)
    p_end = _ints(p["end"], "passage") if len(passages) else np.zeros(0, dtype=np.int64)
    _spans(p_start, p_end, "passage")
    p_text = np_valid(p["text"]) if len(passages) else np.zeros(0, dtype=bool)
    if not (p_text | ((passage_doc >= 0) & (p_start >= 0) & (p_end >= 0))).all():
        raise NotColumnar("a reference passage with no text or span")
    reference = pc.coalesce(_column(table, "reference"), _column(table, "ground_truth"))
    return CaseColumns(_case_ids(table, first), first, chunk_offsets, chunk_id, chunk_doc, chunk_start, chunk_end,
                       chunk_score, chunk_text, ref_offsets, ref_id, np_valid(ref_col), passage_offsets, passage_doc,
                       p_start, p_end, p_text, np_valid(reference), pool, pick, extra)
