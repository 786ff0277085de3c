"""Metrics over the retrieval calls of a case retrieved several times (docs/metrics.md, "Several
retrieval calls").

A case's calls are read from the per-case records a
:class:`~rankwise.metrics.matrix.RelevanceMatrix` was built from
(:meth:`~rankwise.metrics.matrix.RelevanceMatrix.from_records`). Each call becomes a record of its
own — its chunks in rank order, with the verdicts of the merged list shared by chunk key and the
passages they matched — so every existing metric scores a call exactly as it scores a single list. A
case without calls is one call: its ``chunks``.

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> from rankwise.relevance.verdicts import assign_verdicts
    >>> recs = records_from_testset(
    ...     [
    ...         {
    ...             "id": "q",
    ...             "reference_contexts": ["alpha beta gamma", "delta epsilon zeta"],
    ...             "calls": [
    ...                 {"chunks": ["alpha beta gamma", "noise noise noise"]},
    ...                 {"chunks": ["alpha beta gamma", "delta epsilon zeta"]},
    ...             ],
    ...         }
    ...     ]
    ... )
    >>> _ = assign_verdicts(recs, "containment", min_evidence_chars=0)
    >>> m = RelevanceMatrix.from_records(recs, "containment")
    >>> (
    ...     evidence_coverage(m, 1).tolist(),
    ...     calls_to_evidence(m, 2).tolist(),
    ...     call_redundancy(m, 2).tolist(),
    ... )
    ([0.5], [2.0], [0.25])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rankwise.data.records import CaseRecord, ChunkRecord
from rankwise.data.testset import chunk_key, merge_calls
from rankwise.errors import InputError
from rankwise.metrics._names import MeasureParamError
from rankwise.metrics.matrix import RelevanceMatrix, record_truth

__all__ = ["call_records", "per_call", "call_mean", "merged", "per_call_named", "call_mean_named", "merged_named",
           "evidence_coverage", "all_hops_covered",
           "calls_to_evidence", "call_redundancy"]

Inner = Callable[[RelevanceMatrix], np.ndarray]


def _records(m: RelevanceMatrix) -> Sequence[CaseRecord]:
    if m.records is None:
        raise ValueError("metrics over calls need a matrix built from per-case records")
    return m.records


def _calls(m: RelevanceMatrix) -> list[list[CaseRecord]]:
    """Per query, its calls as records (:func:`call_records`), built once per matrix."""
    if "calls" not in m._cache:
        m._cache["calls"] = [call_records(r) for r in _records(m)]
    return m._cache["calls"]


def _sub(record: CaseRecord, chunks: list[ChunkRecord], found: dict[str, list[list[int]]]) -> CaseRecord:
    """A record holding one list of ``chunks`` (ranked 1, 2 ...) with the case's ground truth."""
    ranked = [ChunkRecord(rank=i + 1, id=c.id, text=c.text, doc_id=c.doc_id, start=c.start, end=c.end,
                          score=c.score, verdicts=c.verdicts) for i, c in enumerate(chunks)]
    return CaseRecord(record.id, record.question, reference=record.reference, response=record.response,
                      reference_contexts=record.reference_contexts,
                      reference_context_ids=record.reference_context_ids, chunks=ranked, passages_found=found,
                      status=dict(record.status), truth=dict(record.truth))


def call_records(record: CaseRecord) -> list[CaseRecord]:
    """One record per call of ``record`` in trajectory order (the record itself when it has no
    calls).

    Example:
        >>> from rankwise.data.records import CallRecord
        >>> r = CaseRecord(
        ...     "q",
        ...     chunks=[ChunkRecord(rank=1, id="a")],
        ...     calls=[
        ...         CallRecord([ChunkRecord(rank=1, id="a")]),
        ...         CallRecord([ChunkRecord(rank=1, id="b")]),
        ...     ],
        ... )
        >>> [[c.id for c in x.chunks] for x in call_records(r)]
        [['a'], ['b']]
    """
    if not record.calls:
        return [record]
    out = []
    for chunks, index in zip(record.call_chunks(), record.call_index(), strict=True):
        found = {s: [list(lists[i]) if i is not None and i < len(lists) else _own(c, s)
                     for c, i in zip(chunks, index, strict=True)]
                 for s, lists in record.passages_found.items()}
        out.append(_sub(record, chunks, found))
    return out


def _own(chunk: ChunkRecord, source: str) -> list[int]:
    """The passages a call's chunk absent from the case's list matched, as its own verdict recorded
    them."""
    v = chunk.verdicts.get(source)
    return list(v.meta.get("passages") or []) if v is not None else []


def _matrix(m: RelevanceMatrix, records: list[CaseRecord]) -> RelevanceMatrix:
    return RelevanceMatrix.from_records(records, m.source or "", relevance_level=m.relevance_level,
                                        id_field=m.id_field)


def per_call(m: RelevanceMatrix, inner: Inner, call: int) -> np.ndarray:
    """``inner`` on each case's call number ``call`` (0 = the first); NaN for a case with fewer
    calls."""
    key = ("per_call", call)
    if key not in m._cache:
        rows = [i for i, calls in enumerate(_calls(m)) if call < len(calls)]
        subs = [_calls(m)[i][call] for i in rows]
        m._cache[key] = (rows, _matrix(m, subs) if subs else None)
    rows, sub = m._cache[key]
    out = np.full(len(m.query_ids), np.nan)
    if sub is not None:
        out[rows] = inner(sub)
    return out


def call_mean(m: RelevanceMatrix, inner: Inner) -> np.ndarray:
    """``inner`` on every call of a case, averaged over the case's calls (undefined calls left out).
    """
    if "every_call" not in m._cache:
        owner = [i for i, calls in enumerate(_calls(m)) for _ in calls]
        subs = [sub for calls in _calls(m) for sub in calls]
        m._cache["every_call"] = (np.asarray(owner, dtype=np.int64), _matrix(m, subs) if subs else None)
    owners, sub = m._cache["every_call"]
    values = inner(sub) if sub is not None else np.zeros(0)
    defined = ~np.isnan(values)
    n = len(m.query_ids)
    sums = np.bincount(owners[defined], weights=values[defined], minlength=n)
    counts = np.bincount(owners[defined], minlength=n)
    out = np.full(n, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def merged(m: RelevanceMatrix, inner: Inner, order: str = "interleave", dedup: str = "id") -> np.ndarray:
    """``inner`` on one list merged from each case's calls by
    :func:`~rankwise.data.testset.merge_calls`."""
    key = ("merged", order, dedup)
    if key not in m._cache:
        subs = []
        for r, calls in zip(_records(m), _calls(m), strict=True):
            found_of = {id(c): {s: lists[j] for s, lists in sub.passages_found.items()}
                        for sub in calls for j, c in enumerate(sub.chunks)}
            try:
                chunks = merge_calls([c.chunks for c in calls], order, dedup)
            except InputError as exc:  # order=score on a case without scores: one line naming the case
                raise MeasureParamError(f"case {r.id!r}: {exc.problem}") from None
            found = {s: [found_of[id(c)].get(s, []) for c in chunks] for s in r.passages_found}
            subs.append(_sub(r, chunks, found))
        m._cache[key] = _matrix(m, subs)
    return inner(m._cache[key])


def _named(name: str, k: int | None) -> Inner:
    """The metric a wrapper names (``metric=wcp(decay=linear)``), bound by the registry at the
    wrapper's cutoff."""
    from rankwise.metrics.registry import bind_named

    return bind_named(name, k)


def per_call_named(m: RelevanceMatrix, k: int | None = None, metric: str = "recall",
                   call: int = 0) -> np.ndarray:
    """``per_call`` as the registry declares it: the wrapped metric by name
    (``per_call(metric=recall,call=1)@5``)."""
    return per_call(m, _named(metric, k), call)


def call_mean_named(m: RelevanceMatrix, k: int | None = None, metric: str = "recall") -> np.ndarray:
    """``call_mean`` as the registry declares it: the wrapped metric by name."""
    return call_mean(m, _named(metric, k))


def merged_named(m: RelevanceMatrix, k: int | None = None, metric: str = "recall", order: str = "interleave",
                 dedup: str = "id") -> np.ndarray:
    """``merged`` as the registry declares it: the wrapped metric by name."""
    return merged(m, _named(metric, k), order, dedup)


def _found(sub: CaseRecord, source: str, k: int | None, relevance_level: int, basis: str) -> list[set]:
    """Per rank within the top k of one call: the ground-truth items it found (passage indices, or
    the chunk's key when R counts relevant chunks)."""
    from rankwise.metrics.matrix import verdict_grade

    lists = sub.passages_found.get(source)
    out = []
    for j, c in enumerate(sub.chunks[:k]):
        if lists is not None and basis != "pooled verdicts":
            out.append(set(lists[j]) if j < len(lists) else set())
        else:
            relevant = verdict_grade(c.verdicts.get(source), source) >= relevance_level
            out.append({chunk_key(c) or ("rank", j)} if relevant else set())
    return out


def _per_call_found(m: RelevanceMatrix, i: int, k: int | None) -> tuple[list[set], int, str]:
    r = _records(m)[i]
    truth = record_truth(r, m.source or "", relevance_level=m.relevance_level)
    found = [set().union(*_found(sub, m.source or "", k, m.relevance_level, truth["basis"]))
             for sub in _calls(m)[i]]
    return found, int(truth["n_relevant"]), truth["basis"]


def evidence_coverage(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Share of the ground-truth items (reference passages) found in any call within its top k (0
    when R = 0)."""
    out = np.zeros(len(m.query_ids))
    for i in range(len(m.query_ids)):
        found, n_rel, _ = _per_call_found(m, i, k)
        if n_rel > 0:
            out[i] = min(len(set().union(*found)), n_rel) / n_rel
    return out


def all_hops_covered(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1 when every hop group of reference passages has a passage found in some call's top k, else
    0; NaN when the case's reference passages carry no hop (or R counts no passages)."""
    out = np.full(len(m.query_ids), np.nan)
    for i, r in enumerate(_records(m)):
        hops: dict[int, set[int]] = {}
        for j, p in enumerate(r.reference_contexts):
            if p.hop is not None:
                hops.setdefault(p.hop, set()).add(j)
        found, _, basis = _per_call_found(m, i, k)
        if not hops or basis != "reference passages":
            continue
        seen = set().union(*found)
        out[i] = float(all(group & seen for group in hops.values()))
    return out


def calls_to_evidence(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """How many calls (1, 2 ...) until every ground-truth item was found within the calls' top k;
    NaN when the case has none or the evidence was never complete."""
    out = np.full(len(m.query_ids), np.nan)
    for i in range(len(m.query_ids)):
        found, n_rel, _ = _per_call_found(m, i, k)
        seen: set = set()
        for n, items in enumerate(found, start=1):
            seen |= items
            if n_rel > 0 and len(seen) >= n_rel:
                out[i] = float(n)
                break
    return out


def call_redundancy(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Share of the chunks in the calls' top k already retrieved (same chunk key) by an earlier
    call; NaN when no call retrieved anything."""
    out = np.full(len(m.query_ids), np.nan)
    for i, calls in enumerate(_calls(m)):
        earlier: set = set()
        total = repeated = 0
        for sub in calls:
            keys = [chunk_key(c) for c in sub.chunks[:k]]
            total += len(keys)
            repeated += sum(1 for key in keys if key is not None and key in earlier)
            earlier |= {key for key in keys if key is not None}
        if total:
            out[i] = repeated / total
    return out
