"""``evaluate_rag``: score the retrieved contexts of a RAG test set with verdicts from any source.

Verdicts come from ids, ground-truth text (containment, span, fuzzy), human labels or an LLM judge
(read from records written by ``rankwise judge``). Every verdict is kept per chunk in per-case
records (docs/metrics.md §6); metrics are computed from those stored verdicts by the same engine as
``rankwise eval``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.checks import case_warnings
from rankwise.data.records import CaseRecord, as_records, load_records, write_records
from rankwise.errors import InputError, warn
from rankwise.metrics.engine import EvalResult, evaluate_matrix
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.metrics.registry import parse_measures
from rankwise.relevance.diagnose import all_missing, no_match
from rankwise.relevance.text import MIN_EVIDENCE_CHARS, fragment_warning, rejudges_stored
from rankwise.relevance.verdicts import SOURCES, TEXT_SOURCES, assign_verdicts, case_status

__all__ = ["evaluate_rag", "judged_records", "RagResult", "load_records", "write_records", "default_rag_metrics",
           "ACP_NOTE", "unscorable_reasons", "left_out", "no_match_summary", "call_gaps", "checked_cutoffs",
           "retrieval_failures", "verdict_counts", "rag_summary", "unscorable_treatment", "none_scorable"]

R_BASIS_TEXT = {
    "reference passages": "reference passages (a passage counts once, however many chunks match it)",
    "reference ids": "reference ids at or above the relevance level",
    "qrels": "qrels entries at or above the relevance level",
    "pooled verdicts": ("the chunks judged relevant (pooled, as trec_eval qrels): recall shows how near the top "
                        "the relevant chunks sit, not coverage of a reference"),
}

ACP_NOTE = ("acp divides by the relevant chunks retrieved, not by the passages that exist: one relevant "
            "chunk at rank 1 scores 1.0 however much was missed. Read it with recall / context_recall.")


DEFAULT_KS = (1, 3, 5, 10)
NO_CHUNKS = "no retrieved chunks"  # the one unscorable reason that has ground truth: scored 0 under either policy


def default_rag_metrics(k: Sequence[int], relevance: str, *, calls: bool = False, hops: bool = False) -> list[str]:
    """hit_rate, precision, recall, f1 at each k; mrr; ndcg, wcp (log), acp, context_recall at the
    largest k.

    ids mode adds id_precision / id_recall; span mode adds char_recall at each k. When some case
    made several retrieval ``calls``: recall averaged over calls, evidence coverage, calls to
    evidence and redundancy at the largest k (the cutoff per call), and ``all_hops_covered`` when
    references carry ``hops``.

    Example:
        >>> default_rag_metrics([5], "containment", calls=True)[-4:]
        ['call_mean(metric=recall)@5', 'evidence_coverage@5', 'calls_to_evidence@5', 'call_redundancy@5']
    """
    ks = sorted(set(k))
    top = ks[-1]
    names = [f"{m}@{x}" for m in ("hit_rate", "precision", "recall", "f1") for x in ks]
    names += ["mrr", f"ndcg@{top}", f"wcp@{top}", f"acp@{top}", f"context_recall@{top}"]
    if relevance == "ids":
        names += ["id_precision", "id_recall"]
    if relevance == "span":
        names += [f"char_recall@{x}" for x in ks]
    if calls:
        names += [f"call_mean(metric=recall)@{top}", f"evidence_coverage@{top}", f"calls_to_evidence@{top}",
                  f"call_redundancy@{top}"]
        if hops:
            names.insert(-2, f"all_hops_covered@{top}")
    return names


@dataclass
class RagResult(EvalResult):
    """What :func:`evaluate_rag` returns: an :class:`~rankwise.metrics.EvalResult` plus the records.

    Attributes:
        records: one :class:`~rankwise.data.records.CaseRecord` per case, with every chunk's
            verdict, the passages each chunk matched, each metric's score and the case's status.
        relevance: the verdict source scored.
    """

    records: list[CaseRecord] = field(default_factory=list)
    relevance: str = "containment"

    def write_records(self, path: str | PathLike) -> Path:
        """Write the per-case records as JSON Lines (readable by :func:`load_records`)."""
        return write_records(self.records, path)


def judged_records(testset: Any, relevance: str = "containment", *, labels: Any = None,
                   min_overlap: float = 0.5, threshold: float = 0.8, id_field: str | None = None,
                   relevance_level: int = 1, progress: bool = False,
                   min_evidence_chars: int | None = None, copy: bool = True,
                   system: str | None = None) -> tuple[list[CaseRecord], bool]:
    """Per-case records holding ``relevance`` verdicts, and whether they were stored already.

    Records that already hold this source's verdicts are used as stored, never re-judged — except
    that a ``min_evidence_chars`` given (not None) re-judges stored containment/fuzzy verdicts by
    that rule, since they were decided by whatever rule was in force when they were stored; a test
    set (or ``labels``) is judged now (``min_evidence_chars`` None:
    :data:`~rankwise.relevance.text.MIN_EVIDENCE_CHARS`). Every command that scores RAG cases starts
    here. Records given as objects are copied first unless ``copy=False`` (see
    :func:`evaluate_rag`). ``system`` picks the rows of a human labelling sheet that names several
    systems (default: a records/test-set file's name, as ``--ppi``).

    Example:
        >>> recs, stored = judged_records([{"id": "q", "retrieved_contexts": ["a b", "c"],
        ...                                 "reference_contexts": ["a b"]}])
        >>> recs[0].verdicts("containment"), stored
        ([1, 0], False)
    """
    records = as_records(testset, copy=copy)
    if not records:
        raise InputError("the test set holds no case")
    present = {s for r in records for s in r.sources()}
    if relevance not in SOURCES and relevance not in present:
        raise InputError(f"unknown relevance {relevance!r}; use one of {list(SOURCES)} or a verdict source "
                         f"present in the records ({sorted(present) or 'none'})", field="relevance")
    if relevance == "human" and labels is None and "human" not in present:
        raise InputError("relevance 'human' needs labels (a CSV/JSONL of query_id, chunk_id or rank, verdict, "
                         "type)", field="labels")
    if relevance not in TEXT_SOURCES and relevance not in ("ids", "human") and relevance not in present:
        how = ("utility verdicts: `rankwise utility TESTSET --model M --records OUT.jsonl`" if relevance == "utility"
               else "the LLM judge: `rankwise judge TESTSET --records OUT.jsonl`")
        raise InputError(f"no {relevance!r} verdicts in the records; produce them first (for {how}, then score "
                         f"OUT.jsonl with relevance {relevance!r})",
                         source=testset if isinstance(testset, (str, PathLike)) else None,
                         field=None if isinstance(testset, (str, PathLike)) else "relevance")
    stored = labels is None and relevance in present and not rejudges_stored(relevance, min_evidence_chars)
    if stored:
        for r in records:
            r.status.setdefault(relevance, case_status(r, relevance))
    else:
        if system is None and isinstance(testset, (str, PathLike)):
            system = Path(testset).stem
        assign_verdicts(records, relevance, labels=labels, min_overlap=min_overlap, threshold=threshold,
              id_field=id_field, relevance_level=relevance_level, progress=progress,
              min_evidence_chars=min_evidence_chars, system=system)
    return records, stored



def unscorable_reasons(unscorable_cases: dict[str, str], relevance: str) -> str:
    """Why no case could be scored, for the one-line error: each reason once; cases the retriever
    found nothing for are counted as such (no verdict source would help them).

    Example:
        >>> unscorable_reasons({"q1": "no retrieved chunks", "q2": "no retrieved chunks"}, "span")
        'the retriever returned no chunks for 2 questions'
    """
    empty = sum(1 for why in unscorable_cases.values() if why == "no retrieved chunks")
    reasons = [f"the retriever returned no chunks for {empty} question{'s' if empty != 1 else ''}"
               if why == "no retrieved chunks" else why for why in sorted(set(unscorable_cases.values()))]
    hint = (" (span needs doc_id/start/end on chunks and reference passages; try containment or fuzzy)"
            if relevance == "span" and empty < len(unscorable_cases) else "")
    return "; ".join(reasons) + hint

def evaluate_rag(testset: Any, relevance: str = "containment", *, labels: Any = None,
                 k: int | Iterable[int] | None = None, metrics: Iterable[str] | str | None = None,
                 min_overlap: float = 0.5, threshold: float = 0.8, id_field: str | None = None,
                 relevance_level: int = 1, unscorable: str = "skip", incomplete: str = "zero",
                 progress: bool = False, min_evidence_chars: int | None = None,
                 copy: bool = True, system: str | None = None) -> RagResult:
    """Score a RAG test set's retrieved contexts against verdicts from one source.

    Args:
        testset: a test set (path, DataFrame, dict of lists, list of dicts, :class:`TestSet`) or
            per-case records (a records JSONL path or a list of :class:`CaseRecord`, e.g. from
            ``rankwise judge``).
        relevance: ``containment`` (default), ``span``, ``fuzzy``, ``ids``, ``human`` (needs
            ``labels`` unless the records hold human verdicts), ``llm`` (verdicts already in the
            records) or any other source name present in the records. Records that already hold this
            source's verdicts are scored as stored, never re-judged (pass the test set, or
            ``labels``, to judge anew).
        labels: human labels (CSV/JSONL path or rows) for ``human``; graded qrels for ``ids``.
        k: cutoffs for the default metrics (default 1, 3, 5, 10). A cutoff past every retrieved
            list, asked for or default, is warned about, naming the cutoffs.
        metrics: metric names (``wcp@5``, ``acp(ragas_compat=true)@5``, ``char_recall@5`` ...);
            default :func:`default_rag_metrics`.
        min_overlap: span mode: share of the passage (or of the chunk) a chunk must overlap.
        threshold: fuzzy mode: similarity from which a chunk matches a passage.
        min_evidence_chars: containment and fuzzy: letters/digits a chunk lying inside a reference
            passage must hold to count (default None: 20 for verdicts judged now, stored verdicts
            kept as stored; a number given re-judges stored containment/fuzzy verdicts too); a
            shorter passage is enough in full; fragments such as "the" are counted as not relevant,
            warned about with a count, and their reasons say so.
        id_field: ids mode: compare ``id`` or ``doc_id`` of chunks (default: id, else doc_id).
        relevance_level: grade from which an id/qrels grade counts as relevant.
        unscorable: cases with no ground truth (unanswerable questions) and cases with no retrieved
            chunk: ``skip`` (default: a case without ground truth is left out of the means, as
            trec_eval leaves out unjudged queries; a case whose retriever returned nothing scores 0)
            or ``zero`` (both score 0 and stay in the means). Listed in the summary either way
            (docs/context-metrics.md).
        incomplete: cases with failed or missing verdicts: ``zero`` (those chunks count as not
            relevant, the case stays in the means) or ``skip``. Listed in the summary either way.
        progress: show a progress bar (stderr) while judging long test sets.
        copy: records given as :class:`CaseRecord` objects are copied before verdicts are added, so
            the caller's stay as they were (default); ``False`` adds the verdicts to the caller's
            own records, for a caller that made them for this call (a sweep's cells: no copy of
            every record of every cell).
        system: which system's rows of a human labelling sheet naming several (its ``system``
            column) to use; default the records/test-set file's name (``bm25.jsonl``: ``bm25``), as
            ``--ppi`` reads it.

    Example:
        >>> r = evaluate_rag([{"id": "q1", "retrieved_contexts": ["Paris is the capital.", "Rome."],
        ...                    "reference_contexts": ["paris is the capital"]}], k=2)
        >>> r.mean["precision@2"], r.records[0].verdicts("containment")
        (0.5, [1, 0])
    """
    ks = checked_cutoffs(k, unscorable, incomplete)
    if metrics:
        parse_measures(metrics)  # a misspelt name stops before any judging
    records, stored = judged_records(testset, relevance, labels=labels, min_overlap=min_overlap,
                                     threshold=threshold, id_field=id_field, relevance_level=relevance_level,
                                     progress=progress, min_evidence_chars=min_evidence_chars, copy=copy,
                                     system=system)
    measures = parse_measures(metrics or _defaults(records, ks, relevance))

    unscorable_cases, incomplete_cases, skip = _cases_left_out(records, relevance, testset, unscorable,
                                                               incomplete)
    scored = sorted((r for r in records if r.id not in skip), key=lambda r: r.id.encode("utf-8"))
    if not scored:
        raise InputError(f"no case can be scored with relevance {relevance!r}: "
                         f"{len(unscorable_cases)} unscorable, {len(incomplete_cases)} incomplete")

    matrix = RelevanceMatrix.from_records(scored, relevance, relevance_level=relevance_level, id_field=id_field)
    for measure in measures:
        measure.check(matrix)
    summary = rag_summary(len(records), relevance, len(scored), unscorable_cases, incomplete_cases, unscorable,
                          incomplete, matrix.r_basis, stored, verdict_counts(records, relevance),
                          min_overlap=min_overlap, threshold=threshold, id_field=id_field,
                          relevance_level=relevance_level,
                          min_evidence_chars=MIN_EVIDENCE_CHARS if min_evidence_chars is None and not stored
                          else min_evidence_chars)  # stored verdicts kept: the rule they were judged by
    summary.update(no_match_summary(records, relevance, id_field))
    for message in [*case_warnings(records, [m.k for m in measures]), fragment_warning(records, relevance),
                    call_gaps(records, relevance)]:
        if message:
            warn(message, summary=summary)
    result = evaluate_matrix(matrix, measures, summary, run_name=f"eval-rag ({relevance})")

    for r in records:
        if r.id in skip:
            r.scores[relevance] = {m.name: None for m in measures}
        else:
            r.scores[relevance] = result.per_query[r.id]
    return RagResult(result.measures, result.per_query, result.mean, result.summary, result.run_name,
                     records=records, relevance=relevance)


def call_gaps(records: list[CaseRecord], relevance: str) -> str | None:
    """The warning when chunks of some calls have no ``relevance`` verdict (a call's chunk missing
    from the case's own list, with a source that judges only that list): they count as not relevant.

    Example:
        >>> from rankwise.data.records import CallRecord, ChunkRecord
        >>> r = CaseRecord(
        ...     "q",
        ...     chunks=[ChunkRecord(rank=1, id="a")],
        ...     calls=[CallRecord([ChunkRecord(rank=1, id="z")])],
        ... )
        >>> call_gaps([r], "llm")[:60]
        "1 chunk of the cases' calls (in 1 case) has no 'llm' verdict"
    """
    cases = 0
    gaps = 0
    for r in records:
        n = sum(1 for call in r.call_chunks() for c in call if c.verdicts.get(relevance) is None)
        gaps += n
        cases += n > 0
    if not gaps:
        return None
    return (f"{gaps} chunk{'s' if gaps != 1 else ''} of the cases' calls (in {cases} case{'s' if cases != 1 else ''}) "
            f"{'have' if gaps != 1 else 'has'} no {relevance!r} verdict: not in the case's retrieved_contexts, so "
            f"not judged; the metrics over calls count them as not relevant (judge the calls alone: drop "
            f"retrieved_contexts)")


def _defaults(records: list[CaseRecord], ks: list[int], relevance: str) -> list[str]:
    """The default metrics for these records: with the metrics over calls when some case has calls.
    """
    hops = any(p.hop is not None for r in records for p in r.reference_contexts)
    return default_rag_metrics(ks, relevance, calls=any(r.calls for r in records), hops=hops)


def checked_cutoffs(k: int | Iterable[int] | None, unscorable: str, incomplete: str) -> list[int]:
    """``evaluate_rag``'s cutoffs (default 1, 3, 5, 10), sorted; bad cutoffs or policies raise (one
    check for both engines: :func:`rankwise.spark.rag.evaluate_rag` calls it too).

    Example:
        >>> checked_cutoffs([10, 1, 5], "zero", "skip")
        [1, 5, 10]
    """
    for name, value in (("unscorable", unscorable), ("incomplete", incomplete)):
        if value not in ("zero", "skip"):
            raise InputError(f"{name} must be 'zero' or 'skip', not {value!r}", field=name)
    k = DEFAULT_KS if k is None else k
    ks = [k] if isinstance(k, int) else sorted({int(x) for x in k})
    if not ks or min(ks) < 1:
        raise InputError("cutoffs k must be integers >= 1", field="k")
    return ks


def _cases_left_out(records: list, relevance: str, testset: Any, unscorable: str, incomplete: str
                    ) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """Which cases enter the means: the unscorable and the incomplete cases (id -> why) and the ids
    left out of the means under the ``skip`` policies; no scorable case at all, or no chunk this
    source could judge (:func:`rankwise.relevance.diagnose.all_missing`), raises."""
    unscorable_cases: dict[str, str] = {}
    incomplete_cases: dict[str, str] = {}
    for r in records:
        status = r.status.get(relevance, "ok")
        if status.startswith("unscorable"):
            unscorable_cases[r.id] = status.split(": ", 1)[1]
        elif status.startswith("incomplete"):
            incomplete_cases[r.id] = status.split(": ", 1)[1]
    if len(unscorable_cases) == len(records):
        failed = retrieval_failures(records)
        if len(failed) == len(records):  # nothing was retrieved: the ground truth is not what to fix
            case, error = next(iter(failed.items()))
            raise InputError(f"no case can be scored: the retriever failed on every case (case {case!r}: {error}); "
                             "fix the retriever and run it again", source=testset if isinstance(testset, (str, PathLike))
                             else None, field="retrieval")
        raise none_scorable(unscorable_cases, relevance, testset)
    cannot = all_missing(records, relevance)  # every mean would be 0 for want of verdicts: stop, say why
    if cannot:
        raise InputError(cannot, source=testset if isinstance(testset, (str, PathLike)) else None,
                         field="retrieved_contexts")
    skip = {r.id for r in records if left_out(r.status.get(relevance, "ok"), unscorable, incomplete)}
    return unscorable_cases, incomplete_cases, skip


def retrieval_failures(records: Any) -> dict[str, str]:
    """Case id -> the error of each case whose retrieval failed (``run-adapter`` records keep it in
    ``extra["retrieval"]["status"]``).

    Example:
        >>> from rankwise.data.records import CaseRecord
        >>> retrieval_failures(
        ...     [CaseRecord("q", extra={"retrieval": {"status": "failed: ValueError: boom"}})]
        ... )
        {'q': 'ValueError: boom'}
    """
    out = {}
    for r in records:
        status = ((getattr(r, "extra", None) or {}).get("retrieval") or {}).get("status")
        if isinstance(status, str) and status.startswith("failed"):
            out[r.id] = status.split(": ", 1)[1] if ": " in status else status
    return out


def left_out(status: str, unscorable: str, incomplete: str) -> bool:
    """Whether a case of this status stays out of the means (both engines ask here).
    ``unscorable="skip"`` leaves out a case without ground truth (an unanswerable question:
    unjudged, as trec_eval leaves out queries without judgements) but not one whose retriever
    returned nothing, which has ground truth and scores 0 under either policy: a retriever that
    finds nothing is not rewarded for it.

    Example:
        >>> [
        ...     left_out(s, "skip", "zero")
        ...     for s in (
        ...         "ok",
        ...         "unscorable: no ground truth",
        ...         "unscorable: no retrieved chunks",
        ...         "incomplete: 1 failed verdict",
        ...     )
        ... ]
        [False, True, False, False]
    """
    kind, _, why = status.partition(": ")
    if kind == "unscorable":
        return unscorable == "skip" and why != NO_CHUNKS
    return kind == "incomplete" and incomplete == "skip"


def no_match_summary(records: list, relevance: str, id_field: str | None) -> dict:
    """``{"no_match": sentence}`` when ``relevance`` verdicts matched nothing for a reason a user
    can fix (:func:`rankwise.relevance.diagnose.no_match`), else ``{}``: printed under the table,
    kept in the JSON summary, and warned once per system by compare-rag, gate and sweep."""
    note = no_match(records, relevance, id_field)
    return {"no_match": note} if note else {}


def verdict_counts(records, relevance: str) -> dict[str, int]:
    """Chunks whose ``relevance`` verdict is ok, failed or missing, over ``records``."""
    counts = {"ok": 0, "failed": 0, "missing": 0}
    for r in records:
        for c in r.chunks:
            v = c.verdicts.get(relevance)
            key = "missing" if v is None else v.status
            counts[key] = counts.get(key, 0) + 1
    return counts


def rag_summary(n_cases: int, relevance: str, n_scored: int, unscorable_cases: dict, incomplete_cases: dict,
                unscorable: str, incomplete: str, r_basis: str, stored: bool, counts: dict[str, int],
                **params) -> dict:
    """The summary of an ``evaluate_rag`` result (the Spark engine builds the same from collected
    counts)."""
    basis = R_BASIS_TEXT.get(r_basis, r_basis)
    kept = {k: v for k, v in params.items() if v is not None}
    if relevance != "span":
        kept.pop("min_overlap", None)
    if relevance != "fuzzy":
        kept.pop("threshold", None)
    if relevance not in ("containment", "fuzzy"):
        kept.pop("min_evidence_chars", None)
    if relevance != "ids":
        kept.pop("id_field", None)
        kept.pop("relevance_level", None)
    return {
        "relevance": relevance,
        "cases": n_cases,
        "evaluated": n_scored,
        "unscorable": len(unscorable_cases),
        "unscorable_cases": unscorable_cases,
        "unscorable_treatment": unscorable_treatment(unscorable_cases, unscorable),
        "incomplete": len(incomplete_cases),
        "incomplete_cases": incomplete_cases,
        "incomplete_treatment": ("failed/missing verdicts counted as not relevant; the case stays in the means"
                                 if incomplete == "zero" else "left out of the means"),
        "verdicts": counts,
        "r_basis": r_basis,
        "recall_basis": basis,
        "verdicts_from": "stored in the records" if stored else "judged now",
        "parameters": kept,
        "notes": [ACP_NOTE],
    }


def unscorable_treatment(unscorable_cases: dict[str, str], unscorable: str) -> str:
    """How the unscorable cases were treated, in words, for the reasons present.

    Example:
        >>> unscorable_treatment({"q1": "no ground truth"}, "skip")
        'left out of the retrieval means, as trec_eval leaves out unjudged queries (--unscorable zero scores them 0)'
    """
    zero = "scored 0 on every metric and kept in the means (docs/context-metrics.md)"
    if unscorable == "zero":
        return zero
    reasons = set(unscorable_cases.values())
    skipped = ("left out of the retrieval means, as trec_eval leaves out unjudged queries (--unscorable zero "
               "scores them 0)")
    if NO_CHUNKS not in reasons:
        return skipped
    if reasons == {NO_CHUNKS}:
        return zero
    return f"no ground truth: {skipped}; {NO_CHUNKS}: {zero}"


def none_scorable(reasons_by_case: dict[str, str], relevance: str, testset: Any = None) -> InputError:
    """The error when no case can be scored: names the field that is missing from every case (a null
    or empty ``reference_contexts``) in the file's words, else the reasons."""
    reasons = sorted(set(reasons_by_case.values()))
    source = testset if isinstance(testset, (str, PathLike)) else None
    if relevance in TEXT_SOURCES and reasons == ["no ground truth"]:
        n = len(reasons_by_case)
        every = "the case's" if n == 1 else f"all {n} cases'"
        return InputError(f"no case can be scored with relevance {relevance!r}: {every} reference_contexts "
                          "are null, empty or absent (the passages a relevant chunk must contain)",
                          source=source, field="reference_contexts")
    return InputError(f"no case can be scored with relevance {relevance!r}: "
                      f"{unscorable_reasons(reasons_by_case, relevance)}", source=source, field="relevance")
