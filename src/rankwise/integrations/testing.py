"""Assertions for a plain pytest file: no regression against a baseline, a retriever above its
floors.

:func:`assert_no_regression` runs :func:`rankwise.gate` (the same comparison, test and floors as
``rankwise gate``) and raises :class:`RegressionError`, an ``AssertionError`` whose message a
reviewer can act on: per metric the baseline -> candidate means, the difference with its 95%
bootstrap interval and p-value, the budget and the floor, then the five queries that lost most, with
their ids. :func:`assert_retrieval` runs a retriever over a test set and checks each metric's mean
against a minimum.

A baseline is accepted on purpose with ``update=True`` (pytest: ``--rankwise-update-baseline``;
elsewhere ``RANKWISE_UPDATE_BASELINE=1``): the candidate's result is written as the baseline and the
assertion passes, saying so in a warning (and, under pytest, in the session's summary).

Example:
    >>> qrels = {f"q{i}": {"a": 1} for i in range(20)}
    >>> good = {f"q{i}": ["a", "x"] for i in range(20)}
    >>> bad = {f"q{i}": ["x", "a"] for i in range(20)}
    >>> assert_no_regression(good, good, ["mrr"], qrels=qrels).passed
    True
    >>> try:
    ...     assert_no_regression(good, bad, ["mrr"], qrels=qrels)
    ... except RegressionError as exc:
    ...     print(str(exc).splitlines()[1])
    FAIL mrr: 1.0000 -> 0.5000, difference -0.5000 (95% CI -0.5000 .. -0.5000), p = 0.0000; budget 0.01, no floor
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.analysis.gate import GateResult, MetricCheck, gate
from rankwise.errors import InputError, RegressionError, warn
from rankwise.integrations._session import accepted_baselines, session_defaults

__all__ = ["RegressionError", "assert_no_regression", "assert_retrieval", "accepted_baselines",
           "regression_message", "session_defaults"]


def _update_wanted(update: bool | None) -> bool:
    if update is not None:
        return bool(update)
    if "update" in session_defaults:
        return bool(session_defaults["update"])
    return os.environ.get("RANKWISE_UPDATE_BASELINE", "") not in ("", "0")


def _names(metrics: Iterable[str] | str | None, floors: Mapping[str, float] | None) -> list[str]:
    from rankwise.metrics.registry import parse_measure

    given = [metrics] if isinstance(metrics, str) else list(metrics or [])
    return list(dict.fromkeys(parse_measure(m).name for m in [*given, *(floors or {})]))


def assert_no_regression(baseline: Any = None, candidate: Any = None, metrics: Iterable[str] | str | None = None, *,
                         alpha: float = 0.05, max_drop: float = 0.01, floors: Mapping[str, float] | None = None,
                         qrels: Any = None, relevance: str | None = None, labels: Any = None,
                         update: bool | None = None, worst: int = 5, **gate_options: Any) -> GateResult | None:
    """Fail (``RegressionError``) when the candidate regresses against the baseline, as ``rankwise
    gate`` does: a metric drops by more than ``max_drop`` and the paired test finds it significant
    at ``alpha``, or its mean falls below its floor.

    ``baseline`` and ``candidate`` are runs (with ``qrels``), RAG records / test sets
    (``relevance``), saved results (``rankwise eval --format json --per-query``) or EvalResults;
    ``baseline`` defaults to the pytest option ``--rankwise-baseline``. Other ``gate_options`` go to
    :func:`rankwise.gate` (``test``, ``correction``, ``allow_query_mismatch`` ...). With ``update``
    (default: ``--rankwise-update-baseline``), the candidate's result is written as the baseline (a
    ``.json`` baseline: the candidate scored, per query; another file: a copy of the candidate's
    file) and None is returned. A baseline file that does not exist is bad input (``InputError``)
    naming the option that writes it.

    Example:
        >>> qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
        >>> assert_no_regression(
        ...     {"q1": ["a"], "q2": ["a"]}, {"q1": ["a"], "q2": ["a"]}, "P@1", qrels=qrels
        ... ).passed
        True
    """
    __tracebackhide__ = True  # pytest shows the test's line and the message, not rankwise's own source
    baseline = session_defaults.get("baseline") if baseline is None else baseline
    if baseline is None:
        raise InputError("no baseline: pass one, or run pytest with --rankwise-baseline PATH", field="baseline")
    if candidate is None:
        raise InputError("no candidate to compare with the baseline", field="candidate")
    if _update_wanted(update):
        _write_baseline(baseline, candidate, _names(metrics, floors), qrels=qrels, relevance=relevance,
                        labels=labels, gate_options=gate_options)
        return None
    if isinstance(baseline, (str, PathLike)) and not Path(baseline).exists():
        raise InputError("the baseline does not exist; write it from the candidate on purpose with pytest "
                         "--rankwise-update-baseline (or RANKWISE_UPDATE_BASELINE=1)", source=str(baseline),
                         field="baseline")
    result = gate(baseline, candidate, _names(metrics, floors) if floors else (metrics or []), max_drop=max_drop,
                  alpha=alpha, qrels=qrels, floors=floors, relevance=relevance, labels=labels, worst=worst,
                  **gate_options)
    if not result.passed:
        raise RegressionError(regression_message(result, baseline, candidate), result)
    return result


def _label(obj: Any, role: str) -> str:
    """A file as the user would name it: relative to the working folder when inside it."""
    if not isinstance(obj, (str, PathLike)):
        return f"<{role}>"
    path = Path(obj)
    if path.is_absolute():
        with contextlib.suppress(ValueError):
            return str(path.relative_to(Path.cwd()))
    return str(obj)


def _num(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.4f}"


def _check_line(check: MetricCheck, max_drop: float) -> str:
    """One metric's line: verdict, baseline -> candidate, difference with CI and p, budget and
    floor."""
    verdict = "FAIL" if check.failed else "pass"
    if check.untested:
        stats = "not tested (no per-query values)"
    else:
        p = "n/a" if math.isnan(check.p_value) else f"{check.p_value:.4f}"
        stats = f"(95% CI {_num(check.ci_low)} .. {_num(check.ci_high)}), p = {p}"
    if check.floor is None:
        floor = "no floor"
    else:
        floor = f"floor {check.floor:g} " + ("(below it)" if check.below_floor else "(met)")
    return (f"{verdict} {check.metric}: {check.baseline_mean:.4f} -> {check.candidate_mean:.4f}, difference "
            f"{check.delta:+.4f} {stats}; budget {max_drop:g}, {floor}")


def regression_message(result: GateResult, baseline: Any = None, candidate: Any = None) -> str:
    """The message of a failed gate: what was compared and how, one line per metric, the worst
    queries.

    Example:
        >>> from rankwise.analysis.gate import gate
        >>> qrels = {f"q{i}": {"a": 1} for i in range(8)}
        >>> r = gate(
        ...     {q: ["a"] for q in qrels}, {q: ["x", "a"] for q in qrels}, ["mrr"], qrels=qrels
        ... )
        >>> print(regression_message(r).splitlines()[-1])
          mrr, the 5 queries that lost most: q0 1.0000 -> 0.5000 (-0.5000), q1 1.0000 -> 0.5000 (-0.5000), q2 1.0000 -> 0.5000 (-0.5000), q3 1.0000 -> 0.5000 (-0.5000), q4 1.0000 -> 0.5000 (-0.5000)
    """
    s = result.summary
    failed = ", ".join(c.metric for c in result.failed) or "none"
    how = (f"{s.get('queries')} paired queries, two-sided {result.settings.get('test')} test, alpha {result.alpha}"
           if not s.get("untested") else f"means only: {s['untested']}")
    lines = [f"rankwise: regression in {failed} (baseline {_label(baseline, 'baseline')}, candidate "
             f"{_label(candidate, 'candidate')}; {how})"]
    lines += [_check_line(c, result.max_drop) for c in result.checks]
    for c in result.checks:
        if c.failed and c.worst:
            rows = ", ".join(f"{q} {b:.4f} -> {v:.4f} ({d:+.4f})" for q, b, v, d in c.worst)
            lines.append(f"  {c.metric}, the {len(c.worst)} quer{'y' if len(c.worst) == 1 else 'ies'} that lost "
                         f"most: {rows}")
    return "\n".join(lines)


def _baseline_option(baseline: Any) -> str:
    """How the user named the baseline: pytest's ``--rankwise-baseline`` when it came from there.

    Example:
        >>> _baseline_option("results/base.json")
        'baseline'
    """
    given = session_defaults.get("baseline")
    if given is not None and isinstance(baseline, (str, PathLike)):
        with contextlib.suppress(OSError, RuntimeError):  # (a symlink loop: the guard names it)
            if str(Path(baseline).resolve()) == given:
                return "--rankwise-baseline"
        if os.path.abspath(baseline) == given:
            return "--rankwise-baseline"
    return "baseline"


def _write_baseline(baseline: Any, candidate: Any, names: list[str], *, qrels: Any, relevance: str | None,
                    labels: Any, gate_options: Mapping[str, Any]) -> Path:
    """Write the candidate's result as the baseline (a ``.json``: scored per query; else the file
    copied)."""
    from rankwise._atomic import atomic_write, atomic_write_text
    from rankwise._outputs import check_outputs
    from rankwise.analysis.sides import input_kind

    if not isinstance(baseline, (str, PathLike)):
        raise InputError("updating the baseline needs the baseline as a file path", field="baseline")
    path = Path(baseline)
    # the update target checked before any work, by the one output guard (a baseline is rewritten on
    # purpose)
    check_outputs({_baseline_option(baseline): path}, [candidate if isinstance(candidate, (str, PathLike)) else None,
                                                       qrels if isinstance(qrels, (str, PathLike)) else None,
                                                       labels if isinstance(labels, (str, PathLike)) else None],
                  force=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create its folder: {exc.strerror or exc}", source=str(path),
                         field=_baseline_option(baseline)) from None
    if path.suffix.lower() != ".json":
        if not isinstance(candidate, (str, PathLike)):
            raise InputError("a baseline that is not .json is a copy of the candidate's file: pass the candidate "
                             "as a path, or name the baseline *.json to save the candidate's scores",
                             source=str(path), field="baseline")
        try:
            with open(candidate, "rb") as src, atomic_write(path, "wb") as fh:
                shutil.copyfileobj(src, fh)
        except OSError as exc:
            raise InputError(f"cannot copy the candidate to the baseline: {exc.strerror or exc}", source=str(path),
                             field=_baseline_option(baseline)) from None
    else:
        given = input_kind(candidate, relevance=relevance, role="candidate")
        if given.kind == "saved":
            text = json.dumps(given.obj, indent=2)
        else:
            from rankwise.report.text import to_json

            if not names:
                raise InputError("updating a .json baseline needs the metrics to save", field="metrics")
            level = gate_options.get("relevance_level", 1)
            if given.kind == "rag":
                from rankwise.metrics.rag import evaluate_rag

                result = evaluate_rag(candidate, relevance or "containment", metrics=names, labels=labels,
                                      relevance_level=level)
            elif given.kind == "result":
                result = candidate
            else:
                from rankwise.metrics.engine import evaluate

                result = evaluate(qrels, candidate, names, relevance_level=level,
                                  missing=gate_options.get("missing", "zero"))
            text = to_json(result, per_query=True)
        try:
            atomic_write_text(path, text + "\n")
        except OSError as exc:
            raise InputError(f"cannot write the baseline: {exc.strerror or exc}", source=str(path),
                             field=_baseline_option(baseline)) from None
    origin = _label(candidate, "candidate")
    accepted_baselines.append((_label(path, "baseline"), origin))
    warn(f"accepted a new baseline on purpose: wrote {_label(path, 'baseline')} from {origin} (no comparison made)")
    return path


def _records_of(testset: Any, retriever: Any, *, corpus: Any, k: int | None, options: Mapping[str, Any]) -> list:
    """Per-case records of ``retriever`` (a rankwise pipeline spec, or a framework retriever /
    callable)."""
    from rankwise.adapters.run import run_retriever
    from rankwise.data.questions import records_queries
    from rankwise.retrieval.pipeline import RetrieverSpec

    if isinstance(retriever, (str, RetrieverSpec)):
        from rankwise.data.records import ChunkRecord
        from rankwise.retrieval.pipeline import run_retrieval

        if corpus is None:
            raise InputError("a rankwise pipeline spec needs the corpus to retrieve from (corpus=...)",
                             field="corpus")
        if isinstance(corpus, (str, PathLike)):
            from rankwise.retrieval import load_corpus

            corpus = load_corpus(corpus)
        records = records_queries(testset)
        res = run_retrieval(corpus, {r.id: r.question for r in records}, retriever, k=10 if k is None else k,
                            **{"quiet": True, **options})
        for r in records:
            r.chunks = [ChunkRecord(rank=i + 1, id=c.id, text=c.text, doc_id=c.doc_id, start=c.start, end=c.end,
                                    score=s) for i, (c, s) in enumerate(res.ranked_chunks(r.id))]
        return records
    run = run_retriever(retriever, testset, k=k, **options)
    if run.summary.get("failed"):
        raise InputError(f"the retriever failed on {run.summary['failed']} of {run.summary.get('cases')} "
                         f"questions: {run.summary.get('failed_cases')}", field="retriever")
    return run.records


def assert_retrieval(testset: Any, retriever: Any, min: Mapping[str, float], *,  # noqa: A002 (the issue's name)
                     corpus: Any = None, k: int | None = None, relevance: str = "span", labels: Any = None,
                     worst: int = 5, **options: Any):
    """Run ``retriever`` over ``testset`` and fail (``RegressionError``) when a metric's mean is
    under its minimum; returns the :class:`~rankwise.metrics.rag.RagResult` otherwise.

    ``retriever``: a rankwise pipeline spec (``"bm25"``, ``"hybrid"``, a
    :class:`~rankwise.retrieval.pipeline.RetrieverSpec`; needs ``corpus``) or a LangChain /
    LlamaIndex / Haystack retriever or callable (run by :func:`rankwise.run_retriever`).
    ``relevance``: the verdict source
    (``span`` by default: the chunks' offsets against the reference spans). ``k``: chunks per
        question
    (default: a framework retriever's own depth, as in :func:`rankwise.run_retriever`; else 10).
    ``options`` go to the runner.

    Example:
        >>> cases = [
        ...     {"id": "q1", "question": "capital of France?", "reference_context_ids": ["d1"]}
        ... ]
        >>> corpus = {"d1": "Paris is the capital of France.", "d2": "Rome is in Italy."}
        >>> assert_retrieval(cases, "bm25", {"ndcg@10": 0.9}, corpus=corpus, relevance="ids").mean[
        ...     "ndcg@10"
        ... ]
        1.0
    """
    __tracebackhide__ = True  # pytest shows the test's line and the message, not rankwise's own source
    from rankwise.metrics.rag import evaluate_rag

    if not isinstance(min, Mapping) or not min:
        raise InputError("min must map metric names to the lowest accepted mean, e.g. {'ndcg@10': 0.6}",
                         field="min")
    floors = {_names([m], None)[0]: v for m, v in min.items()}
    for metric, value in floors.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise InputError(f"the minimum of {metric!r} must be a number, not {value!r}", field="min")
    records = _records_of(testset, retriever, corpus=corpus, k=k, options=options)
    result = evaluate_rag(records, relevance, metrics=list(floors), labels=labels)
    low = [m for m, v in floors.items() if not result.mean[m] >= v]
    if low:
        raise RegressionError(_retrieval_message(result, floors, low, worst), result)
    return result


def _retrieval_message(result: Any, floors: Mapping[str, float], low: list[str], worst: int) -> str:
    n = result.summary.get("evaluated", len(result.per_query.query_ids))
    lines = [f"rankwise: retrieval below its minimum on {', '.join(low)} ({n} questions, verdicts: "
             f"{result.summary.get('relevance')})"]
    ids = list(result.per_query.query_ids)
    for metric, floor in floors.items():
        mean = result.mean[metric]
        verdict = "FAIL" if metric in low else "pass"
        lines.append(f"{verdict} {metric}: mean {mean:.4f}, minimum {floor:g}")
        if metric in low:
            values = result.per_query.column(metric)
            order = sorted(range(len(ids)), key=lambda i: (values[i], ids[i]))[:worst]
            lines.append(f"  {metric}, the {len(order)} lowest questions: "
                         + ", ".join(f"{ids[i]} {values[i]:.4f}" for i in order))
    return "\n".join(lines)
