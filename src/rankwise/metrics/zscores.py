"""trec_eval's ``-Z zscores_file``: each per-query value replaced by its z-score against a table of
per-query means and standard deviations (``convert_zscores.c``), before the ``all`` line is formed.

z = (value - mean) / std_dev. A zero std_dev gives 0 when the value equals the mean. trec_eval's
placeholder -1000000 (``MISSING_ZSCORE_VALUE``) stands for a query the table lacks, a measure it
lacks for the query, or a zero std_dev with another value; it then enters the ``all`` line as any
value does (a sum for counts, a mean otherwise). For ``gm_map`` and ``gm_bpref`` trec_eval keeps
log(max(v, 1e-5)) per query, so that is what is z-scored, and the ``all`` value is exp(mean of the
z-scores). ``num_q`` stays the number of queries, and under ``-c`` num_rel's ``all`` the count of
relevant judgements. Printed with a ``Z`` before the measure name (report/text.py).
"""

from __future__ import annotations

import math

from rankwise.data.prefs import ZScores
from rankwise.metrics.engine import EvalResult, PerQuery, aggregate_columns
from rankwise.metrics.trec import MIN_GEO_MEAN

__all__ = ["MISSING_ZSCORE_VALUE", "zscore", "apply_zscores"]

MISSING_ZSCORE_VALUE = -1000000.0  # trec_eval.h


def zscore(value: float, entry: tuple[float, float] | None) -> float:
    """One value's z-score against ``(mean, std_dev)``; :data:`MISSING_ZSCORE_VALUE` without an
    entry.

    Example:
        >>> zscore(0.5, (0.25, 0.5)), zscore(3.0, (3.0, 0.0)), zscore(1.0, None)
        (0.5, 0.0, -1000000.0)
    """
    if entry is None:
        return MISSING_ZSCORE_VALUE
    mean, std = entry
    if std:
        return (value - mean) / std
    return 0.0 if value == mean else MISSING_ZSCORE_VALUE


def apply_zscores(result: EvalResult, zscores: ZScores) -> EvalResult:
    """``result`` with every per-query value z-scored (trec_eval ``-Z``) and the ``all`` values
    formed anew.

    Example:
        >>> from rankwise import evaluate
        >>> r = evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["map"])
        >>> apply_zscores(r, ZScores({("q", "map"): (0.5, 0.25)})).mean
        {'map': 2.0}
    """
    values = result.per_query.values.copy()
    qids = result.per_query.query_ids
    geometric = {}
    for j, m in enumerate(result.measures):
        if m.metric.name == "num_q":
            continue
        name = m.trec_name or m.name
        gm = m.metric.aggregate == "gmean"  # trec_eval holds log(max(v, 1e-5)) per query: that is z-scored
        for i, qid in enumerate(qids):
            v = float(values[i, j])
            values[i, j] = zscore(math.log(max(v, MIN_GEO_MEAN)) if gm else v, zscores.get(qid, name))
        if gm:  # and the `all` value is exp(mean of the z-scores)
            total = 0.0
            for z in values[:, j].tolist():
                total += z
            geometric[m.name] = math.exp(total / len(qids)) if qids else 0.0
    mean, undefined = aggregate_columns(values, result.measures)
    mean.update(geometric)
    # num_rel's `all` under -c stays the judgement count (trec_eval's m_num_rel.c overwrites it
    # after -Z)
    summary = {k: v for k, v in result.summary.items() if k != "undefined"}
    summary["zscores"] = zscores.source
    if undefined:
        summary["undefined"] = undefined
    return EvalResult(result.measures, PerQuery(qids, result.per_query.names, values), mean, summary,
                      result.run_name, result.texts, runid=result.runid)

