"""Turn whatever the user hands us (object, dict, DataFrame, path) into a :class:`Run` or
:class:`Qrels`."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.frames import is_dataframe, qrels_from_frame, run_from_frame
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.data.swap import with_swap_hint
from rankwise.data.tabular import read_beir_qrels, read_delimited_run, read_jsonl_qrels, read_jsonl_run
from rankwise.data.trec import read_trec_qrels, read_trec_run
from rankwise.errors import InputError

__all__ = ["load_run", "load_qrels", "load_both", "RunLike", "QrelsLike", "headerless_trec"]

RunLike = Run | Mapping | str | PathLike | Any
QrelsLike = Qrels | Mapping | str | PathLike | Any


def _sniff_header(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").strip().lower()
    except OSError:
        return False
    return any(h in first for h in ("query-id", "query_id", "qid\t", "qid,", "corpus-id", "doc_id"))


def headerless_trec(path: str | PathLike, kind: str) -> bool:
    """Whether a ``.csv``/``.tsv`` file is TREC after all: its first line holds no header and has a
    TREC ``kind``'s fields (qrels ``qid iter doc grade``; run ``qid Q0 doc rank score tag``). MS
    MARCO ships its qrels as headerless ``.tsv``.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels.dev.tsv")
        >>> _ = open(path, "w").write("1048585\\t0\\t7187158\\t1\\n")
        >>> headerless_trec(path, "qrels"), headerless_trec(path, "run")
        (True, False)
    """
    try:
        with open(path, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").split()
    except OSError:
        return False

    def number(text: str, kind_of=int) -> bool:
        try:
            kind_of(text)
        except ValueError:
            return False
        return True

    if kind == "qrels":
        return len(first) == 4 and number(first[3])
    return len(first) == 6 and number(first[3]) and number(first[4], float)


def load_run(obj: RunLike, *, name: str | None = None) -> Run:
    """A :class:`Run` from a Run, ``{qid: {doc: score}}`` / ``{qid: [doc, ...]}``, a DataFrame, or a
    file.

    Files: TREC (default), ``.jsonl``, ``.parquet`` (``query_id``, ``doc_id``, ``score``), or
    CSV/TSV with a header.

    Example:
        >>> load_run({"q1": {"d1": 2.0, "d2": 1.0}}).ranking("q1")
        ['d1', 'd2']
    """
    if isinstance(obj, Run):
        return obj
    if isinstance(obj, Mapping):
        return Run.from_dict(obj, name=name or "run")
    if is_dataframe(obj):
        return run_from_frame(obj, name=name or "run")
    if isinstance(obj, (str, PathLike)):
        path = Path(obj)
        suffix = path.suffix.lower()
        if suffix in (".parquet", ".pq"):
            from rankwise.data.stream import read_parquet_run

            run = read_parquet_run(path)
        elif suffix in (".jsonl", ".json", ".ndjson"):
            run = read_jsonl_run(path)
        elif (suffix in (".csv", ".tsv") and not headerless_trec(path, "run")) or _sniff_header(path):
            run = read_delimited_run(path)
        else:
            run = with_swap_hint(read_trec_run, path, "run")
        if name:
            object.__setattr__(run, "name", name)
        return run
    raise InputError(f"cannot read a run from {type(obj).__name__}; pass a Run, dict, DataFrame or path")


def load_qrels(obj: QrelsLike) -> Qrels:
    """A :class:`Qrels` from a Qrels, ``{qid: {doc: grade}}``, a DataFrame, or a file.

    Files: TREC qrels (default; also a headerless ``.tsv``/``.csv`` of TREC lines, as MS MARCO ships
    them), BEIR/CSV/TSV with a header, ``.jsonl``, or ``.parquet`` (``query_id``, ``doc_id``,
    ``relevance``).

    Example:
        >>> load_qrels({"q1": {"d1": 1}}).n_queries
        1
    """
    if isinstance(obj, Qrels):
        return obj
    if isinstance(obj, Mapping):
        return Qrels.from_dict(obj)
    if is_dataframe(obj):
        return qrels_from_frame(obj)
    if isinstance(obj, (str, PathLike)):
        path = Path(obj)
        suffix = path.suffix.lower()
        if suffix in (".parquet", ".pq"):
            from rankwise.data.stream import read_parquet_qrels

            return read_parquet_qrels(path)
        if suffix in (".jsonl", ".json", ".ndjson"):
            return read_jsonl_qrels(path)
        if (suffix in (".csv", ".tsv") and not headerless_trec(path, "qrels")) or _sniff_header(path):
            return read_beir_qrels(path)
        return with_swap_hint(read_trec_qrels, path, "qrels")
    raise InputError(f"cannot read qrels from {type(obj).__name__}; pass a Qrels, dict, DataFrame or path")


_BIG_FILE = 1 << 24  # bytes: from a run file this big, the qrels file is read beside it


def load_both(qrels: QrelsLike, run: RunLike) -> tuple[Qrels, Run]:
    """:func:`load_qrels` and :func:`load_run` of a pair; a big run file is read while a second
    thread reads the qrels file (most of a run's ranking leaves a core free). Errors come as if the
    qrels were read first: a bad qrels file is reported before a bad run.

    Example:
        >>> q, r = load_both({"q1": {"d1": 1}}, {"q1": {"d1": 2.0}})
        >>> q.n_queries, r.ranking("q1")
        (1, ['d1'])
    """
    if not (isinstance(qrels, (str, PathLike)) and isinstance(run, (str, PathLike)) and _size(run) >= _BIG_FILE):
        return load_qrels(qrels), load_run(run)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        judged = pool.submit(load_qrels, qrels)
        try:
            ranked = load_run(run)
        except InputError:
            judged.result()  # (its error first)
            raise
        return judged.result(), ranked


def _size(path: str | PathLike) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
