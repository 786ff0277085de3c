"""An OpenTelemetry span exporter that writes OTLP JSON to a file, one ``ExportTraceServiceRequest``
a line.

The request is OpenTelemetry's own (``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans``:
the message the OTLP exporters send) in protobuf's JSON mapping, as the OpenTelemetry file exporters
write OTLP JSON; ``rankwise import-traces`` reads it (``--format otlp``). Needs the ``traces`` extra
(``pip install "rankwise[traces]"``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from os import PathLike
from pathlib import Path

try:
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
except ImportError as exc:  # pragma: no cover - the extra is part of `make test`
    raise ImportError(f"OTLPJsonFileExporter needs the traces extra: pip install \"rankwise[traces]\" ({exc})") from None

__all__ = ["OTLPJsonFileExporter"]


class OTLPJsonFileExporter(SpanExporter):
    """Append each batch of finished spans to ``path`` as one line of OTLP JSON (what
    ``import-traces`` reads).

    Example:
        >>> import os, tempfile
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> path = os.path.join(tempfile.mkdtemp(), "app-traces.json")
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(OTLPJsonFileExporter(path)))
        >>> with provider.get_tracer("demo").start_as_current_span("retrieve") as span:
        ...     span.set_attribute("openinference.span.kind", "RETRIEVER")
        >>> provider.shutdown()
        >>> open(path).read().startswith('{"resourceSpans": [')
        True
    """

    def __init__(self, path: str | PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write one request (one line) holding ``spans``; nothing for an empty batch."""
        if self._closed:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        line = MessageToJson(encode_spans(spans), indent=None)
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except OSError:
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Stop writing (each batch is already on disk: the file is closed after every write)."""
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered: True."""
        return True
