"""trec_eval 10.0's judgement-group measures (``-m qrels_jg`` with ``-R qrels_jg``).

With several judgement groups (JGs: assessors) for a query, each measure is computed against each
JG's judgements as its ordinary counterpart is, and averaged over the JGs (``m_*_avgjg.c``, on the
rankings of ``form_res_rels_jg.c``: score descending, ties by docno descending). Values are summed
over JGs in JG (byte) order and divided by their number, as trec_eval does, so the doubles agree to
the last bit. Definitions: docs/trec-measures.md ("Judgement-group measures").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rankwise.data.prefs import QrelsJG
from rankwise.data.run import Run
from rankwise.errors import InputError
from rankwise.metrics._names import JG_NICKNAMES
from rankwise.metrics.prefs import check_measures, query_summary

__all__ = ["JG_NICKNAMES", "JGInput", "jg_input", "map_avgjg", "p_avgjg", "rprec_mult_avgjg", "evaluate_jg",
           "evaluate_judgements"]



@dataclass(frozen=True, eq=False)
class JGInput:
    """Per query (``query_ids``, byte order) and JG: the grade at each rank (-1: not in that JG's
    qrels, -2: in them with a negative grade) and R (judgements with grade >= the relevance level).
    """

    query_ids: list[str]
    grades: list[list[np.ndarray]]
    num_rel: list[list[int]]
    relevance_level: int = 1

    def has(self, what: str) -> bool:
        return what == "qrels_jg"


def jg_input(qrels: QrelsJG, run: Run, *, relevance_level: int = 1, missing: str = "zero",
             depth: int | None = None) -> tuple[JGInput, dict]:
    """Join judgement-group qrels with a run, per query of the qrels (``missing`` as in
    :func:`~rankwise.metrics.engine.evaluate`, ``depth`` as trec_eval's ``-M``); and a summary."""
    in_run = set(run.queries)
    qids = [q for q in qrels.queries if missing == "zero" or q in in_run]
    grades, num_rel = [], []
    for q in qids:
        ranking = run.ranking(q)[:depth] if q in in_run else []
        rows, rs = [], []
        for jg in qrels.groups(q):
            judged = qrels.by_query[q][jg]
            rows.append(np.array([(-1 if d not in judged else -2 if judged[d] < 0 else judged[d])
                                  for d in ranking], dtype=np.int64))
            rs.append(sum(1 for g in judged.values() if g >= 0 and g >= relevance_level))
        grades.append(rows)
        num_rel.append(rs)
    summary = {**query_summary(qrels.queries, run, missing, len(qids)), "relevance_level": relevance_level}
    return JGInput(qids, grades, num_rel, relevance_level), summary


def _over_jgs(inp: JGInput, one) -> np.ndarray:
    """Per query: ``one(rel, R)`` summed over its JGs, divided by their number when more than one.
    """
    out = np.zeros(len(inp.query_ids))
    for i, (rows, rs) in enumerate(zip(inp.grades, inp.num_rel, strict=True)):
        value = 0.0
        for grades, r in zip(rows, rs, strict=True):
            value += one(grades >= inp.relevance_level, r)
        if len(rows) > 1:
            value /= len(rows)
        out[i] = value
    return out


def map_avgjg(inp: JGInput, k: int | None = None) -> np.ndarray:
    """AP per JG, sum of P@i at relevant ranks i / R (0 when none is retrieved), averaged over JGs.
    """

    def ap(rel: np.ndarray, r: int) -> float:
        total, found = 0.0, 0
        for i in np.flatnonzero(rel).tolist():
            found += 1
            total += found / (i + 1)
        return total / r if found else 0.0

    return _over_jgs(inp, ap)


def p_avgjg(inp: JGInput, k: int | None = None) -> np.ndarray:
    """P@k per JG, relevant in the top k / k (missing ranks count as non-relevant), averaged over
    JGs."""
    assert k is not None

    return _over_jgs(inp, lambda rel, r: int(np.count_nonzero(rel[:k])) / k)


def rprec_mult_avgjg(inp: JGInput, k: int | None = None, mult: float = 1.0) -> np.ndarray:
    """Precision at rank (long)(mult * R + 0.9) per JG (0 at rank 0), averaged over JGs."""

    def prec(rel: np.ndarray, r: int) -> float:
        cut = int(mult * r + 0.9)
        return int(np.count_nonzero(rel[:cut])) / cut if cut > 0 else 0.0

    return _over_jgs(inp, prec)


def evaluate_jg(qrels: QrelsJG, run: Run, metrics: Iterable[str] | str | None = None, *,
                relevance_level: int = 1, missing: str = "zero", depth: int | None = None):
    """Evaluate a run against judgement-group qrels (trec_eval ``-R qrels_jg``); ``relevance_level``
    is trec_eval's ``-l``, ``depth`` its ``-M``.

    Example:
        >>> q = QrelsJG({"q": {"0": {"a": 1}, "1": {"b": 1}}})
        >>> evaluate_jg(
        ...     q, Run.from_dict({"q": {"a": 2.0, "b": 1.0}}), ["map_avgjg", "P_avgjg_1"]
        ... ).mean
        {'map_avgjg': 0.75, 'P_avgjg@1': 0.5}
    """
    from rankwise.metrics.engine import evaluate_matrix
    from rankwise.metrics.registry import asks_runid, parse_measures

    measures = parse_measures(metrics or ["qrels_jg"])
    check_measures(measures, "qrels_jg", "-R qrels_jg")
    if missing not in ("zero", "skip"):
        raise InputError(f"missing must be 'zero' or 'skip', not {missing!r}", field="missing")
    inp, summary = jg_input(qrels, run, relevance_level=relevance_level, missing=missing, depth=depth)
    if not inp.query_ids:
        raise InputError("no query to evaluate: the run and the qrels share no query id", field="query_id")
    result = evaluate_matrix(inp, measures, summary, run.name)  # type: ignore[arg-type]
    if asks_runid(metrics or "qrels_jg"):
        result.runid = run.tag or run.name
    return result


def evaluate_judgements(rel_format: str, qrels_path, run_path, metrics: Iterable[str] | str | None = None, *,
                        relevance_level: int = 1, missing: str = "zero", depth: int | None = None):
    """Read ``qrels_path`` as trec_eval's ``-R rel_format`` (``prefs``, ``qrels_prefs`` or
    ``qrels_jg``) and evaluate the run file against it: what ``rankwise eval -R`` runs.

    Example:
        >>> r = evaluate_judgements("prefs", "prefs.test", "prefs.results.test")  # doctest: +SKIP
    """
    from rankwise.data.load import load_run
    from rankwise.data.prefs import read_prefs, read_qrels_jg, read_qrels_prefs
    from rankwise.metrics.prefs import evaluate_prefs

    run = load_run(run_path)
    if rel_format == "qrels_jg":
        return evaluate_jg(read_qrels_jg(qrels_path), run, metrics, relevance_level=relevance_level, missing=missing,
                           depth=depth)
    if rel_format == "prefs":
        return evaluate_prefs(read_prefs(qrels_path), run, metrics, missing=missing, depth=depth)
    if rel_format == "qrels_prefs":
        return evaluate_prefs(read_qrels_prefs(qrels_path), run, metrics, missing=missing, depth=depth)
    raise InputError(f"unknown judgement format {rel_format!r} (prefs, qrels_prefs or qrels_jg)", field="rel_format")
