"""Evaluate the retrieval in your traces: OpenInference (OTLP JSON, console exporter, Phoenix
Parquet), LangSmith runs and MLflow traces as RAG test sets, and verdicts back as Phoenix document
evaluations.

Every retriever span under one root trace becomes one retrieval call of one case (the trace); the
case's question is the root span's input, its response the root's output. Chunk ids follow the
adapters' rules, so a traced retriever scores as it does through
:func:`rankwise.adapters.run_retriever`. See docs/traces.md.

Example:
    >>> from rankwise.data.traces import TRACE_FORMATS
    >>> TRACE_FORMATS[:3]
    ('auto', 'otlp', 'console')
"""

from rankwise.data.traces.evaluations import (
           DocumentEvaluations,
           document_evaluations,
           write_document_evaluations,
)
from rankwise.data.traces.load import TraceSkipWarning, import_traces, load_traces, write_trace_testset
from rankwise.data.traces.readers import TRACE_FORMATS, read_spans
from rankwise.data.traces.spans import TraceImport

__all__ = ["DocumentEvaluations", "TRACE_FORMATS", "TraceImport", "TraceSkipWarning",
           "document_evaluations", "import_traces", "load_traces", "read_spans", "write_document_evaluations",
           "write_trace_testset"]
