"""Evaluate the retrieval in your traces (face of :mod:`rankwise.data.traces`): OpenInference (OTLP
JSON, console exporter, Phoenix Parquet), LangSmith runs and MLflow traces as RAG test sets, and
verdicts back as Phoenix document evaluations; :class:`OTLPJsonFileExporter` writes an application's
spans as the OTLP JSON it reads. See docs/traces.md.

Example:
    >>> import rankwise.traces as traces
    >>> callable(traces.load_traces) and "phoenix" in traces.TRACE_FORMATS
    True
    >>> traces.OTLPJsonFileExporter.__name__
    'OTLPJsonFileExporter'
"""

from rankwise._lazy import lazy_exports
from rankwise.data.traces import (  # noqa: F401  (the face)
    TRACE_FORMATS,
    DocumentEvaluations,
    TraceImport,
    TraceSkipWarning,
    __all__,  # noqa: F401
    document_evaluations,
    import_traces,
    load_traces,
    read_spans,
    write_document_evaluations,
    write_trace_testset,
)

# the exporter needs OpenTelemetry (the traces extra): imported on first use, so reading traces
# needs none
__getattr__, __dir__ = lazy_exports(__name__, {"OTLPJsonFileExporter": "rankwise.data.traces.exporter"}, globals())
