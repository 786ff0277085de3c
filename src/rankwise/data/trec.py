"""TREC run and qrels files: read (fast path through Arrow's CSV reader) and write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from rankwise.data._text import iter_lines, parse_float, parse_int, read_bytes
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.errors import InputError

__all__ = ["read_trec_run", "read_trec_qrels", "write_trec_run", "write_trec_qrels"]

_RUN_FIELDS = ["query_id", "iter", "doc_id", "rank", "score", "run_id"]
_QRELS_FIELDS = ["query_id", "iter", "doc_id", "relevance"]


def read_trec_run(path: str | Path, *, name: str | None = None) -> Run:
    """Read a TREC run: ``qid iter docno rank score run_id`` (extra fields ignored, ``#`` lines skipped).

    Ranking is by score, ties by doc id in descending byte order (trec_eval's rule); the ``rank``
    column is ignored, as trec_eval does.

    Example:
        >>> run = read_trec_run("run.trec")  # doctest: +SKIP
    """
    path = Path(path)
    name = name or path.stem
    fast = _fast_columns(path, _RUN_FIELDS, {"query_id": pa.string(), "doc_id": pa.string(),
                                                "score": pa.float64(), "run_id": pa.string()})
    if fast is not None:
        try:
            return Run.from_columns(fast["query_id"], fast["doc_id"], fast["score"].to_numpy(),
                                    kind="scored", name=name, source=str(path))
        except InputError:
            pass  # re-read slowly to report the exact line
    qids, docs, scores, lines = [], [], [], []
    for number, line in iter_lines(read_bytes(path), path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 6:
            raise InputError(
                f"expected at least 6 fields (query_id iter doc_id rank score run_id), got {len(fields)}",
                source=path, line=number, field=_RUN_FIELDS[len(fields)] if len(fields) < 6 else None,
            )
        qids.append(fields[0])
        docs.append(fields[2])
        scores.append(parse_float(fields[4], source=path, line=number, field="score"))
        lines.append(number)
    if not qids:
        raise InputError("no run lines (only comments or blank lines)", source=path)
    return Run.from_columns(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                            np.asarray(scores), kind="scored", name=name, source=str(path),
                            lines=np.asarray(lines))


def read_trec_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels: ``qid iter docno grade``, exactly 4 fields; ``#`` lines are comments.

    Example:
        >>> qrels = read_trec_qrels("qrels.txt")  # doctest: +SKIP
    """
    path = Path(path)
    fast = _fast_columns(path, _QRELS_FIELDS, {"query_id": pa.string(), "doc_id": pa.string(),
                                                 "relevance": pa.int64()})
    if fast is not None:
        try:
            return Qrels.from_columns(fast["query_id"], fast["doc_id"], fast["relevance"].to_numpy(),
                                      source=str(path))
        except InputError:
            pass
    qids, docs, grades, lines = [], [], [], []
    for number, line in iter_lines(read_bytes(path), path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
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
    return Qrels.from_columns(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                              np.asarray(grades, dtype=np.int64), source=str(path), lines=np.asarray(lines))


def _fast_columns(path: Path, names: list[str], types: dict) -> dict | None:
    """Parse a well-formed single-space or single-tab separated file with Arrow; None if it is not one."""
    import pyarrow.csv as pcsv

    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    if not head.strip() or head.lstrip().startswith(b"#") or b"\n#" in head:
        return None
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    delimiter = "\t" if b"\t" in first and b" " not in first else " "
    if len(first.split(delimiter.encode())) != len(names):
        return None
    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False),
            convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(types)),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, OSError):
        return None
    if table.num_rows == 0:
        return None
    cols = {n: table.column(n).combine_chunks() for n in types}
    if any(c.null_count for c in cols.values()):
        return None
    # a '#' comment line later in the file would parse as data: leave such files to the exact reader
    import pyarrow.compute as pc

    if pc.any(pc.starts_with(cols["query_id"], "#")).as_py():
        return None
    return cols


def write_trec_run(run: Run, path: str | Path, *, name: str | None = None) -> None:
    """Write a run in TREC format (``qid Q0 doc rank score name``), ranks from 1.

    Ordered runs get descending pseudo-scores so that any TREC tool ranks them the same way.
    """
    tag = name or run.name or "rankwise"
    ranks = run.ranks()
    scores = run.scores if run.scores is not None else (-ranks).astype(np.float64)
    qcodes = run.query_codes()
    docs = run.doc_ids.to_pylist()
    with open(path, "w", encoding="utf-8") as fh:
        for q, d, r, s in zip(qcodes.tolist(), docs, ranks.tolist(), scores.tolist()):
            fh.write(f"{run.queries[q]} Q0 {d} {r} {s!r} {tag}\n")


def write_trec_qrels(qrels: Qrels, path: str | Path) -> None:
    """Write qrels in TREC format (``qid 0 doc grade``)."""
    qcodes = qrels.query_codes()
    with open(path, "w", encoding="utf-8") as fh:
        for q, d, g in zip(qcodes.tolist(), qrels.doc_ids.to_pylist(), qrels.grades.tolist()):
            fh.write(f"{qrels.queries[q]} 0 {d} {g}\n")
