"""TREC run and qrels files: read (fast path through Arrow's CSV reader) and write.

One definition of a valid file, whichever reader runs: UTF-8 text (a leading byte-order mark is
dropped, other bytes that are not UTF-8 are an error naming the line); lines end in LF, CRLF or CR;
fields are separated by any run of ASCII whitespace (space, tab, VT, FF), as trec_eval splits them;
a line whose first field starts with ``#`` is a comment; a score is a finite ASCII decimal number
(``inf``, ``nan`` and values beyond the float range such as ``1e400`` are errors, where trec_eval's
``atof`` would read inf); a grade is an ASCII decimal integer within int64 (``2``, ``-1``, ``2.0``;
not ``0x10``).

Well-formed files (exactly one space, or exactly one tab, between fields, no other whitespace, the
same field count on every line) are parsed by Arrow's multi-threaded CSV reader; anything else, and
every file with an error, goes through the exact line-by-line reader, so both give the same result
or the same error, and messages always name the right line.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from rankwise._atomic import atomic_write
from rankwise.data.columns import arrow_strings, memory_pool, np_values, single_array
from rankwise.data.compiled import HAS_SPACE, HAS_TAB, HAS_VT_FF, SPACE_PAIR, TAB_PAIR, byte_census
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.data.text import normalize_lines, parse_float, parse_int, read_lines, release
from rankwise.errors import InputError

__all__ = ["read_trec_run", "read_trec_qrels", "write_trec_run", "write_trec_qrels", "run_tag", "run_piece",
           "run_text", "unsplittable"]

_RUN_FIELDS = ["query_id", "iter", "doc_id", "rank", "score", "run_id"]
_QRELS_FIELDS = ["query_id", "iter", "doc_id", "relevance"]
_RUN_TYPES = {"query_id": pa.string(), "doc_id": pa.string(), "score": pa.float64()}

# Tests set this to run the exact reader alone and compare it with the fast path on every input.
_EXACT_ONLY = False
# (the numpy path's; the C census's flags say the same: rankwise.data.compiled)
_OTHER_WHITESPACE = {b" ": (b"\t", b"\x0b", b"\x0c"), b"\t": (b" ", b"\x0b", b"\x0c")}


def read_trec_run(path: str | Path, *, name: str | None = None) -> Run:
    """Read a TREC run: ``qid iter docno rank score run_id`` (extra fields ignored, ``#`` lines
    skipped).

    Ranking is by score, ties by doc id in descending byte order (trec_eval's rule); the ``rank``
    column is ignored, as trec_eval does.

    Example:
        >>> run = read_trec_run("run.trec")  # doctest: +SKIP
    """
    path = Path(path)
    name = name or path.stem
    data = read_lines(path, run_text)
    tag = _tag(_last_fields(data))  # from the bytes read: a pipe cannot be opened a second time
    fast = None if _EXACT_ONLY else _fast_columns(data, _RUN_FIELDS, _RUN_TYPES)
    if fast is not None:
        data = release(data)  # the columns are Arrow's copies
        try:
            run = Run.from_columns(fast["query_id"], fast["doc_id"], np_values(single_array(fast["score"])),
                                   kind="scored", name=name, source=str(path))
            object.__setattr__(run, "tag", tag)
            return run
        except InputError:
            pass  # re-read exactly to report the right line
    data = read_lines(path, run_text) if data is None else data
    qids, docs, scores, lines = _exact_run_columns(bytes(data), path)  # (a mapped file: copied)
    if not len(qids):
        raise InputError(NO_RUN_LINES, source=path)
    run = Run.from_columns(qids, docs, scores, kind="scored", name=name, source=str(path), lines=lines)
    object.__setattr__(run, "tag", tag)
    return run


NO_RUN_LINES = "no run lines (only comments or blank lines)"


def run_text(raw: bytes, path: str | Path, *, first_line: int = 1, bom: bool = True) -> bytes:
    """:func:`normalize_lines` for run lines; when bytes are not UTF-8, an error on an earlier line
    is reported first, so the first bad line is named whether the file is read whole or in pieces.
    """
    try:
        return normalize_lines(raw, path, first_line=first_line, bom=bom)
    except InputError as exc:
        if exc.line is not None and exc.line > first_line:
            ends = [m.end() for m in itertools.islice(re.finditer(rb"\r\n|\r|\n", raw), exc.line - first_line)]
            head = normalize_lines(raw[:ends[-1]], path, first_line=first_line, bom=bom)
            _exact_run_columns(head, path, first_line=first_line)
        raise


def run_piece(data: bytes, path: str | Path, *, first_line: int = 1, line_ends: int | None = None,
              census: int | None = None) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray,
                                                     np.ndarray, np.ndarray]:
    r"""Query ids, doc ids, scores and line numbers of the run lines in ``data``: whole lines of a
    run file (from :func:`normalize_lines`), the first numbered ``first_line`` (``line_ends``: its
    count of LF, and ``census``: its bytes' flags, when known). Read by :func:`read_trec_run`'s own
    two readers (Arrow when it takes the piece and every score is finite, else line by line), so a
    file read in pieces (:mod:`rankwise.data.stream`) is accepted or refused exactly as read whole.

    Example:
        >>> q, d, s, lines = run_piece(b"# c\nq1 Q0 d1 1 2.5 s\n", "run.trec", first_line=10)
        >>> q.to_pylist(), s.tolist(), lines.tolist()
        (['q1'], [2.5], [11])
    """
    fast = None if _EXACT_ONLY else _fast_columns(data, _RUN_FIELDS, _RUN_TYPES, census)
    if fast is not None:
        scores = np_values(single_array(fast["score"]))
        n_lines = (data.count(b"\n") if line_ends is None else line_ends) + (not data.endswith(b"\n"))
        if n_lines == len(scores):  # no blank or comment line: row i is line i
            lines = np.arange(first_line, first_line + n_lines, dtype=np.int64)
        else:
            lines = _row_lines(data, first_line)
        if len(lines) == len(scores) and np.isfinite(scores).all():
            return fast["query_id"], fast["doc_id"], scores, lines  # ids chunked as Arrow read them: no copy
    return _exact_run_columns(data, path, first_line=first_line)


def _row_lines(data: bytes, first_line: int) -> np.ndarray:
    """Numbers of the lines of ``data`` (LF line ends) that are neither empty nor start with ``#``:
    the rows of a piece the fast path took (it takes no blank line holding whitespace, no indented
    comment)."""
    chars = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(chars == 10)
    starts = np.concatenate(([0], ends + 1))
    stops = np.append(ends, len(chars))
    filled = stops > starts
    firsts = chars[np.minimum(starts, max(len(chars) - 1, 0))] if len(chars) else np.zeros(len(starts), np.uint8)
    return (np.flatnonzero(filled & (firsts != ord("#"))) + first_line).astype(np.int64)


def _exact_run_columns(data: bytes, path: str | Path, *, first_line: int = 1):
    """The exact reader: every line split on whitespace; errors name the line and field."""
    qids, docs, scores, lines = [], [], [], []
    for number, fields in _iter_fields(data, first_line):
        if len(fields) < 6:
            raise InputError(
                f"expected at least 6 fields (query_id iter doc_id rank score run_id), got {len(fields)}",
                source=path, line=number, field=_RUN_FIELDS[len(fields)],
            )
        qids.append(fields[0])
        docs.append(fields[2])
        scores.append(parse_float(fields[4], source=path, line=number, field="score"))
        lines.append(number)
    return (arrow_strings(qids), arrow_strings(docs), np.asarray(scores, dtype=np.float64),
            np.asarray(lines, dtype=np.int64))


def run_tag(path: str | Path) -> str | None:
    """A TREC run file's tag as trec_eval reports it (its ``runid``): the 6th field of the file's
    last line that is neither blank nor a comment; None when that line has fewer fields. Reads the
    file's end.

    Example:
        >>> run_tag("run.trec")  # doctest: +SKIP
        'bm25'
    """
    with open(path, "rb") as fh:
        pos = fh.seek(0, 2)
        tail = b""
        while True:
            step = min(1 << 16, pos)
            pos -= step
            fh.seek(pos)
            tail = fh.read(step) + tail
            breaks = [i for i in (tail.find(b"\n"), tail.find(b"\r")) if i >= 0]
            whole = tail if pos == 0 else tail[min(breaks) + 1:] if breaks else b""  # the first may be cut short
            fields = _last_fields(whole)
            if fields is not None or pos == 0:
                return _tag(fields)


def _last_fields(data) -> list[bytes] | None:
    """The fields of the last line of ``data`` (bytes or a map) that is neither blank nor a
    comment; None when there is none."""
    end = len(data)
    while end > 0:
        newline = data.rfind(b"\n", 0, end)  # (a carriage return counts only after it: no scan of the file)
        start = max(newline, data.rfind(b"\r", newline + 1, end)) + 1
        fields = data[start:end].split()
        if fields and not fields[0].startswith(b"#"):
            return fields
        end = start - 1
    return None


def _tag(fields: list[bytes] | None) -> str | None:
    return fields[5].decode("utf-8", "replace") if fields is not None and len(fields) >= 6 else None


def read_trec_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels: ``qid iter docno grade``, exactly 4 fields; ``#`` lines are comments.

    Example:
        >>> qrels = read_trec_qrels("qrels.txt")  # doctest: +SKIP
    """
    path = Path(path)
    data = read_lines(path)
    fast = None if _EXACT_ONLY else _fast_columns(data, _QRELS_FIELDS, {"query_id": pa.string(),
                                                                         "doc_id": pa.string(),
                                                                         "relevance": pa.string()})
    if fast is not None:
        data = release(data)  # the columns are Arrow's copies
        try:
            grades = _decimal_ints(fast["relevance"])
            if grades is not None:
                return Qrels.from_columns(fast["query_id"], fast["doc_id"], grades, source=str(path))
        except InputError:
            pass
    data = read_lines(path) if data is None else data
    qids, docs, grades, lines = [], [], [], []
    for number, fields in _iter_fields(bytes(data)):
        if len(fields) != 4:
            raise InputError(
                f"expected 4 fields (query_id iter doc_id relevance), got {len(fields)}",
                source=path, line=number,
                field=_QRELS_FIELDS[len(fields)] if len(fields) < 4 else "relevance",
            )
        qids.append(fields[0])
        docs.append(fields[2])
        grades.append(parse_int(fields[3], source=path, line=number, field="relevance"))
        lines.append(number)
    if not qids:
        raise InputError("no judgement lines (only comments or blank lines)", source=path)
    return Qrels.from_columns(arrow_strings(qids), arrow_strings(docs),
                              np.asarray(grades, dtype=np.int64), source=str(path), lines=np.asarray(lines))


def _iter_fields(data: bytes, first_line: int = 1):
    """Yield ``(line number, fields)`` of the non-blank, non-comment lines, split on ASCII
    whitespace.

    ``data`` comes from :func:`normalize_lines` (UTF-8 checked, LF line ends). A line is a comment
    when its first field starts with ``#``.
    """
    for number, raw in enumerate(data.split(b"\n"), start=first_line):
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        yield number, [f.decode("utf-8") for f in fields]


def _decimal_ints(strings) -> np.ndarray | None:
    """The int64 values of a text column when every value is a plain decimal integer, else None."""
    import pyarrow.compute as pc

    if not pc.all(pc.match_substring_regex(strings, r"^-?[0-9]{1,18}$")).as_py():
        return None  # signs, '2.0', 0x10, 19 digits or more: the exact reader decides
    return np_values(single_array(pc.cast(strings, pa.int64())))


def _fast_columns(data: bytes, names: list[str], types: dict, census: int | None = None) -> dict | None:
    """Parse a well-formed file (one space, or one tab, between fields) with Arrow; None if it is
    not.

    ``data`` comes from :func:`normalize_lines`. Comment lines are skipped. ``None`` whenever the
    result could differ from splitting every line on whitespace: then the exact reader runs.
    """
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    head = data[: 1 << 16]
    first = next((line for line in head.split(b"\n") if line.strip() and not line.startswith(b"#")), b"")
    delimiter = b"\t" if b"\t" in first and b" " not in first else b" "
    if len(first.split(delimiter)) != len(names):
        return None
    # another whitespace byte (splitting on runs of whitespace would cut a field Arrow keeps whole),
    # a second byte-order mark (Arrow would drop it; it belongs to the first id) or an empty field
    # (doubled, leading or trailing delimiter; no field to the exact reader): the exact reader
    # decides. (Looked for in the bytes: the fields not kept are never made into columns.)
    if data[:3] == b"\xef\xbb\xbf" or unsplittable(data, delimiter, census=census):
        return None
    buffer = pa.py_buffer(data)
    comments = []

    def skip_comment(row) -> str:
        if row.text is not None and row.text.lstrip().startswith("#"):
            comments.append(row.number)
            return "skip"
        return "error"

    kept = [n for n in names if n in types]  # (the other fields are split, counted, not kept)
    as_text = {n: pa.string() for n in kept}

    def read(column_types: dict) -> pa.Table | None:
        try:
            return pcsv.read_csv(
                pa.BufferReader(buffer),
                read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 22),
                parse_options=pcsv.ParseOptions(delimiter=delimiter.decode(), quote_char=False,
                                                escape_char=False, invalid_row_handler=skip_comment),
                convert_options=pcsv.ConvertOptions(column_types={**as_text, **column_types}, include_columns=kept),
                memory_pool=memory_pool(),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, OSError):
            return None

    head_has_comments = head.startswith(b"#") or b"\n#" in head
    table = read(as_text if head_has_comments else types)
    if table is None and comments and not head_has_comments:
        # a comment line with the same number of fields failed the number conversion: read as text
        head_has_comments = True
        table = read(as_text)
    if table is None or table.num_rows == 0:
        return None
    for n in kept:  # a null ("NA" read as a number): the exact reader decides
        if table.column(n).null_count:
            return None
    cols = {n: table.column(n) for n in types}  # chunked: the Run builder copies what it keeps once
    if comments or head_has_comments or _starts_with_hash(cols["query_id"]):
        # comment lines with the same number of fields were parsed as rows: drop rows starting with
        # '#'
        keep = pc.invert(pc.starts_with(cols["query_id"], "#"))
        cols = {n: c.filter(keep) for n, c in cols.items()}
        if len(cols["query_id"]) == 0:
            return None
    if head_has_comments:
        try:
            cols = {n: c if types[n] == pa.string() else c.cast(types[n]) for n, c in cols.items()}
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None
    return cols


def unsplittable(data, delimiter: bytes, *, compiled: bool = True, census: int | None = None) -> bool:
    r"""Whether a line of ``data`` (LF line ends) is not cut into the exact reader's fields by
    splitting on ``delimiter`` alone: another whitespace byte (tab or space, VT, FF), or an empty
    field (two delimiters in a row, or one at a line's start or end). Read from the bytes' census
    (one pass in C on two threads, made once for a file :func:`read_lines` mapped) where the
    extension was built (``compiled=False``: numpy alone, a slice at a time; the same answer).
    ``census``: the bytes' flags, when the caller has them (a ``--stream`` piece).

    Example:
        >>> unsplittable(b"q1 Q0 d1 1 2.5 s\n", b" "), unsplittable(b"q1 Q0  d1 1 2.5 s\n", b" ")
        (False, True)
    """
    if data[:1] == delimiter or data[-1:] == delimiter:
        return True
    flags = (census if census is not None else getattr(data, "census", None)) if compiled else None
    if compiled and flags is None:
        flags = byte_census(data)
    if flags is not None:  # (a file read_lines mapped carries its census)
        space = delimiter == b" "
        other = (HAS_TAB if space else HAS_SPACE) | HAS_VT_FF
        return bool(flags & (other | (SPACE_PAIR if space else TAB_PAIR)))
    chars = np.frombuffer(data, dtype=np.uint8)
    others = [ord(w) for w in _OTHER_WHITESPACE[delimiter]]
    step = 1 << 24
    for start in range(0, len(chars), step):
        part = chars[start:start + step + 1]  # (one byte more: the pair across the cut)
        if np.isin(part[:step], others).any():
            return True
        ends, cuts = part == 10, part == ord(delimiter)
        if (cuts[:-1] & (cuts[1:] | ends[1:])).any() or (ends[:-1] & cuts[1:]).any():
            return True
    return False


def _string_bytes(strings: pa.Array | pa.ChunkedArray):
    """The bytes of each chunk's strings, as numpy views."""
    for chunk in (strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]):
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                offset=chunk.offset * 4)
        data = chunk.buffers()[2]
        chars = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
        yield chars[int(offsets[0]):int(offsets[-1])]


def _starts_with_hash(strings: pa.Array | pa.ChunkedArray) -> bool:
    """True if any string may start with '#' (cheap test: a '#' anywhere in the column)."""
    return any(bool(np.any(chars == ord("#"))) for chars in _string_bytes(strings))


def write_trec_run(run: Run, path: str | Path, *, name: str | None = None) -> None:
    """Write a run in TREC format (``qid Q0 doc rank score name``), ranks from 1.

    Ordered runs get descending pseudo-scores so that any TREC tool ranks them the same way.
    """
    tag = name or run.name or "rankwise"
    ranks = run.ranks()
    scores = run.scores if run.scores is not None else (-ranks).astype(np.float64)
    qcodes = run.query_codes()
    docs = run.doc_ids.to_pylist()
    with atomic_write(path) as fh:
        for q, d, r, s in zip(qcodes.tolist(), docs, ranks.tolist(), scores.tolist(), strict=False):
            fh.write(f"{run.queries[q]} Q0 {d} {r} {s!r} {tag}\n")


def write_trec_qrels(qrels: Qrels, path: str | Path) -> None:
    """Write qrels in TREC format (``qid 0 doc grade``)."""
    qcodes = qrels.query_codes()
    with atomic_write(path) as fh:
        for q, d, g in zip(qcodes.tolist(), qrels.doc_ids.to_pylist(), qrels.grades.tolist(), strict=False):
            fh.write(f"{qrels.queries[q]} 0 {d} {g}\n")
