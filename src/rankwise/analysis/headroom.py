"""Headroom: what each fix could buy (docs/failures.md, "Headroom").

For a system evaluated under one verdict source, per metric at K:

- **today** — the mean as evaluated;
- **perfect reranker** — the mean after putting the same retrieved chunks in the best order (each
  case's relevant chunks first, highest grade first, and among them the chunk that finds the most
  reference items not yet found), scored by the same engine: what any reranker over the retrieved
  top N can reach at most;
- **first-stage ceiling** — the share of cases with nothing relevant in the whole list (depth N),
  which no reranker can fix;
- **chunking loss** — the share of cases whose reference passage was retrieved cut apart (failure
  class ``split by chunking``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.analysis.failures import FailureClasses, relevant_ranks
from rankwise.metrics.engine import aggregate_columns, evaluate_matrix
from rankwise.metrics.matrix import RelevanceMatrix, verdict_grade

__all__ = ["Headroom", "headroom", "ideal_order", "best_order"]


def ideal_order(record: Any, source: str) -> Any:
    """A copy of ``record`` with its chunks in the best order for ``source`` (ranks renumbered 1, 2
    ...); the record and its chunks are copied shallowly (verdicts, texts and ground truth shared,
    never written), the original left as it was.

    Relevant chunks first: highest grade first, then the chunk finding the most reference items not
    found by a chunk before it, then the original order; the rest keep their order after them.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> r = CaseRecord("q", chunks=[ChunkRecord(rank=1, id="a", verdicts={"llm": Verdict(0)}),
        ...                             ChunkRecord(rank=2, id="b", verdicts={"llm": Verdict(1)})])
        >>> [(c.rank, c.id) for c in ideal_order(r, "llm").chunks]
        [(1, 'b'), (2, 'a')]
        >>> [(c.rank, c.id) for c in r.chunks]  # the original keeps its order and ranks
        [(1, 'a'), (2, 'b')]
    """
    return _reordered(record, best_order(record, source))


def best_order(record: Any, source: str) -> list[int]:
    """The indices of ``record``'s chunks in :func:`ideal_order`'s order.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> chunks = [ChunkRecord(rank=1, verdicts={"llm": Verdict(0)}),
        ...           ChunkRecord(rank=2, verdicts={"llm": Verdict(1)})]
        >>> best_order(CaseRecord("q", chunks=chunks), "llm")
        [1, 0]
    """
    grades = [verdict_grade(c.verdicts.get(source), source) for c in record.chunks]
    found = record.passages_found.get(source) or [[] for _ in record.chunks]
    left = [i for i, g in enumerate(grades) if g > 0]
    order: list[int] = []
    seen: set = set()
    while left:
        best = max(left, key=lambda i: (grades[i], len(set(found[i]) - seen), -i))
        order.append(best)
        seen.update(found[best])
        left.remove(best)
    return order + [i for i, g in enumerate(grades) if g <= 0]


def _reordered(record: Any, order: list[int], *, renumber: bool = True) -> Any:
    """A shallow copy of ``record`` with its chunks in ``order``, ranks renumbered (``renumber``;
    without it the chunks themselves are shared, their ``rank`` as it was: the matrix reads the
    list's order, never a chunk's rank)."""
    # shallow copies: only the order and the ranks change, the chunks' verdicts and texts are
    # shared, never written (a deep copy of every record was half of eval-rag's time on large test
    # sets)
    new = _shallow(record)
    if not renumber:
        new.chunks = [record.chunks[i] for i in order]
    else:
        new.chunks = [_shallow(record.chunks[i]) for i in order]
        for rank, chunk in enumerate(new.chunks, start=1):
            chunk.rank = rank
    new.passages_found = {s: [lists[i] for i in order] if len(lists) == len(order) else lists
                          for s, lists in record.passages_found.items()}
    return new


_SLOTS: dict[type, tuple[str, ...]] = {}  # a slots type -> every slot, its bases' included


def _shallow(obj: Any) -> Any:
    """A shallow copy of a record dataclass (its fields shared), without ``copy.copy``'s generic
    machinery."""
    kind = type(obj)
    new = object.__new__(kind)
    if hasattr(obj, "__dict__"):
        new.__dict__.update(obj.__dict__)
        return new
    names = _SLOTS.get(kind)
    if names is None:  # a slots dataclass (ChunkRecord: its own slots and its base Chunk's)
        names = _SLOTS[kind] = tuple(n for k in kind.__mro__ for n in getattr(k, "__slots__", ()))
    for name in names:
        setattr(new, name, getattr(obj, name))
    return new


@dataclass
class Headroom:
    """Per metric: today's mean and a perfect reranker's; the shares no reranker can fix.

    Attributes:
        source: the verdict source.
        depth: N, the longest retrieved list (what a reranker reorders).
        today: metric -> mean as evaluated.
        reranked: metric -> mean with every list in its best order.
        nothing_relevant: share of evaluated cases with no relevant chunk in the whole list.
        split_by_chunking: share of evaluated cases in failure class ``split by chunking`` (None:
            not classified).
        cases: evaluated cases.
    """

    source: str
    depth: int
    today: dict[str, float] = field(default_factory=dict)
    reranked: dict[str, float] = field(default_factory=dict)
    nothing_relevant: float = 0.0
    split_by_chunking: float | None = None
    cases: int = 0

    def sentence(self, metric: str | None = None) -> str | None:
        """One sentence a lead can act on, for ``metric`` (default: the first nDCG, else the first
        metric); None when no metric of one ranked list was asked for (metrics over several
        retrieval calls only)."""
        shown = [m for m in self.today if m in self.reranked]
        if not shown:
            return None
        name = metric or next((m for m in shown if m.startswith("ndcg")), shown[0])
        if self.reranked[name] > self.today[name] + 1e-12:
            text = (f"a reranker over your top {self.depth} could lift {name} from {self.today[name]:.2f} to at most "
                    f"{self.reranked[name]:.2f}")
        else:
            text = f"no reranker over your top {self.depth} can lift {name} ({self.today[name]:.2f}: already the best order)"
        text += (f"; {self.nothing_relevant:.0%} of questions have nothing relevant in the top {self.depth}, which no "
                 f"reranker can fix")
        if self.split_by_chunking:
            text += f"; {self.split_by_chunking:.0%} have their passage split by chunking"
        return text

    def to_json(self) -> dict:
        return {"source": self.source, "depth": self.depth, "cases": self.cases, "today": dict(self.today),
                "perfect_reranker": dict(self.reranked), "nothing_relevant_in_list": self.nothing_relevant,
                "split_by_chunking": self.split_by_chunking, "sentence": self.sentence()}


def headroom(result: Any, *, classes: FailureClasses | None = None,
             metrics: Sequence[str] | None = None) -> Headroom:
    """Headroom of an ``evaluate_rag`` result (module docstring), over the cases in its means.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = evaluate_rag([{"id": "q", "retrieved_contexts": ["Rome.", "Paris is the capital."],
        ...                    "reference_contexts": ["paris is the capital"]}], k=1)
        >>> h = headroom(r)
        >>> h.today["ndcg@1"], h.reranked["ndcg@1"]
        (0.0, 1.0)
    """
    source = result.relevance
    scored = [r for r in result.records if r.id in result.per_query]
    # the metrics of one ranked list (a reorder says nothing of metrics over several retrieval
    # calls), defined today
    measures = [m for m in result.measures if (metrics is None or m.name in metrics)
                and "records" not in m.metric.requires and result.mean.get(m.name) is not None]
    params = result.summary.get("parameters") or {}
    best = _reranked_means(result, scored, measures, params) if measures else {}
    n = len(scored)
    empty = sum(1 for r in scored if not relevant_ranks(r, source))
    split = None
    if classes is not None:
        split = sum(1 for r in scored if classes.by_case.get(r.id) == "split by chunking") / n if n else 0.0
    return Headroom(source, max((len(r.chunks) for r in scored), default=0),
                    {m.name: float(result.mean[m.name]) for m in measures},
                    {m.name: float(best[m.name]) for m in measures if best[m.name] is not None},
                    empty / n if n else 0.0, split, n)


def _reranked_means(result: Any, scored: list, measures: list, params: dict) -> dict[str, float | None]:
    """Each measure's mean with every case in its best order. A case already in its best order keeps
    today's per-case values; only the cases a reranker would move are scored again, and the engine's
    own aggregation runs over both (a case's values never depend on the other rows of the matrix:
    tests/analysis/test_failures.py holds that for every metric)."""
    source = result.relevance
    orders = [best_order(r, source) for r in scored]
    moved = [i for i, o in enumerate(orders) if o != list(range(len(o)))]
    per_query = result.per_query
    values = np.column_stack([per_query.column(m.name) for m in measures])
    row = {q: j for j, q in enumerate(per_query.query_ids)}
    rows = np.array([row[r.id] for r in scored], dtype=np.int64)
    values = values[rows] if len(rows) else values[:0]
    if moved:
        best = [_reordered(scored[i], orders[i], renumber=False) for i in moved]
        matrix = RelevanceMatrix.from_records(best, source, id_field=params.get("id_field"),
                                              relevance_level=params.get("relevance_level", 1))
        values[moved] = evaluate_matrix(matrix, measures).per_query.values
    return aggregate_columns(values, measures)[0]
