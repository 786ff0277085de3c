"""Utility verdicts (eRAG, Salemi & Zamani 2024): a chunk is as relevant as the answer the generator
gives from that chunk alone.

For every retrieved chunk with text, the generator answers the question from that chunk only
(:func:`utility_requests`); the answer's score against the reference (token F1, exact match, or an
LLM correctness verdict, computed by the caller) becomes the chunk's verdict under the source
``utility`` (:func:`attach_utility`): binary (score >= ``threshold``), or graded 0-3 (``round(3 *
score)``, relevant from ``relevant_from``). The verdicts are stored like any pooled source (human,
llm): R is the number of chunks judged useful, so every metric — graded ones and K past the list
length included — reads them (``eval-rag --relevance utility``, ``calibrate --relevance utility``).

Example:
    >>> from rankwise.data.records import CaseRecord, ChunkRecord
    >>> rec = CaseRecord(
    ...     "q",
    ...     question="Q?",
    ...     reference="Paris",
    ...     chunks=[ChunkRecord(rank=1, text="Rome."), ChunkRecord(rank=2, text="Paris.")],
    ... )
    >>> attach_utility([rec], {"q\\x1f1": 0.0, "q\\x1f2": 1.0}, threshold=0.5)
    {'verdicts': 2, 'useful': 1, 'failed': 0}
    >>> rec.verdicts("utility"), rec.truth["utility"]["n_relevant"]
    ([0, 1], 1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rankwise.errors import InputError

__all__ = ["utility_requests", "attach_utility", "request_id", "SOURCE"]

SOURCE = "utility"


def request_id(case_id: str, rank: int) -> str:
    """The id of one chunk's request: ``<case id>\\x1f<rank>``.

    Example:
        >>> request_id("q1", 3)
        'q1\\x1f3'
    """
    return f"{case_id}\x1f{rank}"


def utility_requests(records: Sequence[Any], prompt: Any, k: int | None = None) -> list[Any]:
    """One answer request per chunk (top ``k``, all by default) that has text, of every case with a
    question and a reference: the question and that chunk alone.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord
        >>> from rankwise.llm.generate import load_gen_prompt
        >>> rec = CaseRecord(
        ...     "q",
        ...     question="Q?",
        ...     reference="A",
        ...     chunks=[ChunkRecord(rank=1, text="x"), ChunkRecord(rank=2)],
        ... )
        >>> [r.id for r in utility_requests([rec], load_gen_prompt("answer"))]
        ['q\\x1f1']
    """
    from rankwise.llm.generate import GenRequest

    out = []
    for r in records:
        if not r.question or not r.reference:
            continue
        for c in (r.chunks[:k] if k is not None else r.chunks):
            if c.text:
                out.append(GenRequest(request_id(r.id, c.rank), prompt.render_answer(r.question, [c.text])))
    return out


def attach_utility(records: Sequence[Any], scores: Mapping[str, float | None], *, threshold: float = 0.5,
                   graded: bool = False, relevant_from: int = 2, errors: Mapping[str, str] | None = None,
                   answers: Mapping[str, str | None] | None = None, meta: Mapping[str, Any] | None = None,
                   source: str = SOURCE) -> dict[str, int]:
    """Write ``chunk.verdicts[source]`` from per-chunk answer scores (``{request_id: score}``);
    chunks with no score get a ``failed`` verdict with the error (``errors``) or why; then each
    case's status and its pooled ground truth. Returns counts: verdicts, useful, failed."""
    from rankwise.data.records import Verdict
    from rankwise.relevance.truth import case_status, pooled_truth

    if not 0.0 <= threshold <= 1.0:
        raise InputError(f"--threshold must be in [0, 1], got {threshold}", field="threshold")
    counts = {"verdicts": 0, "useful": 0, "failed": 0}
    for r in records:
        for c in r.chunks:
            rid = request_id(r.id, c.rank)
            if rid not in scores and not (errors and rid in errors):
                if not c.text:
                    why = "no text for the chunk (only an id)"
                elif not r.question or not r.reference:
                    why = "no question or reference answer in the case"
                else:
                    why = "not asked (past -k)"
                c.verdicts[source] = Verdict(status="failed", error=why, meta=dict(meta or {}))
                counts["failed"] += 1
                continue
            score = scores.get(rid)
            m = dict(meta or {})
            if answers and answers.get(rid) is not None:
                m["answer"] = answers[rid]
            if score is None:
                c.verdicts[source] = Verdict(status="failed", error=(errors or {}).get(rid, "no answer score"),
                                             meta=m)
                counts["failed"] += 1
                continue
            m["answer_score"] = score
            if graded:
                grade = int(round(3 * score))
                verdict = int(grade >= relevant_from)
            else:
                grade, verdict = None, int(score >= threshold)
            c.verdicts[source] = Verdict(verdict=verdict, grade=grade,
                                         reason=f"answer from this chunk alone scores {score:.3f}", meta=m)
            counts["verdicts"] += 1
            counts["useful"] += verdict
        r.status[source] = case_status(r, source)
        r.truth[source] = pooled_truth(r, source).to_dict()
    return counts
