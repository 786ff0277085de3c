"""Evaluation of runs larger than memory: one block of whole queries at a time, the same numbers.

Each block of the run (see :func:`rankwise.data.stream.iter_run_blocks`) is joined with the qrels of
its queries and measured with the in-memory engine; only the per-query values (one float per query
and measure) are kept. At the end they are put in query-id byte order and aggregated exactly as
:func:`rankwise.metrics.engine.evaluate_matrix` does (left-to-right sums in that order, as
trec_eval), so a streamed evaluation prints the same digits as an in-memory one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from rankwise.data.load import QrelsLike, load_qrels
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.data.stream import DEFAULT_BLOCK_ROWS, NotGrouped, is_parquet, iter_run_blocks
from rankwise.data.trec import run_tag
from rankwise.errors import InputError
from rankwise.metrics.engine import (
    DEFAULT_METRICS,
    EvalResult,
    PerQuery,
    aggregate_columns,
    check_depth,
    evaluate_matrix,
)
from rankwise.metrics.matrix import join
from rankwise.metrics.registry import Measure, asks_runid, parse_measures

__all__ = ["evaluate_stream"]


def evaluate_stream(qrels: QrelsLike, run_path: str | os.PathLike,
                    metrics: Iterable[str | Measure] | str | None = None,
                    *, relevance_level: int = 1, missing: str = "zero", block_rows: int = DEFAULT_BLOCK_ROWS,
                    workdir: str | os.PathLike | None = None, depth: int | None = None,
                    progress: bool = False) -> EvalResult:
    """:func:`rankwise.evaluate` for a run file of any size (TREC text or Parquet), in bounded
    memory.

    The run is read ``block_rows`` rows at a time (whole queries); a file whose queries are not
    grouped is partitioned on disk first (under ``workdir``). The qrels are held in memory.
    ``depth``: trec_eval's ``-M``, as in :func:`rankwise.evaluate`. ``progress``: a bar on stderr
    counting the rows evaluated, for a run file of :data:`PROGRESS_AT_LEAST` bytes or more.

    Example:
        >>> r = evaluate_stream("qrels.txt", "big.trec", ["ndcg@10", "map"])  # doctest: +SKIP
    """
    if missing not in ("zero", "skip"):
        raise InputError(f"missing must be 'zero' or 'skip', not {missing!r}", field="missing")
    metrics = [metrics] if isinstance(metrics, str) else None if metrics is None else list(metrics)
    measures = parse_measures(metrics or DEFAULT_METRICS)
    check_depth(depth)
    q = load_qrels(qrels)
    try:
        result = _evaluate_blocks(q, _shown(iter_run_blocks(run_path, block_rows=block_rows), run_path, progress),
                                  measures, relevance_level, missing, depth)
    except NotGrouped:  # queries not grouped in the file: partition it on disk, then evaluate
        blocks = iter_run_blocks(run_path, block_rows=block_rows, grouped=False, workdir=workdir)
        result = _evaluate_blocks(q, _shown(blocks, run_path, progress, "(partitioned on disk)"), measures,
                                  relevance_level, missing, depth)
    if asks_runid(metrics):  # as evaluate: the TREC file's tag, else the run's name
        result.runid = (None if is_parquet(run_path) else run_tag(run_path)) or result.run_name
    return result


PROGRESS_AT_LEAST = 64 << 20  # bytes of a run file from which evaluate_stream(progress=True) shows a bar


def _shown(blocks: Iterable[Run], path: str | os.PathLike, progress: bool, how: str = "") -> Iterable[Run]:
    """``blocks``, counted on a transient bar on stderr when ``progress`` and the file is large."""
    try:
        large = os.path.getsize(path) >= PROGRESS_AT_LEAST
    except OSError:  # the reader names the problem
        large = False
    if not (progress and large):
        yield from blocks
        return
    from rankwise.progress import progress as bar

    blocks = iter(blocks)
    first = next(blocks, None)  # a file found not grouped says so here, before any bar is drawn
    if first is None:
        return
    with bar(f"run rows evaluated {how}".strip(), None, transient=True) as advance:
        yield first
        advance(len(first))
        for block in blocks:
            yield block
            advance(len(block))


def _evaluate_blocks(qrels: Qrels, blocks: Iterable[Run], measures: list[Measure], relevance_level: int,
                     missing: str, depth: int | None = None) -> EvalResult:
    position = qrels.query_position
    query_ids: list[list[str]] = []
    values: list[np.ndarray] = []
    texts: dict[str, list[str]] = {}  # relstring: a text per query beside its number

    def score(matrix) -> None:
        query_ids.append(matrix.query_ids)
        part = evaluate_matrix(matrix, measures)
        values.append(part.per_query.values)
        for key, column in part.texts.items():
            texts.setdefault(key, []).extend(column)

    in_run = np.zeros(qrels.n_queries, dtype=bool)
    ignored: list[str] = []
    run_queries = 0
    name = "run"
    for block in blocks:  # each block holds whole queries: truncating it is truncating the run
        if depth is not None:
            block = block.truncate(depth)
        name = block.name
        run_queries += block.n_queries
        codes = np.array([position.get(qid, -1) for qid in block.queries], dtype=np.int64)
        ignored.extend(qid for qid, c in zip(block.queries, codes.tolist(), strict=True) if c < 0)
        judged = np.sort(codes[codes >= 0])
        if len(judged) == 0:
            continue
        in_run[judged] = True
        score(join(_subset(qrels, judged), block, relevance_level=relevance_level, missing="skip")[0])
    if run_queries and len(ignored) == run_queries:
        raise InputError(
            f"the run and the qrels share no query id (run: {_examples(sorted(ignored))}; qrels: "
            f"{_examples(qrels.queries)}); ids are compared exactly, so '01' is not '1'", field="query_id")
    absent = np.flatnonzero(~in_run)
    if missing == "zero" and len(absent):
        empty = Run.from_columns([], [], np.zeros(0), kind="scored")
        score(join(_subset(qrels, absent), empty, relevance_level=relevance_level, missing="zero")[0])
    ids = [qid for part in query_ids for qid in part]
    if not ids:
        raise InputError("no query to evaluate: the qrels hold no query", field="query_id")
    table = np.concatenate(values) if values else np.zeros((0, len(measures)))
    order = sorted(range(len(ids)), key=ids.__getitem__)  # code-point order == UTF-8 byte order
    ids = [ids[i] for i in order]
    table = table[np.asarray(order, dtype=np.int64)]
    mean, undefined = aggregate_columns(table, measures)
    ignored.sort()
    missing_queries = [qrels.queries[i] for i in absent.tolist()]
    summary = {
        "queries_in_qrels": qrels.n_queries,
        "queries_in_run": run_queries,
        "evaluated": len(ids),
        "missing_from_run": len(missing_queries),
        "ignored_not_in_qrels": len(ignored),
        "missing_queries": missing_queries,
        "ignored_queries": ignored,
        "missing": missing,
        "relevance_level": relevance_level,
    }
    if missing == "zero":  # as the in-memory join says it (trec_eval -c prints it as num_rel's `all`)
        summary["num_rel_all_trec_eval"] = int((qrels.grades > 0).sum())
    if undefined:
        summary["undefined"] = undefined
    return EvalResult(measures, PerQuery(ids, [m.name for m in measures], table), mean, summary, name,
                      {key: [column[i] for i in order] for key, column in texts.items()})


def _subset(qrels: Qrels, codes: np.ndarray) -> Qrels:
    """The judgements of queries ``codes`` (sorted indices into ``qrels.queries``)."""
    starts, ends = qrels.offsets[codes], qrels.offsets[codes + 1]
    lengths = ends - starts
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    rows = np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
    from rankwise.data.columns import take

    sub = Qrels([qrels.queries[i] for i in codes.tolist()], offsets, take(qrels.doc_ids, rows),
                qrels.grades[rows])
    sub.__dict__["doc_hashes"] = qrels.doc_hashes[rows]
    return sub


def _examples(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:3])
    return shown + (", ..." if len(ids) > 3 else "")
