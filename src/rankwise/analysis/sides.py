"""Each input of a paired comparison (the gate, ``plan-testset``, the pytest assertions) converted
once, at the boundary, into a :class:`Side`: the queries it covers and its per-query values (or a
saved result's means).

An input is told apart once, by :func:`input_kind`, as one of four kinds:

- ``result``: an :class:`~rankwise.metrics.engine.EvalResult` in memory;
- ``saved``: a saved result, a dict or ``.json`` file with ``per_query`` (or ``mean`` and
  ``summary``), parsed once;
- ``rag``: RAG records or a test set, scored by ``evaluate_rag`` under a verdict source (default
  containment);
- ``run``: a run, scored against qrels.

Example:
    >>> qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    >>> side = read_side({"q1": ["a"], "q2": ["x", "a"]}, "baseline", ["mrr"], qrels=qrels)
    >>> side.kind, side.ids, side.values.tolist(), sorted(side.covered)
    ('ir', ['q1', 'q2'], [[1.0], [0.5]], ['q1', 'q2'])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.analysis.system_warnings import case_notes
from rankwise.errors import InputError, warn

__all__ = ["Input", "Side", "input_kind", "read_side", "per_query_values", "read_saved_result", "is_rag_input"]


@dataclass(frozen=True)
class Input:
    """An input told apart: its ``kind`` (result, saved, rag, run), the object to read (a saved
    result already parsed) and ``where`` it came from (its path, else ``<role>``)."""

    kind: str
    obj: Any
    where: str | None


@dataclass
class Side:
    """One input of a paired comparison: its per-query values (or saved means) and the queries it
    covers.

    Attributes:
        role: ``baseline`` or ``candidate`` (or the caller's word).
        where: its path, else ``<role>`` (what messages name it by; None: nothing to name).
        kind: ``ir`` (runs, saved eval results), ``rag`` (records, test sets, saved eval-rag
            results) or ``any`` (a saved result whose summary does not say).
        ids, values: query ids and a (queries x metrics) array; ``values`` is None for means only.
        means: a saved result's means when it holds no per-query values.
        covered: the queries it covers; None when it names none (means only).
        count: how many queries it covers, when known.
        absent: the judged queries it is known to lack (a run's, or those a saved summary lists as
            missing).
    """

    role: str
    where: str | None
    kind: str
    ids: list[str] = field(default_factory=list)
    values: np.ndarray | None = None
    means: dict[str, float] | None = None
    covered: set[str] | None = None
    count: int | None = None
    absent: set[str] = field(default_factory=set)

    @property
    def named(self) -> str:
        """``the baseline (path)``: how messages name this side."""
        return f"the {self.role}" + ("" if self.where in (None, f"<{self.role}>") else f" ({self.where})")


def read_saved_result(obj: Any) -> Mapping | None:
    """The parsed saved result if ``obj`` is one (dict or .json file with ``per_query`` or ``mean``
    and ``summary``), else None.

    Example:
        >>> read_saved_result({"mean": {"map": 0.5}, "summary": {}})["mean"]
        {'map': 0.5}
        >>> read_saved_result("run.trec") is None
        True
    """
    if isinstance(obj, Mapping) and ("per_query" in obj or ("mean" in obj and "summary" in obj)):
        return obj
    if isinstance(obj, (str, PathLike)) and Path(obj).suffix.lower() == ".json":
        from rankwise.data.text import decode_text, json_loads, open_error

        path = Path(obj)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise open_error(exc, path) from None
        text = decode_text(data, path)  # bytes that are not UTF-8: an error naming the line
        try:
            parsed = json_loads(text, source=path, line=None)  # nesting too deep: an error naming the file
        except InputError as exc:
            if exc.problem.startswith("not valid JSON"):
                return None  # several JSON documents: a run in JSON Lines, read as a run
            raise
        if isinstance(parsed, Mapping) and ("per_query" in parsed or "mean" in parsed):
            return parsed
    return None


def is_rag_input(obj: Any) -> bool:
    """Is ``obj`` RAG records or a test set (a list of records / dicts, or a RAG JSONL file) rather
    than a run?

    Example:
        >>> (
        ...     is_rag_input([{"id": "q1", "retrieved_contexts": ["a chunk"]}]),
        ...     is_rag_input({"q1": {"d1": 1.0}}),
        ... )
        (True, False)
    """
    from rankwise.data.records import CaseRecord, is_rag_file

    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], (CaseRecord, Mapping)):
        return True
    return isinstance(obj, (str, PathLike)) and is_rag_file(obj)


def input_kind(obj: Any, *, relevance: str | None = None, role: str = "input") -> Input:
    """Tell ``obj`` apart once: an EvalResult, a saved result (parsed here), RAG records / a test
    set (or anything, when a verdict source is named), else a run.

    Example:
        >>> (
        ...     input_kind({"per_query": {"q1": {"map": 1.0}}}).kind,
        ...     input_kind({"q1": ["a"]}, role="baseline"),
        ... )
        ('saved', Input(kind='run', obj={'q1': ['a']}, where='<baseline>'))
    """
    return _told_apart(obj, relevance, str(obj) if isinstance(obj, (str, PathLike)) else f"<{role}>")


def _told_apart(obj: Any, relevance: str | None, where: str | None) -> Input:
    from rankwise.metrics.engine import EvalResult

    if isinstance(obj, EvalResult):
        return Input("result", obj, where)
    saved = read_saved_result(obj)
    if saved is not None:
        return Input("saved", saved, where)
    if relevance is not None or is_rag_input(obj):
        return Input("rag", obj, where)
    return Input("run", obj, where)


def read_side(obj: Any, role: str, names: Sequence[str], *, qrels: Any = None, relevance_level: int = 1,
              missing: str = "zero", relevance: str | None = None, labels: Any = None,
              min_evidence_chars: int | None = None, load_qrels: Callable[[], Any] | None = None) -> Side:
    """Read and score one input for the canonical metric ``names``.

    ``load_qrels`` gives the qrels already loaded (two runs read them once); without it ``qrels`` is
    loaded here.

    Example:
        >>> side = read_side(
        ...     {"mean": {"map": 0.4}, "summary": {"evaluated": 3}}, "baseline", ["map"]
        ... )
        >>> side.values is None, side.means, side.count
        (True, {'map': 0.4}, 3)
    """
    where = str(obj) if isinstance(obj, (str, PathLike)) else f"<{role}>"
    return _read(obj, role, where, names, qrels=qrels, relevance_level=relevance_level, missing=missing,
                 relevance=relevance, labels=labels, min_evidence_chars=min_evidence_chars, load_qrels=load_qrels)


def _read(obj: Any, role: str, where: str | None, names: Sequence[str], *, qrels: Any, relevance_level: int,
          missing: str, relevance: str | None, labels: Any, min_evidence_chars: int | None,
          load_qrels: Callable[[], Any] | None, need_values: bool = False) -> Side:
    """:func:`read_side`, messages naming ``where`` (None: no source); ``need_values``: a saved
    result of means only is refused."""
    given = _told_apart(obj, relevance, where)
    if given.kind == "result":
        result = given.obj
        _check_result_metrics(result, names, given.where)
        absent = {str(q) for q in result.summary.get("missing_queries") or []}
        ids = list(result.per_query.query_ids)
        covered = set(ids) - absent
        return Side(role, given.where, "ir", ids, _columns(result, names), None, covered, len(covered), absent)
    if given.kind == "saved":
        if need_values and "per_query" not in given.obj:
            raise InputError("the saved result has no per-query values; save it with "
                             "`rankwise eval --format json --per-query`", source=where, field="per_query")
        return _saved_side(given.obj, role, given.where, names)
    if given.kind == "rag":
        from rankwise.metrics.rag import evaluate_rag

        extra = {} if min_evidence_chars is None else {"min_evidence_chars": min_evidence_chars}
        rag = evaluate_rag(obj, relevance or "containment", metrics=list(names), labels=labels,
                           relevance_level=relevance_level, **extra)
        for note in case_notes(rag.summary):  # unscorable / incomplete cases: counted, not silent
            warn(note)
        ids = list(rag.per_query.query_ids)
        return Side(role, given.where, "rag", ids, _columns(rag, names), None, set(ids), len(ids))
    return _run_side(obj, role, given.where, names, qrels=qrels, relevance_level=relevance_level,
                     missing=missing, load_qrels=load_qrels)


def per_query_values(obj: Any, metrics: Sequence[str], *, qrels: Any = None, relevance_level: int = 1,
                     missing: str = "zero", origin: str | None = None, relevance: str | None = None,
                     labels: Any = None, min_evidence_chars: int | None = None) -> tuple[list[str], np.ndarray]:
    """Query ids and a (queries x metrics) array from a run (with ``qrels``), a saved result, an
    EvalResult, or RAG records / a test set (scored under verdict source ``relevance``, default
    containment).

    Example:
        >>> saved = {"per_query": {"q1": {"ndcg@10": 0.5}, "q2": {"ndcg@10": 1.0}}}
        >>> ids, values = per_query_values(saved, ["ndcg_cut_10"])
        >>> ids, values.tolist()
        (['q1', 'q2'], [[0.5], [1.0]])
    """
    from rankwise.metrics.registry import parse_measure

    names = [parse_measure(m).name for m in metrics]
    where = origin or (str(obj) if isinstance(obj, (str, PathLike)) else None)
    side = _read(obj, "input", where, names, qrels=qrels, relevance_level=relevance_level, missing=missing,
                 relevance=relevance, labels=labels, min_evidence_chars=min_evidence_chars, load_qrels=None,
                 need_values=True)
    assert side.values is not None
    return side.ids, side.values


def _columns(result: Any, names: Sequence[str]) -> np.ndarray:
    """The (queries x metrics) array of an EvalResult-like ``result``."""
    return np.column_stack([result.per_query.column(n) for n in names])


def _check_result_metrics(result: Any, names: Sequence[str], where: str | None) -> None:
    missing_names = [n for n in names if n not in result.names]
    if missing_names:
        raise InputError(f"result has no metric {missing_names[0]!r}", source=where, field="metric")


def _run_side(obj: Any, role: str, where: str | None, names: Sequence[str], *, qrels: Any, relevance_level: int,
              missing: str, load_qrels: Callable[[], Any] | None) -> Side:
    """A run scored against the qrels: the judged queries it retrieves for are the ones it covers.
    """
    from rankwise.data.load import load_qrels as read_qrels
    from rankwise.data.load import load_run
    from rankwise.metrics.engine import evaluate

    if qrels is None and load_qrels is None:
        raise InputError("a run needs qrels to be scored, or pass a saved result with per-query "
                         "values (`rankwise eval --format json --per-query`)", source=where, field="qrels")
    judged_qrels = load_qrels() if load_qrels is not None else read_qrels(qrels)
    run = load_run(obj)
    result = evaluate(judged_qrels, run, list(names), relevance_level=relevance_level, missing=missing)
    judged = set(judged_qrels.queries)
    covered = set(run.queries) & judged
    return Side(role, where, "ir", list(result.per_query.query_ids), _columns(result, names), None, covered,
                len(covered), judged - covered)


def _saved_side(saved: Mapping, role: str, where: str | None, names: Sequence[str]) -> Side:
    """A saved result: per-query values when it has them, else its means (and its summary's counts).
    """
    summary = saved.get("summary") if isinstance(saved.get("summary"), Mapping) else {}
    kind = "rag" if "relevance" in summary else "ir" if "queries_in_qrels" in summary else "any"
    absent = {str(q) for q in summary.get("missing_queries") or []}
    if "per_query" in saved:
        ids, values = _saved_values(saved["per_query"], names, where)
        covered = set(ids) - absent
        return Side(role, where, kind, ids, values, None, covered, len(covered), absent)
    means = _saved_means(saved.get("mean"), names, where)
    count = summary.get("evaluated")
    if isinstance(count, int) and summary.get("missing") == "zero":
        count -= int(summary.get("missing_from_run") or 0)
    return Side(role, where, kind, [], None, means, None, count if isinstance(count, int) else None, absent)


def _saved_values(per_query: Any, names: Sequence[str], where: str | None) -> tuple[list[str], np.ndarray]:
    """A saved result's ``per_query`` object as query ids and a (queries x metrics) array, each
    value checked."""
    if not isinstance(per_query, Mapping) or not per_query:
        raise InputError("per_query must be a non-empty object {query_id: {metric: value}}", source=where,
                         field="per_query")
    ids = [str(q) for q in per_query]
    values = np.empty((len(ids), len(names)))
    for i, (qid, row) in enumerate(per_query.items()):
        if not isinstance(row, Mapping):
            raise InputError(f"query {qid!r}: expected an object of metric values", source=where,
                             field="per_query")
        for j, name in enumerate(names):
            if name not in row:
                known = ", ".join(sorted(row)) or "none"
                raise InputError(f"query {qid!r} has no value for metric {name!r} (has: {known})",
                                 source=where, field=name)
            v = row[name]
            if v is None:
                values[i, j] = np.nan
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                values[i, j] = float(v)
            else:
                raise InputError(f"query {qid!r}: value {v!r} is not a number", source=where, field=name)
    return ids, values


def _saved_means(mean: Any, names: Sequence[str], where: str | None) -> dict[str, float]:
    """A saved result's ``mean`` object, each asked metric present and a finite number."""
    if not isinstance(mean, Mapping):
        raise InputError("mean must be an object {metric: value}", source=where, field="mean")
    means: dict[str, float] = {}
    for name in names:
        if name not in mean:
            known = ", ".join(sorted(mean)) or "none"
            raise InputError(f"no mean for metric {name!r} (has: {known})", source=where, field=name)
        v = mean[name]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise InputError(f"the mean {v!r} is not a number", source=where, field=name)
        means[name] = float(v)
    return means
