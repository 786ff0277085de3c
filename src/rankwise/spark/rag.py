"""``rankwise.spark.evaluate_rag``: a RAG test set or per-case records as a Spark DataFrame -> the
numbers ``rankwise.evaluate_rag`` gives, bit for bit.

Each partition's cases are judged (containment, span, fuzzy, ids) or read with their stored verdicts
(LLM, human: from records written by ``rankwise judge``) and scored by rankwise's own engine in a
Python worker (``mapInArrow``); a case's values depend only on the case. The driver collects the
per-case values and statuses, and computes the means and the summary as ``evaluate_rag`` does (cases
in id byte order, :func:`~rankwise.metrics.engine.aggregate`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.checks import case_warnings
from rankwise.data.testset import ID_FIELDS
from rankwise.errors import InputError, warn
from rankwise.metrics.engine import EvalResult, PerQuery, aggregate_columns, note_undefined
from rankwise.metrics.rag import checked_cutoffs, default_rag_metrics, left_out, none_scorable, rag_summary
from rankwise.metrics.registry import Measure, parse_measures
from rankwise.relevance.diagnose import missing_sentence
from rankwise.relevance.text import MIN_EVIDENCE_CHARS, fragment_warning
from rankwise.spark.io import check_workers, require_pyspark

__all__ = ["evaluate_rag", "SparkRagResult", "case_scorer"]


@dataclass
class SparkRagResult:
    """What :func:`evaluate_rag` returns.

    Attributes:
        measures: the measures, in the order asked.
        per_query: Spark DataFrame ``query_id`` + one double column per metric (every case; NaN
            where undefined), persisted.
        records: Spark DataFrame with one ``record`` column: each case's record as a JSON line
            (verdicts, matched passages, scores, status), e.g.
            ``result.records.write.text("records")``.
        mean: canonical name -> mean over the cases that enter the means, as ``evaluate_rag``.
        summary: the same summary ``evaluate_rag`` gives.
        relevance: the verdict source scored.
    """

    measures: list[Measure]
    per_query: Any
    records: Any
    mean: dict[str, float]
    summary: dict
    relevance: str
    query_ids: list[str]
    values: np.ndarray

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.measures]

    def to_eval_result(self) -> EvalResult:
        """The scored cases' values and the means as a local
        :class:`~rankwise.metrics.engine.EvalResult`."""
        return EvalResult(self.measures, PerQuery(self.query_ids, self.names, self.values), dict(self.mean),
                          self.summary, f"eval-rag ({self.relevance})")


def _schema(n: int) -> str:
    cols = ["query_id string", "_status string", "_basis string", "_ok long", "_failed long", "_missing long",
            "_stored boolean", "_error string", "record string", "_depth long", "_dup_id string", "_dup_n long",
            "_frag string"]
    return ", ".join(cols + [f"m{j} double" for j in range(n)])


def _drop_nulls(obj: Any) -> Any:
    """A Spark row as the JSON object it came from: null struct fields are absent keys."""
    if isinstance(obj, Mapping):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nulls(v) for v in obj]
    return obj


def _error_batch(n: int, message: str) -> pa.RecordBatch:
    cols = {"query_id": pa.array([""]), "_status": pa.array([None], pa.string()),
            "_basis": pa.array([None], pa.string()), "_ok": pa.array([0], pa.int64()),
            "_failed": pa.array([0], pa.int64()), "_missing": pa.array([0], pa.int64()),
            "_stored": pa.array([False]), "_error": pa.array([message]), "record": pa.array([None], pa.string()),
            "_depth": pa.array([0], pa.int64()), "_dup_id": pa.array([None], pa.string()),
            "_dup_n": pa.array([0], pa.int64()), "_frag": pa.array([None], pa.string())}
    for j in range(n):
        cols[f"m{j}"] = pa.array([np.nan], pa.float64())
    return pa.RecordBatch.from_pydict(cols)


def case_scorer(names: list[str], relevance: str, json_column: str | None, options: dict):
    """The function each worker runs on its partition's batches: cases -> one row per case."""
    n = len(names)

    def score(batches):
        for batch in batches:
            try:
                objs = _batch_cases(batch, json_column)
                if not objs:
                    continue
                yield _scored_batch(objs, names, relevance, options)
            except InputError as exc:
                if exc.source in (None, "<list>", "<input>"):  # positions within a partition mean nothing
                    exc = InputError(exc.problem.split(" (first on line")[0], source="<spark cases>",
                                     field=exc.field)
                yield _error_batch(n, str(exc))

    return score


def _batch_cases(batch: pa.RecordBatch, json_column: str | None) -> list[Any]:
    """A batch's cases as JSON objects (from the JSON-lines column, else the rows), each with an id.
    """
    if json_column is not None:
        objs = []
        for text in batch.column(json_column).to_pylist():
            if text is None or not text.strip():
                continue
            try:
                objs.append(json.loads(text))
            except ValueError as exc:
                raise InputError(f"not JSON ({exc.msg}): {text[:60]!r}",
                                 source="<spark cases>", field=json_column) from None
    else:
        objs = [_drop_nulls(row) for row in batch.to_pylist()]
    for obj in objs:
        if not isinstance(obj, Mapping) or not any(obj.get(f) not in (None, "") for f in ID_FIELDS):
            raise InputError(f"a case has no id ({' / '.join(ID_FIELDS)}); on Spark every case "
                             f"needs one: {json.dumps(obj)[:80]}", source="<spark cases>", field="id")
    return objs


def _scored_batch(objs: list[Any], names: list[str], relevance: str, options: dict) -> pa.RecordBatch:
    """The cases judged and scored as ``evaluate_rag`` does: one row per case (``_schema``)."""
    from rankwise.data.records import as_records, dump_record
    from rankwise.metrics.engine import evaluate_matrix
    from rankwise.metrics.matrix import RelevanceMatrix, record_truth
    from rankwise.metrics.rag import judged_records

    judge_options = {key: options[key] for key in ("min_overlap", "threshold", "id_field",
                                                   "relevance_level", "min_evidence_chars")}
    records, stored = judged_records(as_records(objs, copy=False), relevance, **judge_options)
    matrix = RelevanceMatrix.from_records(records, relevance, relevance_level=options["relevance_level"],
                                          id_field=options["id_field"])
    for measure in parse_measures(names):
        measure.check(matrix)
    values = evaluate_matrix(matrix, names).per_query.values
    statuses = [r.status.get(relevance, "ok") for r in records]
    counts = _status_counts(records, relevance)
    unscorable, incomplete = options["skip"]
    dups = [_first_repeat(r) for r in records]
    lines = []
    for i, r in enumerate(records):
        if left_out(statuses[i], unscorable, incomplete):
            r.scores[relevance] = {name: None for name in names}
        else:
            r.scores[relevance] = {name: (None if np.isnan(v) else float(v))
                                   for name, v in zip(names, values[i].tolist(), strict=True)}
        lines.append(dump_record(r))
    cols = {
        "query_id": pa.array([r.id for r in records], pa.string()),
        "_status": pa.array(statuses, pa.string()),
        "_basis": pa.array([record_truth(r, relevance, relevance_level=options["relevance_level"])
                            ["basis"] for r in records], pa.string()),
        "_ok": pa.array(counts["ok"], pa.int64()), "_failed": pa.array(counts["failed"], pa.int64()),
        "_missing": pa.array(counts["missing"], pa.int64()),
        "_stored": pa.array([stored] * len(records)),
        "_error": pa.array([None] * len(records), pa.string()),
        "record": pa.array(lines, pa.string()),
        "_depth": pa.array([len(r.chunks) for r in records], pa.int64()),
        "_dup_id": pa.array([d[0] for d in dups], pa.string()),
        "_dup_n": pa.array([d[1] for d in dups], pa.int64()),
        "_frag": pa.array([_fragments(r, relevance) for r in records], pa.string()),
    }
    for j in range(len(names)):
        cols[f"m{j}"] = pa.array(values[:, j], pa.float64())
    return pa.RecordBatch.from_pydict(cols)


def _status_counts(records: list, relevance: str) -> dict[str, list[int]]:
    """Per record, its chunks whose ``relevance`` verdict is ok, failed or missing (three columns).
    """
    counts: dict[str, list[int]] = {"ok": [], "failed": [], "missing": []}
    for r in records:
        c = {"ok": 0, "failed": 0, "missing": 0}
        for ch in r.chunks:
            v = ch.verdicts.get(relevance)
            key = "missing" if v is None else v.status
            c[key] = c.get(key, 0) + 1
        for key in counts:
            counts[key].append(c.get(key, 0))
    return counts


def _fragments(record, relevance: str) -> str | None:
    """JSON ``[count, first rank, its text, minimum]`` of the record's chunks judged fragments (for
    :func:`~rankwise.relevance.text.fragment_warning`), None when there is none."""
    hits = [(c, c.verdicts[relevance]) for c in record.chunks if relevance in c.verdicts
            and c.verdicts[relevance].verdict == 0 and (c.verdicts[relevance].meta or {}).get("fragment_of")]
    if not hits:
        return None
    first, verdict = hits[0]
    return json.dumps([len(hits), first.rank, first.text or "", verdict.meta.get("min_evidence_chars")])


def _first_repeat(record) -> tuple[str | None, int]:
    """The record's first chunk id listed more than once and how often (for ``case_warnings``)."""
    counts = Counter(c.id for c in record.chunks if c.id is not None)
    return next(((i, n) for i, n in counts.items() if n > 1), (None, 0))


def _calls_and_hops(cases: Any, json_column: str | None) -> tuple[bool, bool]:
    """Whether some case has retrieval calls, and some reference passage a hop: one scan of the
    DataFrame, so the default metric list is the one ``rankwise.evaluate_rag`` picks for the same
    cases."""
    from pyspark.sql import functions as F

    if json_column is not None:
        text = F.col(json_column)
        row = cases.select(
            F.max(text.rlike(r'"calls"\s*:\s*\[\s*[^\]\s]').cast("int")).alias("calls"),
            F.max(text.rlike(r'"hop"\s*:\s*-?[0-9]').cast("int")).alias("hops")).first()
        return bool(row["calls"]), bool(row["hops"])
    calls = "calls" in cases.columns and bool(
        cases.select(F.max((F.size("calls") > 0).cast("int")).alias("c")).first()["c"])
    hops = "reference_contexts" in cases.columns and re.search(r"[<,]hop:", dict(cases.dtypes)["reference_contexts"])
    return calls, bool(hops)


def evaluate_rag(cases, relevance: str = "containment", *, k: int | Iterable[int] | None = None,
                 metrics: Iterable[str] | str | None = None, min_overlap: float = 0.5, threshold: float = 0.8,
                 id_field: str | None = None, relevance_level: int = 1, unscorable: str = "skip",
                 incomplete: str = "zero", json_column: str | None = None,
                 min_evidence_chars: int = MIN_EVIDENCE_CHARS) -> SparkRagResult:
    """Score a RAG test set or per-case records held in a Spark DataFrame; same numbers as
    ``rankwise.evaluate_rag``.

    Args:
        cases: a Spark DataFrame with one case per row: either one string column of JSON (a test-set
            or records JSONL read with ``spark.read.text``; the column is ``json_column``, default
            the only column) or test-set columns (``id``, ``retrieved_contexts``,
            ``reference_contexts`` ..., e.g. from Parquet). Every case needs an id.
        relevance: ``containment``, ``span``, ``fuzzy``, ``ids`` (judged in the workers) or a source
            whose verdicts the records hold (``llm``, ``human`` ...: scored as stored).
        k, metrics, min_overlap, threshold, min_evidence_chars, id_field, relevance_level, unscorable,
            incomplete: as for ``rankwise.evaluate_rag``.
        json_column: the column holding each case's JSON.

    Example:
        >>> cases = spark.read.text(
        ...     "records.jsonl"
        ... )  # written by `rankwise judge --records`  # doctest: +SKIP
        >>> evaluate_rag(cases, "llm", k=[5]).mean["precision@5"]  # doctest: +SKIP
        0.42
    """
    require_pyspark()
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if not hasattr(cases, "mapInArrow"):
        raise InputError(f"cases must be a Spark DataFrame, got {type(cases).__name__}", field="cases")
    ks = checked_cutoffs(k, unscorable, incomplete)
    if isinstance(metrics, str):
        metrics = [metrics]
    if json_column is None and len(cases.columns) == 1 and dict(cases.dtypes)[cases.columns[0]] == "string":
        json_column = cases.columns[0]
    if json_column is not None and json_column not in cases.columns:
        raise InputError(f"no column {json_column!r}; columns: {cases.columns}", field="json_column")
    if metrics:
        measures = parse_measures(metrics)
    else:  # as rankwise.evaluate_rag: the metrics over calls (and hops) when some case has them
        calls, hops = _calls_and_hops(cases, json_column)
        measures = parse_measures(default_rag_metrics(ks, relevance, calls=calls, hops=hops))
    names = [m.name for m in measures]
    check_workers(cases.sparkSession)
    skip = (unscorable, incomplete)  # the policies: left_out() decides per case, as rankwise.evaluate_rag
    options = {"min_overlap": min_overlap, "threshold": threshold, "id_field": id_field,
               "relevance_level": relevance_level, "min_evidence_chars": min_evidence_chars}
    out = cases.mapInArrow(_Worker(names, relevance, json_column, options, skip), _schema(len(names)))
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        local = out.select("query_id", "_status", "_basis", "_ok", "_failed", "_missing", "_stored", "_error",
                           "_depth", "_dup_id", "_dup_n", "_frag",
                           *[f"m{j}" for j in range(len(names))]).toArrow()
        result = _finish(local, measures, relevance, unscorable, incomplete, options)
    except BaseException:
        out.unpersist()
        raise
    per_query = out.where(F.col("_error").isNull()).select(
        "query_id", *[F.col(f"m{j}").alias(name) for j, name in enumerate(names)])
    records = out.where(F.col("_error").isNull()).select("record")
    return SparkRagResult(measures, per_query, records, result.mean, result.summary, relevance,
                          result.per_query.query_ids, result.per_query.values)


class _Worker:
    """A picklable partition function (its state is plain data)."""

    def __init__(self, names, relevance, json_column, options, skip):
        self.args = (names, relevance, json_column, {**options, "skip": skip})

    def __call__(self, batches):
        return case_scorer(*self.args)(batches)


def _finish(local: pa.Table, measures: list[Measure], relevance: str, unscorable: str, incomplete: str,
            options: dict) -> EvalResult:
    from rankwise.spark.ir import _reraise

    errors = local.column("_error").drop_null()
    if len(errors):
        _reraise(sorted(errors.to_pylist())[0])
    ids = local.column("query_id").combine_chunks()
    id_list = ids.to_pylist()
    if not id_list:
        raise InputError("the test set holds no case")
    order = np.asarray(pc.sort_indices(ids)).astype(np.int64)
    sorted_ids = [id_list[i] for i in order]
    for a, b in zip(sorted_ids, sorted_ids[1:], strict=False):
        if a == b:
            raise InputError(f"case id {a!r} appears twice", source="<spark cases>", field="id")
    stored_flags = set(local.column("_stored").to_pylist())
    if len(stored_flags) > 1:
        raise InputError(f"some partitions hold stored {relevance!r} verdicts and others do not; score records "
                         f"that all hold them, or a test set", field="relevance")
    stored = stored_flags.pop()
    statuses = local.column("_status").to_pylist()
    unscorable_cases: dict[str, str] = {}
    incomplete_cases: dict[str, str] = {}
    for cid, status in zip(id_list, statuses, strict=True):
        if status.startswith("unscorable"):
            unscorable_cases[cid] = status.split(": ", 1)[1]
        elif status.startswith("incomplete"):
            incomplete_cases[cid] = status.split(": ", 1)[1]
    if len(unscorable_cases) == len(id_list):
        raise none_scorable(unscorable_cases, relevance)  # the words of rankwise.evaluate_rag
    counts = {key: int(np.asarray(local.column(f"_{key}").to_numpy()).sum()) for key in ("ok", "failed", "missing")}
    if counts["missing"] and not counts["ok"] and not counts["failed"]:  # as evaluate_rag: nothing could be judged
        raise InputError(missing_sentence(relevance, counts["missing"]), field="retrieved_contexts")
    skip = {cid for cid, status in zip(id_list, statuses, strict=True) if left_out(status, unscorable, incomplete)}
    scored_rows = np.array([i for i in order.tolist() if id_list[i] not in skip], dtype=np.int64)
    if not len(scored_rows):
        raise InputError(f"no case can be scored with relevance {relevance!r}: "
                         f"{len(unscorable_cases)} unscorable, {len(incomplete_cases)} incomplete")
    values = np.empty((len(scored_rows), len(measures)), dtype=np.float64)
    for j in range(len(measures)):
        values[:, j] = np.asarray(local.column(f"m{j}").to_numpy(), dtype=np.float64)[scored_rows]
    bases = {local.column("_basis")[int(i)].as_py() for i in scored_rows}
    r_basis = bases.pop() if len(bases) == 1 else ("mixed" if bases else "reference passages")
    summary = rag_summary(len(id_list), relevance, len(scored_rows), unscorable_cases, incomplete_cases, unscorable,
                       incomplete, r_basis, stored, counts, **options)
    for message in [*case_warnings(_stand_ins(local), [m.k for m in measures]),
                    fragment_warning(_fragment_stand_ins(local, relevance), relevance)]:
        if message:
            warn(message, summary=summary)
    mean, undefined = aggregate_columns(values, measures)
    note_undefined(summary, undefined, measures)
    return EvalResult(measures, PerQuery([id_list[i] for i in scored_rows.tolist()], [m.name for m in measures],
                                         values), mean, summary, f"eval-rag ({relevance})")


def _fragment_stand_ins(local: pa.Table, relevance: str) -> list:
    """Stand-in records holding each case's fragment chunks (collected as ``_frag``), in input
    order."""
    out = []
    for rid, frag in zip(local.column("query_id").to_pylist(), local.column("_frag").to_pylist(), strict=True):
        if frag:
            n, rank, text, minimum = json.loads(frag)
            verdict = SimpleNamespace(verdict=0, meta={"fragment_of": [0], "min_evidence_chars": minimum})
            out.append(SimpleNamespace(id=rid, chunks=[SimpleNamespace(rank=rank, text=text,
                                                                        verdicts={relevance: verdict})] * n))
    return out


def _stand_ins(local: pa.Table) -> list:
    """Stand-in records with the collected per-case counts (list length; first repeated chunk id and
    its count), in input order, so :func:`~rankwise.data.checks.case_warnings` words the same
    messages as for the real records, which stay on the workers."""
    ids = local.column("query_id").to_pylist()
    depths = local.column("_depth").to_pylist()
    dup_ids = local.column("_dup_id").to_pylist()
    dup_ns = local.column("_dup_n").to_pylist()
    deepest = max(depths, default=0)
    out = [SimpleNamespace(id="", chunks=[SimpleNamespace(id=None)] * deepest)]
    for rid, cid, n in zip(ids, dup_ids, dup_ns, strict=True):
        if cid is not None:
            out.append(SimpleNamespace(id=rid, chunks=[SimpleNamespace(id=cid)] * n))
    return out
