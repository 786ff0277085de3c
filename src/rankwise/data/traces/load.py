"""``import_traces`` / ``load_traces``: a trace export as a RAG test set (see
:mod:`rankwise.data.traces.readers`)."""

from __future__ import annotations

import warnings
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.testset import TestSet
from rankwise.data.traces.readers import read_spans
from rankwise.data.traces.spans import TraceImport, assemble
from rankwise.errors import TraceSkipWarning

__all__ = ["write_first_stage", "import_traces", "load_traces", "write_trace_testset", "TraceSkipWarning"]


def import_traces(path: str | PathLike, *, format: str = "auto", testset: Any = None, id_key: str | None = None,
                  doc_id_key: str | None = None, corpus: Any = None, quiet: bool = False) -> TraceImport:
    """Read a trace export: one case per trace with a retriever call, with what was skipped and why.

    Args:
        path: OTLP JSON or protobuf (``.pb``), console-exporter JSON, a Phoenix span dataframe
            (.parquet), LangSmith runs or MLflow traces (see :mod:`rankwise.data.traces.readers`).
        format: ``auto`` (from the suffix and the first JSON value), ``otlp``, ``console``,
            ``phoenix``, ``langsmith`` or ``mlflow``.
        testset: a RAG test set whose cases give reference passages / ids to the traces they match
            (by a ``case_id`` / ``session.id`` attribute, else by exact question text).
        id_key, doc_id_key: metadata fields holding the chunk id / the document id (as in
            ``run_retriever``).
        corpus: the documents the chunks were cut from (a path ``load_corpus`` reads, or ``{doc_id:
            text}``): chunks without offsets are located in them
            (:mod:`rankwise.data.traces.locate`), so span verdicts apply; ``summary()["located"]``
            counts how. Without it, a case's own reference passages (from ``testset``) that say
            where they sit place the chunks that lie in, hold or overlap one.
        quiet: no progress bar (a big file shows one on stderr while it is read).

    Example:
        >>> import json, tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "spans.json")
        >>> span = {
        ...     "name": "retrieve",
        ...     "context": {
        ...         "trace_id": "0x5d27cd8d41ef33f30305e646ad80c2aa",
        ...         "span_id": "0xfbd159065a44841f",
        ...     },
        ...     "parent_id": None,
        ...     "start_time": "2026-01-01T00:00:00Z",
        ...     "attributes": {
        ...         "openinference.span.kind": "RETRIEVER",
        ...         "input.value": "Capital?",
        ...         "retrieval.documents.0.document.content": "Paris is the capital.",
        ...         "retrieval.documents.0.document.id": "c1",
        ...     },
        ... }
        >>> _ = open(f, "w").write(json.dumps(span))
        >>> imp = import_traces(f)
        >>> imp.format, imp.testset[0].question, [c.id for c in imp.testset[0].chunks]
        ('console', 'Capital?', ['c1'])
    """
    spans, fmt = read_spans(path, format, quiet=quiet)
    ts = None if testset is None else _ground_truth(testset)
    locator = None
    if corpus is not None:
        from rankwise.data.traces.locate import Locator, corpus_documents

        locator = Locator(corpus_documents(corpus))
    return assemble(spans, source=str(path), testset=ts, fmt=fmt, id_key=id_key, doc_id_key=doc_id_key,
                    locator=locator)


def _ground_truth(testset: Any) -> TestSet:
    """The labels' test set read as a question file is (its retrieved contexts not needed, its own
    fields aside)."""
    from rankwise.data.questions import records_queries

    if isinstance(testset, TestSet):
        return testset
    return TestSet([r.to_case() for r in records_queries(testset)], str(testset) if isinstance(testset, (str, PathLike))
                   else None)


def load_traces(path: str | PathLike, *, format: str = "auto", testset: Any = None, id_key: str | None = None,
                doc_id_key: str | None = None, corpus: Any = None) -> TestSet:
    """The test set of :func:`import_traces` (skips, duplicate spans and dropped offsets are warned
    about with :class:`TraceSkipWarning`).

    Example:
        >>> import json, tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "runs.json")
        >>> _ = open(f, "w").write(
        ...     json.dumps(
        ...         [
        ...             {
        ...                 "id": "r1",
        ...                 "run_type": "retriever",
        ...                 "inputs": {"query": "Capital?"},
        ...                 "outputs": {
        ...                     "documents": [
        ...                         {
        ...                             "page_content": "Paris is the capital.",
        ...                             "metadata": {"source": "d1", "start_index": 0},
        ...                         }
        ...                     ]
        ...                 },
        ...             }
        ...         ]
        ...     )
        ... )
        >>> [(c.id, c.question, c.chunks[0].id) for c in load_traces(f)]
        [('r1', 'Capital?', 'd1#0-21')]
    """
    imp = import_traces(path, format=format, testset=testset, id_key=id_key, doc_id_key=doc_id_key, corpus=corpus)
    if imp.skipped:
        what = "; ".join(f"{n} {why}" for why, n in imp.skipped.items())
        warnings.warn(f"{path}: {what}", TraceSkipWarning, stacklevel=2)
    for line in imp.warnings():
        warnings.warn(f"{path}: {line}", TraceSkipWarning, stacklevel=2)
    return imp.testset


def write_trace_testset(imp: TraceImport, path: str | PathLike) -> Path:
    """Write the imported cases as a test set (JSON Lines) that ``eval-rag`` and ``judge`` read; a
    case with several calls keeps them (``calls``), a single-call case is an ordinary line.

    Example:
        >>> import os, tempfile
        >>> from rankwise.data.traces.spans import Span, assemble
        >>> imp = assemble(
        ...     [
        ...         Span(
        ...             "t1",
        ...             "s1",
        ...             retriever=True,
        ...             input="q?",
        ...             documents=[{"id": "c1", "text": "x"}],
        ...         )
        ...     ],
        ...     source="<spans>",
        ... )
        >>> write_trace_testset(
        ...     imp, os.path.join(tempfile.mkdtemp(), "t.jsonl")
        ... ).read_text().startswith('{"id": "t1"')
        True
    """
    from rankwise.data.testset import write_testset as write_cases

    return write_cases(imp.testset, path)


def write_first_stage(imp: TraceImport, path: str | PathLike) -> Path | None:
    """Write the cases' lists before reranking (a RERANKER span's input documents) as a test set
    with the same case ids and ground truth, for ``eval-rag --first-stage`` (failure class ``demoted
    by the reranker``); None when no trace holds a reranker span (nothing is written).

    Example:
        >>> import os, tempfile
        >>> from rankwise.data.traces.spans import Span, assemble
        >>> imp = assemble(
        ...     [
        ...         Span(
        ...             "t1",
        ...             "s1",
        ...             retriever=True,
        ...             input="q?",
        ...             documents=[{"id": "b", "text": "y"}],
        ...             first_stage=[{"id": "a", "text": "x"}, {"id": "b", "text": "y"}],
        ...         )
        ...     ],
        ...     source="<spans>",
        ... )
        >>> [c.id for c in imp.testset["t1"].chunks], [c.id for c in imp.first_stage["t1"]]
        (['b'], ['a', 'b'])
        >>> write_first_stage(imp, os.path.join(tempfile.mkdtemp(), "before.jsonl")).name
        'before.jsonl'
    """
    if not imp.first_stage:
        return None
    import dataclasses

    from rankwise.data.testset import TestSet
    from rankwise.data.testset import write_testset as write_cases

    cases = [dataclasses.replace(c, chunks=list(imp.first_stage[c.id]), calls=[]) for c in imp.testset
             if c.id in imp.first_stage]
    return write_cases(TestSet(cases, imp.testset.source), path)
