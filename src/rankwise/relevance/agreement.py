"""How far two verdict sources agree on the same chunks (human vs LLM judge, two LLM modes, text
match).

Per pair of sources over the per-case records: accuracy, Cohen's kappa (with a 95% interval), the
confusion matrix, each source's share of relevant verdicts, ``b``'s precision and recall taking
``a`` as the truth, the breakdown by the human type label (``answer``, ``partial``, ``topic_only``,
``supports_wrong_answer``, ``irrelevant``), and every chunk the two disagree on with both reasons.
When both sources give grades, the quadratic-weighted kappa of the grades too.

Only chunks where both sources have a verdict (status ``ok``) are compared; the others are counted
by reason, never silently left out. Published LLM-human agreement on single relevance labels is
kappa 0.3-0.65, so a judge is worth auditing before its scores are trusted.

Example:
    >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
    >>> rec = CaseRecord(
    ...     "q1",
    ...     chunks=[
    ...         ChunkRecord(rank=i + 1, verdicts={"human": Verdict(h), "llm": Verdict(l)})
    ...         for i, (h, l) in enumerate([(1, 1), (0, 1), (1, 1), (0, 0)])
    ...     ],
    ... )
    >>> a = agreement([rec], "human", "llm")
    >>> a.accuracy, a.kappa, a.confusion
    (0.75, 0.5, [[1, 1], [0, 2]])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rankwise.errors import InputError

__all__ = ["Agreement", "Disagreement", "TypeAgreement", "agreement", "cohen_kappa", "weighted_kappa"]


def cohen_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa of paired binary (or categorical) labels; None when undefined (one class only).

    Example:
        >>> cohen_kappa([(1, 1), (0, 1), (1, 1), (0, 0)])
        0.5
    """
    return weighted_kappa(pairs, weights=None)


def weighted_kappa(pairs: Sequence[tuple[int, int]], weights: str | None = "quadratic") -> float | None:
    """Cohen's kappa with ``linear`` or ``quadratic`` disagreement weights (None: unweighted), as
    ``sklearn.metrics.cohen_kappa_score`` with ``labels=range(min, max + 1)``; None when the
    expected disagreement is 0.

    Example:
        >>> round(weighted_kappa([(3, 3), (2, 3), (0, 1), (1, 0), (2, 2)]), 4)
        0.7541
    """
    n = len(pairs)
    if n == 0:
        return None
    seen = {x for p in pairs for x in p}
    labels = list(range(min(seen), max(seen) + 1))  # grades: distances by value, unseen grades included
    idx = {v: i for i, v in enumerate(labels)}
    k = len(labels)
    observed = [[0.0] * k for _ in range(k)]
    for x, y in pairs:
        observed[idx[x]][idx[y]] += 1
    row = [sum(r) for r in observed]
    col = [sum(observed[i][j] for i in range(k)) for j in range(k)]

    def w(i: int, j: int) -> float:
        if weights is None:
            return 0.0 if i == j else 1.0
        d = abs(i - j) if weights == "linear" else (i - j) ** 2
        return float(d)

    num = sum(w(i, j) * observed[i][j] for i in range(k) for j in range(k))
    den = sum(w(i, j) * row[i] * col[j] / n for i in range(k) for j in range(k))
    if den == 0:
        return None
    return 1.0 - num / den


def _kappa_interval(po: float, pe: float, n: int) -> tuple[float, float] | None:
    """95% interval of an unweighted kappa (large-sample standard error, Cohen 1960)."""
    if n == 0 or pe >= 1:
        return None
    se = math.sqrt(po * (1 - po) / (n * (1 - pe) ** 2))
    kappa = (po - pe) / (1 - pe)
    return (kappa - 1.96 * se, kappa + 1.96 * se)


@dataclass
class Disagreement:
    """One chunk the two sources judge differently, with both reasons."""

    case_id: str
    rank: int
    chunk_id: str | None
    text: str | None
    a: int
    b: int
    a_reason: str | None
    b_reason: str | None
    type: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TypeAgreement:
    """Agreement on the chunks carrying one human type label."""

    type: str
    n: int
    agree: int
    a_relevant: int
    b_relevant: int

    @property
    def accuracy(self) -> float:
        return self.agree / self.n if self.n else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "n": self.n, "agree": self.agree, "accuracy": self.accuracy,
                "a_relevant": self.a_relevant, "b_relevant": self.b_relevant}


@dataclass
class Agreement:
    """Agreement of source ``b`` with source ``a`` over the chunks both judged.

    Attributes:
        n: chunks compared (both verdicts ok).
        skipped: chunks not compared, by reason (``"llm failed"``, ``"human missing"`` ...).
        confusion: ``[[a0 b0, a0 b1], [a1 b0, a1 b1]]`` (rows: ``a``'s verdict, columns: ``b``'s).
        kappa: Cohen's kappa, None when undefined (both sources give one class only).
        kappa_ci: its 95% interval.
        graded_kappa: quadratic-weighted kappa of the grades, when both sources give grades.
        by_type: per human type label (from ``a``, else ``b``), how often ``b`` agrees.
        disagreements: every chunk judged differently, in case and rank order.
    """

    a: str
    b: str
    n: int
    cases: int
    skipped: dict[str, int]
    confusion: list[list[int]]
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    graded_kappa: float | None
    graded_n: int
    by_type: list[TypeAgreement] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def agree(self) -> int:
        return self.confusion[0][0] + self.confusion[1][1]

    @property
    def accuracy(self) -> float | None:
        return self.agree / self.n if self.n else None

    @property
    def a_relevant_rate(self) -> float | None:
        return (self.confusion[1][0] + self.confusion[1][1]) / self.n if self.n else None

    @property
    def b_relevant_rate(self) -> float | None:
        return (self.confusion[0][1] + self.confusion[1][1]) / self.n if self.n else None

    @property
    def b_precision(self) -> float | None:
        """Of the chunks ``b`` calls relevant, the share ``a`` calls relevant."""
        d = self.confusion[0][1] + self.confusion[1][1]
        return self.confusion[1][1] / d if d else None

    @property
    def b_recall(self) -> float | None:
        """Of the chunks ``a`` calls relevant, the share ``b`` calls relevant."""
        d = self.confusion[1][0] + self.confusion[1][1]
        return self.confusion[1][1] / d if d else None

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "n": self.n, "cases": self.cases, "skipped": self.skipped,
                "accuracy": self.accuracy, "kappa": self.kappa,
                "kappa_ci": list(self.kappa_ci) if self.kappa_ci else None,
                "graded_kappa": self.graded_kappa, "graded_n": self.graded_n,
                "confusion": {"a0_b0": self.confusion[0][0], "a0_b1": self.confusion[0][1],
                              "a1_b0": self.confusion[1][0], "a1_b1": self.confusion[1][1]},
                "a_relevant_rate": self.a_relevant_rate, "b_relevant_rate": self.b_relevant_rate,
                "b_precision": self.b_precision, "b_recall": self.b_recall,
                "by_type": [t.to_dict() for t in self.by_type],
                "disagreements": [d.to_dict() for d in self.disagreements]}


def agreement(records: Sequence[Any], a: str = "human", b: str = "llm") -> Agreement:
    """Compare two verdict sources over per-case records (see the module doc).

    Raises :class:`~rankwise.errors.InputError` when a source is absent from the records or the two
    sources share no judged chunk.

    Example:
        >>> from rankwise.data.records import as_records
        >>> def chunk(rank, human, llm):
        ...     return {"rank": rank, "id": f"c{rank}", "verdicts": {"human": {"verdict": human},
        ...                                                          "llm": {"verdict": llm}}}
        >>> records = as_records(
        ...     [{"id": "q1", "chunks": [chunk(1, 1, 1), chunk(2, 0, 1), chunk(3, 0, 0)]}]
        ... )
        >>> a = agreement(records, "human", "llm")
        >>> a.n, a.confusion, [(d.case_id, d.rank) for d in a.disagreements]
        (3, [[1, 1], [0, 1]], [('q1', 2)])
    """
    if a == b:
        raise InputError(f"compare two different sources, got {a!r} twice", field="b")
    present: dict[str, None] = {}
    for r in records:
        for s in r.sources():
            present.setdefault(s, None)
    for name, src in (("a", a), ("b", b)):
        if src not in present:
            raise InputError(f"no {src!r} verdicts in the records (sources present: "
                             f"{', '.join(present) or 'none'})", field=name)
    skipped: Counter = Counter()
    confusion = [[0, 0], [0, 0]]
    graded: list[tuple[int, int]] = []
    types: dict[str, TypeAgreement] = {}
    disagreements: list[Disagreement] = []
    cases = 0
    for r in records:
        compared = False
        for c in r.chunks:
            va, vb = c.verdicts.get(a), c.verdicts.get(b)
            bad = False
            for src, v in ((a, va), (b, vb)):
                if v is None or v.status == "missing" or (v.status == "ok" and v.verdict is None):
                    skipped[f"{src} missing"] += 1
                    bad = True
                elif v.status != "ok":
                    skipped[f"{src} {v.status}"] += 1
                    bad = True
            if bad:
                continue
            compared = True
            x, y = int(va.verdict), int(vb.verdict)  # type: ignore[union-attr]
            confusion[x][y] += 1
            if va.grade is not None and vb.grade is not None:  # type: ignore[union-attr]
                graded.append((int(va.grade), int(vb.grade)))  # type: ignore[union-attr]
            label = va.type or vb.type or "(no type)"  # type: ignore[union-attr]
            t = types.setdefault(label, TypeAgreement(label, 0, 0, 0, 0))
            t.n += 1
            t.agree += x == y
            t.a_relevant += x
            t.b_relevant += y
            if x != y:
                disagreements.append(Disagreement(r.id, c.rank, c.id, c.text, x, y, va.reason, vb.reason,
                                                  va.type or vb.type))  # type: ignore[union-attr]
        cases += compared
    n = sum(map(sum, confusion))
    if n == 0:
        raise InputError(f"no chunk has an ok verdict from both {a!r} and {b!r} (not compared: "
                         f"{dict(skipped)})", field="b")
    pairs = [(i, j) for i in (0, 1) for j in (0, 1) for _ in range(confusion[i][j])]
    kappa = cohen_kappa(pairs)
    po = (confusion[0][0] + confusion[1][1]) / n
    pa1 = (confusion[1][0] + confusion[1][1]) / n
    pb1 = (confusion[0][1] + confusion[1][1]) / n
    pe = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    order = {t: i for i, t in enumerate(("answer", "partial", "topic_only", "supports_wrong_answer",
                                         "irrelevant"))}
    by_type = sorted(types.values(), key=lambda t: (order.get(t.type, len(order)), t.type))
    return Agreement(a=a, b=b, n=n, cases=cases, skipped=dict(sorted(skipped.items())), confusion=confusion,
                     kappa=kappa, kappa_ci=_kappa_interval(po, pe, n) if kappa is not None else None,
                     graded_kappa=weighted_kappa(graded) if graded else None, graded_n=len(graded),
                     by_type=by_type, disagreements=disagreements)
