"""Runs larger than memory: read a run file as a sequence of smaller runs, each holding whole
queries.

A file whose rows are grouped by query (every query's rows together, as trec_eval's own output and
nearly every run writer leaves them) is read once, in batches, and cut at query boundaries. Any
other file is first partitioned on disk by a hash of the query id (Arrow IPC files, one or more per
partition), so that each partition holds whole queries and fits in memory; the partitions are then
read one at a time. Memory stays bounded by the block size either way.

TREC text runs (``qid iter docno rank score run_id``) are read in pieces of whole lines, each by the
in-memory reader's own code (:func:`rankwise.data.trec.run_piece`), and Parquet runs (``query_id``,
``doc_id`` and, when there is one, ``score`` columns; without scores the rows' order within a query
is the ranking) in record batches checked by the in-memory reader's column rules
(:func:`run_columns`): both accept and refuse exactly what :func:`rankwise.load_run` does, with the
same one-line errors naming the file and line (a Parquet row's number is its line).

Example:
    >>> blocks = iter_run_blocks("big.trec", block_rows=2_000_000)  # doctest: +SKIP
    >>> sum(len(run) for run in blocks)  # doctest: +SKIP
    100000000
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.columns import (
    arrow_floats,
    arrow_indices,
    as_string_array,
    np_values,
    single_array,
    string_hashes,
    take_ascending,
)
from rankwise.data.compiled import HAS_CR, HAS_HIGH, line_census
from rankwise.data.run import Run
from rankwise.data.text import INT64_MAX, open_error
from rankwise.errors import InputError

__all__ = ["iter_run_blocks", "read_parquet_run", "read_parquet_qrels", "read_parquet_table", "parquet_error",
           "NotGrouped", "DEFAULT_BLOCK_ROWS", "is_parquet", "run_columns"]

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
    path = Path(path)
    columns = _parquet_columns(path, ["query_id", "doc_id"], optional=["score"])
    table = read_parquet_table(path, columns)
    if table.num_rows == 0:
        raise InputError(NO_PARQUET_ROWS, source=path)
    qids, docs, scores = run_columns(table, path, 0, scored="score" in columns)
    return Run.from_columns(qids, docs, scores, name=name or path.stem, source=str(path))


NO_PARQUET_ROWS = "no rows (the Parquet file holds no run)"


def read_parquet_qrels(path: str | os.PathLike):
    """Qrels from Parquet with ``query_id``, ``doc_id`` and ``relevance`` (integer) columns.

    Grades are integers within int64 (integer-valued floats too), as in text qrels.

    Example:
        >>> qrels = read_parquet_qrels("qrels.parquet")  # doctest: +SKIP
    """
    from rankwise.data.qrels import Qrels

    path = Path(path)
    columns = _parquet_columns(path, ["query_id", "doc_id", "relevance"])
    table = read_parquet_table(path, columns)
    qids = _id_column(table.column("query_id"), path, "query_id", 0)
    docs = _id_column(table.column("doc_id"), path, "doc_id", 0)
    return Qrels.from_columns(qids, docs, _grade_column(table.column("relevance"), path), source=str(path))


def read_parquet_table(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file's table (or some of its columns); a missing, unreadable or corrupt file is one
    :class:`InputError`.

    Example:
        >>> table = read_parquet_table("testset.parquet")  # doctest: +SKIP
    """
    import pyarrow.parquet as pq

    _can_open(path)
    try:
        if Path(path).is_dir():  # a Parquet dataset (a folder of parts): Arrow's dataset reader
            return pq.read_table(path, columns=columns)
        # one file: read directly (pq.read_table goes through pyarrow.dataset, which imports pandas)
        with pq.ParquetFile(path) as pf:
            return pf.read(columns=columns)
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # a damaged file: bytes in its metadata
        raise parquet_error(exc, path) from None


def _can_open(path: str | os.PathLike) -> None:
    """The operating system's own reason when a file cannot be opened (Arrow says "not found" for a
    symlink loop or a file without read permission); a folder (a Parquet dataset) is left to Arrow.
    """
    if Path(path).is_dir():
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise open_error(exc, path) from None


def parquet_error(exc: Exception, path: str | os.PathLike) -> InputError:
    """The one-line error for a Parquet file Arrow cannot open or decode."""
    errno = getattr(exc, "errno", None)
    if isinstance(exc, OSError) and errno:  # missing, a directory, no permission, a symlink loop ...
        return open_error(OSError(errno, os.strerror(errno)), path)
    text = str(exc).strip().splitlines()
    return InputError(f"not a readable Parquet file ({text[0] if text else type(exc).__name__})", source=path)


def _parquet_columns(path: Path, required: list[str], optional: list[str] = ()) -> list[str]:
    import pyarrow.parquet as pq

    _can_open(path)
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # a damaged file: bytes in its metadata
        raise parquet_error(exc, path) from None
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(f"no column {missing[0]!r}; Parquet columns: {names}", source=path, field=missing[0])
    wanted = required + [c for c in optional if c in names]
    twice = [c for c in wanted if names.count(c) > 1]
    if twice:
        raise InputError(f"column {twice[0]!r} appears {names.count(twice[0])} times; keep one",
                         source=path, field=twice[0])
    return wanted


def run_columns(table: pa.Table | pa.RecordBatch, path: Path, first_row: int, *, scored: bool = True):
    """Query ids, doc ids (strings; integer or dictionary-encoded columns are converted) and scores
    (float64, None when not ``scored``) of Parquet rows, row ``first_row + 1`` first; the in-memory
    and the streaming reader both read them here."""
    qids = _id_column(table.column("query_id"), path, "query_id", first_row)
    docs = _id_column(table.column("doc_id"), path, "doc_id", first_row)
    scores = _float_column(table.column("score"), path, first_row) if scored else None
    return qids, docs, scores


def _id_column(column, path: Path, field: str, first_row: int) -> pa.Array:
    column = single_array(column) if isinstance(column, pa.ChunkedArray) else column
    if column.null_count:
        row = int(np.flatnonzero(~np.asarray(column.is_valid()))[0])
        raise InputError("missing id", source=path, line=first_row + row + 1, field=field)
    if pa.types.is_unsigned_integer(column.type) or pa.types.is_signed_integer(column.type):
        column = column.cast(pa.string())
    column = as_string_array(column, source=str(path), field=field)
    try:
        column.validate(full=True)  # Arrow reads string columns from Parquet without checking UTF-8
    except pa.ArrowInvalid:
        row = next(i for i, v in enumerate(column.cast(pa.binary()).to_pylist()) if not _is_utf8(v))
        raise InputError("bytes that are not UTF-8", source=path, line=first_row + row + 1, field=field) from None
    return column


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _float_column(column: pa.ChunkedArray | pa.Array, path: Path, first_row: int = 0) -> np.ndarray:
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind)):
        raise InputError(f"score must be numbers, got {column.type}", source=path, field="score")
    column = single_array(column) if isinstance(column, pa.ChunkedArray) else column
    if column.null_count:
        row = int(np.flatnonzero(~np.asarray(column.is_valid()))[0])
        raise InputError("missing score", source=path, line=first_row + row + 1, field="score")
    if column.type != pa.float64():
        column = column.cast(pa.float64(), safe=False)  # uint64 beyond 2**53, decimals: the nearest float
    return np_values(column)


def _grade_column(column: pa.ChunkedArray, path: Path) -> np.ndarray:
    """Integer grades within int64, as text qrels allow; floats only when integer-valued."""
    column = single_array(column)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise InputError(f"relevance must be integers, got {column.type}", source=path, field="relevance")
    if column.null_count:
        row = int(np.flatnonzero(~np.asarray(column.is_valid()))[0])
        raise InputError("missing relevance", source=path, line=row + 1, field="relevance")
    try:
        values = np_values(column)  # from the buffer: Array.to_numpy would import pandas
    except TypeError:  # a type numpy reads only through Arrow's converter
        values = column.to_numpy(zero_copy_only=False)
    if values.dtype == np.uint64:
        bad = values > np.uint64(INT64_MAX)
    elif values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values != np.floor(values)) | (values < -(2.0**63)) | (values >= 2.0**63)
    else:
        bad = np.zeros(len(values), dtype=bool)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = values[row].item()
        whole = isinstance(value, int) or (math.isfinite(value) and value == math.floor(value))
        problem = "integer out of range (beyond 64 bits)" if whole else "not an integer"
        raise InputError(f"{problem}: {value!r}", source=path, line=row + 1, field="relevance")
    return values.astype(np.int64)


# ----------------------------------------------------------------------------- batches
def _batches(path: Path, batch_rows: int) -> Iterator[tuple[pa.Array, pa.Array, np.ndarray | None, np.ndarray]]:
    """(query ids, doc ids, scores, line numbers) of consecutive rows, in file order: the rows the
    in-memory readers read, with their errors (a Parquet row's number is its line). A Parquet run
    without a ``score`` column gives ``None`` scores: its rows' order within a query is the ranking.
    """
    if is_parquet(path):
        yield from _parquet_batches(path, batch_rows)
    else:
        yield from _text_batches(path, batch_rows)


def _parquet_batches(path: Path, batch_rows: int) -> Iterator[tuple[pa.Array, pa.Array, np.ndarray | None,
                                                                    np.ndarray]]:
    import pyarrow.parquet as pq

    columns = _parquet_columns(path, ["query_id", "doc_id"], optional=["score"])  # as read_parquet_run
    first_row = 0
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns)
        for batch in batches:
            qids, docs, scores = run_columns(batch, path, first_row, scored="score" in columns)
            yield qids, docs, scores, np.arange(first_row + 1, first_row + len(qids) + 1, dtype=np.int64)
            first_row += len(qids)
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # a damaged file: bytes in its metadata
        raise parquet_error(exc, path) from None
    if first_row == 0:
        raise InputError(NO_PARQUET_ROWS, source=path)


def _text_batches(path: Path, batch_rows: int) -> Iterator[tuple[pa.Array, pa.Array, np.ndarray, np.ndarray]]:
    r"""The rows of a TREC run read in pieces of whole lines, each piece checked and parsed by the
    in-memory reader's own code (:func:`~rankwise.data.trec.run_piece`), line numbers counted
    across.

    Example:
        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "run.trec"
        >>> _ = f.write_bytes(b"q1\tQ0\td1\t1\t  2.5\ttag more words\rq1  Q0 d2 2 1.0 tag\r\n")
        >>> [
        ...     (q.to_pylist(), d.to_pylist(), s.tolist(), n.tolist())
        ...     for q, d, s, n in _text_batches(f, 10)
        ... ]
        [(['q1', 'q1'], ['d1', 'd2'], [2.5, 1.0], [1, 2])]
    """
    from rankwise.data.trec import NO_RUN_LINES, run_piece, run_text

    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; a generator holds it across yields)
    except OSError as exc:
        raise open_error(exc, path) from None
    with fh:
        pieces = _pieces(fh, path, batch_rows)
        line, rows, filled, bytes_seen = 1, 0, False, False
        for piece in pieces:
            filled = filled or not piece.isspace()
            bytes_seen = bytes_seen or bool(piece.removeprefix(b"\xef\xbb\xbf") if line == 1 else piece)
            census = line_census(piece)  # (one pass: what the piece holds, and its lines)
            if census is not None and not census[0] & (HAS_CR | HAS_HIGH):
                data, (flags, ends) = piece, census  # ASCII with LF line ends: nothing to normalise
            else:
                data, flags = run_text(piece, path, first_line=line, bom=line == 1), None
                ends = data.count(b"\n")
            qids, docs, scores, lines = run_piece(data, path, first_line=line, line_ends=ends, census=flags)
            line += ends
            rows += len(qids)
            if len(qids):
                yield qids, docs, scores, lines
    if not bytes_seen:  # the in-memory reader's words (data/text.read_bytes)
        raise InputError("file is empty", source=path)
    if not filled:
        raise InputError("file has no rows: only blank lines", source=path)
    if not rows:
        raise InputError(NO_RUN_LINES, source=path)


def _sized(piece: bytearray | None, size: int) -> bytearray:
    """A buffer of ``size`` bytes: ``piece`` resized where nothing holds a view of it (its pages
    already faulted in: a fresh 40 MB buffer a piece cost a tenth of a second in all), else a new
    one (resizing a buffer something still views raises BufferError; nothing is ever written into
    memory another object reads)."""
    if piece is not None:
        try:
            piece.append(0)  # (a resize, which is refused while anything views the buffer)
        except BufferError:
            piece = None
    if piece is None:
        return bytearray(size)
    if len(piece) < size:
        piece.extend(bytes(size - len(piece)))  # (the last piece's unfinished line: a few bytes)
    else:
        del piece[size:]
    return piece


def _pieces(fh, path: Path, batch_rows: int) -> Iterator[bytearray]:
    """Consecutive pieces of the file, each ending at a line end (LF, CRLF or CR; never between CR
    and LF), of about ``batch_rows`` lines (sized from the first line). Each piece is read into one
    buffer, reused from piece to piece once the last is parsed, behind the previous piece's
    unfinished line (no copy of the piece)."""
    size = 0
    rest = b""
    piece = None
    while True:
        piece = _sized(piece, len(rest) + (size or (1 << 16)))
        piece[:len(rest)] = rest
        try:
            got = fh.readinto(memoryview(piece)[len(rest):])
        except OSError as exc:
            raise open_error(exc, path) from None
        if not got:
            if rest:
                yield bytearray(rest)
            return
        del piece[len(rest) + got:]
        if not size:  # about batch_rows rows per piece, from the first line's length
            first = piece.find(b"\n")
            size = int(min(max(first if first >= 0 else len(piece), 16) * batch_rows * 1.1, 1 << 30))
        newline = piece.rfind(b"\n")  # (a CR counts only after it: the piece is not scanned twice)
        cut = max(newline, piece.rfind(b"\r", newline + 1, len(piece) - 1)) + 1  # a last CR may precede LF
        if cut == 0:
            rest = bytes(piece)  # no line end yet: read on
            continue
        rest = bytes(piece[cut:])
        del piece[cut:]
        yield piece


def iter_run_blocks(path: str | os.PathLike, *, block_rows: int = DEFAULT_BLOCK_ROWS, name: str | None = None,
                    grouped: bool | None = None, workdir: str | os.PathLike | None = None) -> Iterator[Run]:
    """Runs of about ``block_rows`` rows each (a bigger query comes whole), every query in exactly
    one.

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
    yield from _grouped_blocks(path, block_rows, name)


def _grouped_blocks(path: Path, block_rows: int, name: str) -> Iterator[Run]:
    seen: set[str] = set()
    pending: list[tuple[pa.Array, pa.Array, np.ndarray | None, np.ndarray]] = []
    pending_rows = 0
    for part in _batches(path, max(block_rows // 4, 1024)):
        qids = part[0]
        if len(qids) == 0:
            continue
        _check_blocks(qids)
        pending.append(part)
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
        q, d, sc, ln = pending[at]
        head = pending[:at] + ([(q.slice(0, start), d.slice(0, start), _cut(sc, 0, start), ln[:start])]
                               if start else [])
        pending = ([(q.slice(start), d.slice(start), _cut(sc, start, None), ln[start:])] if start < len(q)
                   else []) + pending[at + 1:]
        pending_rows = sum(len(p[0]) for p in pending)
        yield _block(head, name, path, seen)
    if pending:
        yield _block(pending, name, path, seen)


def _check_blocks(qids: pa.Array | pa.ChunkedArray) -> None:
    """:class:`NotGrouped` when a query's rows in this batch are not one block: a shuffled file says
    so in its first batch, before any block is ranked (only the ids where the query changes are
    compared, few in a grouped file).

    Example:
        >>> _check_blocks(pa.array(["q1", "q1", "q2"]))
        >>> _check_blocks(pa.array(["q1", "q2", "q1"]))
        Traceback (most recent call last):
        rankwise.data.stream.NotGrouped: query 'q1' appears again after other queries
    """
    n = len(qids)
    if n < 3:
        return
    heads = np.flatnonzero(np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1)))) + 1
    if len(heads) < 2:
        return
    head_ids = take_ascending(qids, np.concatenate([[0], heads]).astype(np.int64))
    if pc.count_distinct(head_ids).as_py() == len(head_ids):
        return
    seen: set[str] = set()
    for qid in head_ids.to_pylist():
        if qid in seen:
            raise NotGrouped(f"query {qid!r} appears again after other queries")
        seen.add(qid)


def _cut(scores: np.ndarray | None, start: int, end: int | None) -> np.ndarray | None:
    """``scores[start:end]``; no scores (an ordered run) stay None."""
    return None if scores is None else scores[start:end]


def _trailing_true(mask: np.ndarray) -> int:
    false = np.flatnonzero(~mask)
    return len(mask) if len(false) == 0 else len(mask) - 1 - int(false[-1])


def _chunks(columns) -> list[pa.Array]:
    return [c for column in columns for c in (column.chunks if isinstance(column, pa.ChunkedArray) else [column])]


def _block(parts: list, name: str, path: Path, seen: set[str]) -> Run:
    qids = pa.chunked_array(_chunks(p[0] for p in parts), pa.string())
    docs = pa.chunked_array(_chunks(p[1] for p in parts), pa.string())
    scored = parts[0][2] is not None  # a Parquet run without scores: every part None, the rows' order ranks
    scores = (np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]) if scored else None
    lines = np.concatenate([p[3] for p in parts]) if len(parts) > 1 else parts[0][3]
    run = Run.from_columns(qids, docs, scores, kind="scored" if scored else "ordered", name=name,
                           source=str(path), lines=lines)
    again = seen.intersection(run.queries)
    if again:
        raise NotGrouped(f"query {sorted(again)[0]!r} appears again after other queries")
    seen.update(run.queries)
    return run


def _partitioned_blocks(path: Path, block_rows: int, name: str, workdir) -> Iterator[Run]:
    """Partition the rows on disk by a hash of the query id (Arrow IPC files), then read each
    partition."""
    size = path.stat().st_size
    sample = next(_batches(path, 4096), None)  # a bad first piece fails here, before any writing
    if sample is None:
        return
    scored = sample[2] is not None
    if is_parquet(path):
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(path).metadata.num_rows
    else:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
        rows = int(size / max(len(head) / max(head.count(b"\n"), 1), 1)) + 1
    parts = min(max(math.ceil(rows / block_rows), 1), 1024)
    top = Path(tempfile.mkdtemp(prefix="rankwise-partitions-", dir=workdir))
    try:
        files = _write_partitions(path, top, parts, scored, min(1 << 20, max(block_rows // 2, 4096)))
        for part_files in files:
            if not part_files:
                continue
            yield _partition_run(_read_partition(part_files), name, path, scored)
            for f in part_files:
                _remove(f)
    finally:
        shutil.rmtree(top, ignore_errors=True)


_PARTITION_SCHEMA = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("score", pa.float64()),
                               ("line", pa.int64())])


def _open_at_most() -> int:
    """Partition files held open at once: half the process's limit on open files (the rest are the
    program's), 16 to 1,024."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # (no resource module on Windows)
        return 256
    return 1024 if soft == resource.RLIM_INFINITY else max(16, min(1024, soft // 2))


def _write_partitions(path: Path, top: Path, parts: int, scored: bool, batch_rows: int) -> list[list[Path]]:
    """Every row of the run into the partition of its query id's hash, rows in file order within
    each, as Arrow IPC stream files under ``top`` (written and read back at memory speed, with no
    import of ``pyarrow.dataset``, which brings pandas); the files of each partition. A second
    thread writes each batch of ``batch_rows`` rows while the next is parsed (two batches in memory
    at most). Past :func:`_open_at_most` files open, all are closed and the partitions written next
    begin new files."""
    from concurrent.futures import ThreadPoolExecutor

    bits = max(parts - 1, 1).bit_length()
    open_at_most = _open_at_most()
    files: list[list[Path]] = [[] for _ in range(parts)]
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}

    def write(qids, docs, scores, lines) -> None:
        qids = single_array(qids)
        part = ((string_hashes(qids) >> np.uint64(64 - bits)) % np.uint64(parts)).astype(np.int16)
        batch = pa.RecordBatch.from_arrays(
            [qids, single_array(docs), arrow_floats(scores) if scored else pa.nulls(len(qids), pa.float64()),
             arrow_indices(lines)], schema=_PARTITION_SCHEMA)
        counts = np.bincount(part, minlength=parts)
        if parts > 1:
            batch = batch.take(arrow_indices(np.argsort(part, kind="stable")))
        start = 0
        for p in np.flatnonzero(counts).tolist():
            if p not in writers:
                if len(writers) >= open_at_most:
                    _close(writers)
                files[p].append(top / f"{p}-{len(files[p])}.arrows")
                writers[p] = pa.ipc.new_stream(str(files[p][-1]), _PARTITION_SCHEMA)
            writers[p].write_batch(batch.slice(start, int(counts[p])))
            start += int(counts[p])

    try:
        with ThreadPoolExecutor(1) as pool:
            pending = None
            for columns in _batches(path, batch_rows):
                if pending is not None:
                    pending.result()
                pending = pool.submit(write, *columns)
            if pending is not None:
                pending.result()
    finally:
        _close(writers)
    return files


def _close(writers: dict) -> None:
    for writer in writers.values():
        writer.close()
    writers.clear()


def _read_partition(files: list[Path]) -> pa.Table:
    """One partition's rows, mapped from its files (no copy: the run built from them copies what it
    moves; a column it keeps as read stays mapped after its file is removed)."""
    tables = [pa.ipc.open_stream(pa.memory_map(str(f))).read_all() for f in files]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):  # (a file still mapped, on Windows: the folder goes at the end)
        path.unlink()


def _partition_run(table: pa.Table, name: str, path: Path, scored: bool = True) -> Run:
    """One partition's run; its errors name the file's lines (rows put back in file order to find
    the first). Without scores the rows' order within a query is the ranking: the rows are put back
    in file order first."""
    def build(t: pa.Table) -> Run:
        scores = np_values(single_array(t.column("score"))) if scored else None
        return Run.from_columns(t.column("query_id"), t.column("doc_id"), scores,
                                kind="scored" if scored else "ordered", name=name, source=str(path),
                                lines=np_values(single_array(t.column("line"))))

    if not scored:
        return build(table.sort_by("line"))
    try:
        return build(table)
    except InputError:
        return build(table.sort_by("line"))
