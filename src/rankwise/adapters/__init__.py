"""Evaluate the retriever you already have: LangChain, LlamaIndex, Haystack or any callable.

:func:`run_retriever` runs it over a test set and keeps, per chunk, rank, score, a stable id (see
:mod:`rankwise.data.ids`), document id, text, offsets and metadata, and per question the latency;
the records it gives are scored by :func:`rankwise.evaluate_rag` with any verdict source — ``span``
scores any framework's chunking against span-labelled passages. No framework is imported here.

Example:
    >>> from rankwise.adapters import run_retriever
    >>> run = run_retriever(
    ...     lambda q: [{"text": "Paris is the capital.", "doc_id": "d1", "start": 0}],
    ...     [
    ...         {
    ...             "id": "q1",
    ...             "question": "Capital?",
    ...             "reference_contexts": [
    ...                 {"text": "Paris is the capital.", "doc_id": "d1", "start": 0, "end": 21}
    ...             ],
    ...         }
    ...     ],
    ...     k=1,
    ... )
    >>> run.records[0].chunks[0].id, run.evaluate("span", k=1).mean["precision@1"]
    ('d1#0-21', 1.0)
"""

from rankwise.adapters.check import AdapterCheck, check_adapter, rerank_records
from rankwise.adapters.run import (
    AdapterRun,
    RetrieverDepthWarning,
    RetrieverRandomIdWarning,
    RetrieverShortListWarning,
    build_retriever,
    detect,
    retriever_depth,
    run_retriever,
)
from rankwise.data.ids import ID_STRATEGIES, looks_random, resolve_id, text_id
from rankwise.data.items import RawItem, to_item

__all__ = ["AdapterCheck", "AdapterRun", "ID_STRATEGIES", "RawItem", "RetrieverDepthWarning", "RetrieverRandomIdWarning",
           "RetrieverShortListWarning", "build_retriever", "check_adapter", "detect", "looks_random",
           "rerank_records", "resolve_id", "retriever_depth", "run_retriever", "text_id", "to_item"]
