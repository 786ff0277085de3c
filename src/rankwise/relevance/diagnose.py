"""Why a verdict source matched nothing: one sentence with the likely cause and the fix, instead of
a silent 0.0000 (docs/context-metrics.md, "When nothing can match").

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> from rankwise.relevance.ids import judge_ids
    >>> recs = records_from_testset(
    ...     [
    ...         {
    ...             "id": "q",
    ...             "retrieved_contexts": [{"id": "rules.md#3", "doc_id": "rules.md", "text": "x"}],
    ...             "reference_context_ids": ["rules.md"],
    ...         }
    ...     ]
    ... )
    >>> _ = judge_ids(recs)
    >>> print(no_match(recs, "ids"))
    no retrieved chunk id equals a reference id in any case, but chunk doc_ids do (chunk ids such as 'rules.md#3'; reference ids such as 'rules.md'): the reference ids name documents; pass --id-field doc_id
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

__all__ = ["all_missing", "missing_sentence", "no_match", "SPAN_NO_OFFSETS"]

SPAN_NO_OFFSETS = ("these cases carry no character offsets: pass --corpus to import-traces (it finds each chunk "
                   "in its document), or use -r containment")


def _examples(values: Iterable[str], n: int = 2) -> str:
    shown = sorted(set(values))[:n]
    return ", ".join(repr(v) for v in shown)


def all_missing(records: Sequence[Any], relevance: str) -> str | None:
    """The sentence when there are retrieved chunks and every one's ``relevance`` verdict is
    missing, else None.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> from rankwise.relevance.text import judge_text
        >>> recs = records_from_testset([{"id": "q", "retrieved_contexts": ["a b"],
        ...     "reference_contexts": [{"text": "a b", "doc_id": "d", "start": 0, "end": 3}]}])
        >>> _ = judge_text(recs, "span")
        >>> all_missing(recs, "span")
        "no retrieved chunk (of 1) carries (doc_id, start, end), so no 'span' verdict could be given: these cases carry no character offsets: pass --corpus to import-traces (it finds each chunk in its document), or use -r containment"
    """
    chunks = [c for r in records for c in r.chunks]
    if not chunks or any(c.verdicts.get(relevance) is not None and c.verdicts[relevance].status != "missing"
                         for c in chunks):
        return None
    errors = sorted({c.verdicts[relevance].error for c in chunks
                     if c.verdicts.get(relevance) is not None and c.verdicts[relevance].error})
    return missing_sentence(relevance, len(chunks), errors[0] if errors else None)


def missing_sentence(relevance: str, n_chunks: int, error: str | None = None) -> str:
    """What :func:`all_missing` says for ``n_chunks`` chunks without a ``relevance`` verdict (the
    Spark engine, which counts verdicts per partition, says the same).

    Example:
        >>> missing_sentence("ids", 3)
        "no retrieved chunk (of 3) carries an id or doc_id, so no 'ids' verdict could be given: use -r containment"
    """
    n = f"(of {n_chunks})"
    if relevance == "span":
        return f"no retrieved chunk {n} carries (doc_id, start, end), so no 'span' verdict could be given: " \
               + SPAN_NO_OFFSETS
    if relevance in ("containment", "fuzzy"):
        return (f"no retrieved chunk {n} carries text, so no {relevance!r} verdict could be given: score chunk ids "
                f"with -r ids, or offsets with -r span")
    if relevance == "ids":
        return f"no retrieved chunk {n} carries an id or doc_id, so no 'ids' verdict could be given: use -r containment"
    why = f" ({error})" if error else ""
    return f"no retrieved chunk {n} has a {relevance!r} verdict{why}: every mean would be 0 for want of verdicts"


def _stem(name: str) -> str:
    """A document name without its extension: ``rules.md`` -> ``rules`` (``v1.2`` stays whole:
    digits)."""
    p = PurePosixPath(name)
    return str(p.with_suffix("")) if p.suffix and not p.suffix[1:].isdigit() else name


def _extension_note(chunk_names: set[str], ref_names: set[str], what: str) -> str | None:
    """The sentence when the two sides' names meet once extensions are dropped (``rules`` vs
    ``rules.md``)."""
    pairs = [(c, r) for c in sorted(chunk_names) for r in sorted(ref_names) if c != r and _stem(c) == _stem(r)]
    if not pairs:
        return None
    chunk, ref = pairs[0]
    return (f"no retrieved chunk's {what} equals a reference's in any case, but they differ only by an extension "
            f"(chunks {chunk!r}, references {ref!r}): a corpus read from a folder (`rankwise run --corpus "
            f"folder/`, `sweep --corpus folder/`) names each document by its path in the folder, extension included; write the test set's doc_id as that name ({chunk!r}), or give "
            f"the corpus as a JSONL with your own ids")


def _doc_names(records: Sequence[Any], relevance: str) -> tuple[set[str], set[str], bool]:
    """The chunks' doc_ids, the references' document names and whether some case shares one."""
    chunks: set[str] = set()
    refs: set[str] = set()
    shared = False
    for r in records:
        mine = {c.doc_id for c in r.chunks if c.doc_id is not None}
        theirs = ({p.doc_id for p in r.reference_contexts if p.doc_id is not None} if relevance == "span"
                  else set(r.reference_context_ids or []))
        chunks |= mine
        refs |= theirs
        shared = shared or bool(mine & theirs)
    return chunks, refs, shared


def _ids_note(records: Sequence[Any], id_field: str | None) -> str | None:
    """ids verdicts that never matched: which chunk field would have matched the reference ids."""
    from rankwise.relevance.ids import id_key

    keys: set[str] = set()
    refs: set[str] = set()
    other: dict[str, bool] = {"id": False, "doc_id": False}
    for r in records:
        theirs = set(r.reference_context_ids or [])
        refs |= theirs
        keys |= {k for c in r.chunks if (k := id_key(c, id_field)) is not None}
        for name in other:
            other[name] = other[name] or any(getattr(c, name) in theirs for c in r.chunks)
    if not refs or not keys:
        return None
    used = id_field or "id"
    for name, flag in (("doc_id", "--id-field doc_id"), ("id", "--id-field id")):
        if name != used and other[name]:
            return (f"no retrieved chunk {used} equals a reference id in any case, but chunk {name}s do (chunk "
                    f"{used}s such as {_examples(keys)}; reference ids such as {_examples(refs)}): the reference ids "
                    f"name {'documents' if name == 'doc_id' else 'chunks'}; pass {flag}")
    doc_ids = {c.doc_id for r in records for c in r.chunks if c.doc_id is not None}
    if used != "doc_id" and (note := _extension_note(doc_ids, refs, "doc_id")):
        return f"{note}; and pass --id-field doc_id (the reference ids name documents)"
    return _extension_note(doc_ids if used == "doc_id" else keys, refs, used) or (
        f"no retrieved chunk {used} equals a reference id in any case (chunk {used}s such as {_examples(keys)}; "
        f"reference ids such as {_examples(refs)}): ids are compared exactly; if the references name documents, "
        f"pass --id-field doc_id")


def no_match(records: Sequence[Any], relevance: str, id_field: str | None = None) -> str | None:
    """The sentence when ``relevance`` verdicts could match nothing in any case (ids or document
    names of chunks and references never meet), else None. Only ``ids`` and ``span`` compare names.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> from rankwise.relevance.text import judge_text
        >>> recs = records_from_testset([{"id": "q", "retrieved_contexts": [
        ...     {"text": "a", "doc_id": "rules.md", "start": 0, "end": 9}],
        ...     "reference_contexts": [{"text": "a", "doc_id": "rules", "start": 0, "end": 9}]}])
        >>> _ = judge_text(recs, "span")
        >>> no_match(recs, "span")[:100]
        "no retrieved chunk's doc_id equals a reference's in any case, but they differ only by an extension ("
    """
    judged = [r for r in records if any(c.verdicts.get(relevance) is not None
                                        and c.verdicts[relevance].status == "ok" for c in r.chunks)]
    if not judged or any(c.verdicts[relevance].verdict for r in judged for c in r.chunks
                         if c.verdicts.get(relevance) is not None and c.verdicts[relevance].status == "ok"):
        return None
    if relevance == "ids":
        if id_field == "doc_id":
            chunks, refs, shared = _doc_names(judged, "ids")
            if not shared and chunks and refs:
                return _extension_note(chunks, refs, "doc_id") or _ids_note(judged, id_field)
            return None
        return _ids_note(judged, id_field)
    if relevance != "span":
        return None
    chunks, refs, shared = _doc_names(judged, "span")
    if shared or not chunks or not refs:
        return None
    return _extension_note(chunks, refs, "doc_id") or (
        f"no retrieved chunk's doc_id equals a reference passage's doc_id in any case (chunks: {_examples(chunks)}; "
        f"references: {_examples(refs)}): span compares document names exactly; name the documents alike in the "
        f"test set and the corpus")
