"""Runs larger than memory: read a run file as a sequence of smaller runs, each holding whole queries.

A file whose rows are grouped by query (every query's rows together, as trec_eval's own output and
nearly every run writer leaves them) is read once, in batches, and cut at query boundaries. Any
other file is first partitioned on disk by a hash of the query id with Arrow datasets
(``pyarrow.dataset.write_dataset``), so that each partition holds whole queries and fits in memory;
the partitions are then read one at a time. Memory stays bounded by the block size either way.

TREC text runs (``qid iter docno rank score run_id``, one space or one tab between fields) and
Parquet runs (``query_id``, ``doc_id``, ``score`` columns) are read this way.

Example:
    >>> blocks = iter_run_blocks("big.trec", block_rows=2_000_000)  # doctest: +SKIP
    >>> sum(len(run) for run in blocks)  # doctest: +SKIP
    100000000
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data._columns import memory_pool, np_values, single_array, string_hashes
from rankwise.data.run import Run
from rankwise.errors import InputError

__all__ = ["iter_run_blocks", "read_parquet_run", "read_parquet_qrels", "NotGrouped", "DEFAULT_BLOCK_ROWS"]

DEFAULT_BLOCK_ROWS = 2_000_000
_RUN_COLUMNS = ["query_id", "iter", "doc_id", "rank", "score", "run_id"]
_TYPES = {"query_id": pa.string(), "doc_id": pa.string(), "score": pa.float64()}


class NotGrouped(Exception):
    """A query's rows are not all together: the file cannot be cut at query boundaries as it is."""


def is_parquet(path: str | os.PathLike) -> bool:
    """True for a ``.parquet`` / ``.pq`` path or a file starting with Parquet's magic bytes."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def read_parquet_run(path: str | os.PathLike, *, name: str | None = None) -> Run:
    """A run from Parquet with ``query_id``, ``doc_id`` and ``score`` columns (no score: ordered).

    Example:
        >>> run = read_parquet_run("run.parquet")  # doctest: +SKIP
    """
    import pyarrow.parquet as pq

    path = Path(path)
    columns = _parquet_columns(path, ["query_id", "doc_id"], optional=["score"])
    table = pq.read_table(path, columns=columns)
    scores = None
    if "score" in columns:
        scores = _float_column(table.column("score"), path)
    return Run.from_columns(table.column("query_id"), table.column("doc_id"), scores, name=name or path.stem,
                            source=str(path))


def read_parquet_qrels(path: str | os.PathLike):
    """Qrels from Parquet with ``query_id``, ``doc_id`` and ``relevance`` (integer) columns.

    Example:
        >>> qrels = read_parquet_qrels("qrels.parquet")  # doctest: +SKIP
    """
    import pyarrow.parquet as pq

    from rankwise.data.qrels import Qrels

    path = Path(path)
    columns = _parquet_columns(path, ["query_id", "doc_id", "relevance"])
    table = pq.read_table(path, columns=columns)
    grades = table.column("relevance")
    if grades.null_count:
        raise InputError("missing relevance", source=path, field="relevance")
    if pa.types.is_floating(grades.type) or pa.types.is_integer(grades.type):
        grades = np.asarray(single_array(grades).to_numpy(zero_copy_only=False))
    else:
        raise InputError(f"relevance must be integers, got {grades.type}", source=path, field="relevance")
    return Qrels.from_columns(table.column("query_id"), table.column("doc_id"), grades, source=str(path))


def _parquet_columns(path: Path, required: list[str], optional: list[str] = ()) -> list[str]:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", source=path) from None
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(f"no column {missing[0]!r}; Parquet columns: {names}", source=path, field=missing[0])
    return required + [c for c in optional if c in names]


def _float_column(column: pa.ChunkedArray | pa.Array, path: Path) -> np.ndarray:
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise InputError(f"score must be numbers, got {column.type}", source=path, field="score")
    if column.null_count:
        raise InputError("missing score", source=path, field="score")
    column = single_array(column)
    if column.type != pa.float64():
        column = column.cast(pa.float64())
    return np_values(column)


# ----------------------------------------------------------------------------- batches
class _Irregular(Exception):
    """The file is a valid run that Arrow's fixed-delimiter reader cannot take (fields after run_id, several
    spaces or tabs between fields, padded numbers): it is read again line by line (:func:`_exact_batches`)."""


def _batches(path: Path, batch_rows: int, exact: bool = False) -> Iterator[tuple[pa.Array, pa.Array, np.ndarray]]:
    """(query ids, doc ids, scores) of consecutive rows, in file order. Raises :class:`_Irregular` when a
    valid line needs the ``exact`` reader (lines split on runs of whitespace, as trec_eval and
    :func:`~rankwise.data.read_trec_run` read them)."""
    if exact and not is_parquet(path):
        yield from _exact_batches(path, batch_rows)
        return
    if is_parquet(path):
        import pyarrow.parquet as pq

        _parquet_columns(path, ["query_id", "doc_id", "score"])
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows,
                                                       columns=["query_id", "doc_id", "score"]):
            qids, docs = batch.column("query_id"), batch.column("doc_id")
            if pa.types.is_large_string(qids.type) or pa.types.is_string_view(qids.type):
                qids = qids.cast(pa.string())
            if pa.types.is_large_string(docs.type) or pa.types.is_string_view(docs.type):
                docs = docs.cast(pa.string())
            yield qids, docs, _float_column(batch.column("score"), path)
        return
    import pyarrow.csv as pcsv

    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", source=path) from None
    delimiter = "\t" if len(first.split(b"\t")) >= len(_RUN_COLUMNS) else " "
    # about batch_rows rows per Arrow block, from the first line's length
    block_size = int(min(max(len(first), 16) * batch_rows * 1.1, 1 << 30))
    def skip_comment(row) -> str:
        return "skip" if row.text is not None and row.text.lstrip().startswith("#") else "error"

    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=_RUN_COLUMNS, block_size=block_size),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False,
                                            invalid_row_handler=skip_comment),
            convert_options=pcsv.ConvertOptions(column_types=_TYPES, include_columns=list(_TYPES)),
            memory_pool=memory_pool(),
        )
        for batch in reader:
            qids, docs = batch.column("query_id"), batch.column("doc_id")
            if _has_whitespace(qids) or _has_whitespace(docs):  # an id Arrow kept whole that whitespace splits
                raise _Irregular()
            yield qids, docs, np_values(batch.column("score"))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for _ in _exact_batches(path, 1 << 16):  # a line no reader takes: its one-line error, from here
            pass
        raise _Irregular() from None  # every line is valid: only Arrow's one-delimiter reader refused it


_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True


def _has_whitespace(strings: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any string holds a whitespace byte (checked on the Arrow data buffer, no Python loop).

    Example:
        >>> _has_whitespace(pa.array(["q1", "d 2"])), _has_whitespace(pa.array(["q1", "d2"]))
        (True, False)
    """
    for chunk in strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]:
        if len(chunk) == 0:
            continue
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset: chunk.offset + len(chunk) + 1]
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0]: offsets[-1]]
        if len(data) and data.min() <= 32 and _WHITESPACE[data].any():  # min(): one pass, no copy
            return True
    return False


def _exact_batches(path: Path, batch_rows: int) -> Iterator[tuple[pa.Array, pa.Array, np.ndarray]]:
    r"""The rows of a TREC run read line by line, each split on runs of whitespace (fields after run_id
    ignored, comment lines skipped): slower than Arrow, for the files it cannot take.

    Example:
        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "run.trec"
        >>> _ = f.write_text("q1\tQ0\td1\t1\t  2.5\ttag more words\nq1  Q0 d2 2 1.0 tag\n")
        >>> [(q.to_pylist(), d.to_pylist(), s.tolist()) for q, d, s in _exact_batches(f, 10)]
        [(['q1', 'q1'], ['d1', 'd2'], [2.5, 1.0])]
    """
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            fields = raw.split()
            if not fields or fields[0].startswith(b"#"):
                continue
            if len(fields) < len(_RUN_COLUMNS):
                raise InputError(f"expected 6 fields (query_id iter doc_id rank score run_id), got {len(fields)}",
                                 source=path, line=number, field=_RUN_COLUMNS[len(fields)])
            try:
                scores.append(float(fields[4]))
                qids.append(fields[0].decode("utf-8"))
                docs.append(fields[2].decode("utf-8"))
            except ValueError:
                raise InputError(f"not a number: {fields[4].decode('utf-8', 'replace')!r}", source=path,
                                 line=number, field="score") from None
            except UnicodeDecodeError:
                raise InputError("not UTF-8", source=path, line=number, field="query_id") from None
            if len(qids) >= batch_rows:
                yield pa.array(qids, pa.string()), pa.array(docs, pa.string()), np.array(scores)
                qids, docs, scores = [], [], []
    if qids:
        yield pa.array(qids, pa.string()), pa.array(docs, pa.string()), np.array(scores)


def iter_run_blocks(path: str | os.PathLike, *, block_rows: int = DEFAULT_BLOCK_ROWS, name: str | None = None,
                    grouped: bool | None = None, workdir: str | os.PathLike | None = None) -> Iterator[Run]:
    """Runs of about ``block_rows`` rows each (a bigger query comes whole), every query in exactly one.

    ``grouped=None`` streams the file directly and raises :class:`NotGrouped` as soon as a query
    shows up again after its block ended (the caller starts over with ``grouped=False``);
    ``grouped=False`` partitions the file on disk first (under ``workdir``, default a temporary
    directory, removed afterwards).

    Example:
        >>> for block in iter_run_blocks("run.trec", block_rows=1_000_000):  # doctest: +SKIP
        ...     print(block.n_queries)
    """
    path = Path(path)
    name = name or path.stem
    if grouped is False:
        yield from _partitioned_blocks(path, block_rows, name, workdir)
        return
    try:
        yield from _grouped_blocks(path, block_rows, name)
    except _Irregular:  # the caller starts over with grouped=False, which reads the file exactly
        raise NotGrouped("the file needs the exact reader (irregular whitespace or extra fields)") from None


def _grouped_blocks(path: Path, block_rows: int, name: str) -> Iterator[Run]:
    seen: set[str] = set()
    pending: list[tuple[pa.Array, pa.Array, np.ndarray]] = []
    pending_rows = 0
    first_row = 0
    for qids, docs, scores in _batches(path, max(block_rows // 4, 1024)):
        if len(qids) == 0:
            continue
        pending.append((qids, docs, scores))
        pending_rows += len(qids)
        if pending_rows < block_rows:
            continue
        # cut before the last query of what is pending: it may go on in the next batch
        last = qids[len(qids) - 1]
        at = len(pending) - 1  # the batch where that query's rows begin, and the row
        while True:
            same = np_values(pc.equal(pending[at][0], last))
            start = len(same) - _trailing_true(same)
            if start > 0 or at == 0:
                break
            at -= 1
        if at == 0 and start == 0:
            continue  # one query fills everything pending: read on
        q, d, sc = pending[at]
        head = pending[:at] + ([(q.slice(0, start), d.slice(0, start), sc[:start])] if start else [])
        pending = ([(q.slice(start), d.slice(start), sc[start:])] if start < len(q) else []) + pending[at + 1:]
        pending_rows = sum(len(part[0]) for part in pending)
        run = _block(head, name, path, first_row, seen)
        first_row += len(run)
        yield run
    if pending:
        yield _block(pending, name, path, first_row, seen)


def _trailing_true(mask: np.ndarray) -> int:
    false = np.flatnonzero(~mask)
    return len(mask) if len(false) == 0 else len(mask) - 1 - int(false[-1])


def _block(parts: list, name: str, path: Path, first_row: int, seen: set[str]) -> Run:
    qids = pa.chunked_array([p[0] for p in parts], pa.string())
    docs = pa.chunked_array([p[1] for p in parts], pa.string())
    scores = np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]
    n = len(qids)
    run = Run.from_columns(qids, docs, scores, kind="scored", name=name, source=str(path),
                           lines=np.arange(first_row + 1, first_row + n + 1))
    again = seen.intersection(run.queries)
    if again:
        raise NotGrouped(f"query {sorted(again)[0]!r} appears again after other queries")
    seen.update(run.queries)
    return run


def _partitioned_blocks(path: Path, block_rows: int, name: str, workdir) -> Iterator[Run]:
    """Partition the rows on disk by a hash of the query id (Arrow datasets), then read each partition."""
    import pyarrow.dataset as ds

    size = path.stat().st_size
    try:
        sample = next(_batches(path, 4096), None)
        exact = False
    except _Irregular:
        sample, exact = next(_batches(path, 4096, exact=True), None), True
    if sample is None:
        return
    if is_parquet(path):
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(path).metadata.num_rows
    else:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
        rows = int(size / max(len(head) / max(head.count(b"\n"), 1), 1)) + 1
    parts = min(max(math.ceil(rows / block_rows), 1), 1024)
    bits = max(parts - 1, 1).bit_length()
    schema = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("score", pa.float64()),
                        ("part", pa.int32())])

    def tagged() -> Iterator[pa.RecordBatch]:
        for qids, docs, scores in _batches(path, 1 << 20, exact=exact):
            qids = single_array(qids)
            part = (string_hashes(qids) >> np.uint64(64 - bits)).astype(np.int64) % parts
            yield pa.RecordBatch.from_arrays(
                [qids, single_array(docs), pa.Array.from_buffers(pa.float64(), len(scores), [None, pa.py_buffer(np.ascontiguousarray(scores))]), pa.Array.from_buffers(pa.int32(), len(part), [None, pa.py_buffer(part.astype(np.int32))])],
                schema=schema)

    top = Path(tempfile.mkdtemp(prefix="rankwise-partitions-", dir=workdir))

    def write() -> None:
        ds.write_dataset(tagged(), top, schema=schema, format="parquet",
                         partitioning=ds.partitioning(pa.schema([("part", pa.int32())])),
                         max_partitions=1024, max_open_files=1024, min_rows_per_group=0,
                         max_rows_per_group=1 << 16, existing_data_behavior="overwrite_or_ignore")

    try:
        try:
            write()
        except _Irregular:  # found past the first rows: partition again, reading every line exactly
            exact = True
            shutil.rmtree(top, ignore_errors=True)
            top.mkdir()
            write()
        for part in range(parts):
            folder = top / str(part)
            if not folder.exists():
                continue
            table = ds.dataset(folder, format="parquet", schema=schema.remove(3)).to_table()
            yield Run.from_columns(table.column("query_id"), table.column("doc_id"),
                                   np_values(single_array(table.column("score"))), kind="scored", name=name,
                                   source=f"{path} (partition {part})")
            del table
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
