"""Unanswerable questions as a class: can the retriever's top score tell them from answerable ones?

A case without ground truth (no reference passage or id) is an *unanswerable* question:
``evaluate_rag`` leaves it out of the retrieval means by default (``--unscorable skip``, as
trec_eval leaves out unjudged
queries). What such cases can still measure is whether the pipeline could *abstain* on them: the top
retrieval score of each case (the highest ``score`` among its chunks; a case with no chunk has none
and is taken as the lowest) is read as a confidence, higher meaning more confident. The view gives

- the AUROC of that score for answerable against unanswerable cases: the chance that a random
  answerable case scores higher than a random unanswerable one (ties count half). 0.5 is chance;
  below 0.5 the scores rank the other way round (a distance, where lower is closer?). Undefined, and
  said so, when one class is empty or no chunk carries a score.
- for each share of unanswerables (50%, 80%, 90% by default), the threshold T such that returning
  nothing when the top score is <= T silences at least that share of the unanswerable cases, and the
  share of answerable cases silenced with them (the loss).

Example:
    >>> view = no_answer_view({"a1": 0.9, "a2": 0.7, "a3": 0.4}, {"u1": 0.5, "u2": 0.3})
    >>> view.auroc, view.thresholds[0]
    (0.8333333333333334, {'share': 0.5, 'threshold': 0.3, 'unanswerable_silenced': 0.5, 'answerable_lost': 0.0})
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NoAnswerView", "no_answer_view", "no_answer_from_records", "with_no_answer", "top_scores", "auroc", "SHARES"]

SHARES = (0.5, 0.8, 0.9)


@dataclass
class NoAnswerView:
    """How well the top retrieval score separates answerable from unanswerable cases.

    Attributes:
        answerable: number of cases with ground truth.
        unanswerable: number of cases without; ``unanswerable_cases`` lists their ids.
        auroc: the AUROC of the top score (answerable = positive), None when undefined.
        auroc_undefined: why the AUROC is undefined (None when it is defined).
        thresholds: per share: the threshold, the share of unanswerables silenced and of answerables
            lost.
        unscored: cases that have chunks but no chunk score (their top score is unknown).
    """

    answerable: int
    unanswerable: int
    unanswerable_cases: list[str] = field(default_factory=list)
    auroc: float | None = None
    auroc_undefined: str | None = None
    thresholds: list[dict[str, float]] = field(default_factory=list)
    unscored: int = 0

    def to_json(self) -> dict[str, Any]:
        """The view as plain JSON (``summary["no_answer"]`` of ``eval-rag --format json``)."""
        out: dict[str, Any] = {"answerable": self.answerable, "unanswerable": self.unanswerable,
                               "unanswerable_cases": list(self.unanswerable_cases), "auroc": self.auroc}
        if self.auroc_undefined:
            out["auroc_undefined"] = self.auroc_undefined
        out["thresholds"] = [{k: (v if math.isfinite(v) else None) for k, v in t.items()} for t in self.thresholds]
        if self.unscored:
            out["unscored"] = self.unscored
        out["score"] = "top retrieval score of a case; returning nothing when it is <= threshold"
        return out


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """P(positive > negative) + P(tie) / 2 over all pairs (the Mann-Whitney AUC); None when a class
    is empty.

    Example:
        >>> auroc([0.9, 0.5], [0.5, 0.1]), auroc([1.0], [])
        (0.875, None)
    """
    if not positive or not negative:
        return None
    wins = 0.0
    for p in positive:
        for n in negative:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positive) * len(negative))


def _threshold_row(share: float, answerable: Sequence[float], unanswerable: Sequence[float]) -> dict[str, float]:
    """The lowest threshold silencing at least ``share`` of the unanswerables, and what it costs."""
    ordered = sorted(unanswerable)
    k = max(1, math.ceil(share * len(ordered) - 1e-9))
    t = ordered[k - 1]
    silenced = sum(1 for u in ordered if u <= t) / len(ordered)
    lost = sum(1 for a in answerable if a <= t) / len(answerable) if answerable else 0.0
    return {"share": share, "threshold": t, "unanswerable_silenced": silenced, "answerable_lost": lost}


def no_answer_view(answerable: Mapping[str, float | None], unanswerable: Mapping[str, float | None],
                   shares: Sequence[float] = SHARES) -> NoAnswerView:
    """The view from each case's top score (``-inf``: no chunk; None: chunks without a score).

    Example:
        >>> no_answer_view({}, {"u1": 0.2}).auroc_undefined
        'no answerable case: the score has only one class to rank'
    """
    unscored = sum(1 for v in [*answerable.values(), *unanswerable.values()] if v is None)
    pos = [float(v) for v in answerable.values() if v is not None]
    neg = [float(v) for v in unanswerable.values() if v is not None]
    view = NoAnswerView(len(answerable), len(unanswerable), list(unanswerable), unscored=unscored)
    if not answerable or not unanswerable:
        view.auroc_undefined = (f"no {'answerable' if not answerable else 'unanswerable'} case: the score has "
                                "only one class to rank")
        return view
    if not any(math.isfinite(v) for v in [*pos, *neg]):
        view.auroc_undefined = "no retrieved chunk carries a score (the retriever's similarity)"
        return view
    if not pos or not neg:
        view.auroc_undefined = (f"no {'answerable' if not pos else 'unanswerable'} case has a scored chunk: the "
                                "score has only one class to rank")
        return view
    view.auroc = auroc(pos, neg)
    view.thresholds = [_threshold_row(s, pos, neg) for s in shares]
    return view


def top_scores(records: Sequence[Any]) -> dict[str, float | None]:
    """Each case's top retrieval score: the highest chunk ``score``; ``-inf`` with no chunk, None
    when its chunks carry no score.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord
        >>> top_scores(
        ...     [
        ...         CaseRecord(
        ...             "q", chunks=[ChunkRecord(rank=1, score=0.4), ChunkRecord(rank=2, score=0.6)]
        ...         ),
        ...         CaseRecord("e"),
        ...     ]
        ... )
        {'q': 0.6, 'e': -inf}
    """
    out: dict[str, float | None] = {}
    for r in records:
        scores = [c.score for c in r.chunks if c.score is not None]
        out[r.id] = max(scores) if scores else (None if r.chunks else -math.inf)
    return out


def no_answer_from_records(records: Sequence[Any], relevance: str,
                           shares: Sequence[float] = SHARES) -> NoAnswerView | None:
    """The view over records judged under ``relevance``, or None when no case lacks ground truth
    (the records' status ``unscorable: no ground truth``, as ``evaluate_rag`` sets it).

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = evaluate_rag(
        ...     [
        ...         {
        ...             "id": "a",
        ...             "retrieved_contexts": [{"text": "alpha", "score": 0.9}],
        ...             "reference_contexts": ["alpha"],
        ...         },
        ...         {"id": "u", "retrieved_contexts": [{"text": "beta", "score": 0.2}]},
        ...     ],
        ...     k=1,
        ... )
        >>> no_answer_from_records(r.records, "containment").auroc
        1.0
    """
    unanswerable = {r.id for r in records if r.status.get(relevance) == "unscorable: no ground truth"}
    if not unanswerable:
        return None
    tops = top_scores(records)
    return no_answer_view({q: v for q, v in tops.items() if q not in unanswerable},
                          {q: v for q, v in tops.items() if q in unanswerable}, shares)


def with_no_answer(result: Any, shares: Sequence[float] = SHARES) -> Any:
    """``result`` (an ``evaluate_rag`` result) with ``summary["no_answer"]`` set when its test set
    has unanswerable cases: what ``eval-rag`` prints under its table and in its JSON.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = with_no_answer(evaluate_rag([{"id": "a", "retrieved_contexts": ["alpha"],
        ...                                   "reference_contexts": ["alpha"]}], k=1))
        >>> "no_answer" in r.summary
        False
    """
    view = no_answer_from_records(result.records, result.relevance, shares)
    if view is not None:
        result.summary["no_answer"] = view.to_json()
    return result
