"""``evaluate``: qrels + run + metric names -> per-query values, means and a summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from rankwise.data.load import QrelsLike, RunLike, load_both
from rankwise.errors import InputError
from rankwise.metrics.matrix import RelevanceMatrix, join
from rankwise.metrics.registry import Measure, asks_runid, parse_measures

__all__ = ["evaluate", "evaluate_matrix", "aggregate", "aggregate_columns", "note_undefined", "EvalResult",
           "PerQuery", "DEFAULT_METRICS", "sequential_mean", "check_depth"]

DEFAULT_METRICS = (
    [f"hit_rate@{k}" for k in (1, 3, 5, 10)]
    + [f"precision@{k}" for k in (1, 3, 5, 10)]
    + [f"recall@{k}" for k in (1, 3, 5, 10)]
    + ["mrr", "ndcg@10", "map"]
)


def sequential_mean(values: np.ndarray) -> float:
    """Sum in the given (query-id byte) order, left to right, divided by the count: trec_eval's
    digits."""
    if len(values) == 0:
        return 0.0
    return float(np.add.accumulate(values)[-1] / len(values))


def aggregate(values: np.ndarray, measure: str | Measure) -> float:
    """A measure's value over queries, as every command reports it: undefined (NaN) values left out,
    then the mean (sum for count measures such as ``num_ret``; trec_eval's geometric mean for
    ``gm_map``) in the given order.

    Example:
        >>> import numpy as np
        >>> (
        ...     aggregate(np.array([1.0, 0.0, np.nan]), "P_5"),
        ...     aggregate(np.array([3.0, 4.0]), "num_ret"),
        ... )
        (0.5, 7.0)
    """
    from rankwise.metrics.registry import parse_measure

    m = parse_measure(measure)
    col = np.asarray(values, dtype=np.float64)
    col = col[~np.isnan(col)]
    if not len(col) and m.metric.undefined_when:  # undefined for every query: no mean, not 0
        return float("nan")
    if m.metric.aggregate == "sum":
        return float(np.add.accumulate(col)[-1]) if len(col) else 0.0
    if m.metric.aggregate == "gmean":  # trec_eval's gm_map: exp(mean log(max(v, 1e-5)))
        from rankwise.metrics.trec import gmean_trec

        return gmean_trec(col)
    return sequential_mean(col)


def aggregate_columns(values: np.ndarray,
                      measures: list[Measure]) -> tuple[dict[str, float | None], dict[str, int]]:
    """Each measure's value over the queries (a column of ``values`` each, via :func:`aggregate`)
    and, per measure that has some, the count of undefined (NaN) queries left out. Every engine ends
    here: in memory, streamed, and on Spark.

    Example:
        >>> import numpy as np
        >>> aggregate_columns(np.array([[1.0], [np.nan]]), parse_measures(["id_recall"]))
        ({'id_recall': 1.0}, {'id_recall': 1})
    """
    mean: dict[str, float] = {}
    undefined: dict[str, int] = {}
    for j, measure in enumerate(measures):
        nan = np.isnan(values[:, j])
        if nan.any():
            if not measure.metric.undefined_is_nan:
                raise AssertionError(f"{measure.name} produced NaN")  # an engine bug, never user input
            undefined[measure.name] = int(nan.sum())
        value = aggregate(values[:, j], measure)
        mean[measure.name] = None if np.isnan(value) else value  # undefined for every query: no mean
    return mean, undefined


def note_undefined(summary: dict, undefined: dict[str, int], measures: list[Measure]) -> dict:
    """``summary`` with the undefined counts and, for metrics that declare it, when a value is
    undefined.

    Example:
        >>> note_undefined({}, {"calls_to_evidence@5": 2}, parse_measures(["calls_to_evidence@5"]))[
        ...     "undefined_why"
        ... ]
        {'calls_to_evidence@5': 'the evidence was never complete (or the case has no ground truth)'}
    """
    if undefined:
        summary["undefined"] = undefined
        why = {m.name: m.metric.undefined_when for m in measures if m.name in undefined and m.metric.undefined_when}
        if why:
            summary["undefined_why"] = why
    return summary


class PerQuery(Mapping):
    """Per-query values: a mapping ``qid -> {metric: value}`` that also converts to DataFrames.

    Example:
        >>> r = evaluate({"q1": {"a": 1}}, {"q1": {"a": 1.0}}, ["precision@1"])
        >>> r.per_query["q1"]
        {'precision@1': 1.0}
    """

    def __init__(self, query_ids: list[str], names: list[str], values: np.ndarray):
        self.query_ids = query_ids
        self.names = names
        self.values = values
        self._index = {q: i for i, q in enumerate(query_ids)}

    def __getitem__(self, qid: str) -> dict[str, float]:
        row = self.values[self._index[qid]]
        return {n: (None if np.isnan(v) else float(v)) for n, v in zip(self.names, row.tolist(), strict=True)}

    def __iter__(self):
        return iter(self.query_ids)

    def __len__(self) -> int:
        return len(self.query_ids)

    def column(self, name: str) -> np.ndarray:
        """One metric's values over all queries, in query order."""
        return self.values[:, self.names.index(name)]

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {q: self[q] for q in self.query_ids}

    def _columns(self) -> dict:
        cols = {"query_id": list(self.query_ids)}
        for j, n in enumerate(self.names):
            cols[n] = self.values[:, j]
        return cols

    def to_pandas(self):
        """A pandas DataFrame with a ``query_id`` column and one column per metric."""
        from rankwise.data.frames import to_frame

        return to_frame(self._columns(), "pandas")

    def to_polars(self):
        """A polars DataFrame with a ``query_id`` column and one column per metric."""
        from rankwise.data.frames import to_frame

        return to_frame(self._columns(), "polars")


@dataclass
class EvalResult:
    """What :func:`evaluate` returns.

    Attributes:
        measures: the measures, in the order asked.
        per_query: :class:`PerQuery` (mapping qid -> {metric: value}, ``.to_pandas()``,
            ``.to_polars()``).
        mean: canonical name -> mean over evaluated queries (sum for count measures).
        summary: queries evaluated / missing from run / ignored (absent from qrels), and per-metric
            counts of undefined queries where a metric can be undefined.
        run_name: name of the evaluated run.
        texts: per-query texts of text measures (``relstring``): name -> one string per query.
        runid: what trec_eval's ``runid`` line says (``--format trec``): a TREC run file's tag (the
            6th column of its last line), else the run's name; None when ``runid`` was not asked for
            (:func:`~rankwise.metrics.registry.asks_runid`: no metric list, ``runid``, ``official``,
            ``set`` or ``all_trec`` ask for it, as in trec_eval).
    """

    measures: list[Measure]
    per_query: PerQuery
    mean: dict[str, float]
    summary: dict
    run_name: str = "run"
    texts: dict[str, list[str]] = field(default_factory=dict)
    runid: str | None = None

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.measures]

    def to_json(self, *, per_query: bool = False) -> dict:
        """``{"runid"?, "summary", "mean", "per_query"?}`` as printed by ``rankwise eval --format
        json`` (``runid`` when it was asked for, as trec_eval prints it)."""
        out = {"runid": self.runid} if self.runid is not None else {}
        out.update({"summary": self.summary, "mean": self.mean})
        if per_query:
            out["per_query"] = self.per_query.to_dict()
            if self.texts:  # relstring: {name: {qid: text}}
                out["texts"] = {n: dict(zip(self.per_query.query_ids, t, strict=True)) for n, t in self.texts.items()}
        return out


def evaluate_matrix(matrix: RelevanceMatrix, measures: Iterable[str | Measure], summary: dict | None = None,
                    run_name: str = "run") -> EvalResult:
    """Compute measures over an already joined :class:`RelevanceMatrix`."""
    parsed = parse_measures(measures)
    values = np.empty((len(matrix.query_ids), len(parsed)), dtype=np.float64)
    texts: dict[str, list[str]] = {}
    for j, measure in enumerate(parsed):
        values[:, j] = column = measure(matrix)
        if hasattr(column, "texts"):  # relstring: a text per query beside its number
            texts[measure.name] = column.texts
    mean, undefined = aggregate_columns(values, parsed)
    summary = note_undefined(dict(summary or {"evaluated": len(matrix.query_ids)}), undefined, parsed)
    return EvalResult(parsed, PerQuery(matrix.query_ids, [m.name for m in parsed], values), mean, summary,
                      run_name, texts)


def check_depth(depth: int | None) -> None:
    """``depth`` (trec_eval ``-M``) is None or a whole number >= 1.

    Example:
        >>> check_depth(100), check_depth(None)
        (None, None)
    """
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth must be a whole number >= 1, got {depth!r}", field="depth")


def _examples(ids: list[str], n: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:n])
    return shown + (f" ... ({len(ids)} in all)" if len(ids) > n else "")


def evaluate(qrels: QrelsLike, run: RunLike, metrics: Iterable[str | Measure] | str | None = None, *,
             relevance_level: int = 1, missing: str = "zero", depth: int | None = None) -> EvalResult:
    """Evaluate a run against qrels.

    Args:
        qrels: :class:`~rankwise.data.Qrels`, ``{qid: {doc: grade}}``, a DataFrame or a path.
        run: :class:`~rankwise.data.Run`, ``{qid: {doc: score}}`` / ``{qid: [doc, ...]}``, a
            DataFrame or a path.
        metrics: metric names (``"ndcg@10"``, ``"P_5"``, ...); default :data:`DEFAULT_METRICS`.
        relevance_level: grade from which a judgement counts as relevant.
        missing: ``"zero"`` scores qrels queries absent from the run as 0 (trec_eval ``-c``);
            ``"skip"`` evaluates only queries in both (trec_eval default, pytrec_eval).
        depth: evaluate only the top ``depth`` items of each query's ranking (trec_eval ``-M``;
            ``num_ret`` counts what is kept). None: all of them.

    Example:
        >>> qrels = {"q1": {"a": 1, "b": 0, "c": 2, "d": 1}}
        >>> run = {"q1": {"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}}
        >>> r = evaluate(qrels, run, ["P@3", "map", "ndcg@3"])
        >>> {k: round(v, 4) for k, v in r.mean.items()}
        {'precision@3': 0.3333, 'map': 0.2778, 'ndcg@3': 0.1597}
    """
    metrics = [metrics] if isinstance(metrics, str) else None if metrics is None else list(metrics)
    measures = parse_measures(metrics or DEFAULT_METRICS)
    if missing not in ("zero", "skip"):
        raise InputError(f"missing must be 'zero' or 'skip', not {missing!r}", field="missing")
    check_depth(depth)
    q, r = load_both(qrels, run)
    if depth is not None:
        r = r.truncate(depth)
    matrix, summary = join(q, r, relevance_level=relevance_level, missing=missing)
    if r.n_queries and summary["ignored_not_in_qrels"] == r.n_queries:
        # every score would be 0: almost always the wrong qrels for this run, or ids written
        # differently
        raise InputError(
            f"the run and the qrels share no query id (run: {_examples(r.queries)}; qrels: "
            f"{_examples(q.queries)}); ids are compared exactly, so '01' is not '1'", field="query_id",
        )
    if not matrix.query_ids:
        raise InputError("no query to evaluate: the qrels hold no query", field="query_id")
    result = evaluate_matrix(matrix, measures, summary, r.name)
    if asks_runid(metrics):
        result.runid = r.tag or r.name
    return result
