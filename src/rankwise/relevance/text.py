"""Verdicts from ground-truth text (docs/metrics.md §4): containment, span overlap, fuzzy matching.

Precision counts matching *chunks*; recall counts reference *passages* matched by at least one chunk
in the top K. Each chunk's verdict records which passages it matched (``passages_found``) and why.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Sequence

from rankwise.data.records import CaseRecord, Verdict
from rankwise.data.testset import Chunk, ReferencePassage
from rankwise.errors import InputError
from rankwise.relevance.truth import GroundTruth, case_status, with_progress

__all__ = ["normalize", "contains_match", "span_overlap", "span_match", "fuzzy_similarity", "fuzzy_similarities",
           "spans_char_recall", "judge_text", "MIN_EVIDENCE_CHARS", "evidence_chars", "is_fragment", "fragment_warning",
           "merge_intervals", "rejudges_stored"]

_FUZZY_BATCH = 2048  # cases scored per batched call (progress moves, memory stays small)

#: letters/digits a chunk lying inside a reference passage must hold to count as evidence
#: (containment, fuzzy)
MIN_EVIDENCE_CHARS = 20


def normalize(text: str) -> str:
    """Unicode NFKC, lower-case, whitespace runs collapsed to one space, ends stripped.

    Example:
        >>> normalize("  Paris\\n is  the ＣＡＰＩＴＡＬ ")
        'paris is the capital'
    """
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def contains_match(chunk: str, passage: str) -> bool:
    """True when either normalised text contains the other (an empty text matches nothing).

    Example:
        >>> contains_match(
        ...     "The capital of France is Paris. It is large.", "capital of  FRANCE is Paris"
        ... )
        True
    """
    return _contains(normalize(chunk), normalize(passage))


def _contains(a: str, b: str) -> bool:
    return bool(a) and bool(b) and (b in a or a in b)


def evidence_chars(text: str) -> int:
    """Letters and digits in ``text``: what the evidence minimum counts (spaces and punctuation are
    not evidence, in any script).

    Example:
        >>> evidence_chars("the."), evidence_chars("Kestrel keeps 3 copies")
        (3, 19)
    """
    return sum(ch.isalnum() for ch in text)


def rejudges_stored(source: str, min_evidence_chars: int | None) -> bool:
    """Whether verdicts of ``source`` already stored in records are judged again: containment and
    fuzzy ones when an evidence minimum is given (they were decided by whatever minimum was in force
    when they were stored).

    Example:
        >>> (
        ...     rejudges_stored("containment", 0),
        ...     rejudges_stored("containment", None),
        ...     rejudges_stored("span", 0),
        ... )
        (True, False, False)
    """
    return min_evidence_chars is not None and source in ("containment", "fuzzy")


def is_fragment(chunk: str, passage: str, min_chars: int = MIN_EVIDENCE_CHARS) -> bool:
    """True when a normalised chunk that is *shorter* than the normalised passage it matched holds
    fewer than ``min_chars`` letters/digits (or fewer than the whole passage holds, when the passage
    is shorter still): a fragment such as "the" or "." lies inside nearly every reference and is not
    evidence. A chunk as long as the passage or longer (it holds the passage) is never a fragment.

    Example:
        >>> is_fragment("the", "the warranty lasts two years")
        True
        >>> is_fragment("warranty lasts two years", "the warranty lasts two years")
        False
        >>> is_fragment("paris", "paris"), is_fragment("par", "paris")
        (False, True)
    """
    if len(chunk) >= len(passage):
        return False
    return evidence_chars(chunk) < min(min_chars, evidence_chars(passage))


def span_overlap(a: tuple[str, int, int], b: tuple[str, int, int]) -> int:
    """Characters shared by two ``(doc_id, start, end)`` spans (end exclusive); 0 across documents.

    Example:
        >>> span_overlap(("d1", 0, 100), ("d1", 80, 150))
        20
    """
    if a[0] != b[0]:
        return 0
    return max(0, min(a[2], b[2]) - max(a[1], b[1]))


def span_match(chunk: tuple[str, int, int], passage: tuple[str, int, int], min_overlap: float = 0.5) -> bool:
    """The chunk covers >= ``min_overlap`` of the passage, or the passage >= ``min_overlap`` of the
    chunk.

    Example:
        >>> span_match(("d1", 0, 500), ("d1", 100, 200))   # the chunk holds the whole passage
        True
        >>> span_match(("d1", 0, 130), ("d1", 100, 200))   # 30% of the passage, 23% of the chunk
        False
    """
    shared = span_overlap(chunk, passage)
    if shared <= 0:
        return False
    chunk_len, passage_len = chunk[2] - chunk[1], passage[2] - passage[1]
    return (passage_len > 0 and shared / passage_len >= min_overlap) or (
        chunk_len > 0 and shared / chunk_len >= min_overlap)


def fuzzy_similarity(chunk: str, passage: str) -> float:
    """Best partial-match similarity in [0, 1] of the normalised texts (rapidfuzz
    ``partial_ratio``).

    Example:
        >>> round(
        ...     fuzzy_similarity("The capital of France is Paris.", "capital of france is paris"), 2
        ... )
        1.0
    """
    return _partial(normalize(chunk), normalize(passage))


def _partial(a: str, b: str) -> float:
    fuzz, _ = _rapidfuzz()
    if not a or not b:
        return 0.0
    return fuzz.partial_ratio(a, b) / 100.0


def _rapidfuzz():
    try:
        from rapidfuzz import fuzz
        from rapidfuzz.distance import LCSseq
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("relevance 'fuzzy' needs rapidfuzz: pip install 'rankwise[text]'") from None
    return fuzz, LCSseq


def fuzzy_similarities(pairs: Sequence[tuple[str, str]], threshold: float) -> list[float | None]:
    """:func:`fuzzy_similarity` of many normalised ``(chunk, passage)`` pairs, for a ``threshold``:
    the exact similarity where it is >= ``threshold``, None where it is below.

    Each verdict equals ``fuzzy_similarity(chunk, passage) >= threshold``; most pairs are settled
    without the costly scorer:

    * one text contains the other: the shorter is a window of the longer, similarity 1.0;
    * a bound: ``partial_ratio`` is the best ``2 * LCS(s, w) / (|s| + |w|)`` over windows ``w`` of
      the longer text, with ``s`` the shorter; from ``LCS(s, w) <= |w|`` that needs ``LCS(s, w) >= t
      * |s| / (2 - t)``, and ``LCS(s, w) <= LCS(s, longer text)``. One bit-parallel LCS of the two
      whole texts (microseconds) rules out nearly every non-matching pair;
    * the rest get ``partial_ratio`` with the threshold as its ``score_cutoff`` (it skips hopeless
      windows).

    (``process.cdist``/``cpdist(..., workers=-1)`` was measured too: no faster here, as it scores
    every pair in full.)

    Example:
        >>> sims = fuzzy_similarities(
        ...     [("the warranty lasts two years", "warranty lasts 2 years"), ("a", "b")], 0.8
        ... )
        >>> round(sims[0], 4), sims[1]
        (0.8636, None)
    """
    fuzz, lcs = _rapidfuzz()
    partial_ratio, lcs_length = fuzz.partial_ratio, lcs.similarity
    cutoff = max(threshold * 100.0 - 1e-6, 0.0)  # a hair low: "x / 100 >= threshold" decides, as before
    factor = threshold / (2.0 - threshold)
    out: list[float | None] = [None] * len(pairs)
    for i, (a, b) in enumerate(pairs):
        if not a or not b:
            continue
        if b in a or a in b:  # the shorter text is a window of the other: partial_ratio is 100
            out[i] = 1.0
            continue
        need = math.ceil(factor * min(len(a), len(b)) - 1e-9)
        if need > 0 and lcs_length(a, b, score_cutoff=need) < need:
            continue
        sim = partial_ratio(a, b, score_cutoff=cutoff) / 100.0
        if sim >= threshold:
            out[i] = sim
    return out


def merge_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, overlapping or touching ``[start, end)`` intervals joined; empty ones dropped.

    Example:
        >>> merge_intervals([(5, 9), (0, 3), (2, 4), (7, 7)])
        [(0, 4), (5, 9)]
    """
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def spans_char_recall(chunks: Sequence[Chunk], passages: Sequence[ReferencePassage], k: int | None = None) -> float:
    """Share of the reference passages' characters covered by the top ``k`` chunks' spans.

    Overlapping passages or chunks are counted once. 0.0 when no passage has a span.

    Example:
        >>> c = [Chunk(doc_id="d", start=0, end=50), Chunk(doc_id="d", start=150, end=200)]
        >>> p = [
        ...     ReferencePassage(doc_id="d", start=40, end=60),
        ...     ReferencePassage(doc_id="d", start=140, end=160),
        ... ]
        >>> spans_char_recall(c, p), spans_char_recall(c, p, k=1)
        (0.5, 0.25)
    """
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for p in passages:
        if p.span is not None:
            by_doc.setdefault(p.span[0], []).append((p.span[1], p.span[2]))
    cover: dict[str, list[tuple[int, int]]] = {}
    for c in list(chunks)[: (None if k is None else k)]:
        if c.span is not None and c.span[0] in by_doc:
            cover.setdefault(c.span[0], []).append((c.span[1], c.span[2]))
    total = covered = 0
    for doc, ivs in by_doc.items():
        gold = merge_intervals(ivs)
        total += sum(e - s for s, e in gold)
        got = merge_intervals(cover.get(doc, []))
        for gs, ge in gold:
            for cs, ce in got:
                covered += max(0, min(ge, ce) - max(gs, cs))
    return covered / total if total else 0.0


def _reason(mode: str, text: str, chunk: Chunk, matched: list[int], usable: list[int], norm: dict[int, str],
            passages: Sequence[ReferencePassage], meta: dict, min_overlap: float,
            min_evidence: int = MIN_EVIDENCE_CHARS) -> str:
    """Why a chunk got its text verdict, naming reference passages 1-based (as a user counts them)
    and the rule that matched.

    Example:
        >>> _reason("containment", "a b c d", Chunk("a b c d"), [0], [0], {0: "b c"}, [], {}, 0.5)
        'contains reference passage 1 (chars 2\u20135 of the normalised chunk)'
    """
    if not usable:
        return "no reference passage to compare with"
    if mode == "containment":
        return _containment_reason(text, matched, usable, norm, meta, min_evidence)
    if mode == "span":
        return _span_reason(chunk, matched, usable, passages, min_overlap)
    return _fuzzy_reason(text, matched, norm, meta, min_evidence)


def _fragment_text(text: str, fragments: list[int], norm: dict[int, str], minimum: int, how: str) -> str:
    where = ", ".join(str(i + 1) for i in fragments)
    needed = min(min(minimum, evidence_chars(norm.get(i, ""))) for i in fragments)
    bar = (f"the evidence minimum of {minimum}" if needed == minimum
           else f"the {needed} of the passage, shorter than the evidence minimum of {minimum}")
    return (f"{how} reference passage{'s' if len(fragments) > 1 else ''} {where} but holds only "
            f"{evidence_chars(text)} letters/digits, under {bar} (min_evidence_chars): a fragment, not evidence")


def _containment_reason(text: str, matched: list[int], usable: list[int], norm: dict[int, str],
                        meta: dict, minimum: int) -> str:
    fragments = meta.get("fragment_of") or []
    if not matched and not fragments:
        return f"contains none of the {len(usable)} reference passages and lies inside none"
    parts = []
    for i in matched:
        at = text.find(norm[i])
        if at >= 0:
            parts.append(f"contains reference passage {i + 1} (chars {at}\u2013{at + len(norm[i])} of the "
                         f"normalised chunk)")
        else:
            at = norm[i].find(text)
            parts.append(f"lies inside reference passage {i + 1} (chars {at}\u2013{at + len(text)} of the "
                         f"normalised passage; {evidence_chars(text)} letters/digits, at least the evidence "
                         f"minimum of {min(minimum, evidence_chars(norm[i]))})")
    if fragments:
        parts.append(_fragment_text(text, fragments, norm, minimum, "lies inside"))
    return "; ".join(parts)


def _span_reason(chunk: Chunk, matched: list[int], usable: list[int], passages: Sequence[ReferencePassage],
                 min_overlap: float) -> str:
    chunk_len = max(chunk.span[2] - chunk.span[1], 0)
    rows = []
    for i in usable:
        span = passages[i].span
        shared = span_overlap(chunk.span, span)
        plen = max(span[2] - span[1], 0)
        rows.append((i, shared, shared / plen if plen else 0.0, shared / chunk_len if chunk_len else 0.0))
    shown = [r for r in rows if r[0] in matched] or [max(rows, key=lambda r: (r[1], -r[0]))]
    if not matched and shown[0][1] == 0:
        return f"no overlap with any of the {len(usable)} reference passage spans"
    text_rows = [f"overlaps reference passage {i + 1} by {n} chars ({p:.0%} of the passage, {c:.0%} of the "
                 f"chunk)" for i, n, p, c in shown]
    verdict = (f"at least {min_overlap:.0%} of one of them" if matched
               else f"under {min_overlap:.0%} of both")
    return "; ".join(text_rows) + f": {verdict}"


def _fuzzy_reason(text: str, matched: list[int], norm: dict[int, str], meta: dict, minimum: int) -> str:
    sims = meta.get("similarity") or {}
    threshold = meta.get("threshold")
    fragments = meta.get("fragment_of") or []
    pairs = [(int(i), float(v)) for i, v in sims.items()] if isinstance(sims, dict) else []
    if not pairs:
        if not matched and threshold is not None:
            return f"no reference passage reaches similarity {threshold} (similarities below it are not computed)"
        return "matched" if matched else "not matched"
    if matched:
        best = max(((i, v) for i, v in pairs if i in matched), key=lambda p: p[1])
        passage = norm.get(best[0], "")
        rule = ("the passage matched within the chunk" if len(text) >= len(passage) else
                f"the chunk matched within the passage; {evidence_chars(text)} letters/digits, at least the "
                f"evidence minimum of {min(minimum, evidence_chars(passage))}")
        return f"similarity {best[1]:.2f} to reference passage {best[0] + 1} >= threshold {threshold} ({rule})"
    if fragments:
        best = max(((i, v) for i, v in pairs if i in fragments), key=lambda p: p[1])
        return (f"similarity {best[1]:.2f} to reference passage {best[0] + 1} >= threshold {threshold}; "
                + _fragment_text(text, fragments, norm, minimum, "lies within"))
    best = max(pairs, key=lambda p: p[1])
    return f"best similarity {best[1]:.2f} (reference passage {best[0] + 1}) < threshold {threshold}"


def _usable(passages: Sequence[ReferencePassage], mode: str) -> list[int]:
    if mode == "span":
        return [i for i, p in enumerate(passages) if p.span is not None]
    return [i for i, p in enumerate(passages) if p.text is not None and normalize(p.text)]


def judge_text(records: list[CaseRecord], mode: str = "containment", *, min_overlap: float = 0.5,
               threshold: float = 0.8, min_evidence_chars: int = MIN_EVIDENCE_CHARS,
               progress: bool = False) -> dict[str, GroundTruth]:
    """Judge every chunk of every record against the case's reference passages; fills records in
    place.

    A chunk with no text (containment, fuzzy) or no ``(doc_id, start, end)`` (span) gets a
    ``missing`` verdict and makes its case incomplete. A case with no usable reference passage is
    unscorable. Containment and fuzzy count a chunk shorter than the passage it matched only when it
    holds at least ``min_evidence_chars`` letters/digits (:func:`is_fragment`); the verdict's
    ``meta["fragment_of"]`` names the passages such a fragment matched, and its reason says so.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> recs = records_from_testset([{"id": "q", "retrieved_contexts": ["a b c", "x"],
        ...                               "reference_contexts": ["B C", "nothing"]}])
        >>> judge_text(recs)["q"].n_relevant, recs[0].passages_found["containment"]
        (2, [[0], []])
    """
    if mode not in ("containment", "span", "fuzzy"):
        raise ValueError(f"text relevance mode must be containment, span or fuzzy, not {mode!r}")
    if not 0 < min_overlap <= 1:
        raise InputError(f"min_overlap must be in (0, 1], got {min_overlap}", field="min_overlap")
    if not 0 < threshold <= 1:
        raise InputError(f"threshold must be in (0, 1], got {threshold}", field="threshold")
    if isinstance(min_evidence_chars, bool) or not isinstance(min_evidence_chars, int) or min_evidence_chars < 0:
        raise InputError(f"min_evidence_chars must be a whole number >= 0, got {min_evidence_chars!r}",
                         field="min_evidence_chars")
    if mode == "fuzzy":
        fuzzy_similarity("a", "a")  # fail early, with the install hint, if rapidfuzz is missing
    truth: dict[str, GroundTruth] = {}
    fuzzy = _fuzzy_batches(records, threshold) if mode == "fuzzy" else None
    for rec in with_progress(records, f"{mode} verdicts", progress):
        similar = next(fuzzy) if fuzzy is not None else None
        passages = rec.reference_contexts
        usable = _usable(passages, mode)
        norm = {i: normalize(passages[i].text) for i in usable} if mode != "span" else {}
        found: list[list[int]] = []
        for n_chunk, c in enumerate(rec.chunks):
            chunk = c  # a record is its chunk
            if mode == "span" and chunk.span is None:
                c.verdicts[mode] = Verdict(None, status="missing", error="chunk has no (doc_id, start, end)")
                found.append([])
                continue
            if mode != "span" and chunk.text is None:
                c.verdicts[mode] = Verdict(None, status="missing", error="chunk has no text")
                found.append([])
                continue
            text = normalize(chunk.text) if mode != "span" else ""
            matched, meta = _chunk_matches(mode, text, chunk, usable, norm, passages, min_overlap,
                                           similar[n_chunk] if similar is not None else None, min_evidence_chars)
            if mode == "fuzzy":
                meta = {"similarity": meta.get("similarity", {}), "threshold": threshold, **meta}
            elif mode == "span":
                meta = {"min_overlap": min_overlap}
            c.verdicts[mode] = Verdict(1 if matched else 0, meta=meta,
                                       reason=_reason(mode, text, chunk, matched, usable, norm, passages, meta,
                                                      min_overlap, min_evidence_chars))
            found.append(matched)
        rec.passages_found[mode] = found
        why = None
        if not usable:
            why = ("no reference passage with (doc_id, start, end)" if mode == "span" and passages
                   else "no ground truth")
        rec.status[mode] = case_status(rec, mode, unscorable=why)
        truth[rec.id] = GroundTruth(len(usable), [1] * len(usable), basis="reference passages")
    return truth


def _chunk_matches(mode: str, text: str, chunk: Chunk, usable: list[int], norm: dict[int, str],
                   passages: Sequence[ReferencePassage], min_overlap: float, similar: dict | None,
                   min_evidence_chars: int) -> tuple[list[int], dict]:
    """The passages one chunk matches and the verdict's meta (fuzzy similarities; for containment
    and fuzzy the passages it matched only as a fragment, ``fragment_of``, and the minimum applied).
    """
    matched: list[int] = []
    meta: dict = {}
    fragments: list[int] = []
    for i in usable:
        if mode == "containment":
            ok = _contains(text, norm[i])
        elif mode == "span":
            ok = span_match(chunk.span, passages[i].span, min_overlap)
        else:
            sim = similar[i]
            ok = sim is not None
            if ok:
                meta.setdefault("similarity", {})[str(i)] = round(sim, 4)
        if ok and mode != "span" and is_fragment(text, norm[i], min_evidence_chars):
            fragments.append(i)
            continue
        if ok:
            matched.append(i)
    if fragments:  # kept only when it decided something (records stay as they were otherwise)
        meta["fragment_of"] = fragments
        meta["min_evidence_chars"] = min_evidence_chars
    return matched, meta


def fragment_warning(records: Sequence[CaseRecord], source: str) -> str | None:
    """One message counting the chunks ``source`` (containment, fuzzy) left not relevant because
    they matched a reference passage only as a fragment (:func:`is_fragment`), else None.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> recs = records_from_testset([{"id": "q", "retrieved_contexts": ["the", "."],
        ...                               "reference_contexts": ["the warranty lasts two years."]}])
        >>> _ = judge_text(recs)
        >>> fragment_warning(recs, "containment")[:60]
        '2 chunks (in 1 case) lie inside a reference passage but hold'
    """
    chunks = cases = 0
    example = minimum = None
    for rec in records:
        hits = 0
        for c in rec.chunks:
            v = c.verdicts.get(source)
            if v is None or v.verdict != 0 or not (v.meta or {}).get("fragment_of"):
                continue
            hits += 1
            minimum = v.meta.get("min_evidence_chars", MIN_EVIDENCE_CHARS)
            if example is None:
                example = (rec.id, c.rank, c.text or "")
        chunks += hits
        cases += 1 if hits else 0
    if not chunks:
        return None
    rid, rank, text = example
    shown = text if len(text) <= 30 else text[:27] + "..."
    return (f"{chunks} chunk{'s' if chunks != 1 else ''} (in {cases} case{'s' if cases != 1 else ''}) "
            f"lie{'s' if chunks == 1 else ''} inside a reference passage but hold{'s' if chunks == 1 else ''} "
            f"fewer than {minimum} letters/digits (e.g. case {rid!r} rank {rank}: {shown!r}): fragments, "
            f"counted as not relevant (lower --min-evidence-chars / min_evidence_chars to count them)")


def _fuzzy_batches(records: list[CaseRecord], threshold: float):
    """Per record, per chunk, ``{passage index: similarity}`` (None below ``threshold``), scored
    :data:`_FUZZY_BATCH` records at a time with :func:`fuzzy_similarities`."""
    for start in range(0, len(records), _FUZZY_BATCH):
        batch = records[start:start + _FUZZY_BATCH]
        pairs: list[tuple[str, str]] = []
        slots: list[list[list[int]]] = []
        for rec in batch:
            passages = rec.reference_contexts
            norm = {i: normalize(passages[i].text) for i in _usable(passages, "fuzzy")}
            per_chunk = []
            for c in rec.chunks:
                text = c.text
                text = "" if text is None else normalize(text)
                per_chunk.append(list(range(len(pairs), len(pairs) + len(norm))))
                pairs.extend((text, p) for p in norm.values())
            slots.append([list(zip(norm, idx, strict=True)) for idx in per_chunk])
        sims = fuzzy_similarities(pairs, threshold)
        for rec_slots in slots:
            yield [{i: sims[j] for i, j in chunk_slots} for chunk_slots in rec_slots]
