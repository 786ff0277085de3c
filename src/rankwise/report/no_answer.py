"""The no-answer view in words (``eval-rag`` prints it under the table when a test set has
unanswerable questions; the JSON carries ``summary["no_answer"]``,
:mod:`rankwise.analysis.no_answer`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["no_answer_lines"]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def no_answer_lines(view: Mapping[str, Any]) -> list[str]:
    """Lines for a no-answer view (its JSON form): counts, AUROC or why it is undefined, and per
    share of unanswerables silenced the threshold and the answerables lost (shares with the same
    threshold merged).

    Example:
        >>> for line in no_answer_lines(
        ...     {
        ...         "answerable": 3,
        ...         "unanswerable": 2,
        ...         "auroc": 0.8333,
        ...         "thresholds": [
        ...             {
        ...                 "share": 0.5,
        ...                 "threshold": 0.3,
        ...                 "unanswerable_silenced": 0.5,
        ...                 "answerable_lost": 0.0,
        ...             },
        ...             {
        ...                 "share": 0.8,
        ...                 "threshold": 0.5,
        ...                 "unanswerable_silenced": 1.0,
        ...                 "answerable_lost": 1 / 3,
        ...             },
        ...             {
        ...                 "share": 0.9,
        ...                 "threshold": 0.5,
        ...                 "unanswerable_silenced": 1.0,
        ...                 "answerable_lost": 1 / 3,
        ...             },
        ...         ],
        ...     }
        ... ):
        ...     print(line)
        no-answer view: 2 unanswerable cases, 3 answerable; the top retrieval score as the signal
          AUROC 0.8333 (answerable scored above unanswerable; 0.5 is chance)
          to silence 50% of unanswerables: return nothing when the top score <= 0.3000 -> 50% silenced, 0% of answerables lost
          to silence 80%, 90% of unanswerables: return nothing when the top score <= 0.5000 -> 100% silenced, 33% of answerables lost
    """
    n_u, n_a = view.get("unanswerable", 0), view.get("answerable", 0)
    lines = [f"no-answer view: {n_u} unanswerable case{'s' if n_u != 1 else ''}, {n_a} answerable; the top "
             f"retrieval score as the signal"]
    if view.get("auroc") is None:
        lines.append(f"  AUROC undefined: {view.get('auroc_undefined') or 'one class only'}")
        return lines
    lines.append(f"  AUROC {view['auroc']:.4f} (answerable scored above unanswerable; 0.5 is chance)")
    merged: dict[Any, list[dict]] = {}
    for row in view.get("thresholds") or []:
        merged.setdefault(row["threshold"], []).append(row)
    for t, rows in merged.items():
        shares = ", ".join(_pct(r["share"]) for r in rows)
        cut = "when the retriever returns no chunk" if t is None else f"when the top score <= {t:.4f}"
        lines.append(f"  to silence {shares} of unanswerables: return nothing {cut} -> "
                     f"{_pct(rows[0]['unanswerable_silenced'])} silenced, {_pct(rows[0]['answerable_lost'])} of "
                     f"answerables lost")
    if view.get("unscored"):
        n = view["unscored"]
        lines.append(f"  {n} case{'s' if n != 1 else ''} with chunks but no chunk score left out of this view")
    return lines
