"""From chunks to documents: a document ranks where its best chunk ranks, to use document-level
qrels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rankwise.data import Run
from rankwise.errors import InputError
from rankwise.retrieval.chunking import CorpusChunk

__all__ = ["lift_to_documents"]


def lift_to_documents(run: Run, chunks: Mapping[str, str] | Iterable[CorpusChunk], *, depth: int | None = None,
                      name: str | None = None) -> Run:
    """The run of documents: each keeps the rank and score of its best chunk (later chunks are
    dropped).

    ``chunks``: the chunk table, or ``{chunk_id: doc_id}``. An ordered run stays ordered (first
    chunk of a document wins); a scored run keeps each document's best chunk score, so equal best
    scores tie as any scored run does (doc id, descending). ``depth`` keeps the top documents only.

    Example:
        >>> run = Run.from_dict({"q": {"d1#0-9": 3.0, "d2#0-5": 2.0, "d1#9-20": 1.0}})
        >>> lift_to_documents(run, {"d1#0-9": "d1", "d1#9-20": "d1", "d2#0-5": "d2"}).to_dict()
        {'q': {'d1': 3.0, 'd2': 2.0}}
    """
    doc_of = chunks if isinstance(chunks, Mapping) else {c.id: c.doc_id for c in chunks}
    qcodes = run.query_codes().tolist()
    items = run.doc_ids.to_pylist()
    scores = run.scores.tolist() if run.scores is not None else None
    seen: set[tuple[int, str]] = set()
    counts = [0] * run.n_queries
    qids: list[str] = []
    docs: list[str] = []
    kept_scores: list[float] = []
    for row, (q, item) in enumerate(zip(qcodes, items, strict=True)):
        try:
            doc = doc_of[item]
        except KeyError:
            raise InputError(f"run '{run.name}' holds chunk '{item}', which is not in the chunk table",
                             field="doc_id") from None
        if (q, doc) in seen or (depth is not None and counts[q] >= depth):
            continue
        seen.add((q, doc))
        counts[q] += 1
        qids.append(run.queries[q])
        docs.append(doc)
        if scores is not None:
            kept_scores.append(scores[row])
    return Run.from_columns(qids, docs, kept_scores if scores is not None else None, kind=run.kind,
                            name=name or run.name, source=f"<{run.name}>")
