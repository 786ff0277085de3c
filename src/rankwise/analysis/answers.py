"""Answer scores: how good the generator's answer of each case is, the target that retrieval metrics
are calibrated against (docs/calibrate.md).

Scores come from exact match or token F1 of the ``response`` against the ``reference`` (SQuAD's
normalisation: lower case, punctuation and articles removed, whitespace collapsed), from a CSV/JSONL
of ``query_id, answer_score`` (human or LLM correctness labels), or are already in the records
(``answer_score`` with ``answer_score_source``).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankwise.errors import InputError

__all__ = ["normalize_answer", "exact_match", "token_f1", "score_answers", "read_answer_scores", "METHODS"]

METHODS = ("f1", "em")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles (a, an, the), whitespace collapsed (SQuAD's rule).

    Example:
        >>> normalize_answer("The  Eiffel Tower!")
        'eiffel tower'
    """
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised reference, else 0.0.

    Example:
        >>> exact_match("the Eiffel tower.", ["Eiffel Tower", "tour Eiffel"])
        1.0
    """
    refs = [references] if isinstance(references, str) else list(references)
    p = normalize_answer(prediction)
    return 1.0 if any(p == normalize_answer(r) for r in refs) else 0.0


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    """Best token-overlap F1 between the normalised prediction and a normalised reference.

    Example:
        >>> round(
        ...     token_f1("Paris, the capital of France", "Paris is the capital"), 4
        ... )  # P 2/4, R 2/3
        0.5714
    """
    refs = [references] if isinstance(references, str) else list(references)
    p = normalize_answer(prediction).split()
    best = 0.0
    for r in refs:
        g = normalize_answer(r).split()
        if not p or not g:
            best = max(best, float(p == g))
            continue
        common = sum((Counter(p) & Counter(g)).values())
        if common == 0:
            continue
        precision, recall = common / len(p), common / len(g)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def read_answer_scores(path: str | Path) -> dict[str, float]:
    """``{case_id: score}`` from a CSV (``query_id,answer_score``) or JSONL file of answer scores.
    """
    from rankwise.data.text import iter_json_lines

    p = Path(path)
    out: dict[str, float] = {}
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        rows = ((n, obj) for n, obj in iter_json_lines(p))
    else:
        import csv

        try:
            text = p.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read answer scores: {exc}", source=p) from None
        reader = csv.DictReader(text.splitlines())
        rows = ((i + 2, row) for i, row in enumerate(reader))
    for line, row in rows:
        qid = next((row[k] for k in ("query_id", "case_id", "id", "qid") if row.get(k) not in (None, "")), None)
        if qid is None:
            raise InputError("no case id (query_id, case_id or id)", source=p, line=line, field="query_id")
        raw = row.get("answer_score", row.get("score"))
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise InputError(f"answer_score must be a number, got {raw!r}", source=p, line=line,
                             field="answer_score") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"answer_score must be finite, got {raw!r}", source=p, line=line, field="answer_score")
        if str(qid) in out:
            raise InputError(f"case {qid!r} has two answer scores", source=p, line=line, field="query_id")
        out[str(qid)] = value
    return out


def score_answers(records: Sequence[Any], method: str = "f1", *, scores: dict[str, float] | None = None,
                  source: str | None = None) -> dict[str, int]:
    """Fill ``answer_score`` of every record (in place): from ``scores`` (``{case_id: score}``),
    else by ``method`` (``f1`` token F1, ``em`` exact match) of ``response`` against ``reference``.
    Records that already hold a score keep it unless ``scores`` gives one. Returns counts: scored,
    kept, missing.

    Example:
        >>> from rankwise.data.records import CaseRecord
        >>> recs = [CaseRecord("q", reference="Paris", response="It is Paris."), CaseRecord("r")]
        >>> score_answers(recs, "f1"), round(recs[0].answer_score, 4), recs[0].answer_score_source
        ({'scored': 1, 'kept': 0, 'missing': 1}, 0.5, 'token_f1')
    """
    if method not in METHODS:
        raise InputError(f"answer scoring method must be one of {', '.join(METHODS)}, not {method!r}",
                         field="method")
    counts = {"scored": 0, "kept": 0, "missing": 0}
    for rec in records:
        if scores is not None and rec.id in scores:
            rec.answer_score, rec.answer_score_source = scores[rec.id], source or "labels"
            counts["scored"] += 1
        elif rec.answer_score is not None:
            counts["kept"] += 1
        elif rec.response is not None and rec.reference is not None:
            fn = token_f1 if method == "f1" else exact_match
            value = fn(rec.response, rec.reference)
            rec.answer_score, rec.answer_score_source = value, "token_f1" if method == "f1" else "exact_match"
            counts["scored"] += 1
        else:
            counts["missing"] += 1
    return counts
