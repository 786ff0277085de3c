"""rankwise results in MLflow: :func:`log` a result as a run, and rankwise metrics as MLflow GenAI
scorers.

:func:`log` takes what ``rankwise eval``, ``eval-rag``, ``compare(-rag)``, ``gate`` and ``sweep``
compute (an EvalResult / RagResult, a ComparisonResult, a GateResult, a SweepResult) and logs, in
one run: the metric means under MLflow-safe names (``ndcg@10`` -> ``ndcg_at_10``), the parameters
(verdict source, R basis, cutoffs, judge model and prompt version when an LLM judged), the per-query
table (``mlflow.log_table``: ``per_query.parquet`` with every digit, ``per_query.json`` for MLflow's
table view, which keeps 10), and the HTML report and records as artifacts. A sweep logs one child
run per configuration. :func:`scorers` gives rankwise metrics as ``mlflow.genai`` scorers: on traces
with RETRIEVER spans, ``mlflow.genai.evaluate`` gets rankwise's exact values (each case scored by
:func:`rankwise.evaluate_rag`; the ``/mean`` aggregate is rankwise's mean).

MLflow is imported only when a function here runs (``pip install "rankwise[mlflow]"``).

Example:
    >>> mlflow_name("ndcg@10"), mlflow_name("wcp(decay=linear)@5"), mlflow_name("P_5")
    ('ndcg_at_10', 'wcp_decay_linear_at_5', 'P_5')
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.finite import finite_float
from rankwise.errors import InputError, MlflowLogError, RankwiseError
from rankwise.integrations._mlflow_uri import borrowed_mlflow, check_tracking_uri, import_mlflow

__all__ = ["log", "mlflow_name", "scorers", "case_from_trace", "check_tracking_uri", "MlflowLogError", "log_failure"]


def log_failure(uri: str | None, exc: BaseException) -> MlflowLogError:
    """The one-line error for a failed MLflow write: where, the exception's type and its first line.

    Example:
        >>> str(log_failure("sqlite:///m.db", OSError(28, "No space left on device")))
        'logging to MLflow at sqlite:///m.db failed: OSError: [Errno 28] No space left on device'
    """
    from rankwise.llm.client import mask_url

    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    why = (lines[0] if lines else "")[:300]
    where = f" at {mask_url(uri)}" if uri else ""
    return MlflowLogError(f"logging to MLflow{where} failed: {type(exc).__name__}" + (f": {why}" if why else ""))


def mlflow_name(name: str) -> str:
    """A metric or system name as MLflow accepts it: ``@K`` -> ``_at_K``, other signs -> ``_``."""
    text = str(name).replace("@", "_at_")
    text = re.sub(r"[^A-Za-z0-9_\-./ ]+", "_", text)
    return re.sub(r"_+", "_", text).strip("_") or "_"


def _metrics(values: Mapping[str, Any]) -> dict[str, float]:
    return {k: v for k, v in ((k, finite_float(x)) for k, x in values.items()) if v is not None}


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _cutoffs(metrics: Iterable[str]) -> str:
    from rankwise.metrics.registry import parse_measure

    ks = set()
    for m in metrics:
        try:
            k = getattr(parse_measure(m), "k", None)
        except Exception:  # a name only its saved result knows: no cutoff to report
            k = None
        if isinstance(k, int):
            ks.add(k)
    return ",".join(str(k) for k in sorted(ks))


def _judge_params(records: Sequence[Any], source: str | None) -> dict[str, str]:
    """The judge's model(s) and prompt version(s) found in the records' verdicts of ``source``."""
    models, versions = set(), set()
    for r in records or []:
        for c in getattr(r, "chunks", []):
            v = c.verdicts.get(source) if source else None
            if v is not None and v.meta:
                if v.meta.get("model"):
                    models.add(str(v.meta["model"]))
                if v.meta.get("prompt_version"):
                    versions.add(str(v.meta["prompt_version"]))
    out = {}
    if models:
        out["judge_model"] = ",".join(sorted(models))
    if versions:
        out["judge_prompt_version"] = ",".join(sorted(versions))
    return out


def _eval_params(summary: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {"metrics": ",".join(metrics), "cutoffs": _cutoffs(metrics)}
    if summary.get("relevance"):
        params["verdict_source"] = summary["relevance"]
    for key, value in summary.items():
        if key in ("relevance", "parameters") or isinstance(value, (dict, list)):
            continue
        params[key] = value
    for key, value in (summary.get("parameters") or {}).items():
        params[key] = value
    return params


def _per_query_table(ids: Sequence[str], metrics: Sequence[str], columns: Mapping[str, Sequence[float]],
                     extra: Mapping[str, Sequence[Any]] | None = None) -> dict[str, list]:
    table: dict[str, list] = {**{k: list(v) for k, v in (extra or {}).items()}, "query_id": [str(q) for q in ids]}
    for m in metrics:
        table[m] = [finite_float(v) for v in columns[m]]
    return table


def _log_table(mlflow: Any, table: Any, name: str) -> None:
    """``name.parquet`` (every digit) and ``name.json`` (MLflow's table view, which writes 10
    significant digits)."""
    mlflow.log_table(table, f"{name}.parquet")
    mlflow.log_table(table, f"{name}.json")


def _log_eval(mlflow: Any, result: Any, tmp: Path) -> None:
    names = list(result.names)
    mlflow.log_metrics(_metrics({mlflow_name(m): v for m, v in result.mean.items()}))
    params = _eval_params(result.summary, names)
    records = getattr(result, "records", None)
    if records:
        params.update(_judge_params(records, result.summary.get("relevance")))
    mlflow.log_params({k: _param_text(v) for k, v in params.items()})
    pq = result.per_query
    _log_table(mlflow, _per_query_table(pq.query_ids, names, {m: pq.column(m).tolist() for m in names}),
               "per_query")
    if records:
        from rankwise.data.records import write_records

        path = write_records(records, tmp / "records.jsonl")
        mlflow.log_artifact(str(path), "records")


def _log_comparison(mlflow: Any, cmp: Any) -> None:
    metrics: dict[str, Any] = {}
    for s in cmp.systems:
        for m in cmp.metrics:
            metrics[f"{mlflow_name(s)}.{mlflow_name(m)}"] = cmp.means[s][m]
    for c in cmp.comparisons:
        key = f"{mlflow_name(c.system)}.{mlflow_name(c.metric)}"
        for part in ("delta", "ci_low", "ci_high", "p_value", "p_adjusted"):
            metrics[f"{key}.{part}"] = getattr(c, part)
    mlflow.log_metrics(_metrics(metrics))
    params = {"systems": ",".join(cmp.systems), "baseline": cmp.baseline, "metrics": ",".join(cmp.metrics),
              "cutoffs": _cutoffs(cmp.metrics), "queries": len(cmp.query_ids),
              **{k: v for k, v in cmp.settings.items() if not isinstance(v, dict)}}
    if cmp.summary.get("source"):
        params["verdict_source"] = cmp.summary["source"]
    if cmp.summary.get("r_basis"):
        params["r_basis"] = cmp.summary["r_basis"]
    mlflow.log_params({k: _param_text(v) for k, v in params.items()})
    n = len(cmp.query_ids)
    table: dict[str, list] = {"system": [], "query_id": [], **{m: [] for m in cmp.metrics}}
    for s in cmp.systems:
        table["system"] += [s] * n
        table["query_id"] += [str(q) for q in cmp.query_ids]
        for j, m in enumerate(cmp.metrics):
            table[m] += [finite_float(v) for v in cmp.values[s][:, j].tolist()]
    _log_table(mlflow, table, "per_query")


def _log_gate(mlflow: Any, result: Any) -> None:
    metrics: dict[str, Any] = {"gate_passed": 1.0 if result.passed else 0.0}
    for c in result.checks:
        key = mlflow_name(c.metric)
        metrics.update({f"{key}.baseline": c.baseline_mean, f"{key}.candidate": c.candidate_mean,
                        f"{key}.delta": c.delta, f"{key}.p_value": c.p_value, f"{key}.ci_low": c.ci_low,
                        f"{key}.ci_high": c.ci_high, f"{key}.failed": 1.0 if c.failed else 0.0})
    mlflow.log_metrics(_metrics(metrics))
    names = [c.metric for c in result.checks]
    params = {"metrics": ",".join(names), "cutoffs": _cutoffs(names), "max_drop": result.max_drop,
              "alpha": result.alpha, "queries": result.summary.get("queries"),
              **{k: v for k, v in result.settings.items() if v is not None and v != {}}}
    if result.settings.get("relevance"):
        params["verdict_source"] = result.settings["relevance"]
    mlflow.log_params({k: _param_text(v) for k, v in params.items()})
    table: dict[str, list] = {"metric": [], "query_id": [], "baseline": [], "candidate": [], "delta": []}
    for c in result.checks:
        for q, b, v, d in c.worst:
            for col, x in zip(table, (c.metric, q, b, v, d), strict=True):
                table[col].append(x)
    _log_table(mlflow, table, "worst_queries")


def _log_sweep(mlflow: Any, result: Any, tmp: Path) -> list[str]:
    """The sweep's settings and best configurations on the parent run; one child run per
    configuration."""
    best = {f"best.{mlflow_name(m)}": v for m, (_, v) in result.best.items()}
    mlflow.log_metrics(_metrics(best))
    params = {"metrics": ",".join(result.metrics), "cutoffs": _cutoffs(result.metrics), "baseline": result.baseline,
              "configurations": len(result.configs),
              **{f"best.{mlflow_name(m)}": lab for m, (lab, _) in result.best.items()},
              **{k: v for k, v in result.settings.items() if not isinstance(v, (dict, list))}}
    mlflow.log_params({k: _param_text(v) for k, v in params.items()})
    rows = result.rows()
    keys = list(dict.fromkeys(k for row in rows for k in row))
    _log_table(mlflow, {k: [row.get(k) for row in rows] for k in keys}, "configurations")
    children = []
    for cfg in result.configs:
        with mlflow.start_run(run_name=cfg.label, nested=True) as child:
            mlflow.log_params({k: _param_text(v) for k, v in cfg.to_dict().items() if v is not None})
            values = {mlflow_name(m): result.means[cfg.label][m] for m in result.metrics}
            for m in result.metrics:
                delta, p, _ = result.significance(cfg.label, m)
                values[f"{mlflow_name(m)}.delta"] = delta
                values[f"{mlflow_name(m)}.p_adjusted"] = p
            mlflow.log_metrics(_metrics(values))
            records = result.records.get(cfg.label)
            if records:
                from rankwise.data.records import write_records

                path = write_records(records, tmp / f"{mlflow_name(cfg.label)}.jsonl")
                mlflow.log_artifact(str(path), "records")
            children.append(child.info.run_id)
    return children


def log(result: Any, *, experiment: str | None = None, tracking_uri: str | None = None,
        run_name: str | None = None, html: str | PathLike | None = None,
        records: str | PathLike | Sequence[str | PathLike] | None = None, params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None, nested: bool = False) -> str:
    """Log a rankwise result to MLflow as one run (a sweep: a parent run and a child per
    configuration); returns the run id.

    Args:
        result: an EvalResult / RagResult (``evaluate``, ``evaluate_rag``), a ComparisonResult
            (``compare``, ``compare_records``), a GateResult (``gate``) or a SweepResult
            (``sweep``).
        experiment: experiment name (created if needed; default MLflow's active one).
        tracking_uri: e.g. ``sqlite:///mlflow.db`` (default: ``$MLFLOW_TRACKING_URI``, else MLflow's
            default).
        html: an HTML report to attach (artifact folder ``report``).
        records: records / result files to attach (artifact folder ``records``); a RagResult's own
            records are attached whatever this says.
        params, tags: more parameters and tags for the run.
        nested: start the run as a child of the active run.

    The caller's own tracking URI and active experiment are unchanged afterwards, and MLflow's INFO
    lines are kept off stderr while logging. The tracking URI is checked first
    (:func:`check_tracking_uri`: an :class:`InputError` in seconds); a store or server that fails
    while logging raises :class:`MlflowLogError` (one line).

    Example:
        >>> import rankwise
        >>> callable(rankwise.mlflow.log)
        True
    """
    from rankwise.analysis.compare import ComparisonResult
    from rankwise.analysis.gate import GateResult
    from rankwise.metrics.engine import EvalResult

    mlflow = import_mlflow()
    kinds = {EvalResult: "eval", ComparisonResult: "compare", GateResult: "gate"}
    kind = next((k for cls, k in kinds.items() if isinstance(result, cls)),
                "sweep" if type(result).__name__ == "SweepResult" else None)
    if kind is None:
        raise InputError(f"cannot log a {type(result).__name__} to MLflow: give an EvalResult, RagResult, "
                         "ComparisonResult, GateResult or SweepResult", field="result")
    check_tracking_uri(tracking_uri)  # a store that cannot be logged to: one line now, not minutes of retries
    try:
        with borrowed_mlflow(mlflow, tracking_uri, experiment):  # the caller's URI and experiment kept
            return _log_run(mlflow, result, kind, run_name=run_name, html=html, records=records,
                            params=params, tags=tags, nested=nested)
    except RankwiseError:
        raise
    except Exception as exc:  # the store or server failed mid-way (MlflowException, SQLAlchemy, OS, HTTP)
        raise log_failure(tracking_uri or _current_uri(mlflow), exc) from exc


def _current_uri(mlflow: Any) -> str | None:
    try:
        return str(mlflow.get_tracking_uri())
    except Exception:  # the URI itself is what failed
        return None


def _log_run(mlflow: Any, result: Any, kind: str, *, run_name: str | None, html: Any, records: Any,
             params: Mapping[str, Any] | None, tags: Mapping[str, str] | None, nested: bool) -> str:
    """One run (a sweep: with its children) of ``result``; returns its id."""
    with tempfile.TemporaryDirectory(prefix="rankwise-mlflow-") as folder, \
            mlflow.start_run(run_name=run_name, nested=nested) as run:
        tmp = Path(folder)
        mlflow.set_tags({"rankwise.kind": kind, **(tags or {})})
        if kind == "eval":
            _log_eval(mlflow, result, tmp)
        elif kind == "compare":
            _log_comparison(mlflow, result)
        elif kind == "gate":
            _log_gate(mlflow, result)
        else:
            _log_sweep(mlflow, result, tmp)
        if params:
            mlflow.log_params({k: _param_text(v) for k, v in params.items()})
        if html:
            mlflow.log_artifact(str(html), "report")
        for path in [records] if isinstance(records, (str, PathLike)) else list(records or []):
            mlflow.log_artifact(str(path), "records")
        return run.info.run_id


# ---------------------------------------------------------------------------------------------
# GenAI scorers
def _retriever_documents(trace: Any) -> list[dict]:
    """The documents of the trace's first top-level RETRIEVER span, in rank order (``[]`` when
    none)."""
    from mlflow.entities import SpanType

    spans = trace.search_spans(span_type=SpanType.RETRIEVER) if trace is not None else []
    retrievers = {s.span_id for s in spans}
    by_id = {s.span_id: s for s in trace.data.spans} if trace is not None else {}

    def nested(span: Any) -> bool:
        parent = span.parent_id
        while parent:
            if parent in retrievers:
                return True
            parent = getattr(by_id.get(parent), "parent_id", None)
        return False

    top = [s for s in spans if not nested(s)]
    if not top:
        return []
    outputs = top[0].outputs
    if isinstance(outputs, str):
        try:
            outputs = json.loads(outputs)
        except ValueError:
            raise InputError(f"the RETRIEVER span {top[0].name!r} gave text that is not JSON documents",
                             field="outputs") from None
    if outputs is not None and not isinstance(outputs, (list, tuple)):
        raise InputError(f"the RETRIEVER span {top[0].name!r} gave {type(outputs).__name__}, not a list of "
                         "documents", field="outputs")
    return [d for d in outputs or [] if isinstance(d, Mapping)]


def _list_of(exp: Mapping[str, Any], key: str, kinds: Any, what: str) -> list:
    """``exp[key]`` as a list of ``kinds`` (absent or empty: ``[]``); anything else is an
    InputError."""
    value = exp.get(key)
    if value is None or value == []:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, kinds) and not isinstance(v, bool)
                                                       for v in value):
        raise InputError(f"expected a list of {what}, not {value!r}"[:200], field=key)
    return list(value)


def case_from_trace(trace: Any = None, expectations: Mapping[str, Any] | None = None, inputs: Any = None,
                    case_id: str = "case") -> dict[str, Any]:
    """One RAG test-set row from an MLflow trace (its RETRIEVER span's documents, best first) and the
    expectations (``expected_retrieved_context``: ``[{"doc_uri": ...}]`` as reference ids or ``[{"content":
    ...}]`` as reference passages; or rankwise's ``reference_context_ids`` / ``reference_contexts``).

    Example:
        >>> row = case_from_trace(None, {"expected_retrieved_context": [{"doc_uri": "d1"}]}, "q?")
        >>> row["reference_context_ids"], row["retrieved_contexts"]
        (['d1'], [])
    """
    chunks = []
    for doc in _retriever_documents(trace):
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
        uri = meta.get("doc_uri") or meta.get("source") or doc.get("doc_uri")
        cid = doc.get("id") or meta.get("chunk_id") or uri
        text = doc.get("page_content") or doc.get("content") or doc.get("text") or ""
        chunks.append({"id": None if cid is None else str(cid), "doc_id": None if uri is None else str(uri),
                       "text": text if isinstance(text, str) else json.dumps(text, default=str)})
    if expectations is not None and not isinstance(expectations, Mapping):
        raise InputError(f"expectations must be an object, not {type(expectations).__name__}",
                         field="expectations")
    exp = dict(expectations or {})
    question = inputs if isinstance(inputs, str) else json.dumps(inputs, default=str)
    row: dict[str, Any] = {"id": case_id, "question": question, "retrieved_contexts": chunks}
    expected = _list_of(exp, "expected_retrieved_context", Mapping, "objects such as {'doc_uri': 'd1'}")
    ids = _list_of(exp, "reference_context_ids", (str, int), "document ids") or [
        e["doc_uri"] for e in expected if e.get("doc_uri") is not None]
    passages = _list_of(exp, "reference_contexts", str, "passages") or [
        e["content"] for e in expected if e.get("content") is not None]
    for value, what in [*((i, "doc_uri") for i in ids), *((p, "content") for p in passages)]:
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise InputError(f"a {what} must be text, not {value!r}", field="expected_retrieved_context")
    if ids:
        row["reference_context_ids"] = [str(i) for i in ids]
    if passages:
        row["reference_contexts"] = list(passages)
    return row


def scorers(metrics: Iterable[str] | str = ("ndcg@10", "recall@10", "mrr@10"), *, relevance: str | None = None,
            **options: Any) -> list[Any]:
    """rankwise metrics as MLflow GenAI scorers (one per metric, named MLflow-safe: ``ndcg_at_10``).

    Each scores a trace's first top-level RETRIEVER span against the row's expectations (see
    :func:`case_from_trace`) with :func:`rankwise.evaluate_rag` under ``relevance`` (default:
    ``ids`` when the expectations give document ids, on the chunks' ``doc_uri``; else
    ``containment``); ``options`` go to ``evaluate_rag``. A case that cannot be scored is scored 0
    (rankwise's default) with the reason as the rationale. The ``/mean`` aggregate is rankwise's own
    mean of the per-case values.

    Example:
        >>> [s.name for s in scorers(["ndcg@10", "P@5"])]
        ['ndcg_at_10', 'precision_at_5']
    """
    from mlflow.entities import Feedback
    from mlflow.genai.scorers import scorer

    from rankwise.metrics.engine import aggregate
    from rankwise.metrics.registry import parse_measure

    names = [parse_measure(m).name for m in ([metrics] if isinstance(metrics, str) else metrics)]
    return [_metric_scorer(metric, relevance, options, scorer, Feedback, aggregate) for metric in names]


def _metric_scorer(metric: str, relevance: str | None, options: Mapping[str, Any], scorer: Any, feedback: Any,
                   aggregate: Any) -> Any:
    """One metric's scorer: per case a Feedback, aggregated by rankwise's mean (named ``mean``)."""

    def score(inputs=None, outputs=None, expectations=None, trace=None):
        return _score_case(metric, trace, expectations, inputs, relevance, options, feedback)

    def mean(values):
        import numpy as np

        return aggregate(np.asarray(values, dtype=float), metric)

    return scorer(score, name=mlflow_name(metric), aggregations=[mean],
                  description=f"rankwise {metric} of the retrieved context")


def _score_case(metric: str, trace: Any, expectations: Any, inputs: Any, relevance: str | None,
                options: Mapping[str, Any], feedback: Any) -> Any:
    from rankwise.metrics.rag import evaluate_rag

    tid = getattr(getattr(trace, "info", None), "trace_id", None) or "case"
    row = case_from_trace(trace, expectations, inputs, case_id=str(tid))
    source = relevance or ("ids" if row.get("reference_context_ids") else "containment")
    extra = {"id_field": "doc_id"} if source == "ids" and "id_field" not in options else {}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one case's K past its list: not news per row
        result = evaluate_rag([row], source, metrics=[metric], **extra, **options)
    value = float(result.per_query.column(metric)[0])
    reason = (result.summary.get("unscorable_cases") or {}).get(row["id"])
    rationale = (f"unscorable, scored 0: {reason}" if reason else
                 f"rankwise {metric} over {len(row['retrieved_contexts'])} retrieved chunks, verdicts: {source}")
    return feedback(value=value, rationale=rationale)
