"""``evaluate_rag`` over columns, a block of cases at a time: the same result, in bounded memory.

:class:`RagColumns` takes each block of cases (:class:`~rankwise.data.testset_columns.CaseColumns`)
with its column verdicts, builds the matrix of the block's scored cases
(:func:`~rankwise.metrics.matrix_columns.matrix_from_columns`), measures it with the engine and
keeps per case only its status and its values (a case's values never depend on the other rows of
the matrix). :meth:`RagColumns.result` then does what :func:`~rankwise.metrics.rag.evaluate_rag`
does after judging: the statuses and policies, the summary, the warnings, and the means over the
scored cases in case-id byte order — the same digits. Whatever ``evaluate_rag`` would refuse or
explain (no case scorable, every verdict missing, nothing matched anywhere, a repeated case id, a
metric the columns cannot feed) makes :meth:`~RagColumns.result` return None: the caller runs
``evaluate_rag``, which says it.

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> from rankwise.relevance.column_sources import judge_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> rows = [{"id": "q1", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]},
    ...         {"id": "q2", "retrieved_context_ids": ["c"], "reference_context_ids": ["c"]}]
    >>> _ = path.write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> run = RagColumns("ids", ["mrr", "recall@1"])
    >>> for cases in iter_case_columns(path):
    ...     _ = run.add(cases, judge_columns(cases, "ids"))
    >>> run.result().mean
    {'mrr': 0.75, 'recall@1': 0.5}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from rankwise.data.checks import cutoffs_beyond_depth, repeated_ids_message
from rankwise.data.columns import arrow_strings, distinct_sorted, np_values
from rankwise.data.testset_columns import CaseColumns
from rankwise.errors import InputError, warn
from rankwise.metrics.engine import PerQuery, aggregate_columns, note_undefined
from rankwise.metrics.matrix_columns import matrix_from_columns
from rankwise.metrics.rag import RagResult, rag_summary
from rankwise.metrics.registry import Measure, parse_measures
from rankwise.relevance.column_verdicts import UNSCORABLE, ColumnVerdicts
from rankwise.relevance.truth import incomplete_words

__all__ = ["RagColumns", "BlockScores", "RunningMeans", "columns_measures", "case_values"]


def columns_measures(metrics: Iterable[str | Measure]) -> list[Measure] | None:
    """The measures parsed, or None when one needs what columns do not carry (the records: metrics
    over retrieval calls) or counts the matrix's own rows (``num_q``: a block is not the whole).

    Example:
        >>> [m.name for m in columns_measures(["mrr", "recall@5"])], columns_measures(["num_q"])
        (['mrr', 'recall@5'], None)
    """
    measures = parse_measures(metrics)
    if any("records" in m.metric.requires or m.metric.name == "num_q" for m in measures):
        return None
    return measures


def case_values(matrix, measures: list[Measure]) -> np.ndarray:
    """Each case's values (a row per matrix row, a column per measure): the per-query values of
    :func:`~rankwise.metrics.engine.evaluate_matrix`, without the block's own means.

    Example:
        >>> from rankwise.metrics.matrix import RelevanceMatrix
        >>> matrix = RelevanceMatrix.from_verdicts([[0, 1], [1, 0]])
        >>> case_values(matrix, parse_measures(["mrr"])).tolist()
        [[0.5], [1.0]]
    """
    values = np.empty((len(matrix.query_ids), len(measures)), dtype=np.float64)
    for j, measure in enumerate(measures):
        values[:, j] = measure(matrix)
    return values


class RunningMeans:
    """:func:`~rankwise.metrics.engine.aggregate_columns` over rows given a block at a time, in
    that order, without keeping them: each mean (or sum) is the same left-to-right sum carried from
    block to block; a geometric mean keeps its column.

    Example:
        >>> import numpy as np
        >>> run = RunningMeans(parse_measures(["mrr", "num_ret"]))
        >>> run.add(np.array([[1.0, 2.0], [0.5, 3.0]]))
        >>> run.add(np.array([[0.25, 1.0]]))
        >>> run.result()
        ({'mrr': 0.5833333333333334, 'num_ret': 6.0}, {})
    """

    def __init__(self, measures: list[Measure]):
        self.measures = measures
        self.sums: list[np.float64 | None] = [None] * len(measures)
        self.counts = [0] * len(measures)
        self.kept: dict[int, list[np.ndarray]] = {j: [] for j, m in enumerate(measures)
                                                  if m.metric.aggregate not in ("mean", "sum")}
        self.nan = [0] * len(measures)

    def add(self, values: np.ndarray) -> None:
        """Take the next rows (one column per measure)."""
        for j, measure in enumerate(self.measures):
            col = values[:, j]
            nan = np.isnan(col)
            if nan.any() and not measure.metric.undefined_is_nan:
                raise AssertionError(f"{measure.name} produced NaN")  # an engine bug, never user input
            self.nan[j] += int(nan.sum())
            if j in self.kept:
                self.kept[j].append(col)
                continue
            col = col[~nan]
            if len(col):
                carried = col if self.sums[j] is None else np.concatenate(([self.sums[j]], col))
                self.sums[j] = np.add.accumulate(carried)[-1]
                self.counts[j] += len(col)

    def result(self) -> tuple[dict[str, float | None], dict[str, int]]:
        """``aggregate_columns``' means and undefined counts."""
        mean: dict[str, float | None] = {}
        for j, measure in enumerate(self.measures):
            if j in self.kept:
                col = np.concatenate(self.kept[j]) if self.kept[j] else np.zeros(0)
                value = aggregate_columns(col[:, None], [measure])[0][measure.name]
            elif not self.counts[j]:
                value = None if measure.metric.undefined_when else 0.0
            elif measure.metric.aggregate == "sum":
                value = float(self.sums[j])
            else:
                value = float(self.sums[j] / self.counts[j])
            mean[measure.name] = value
        return mean, {m.name: n for m, n in zip(self.measures, self.nan, strict=True) if n}


@dataclass(eq=False)
class BlockScores:
    """What one block gave: its scored cases (indices into the block, in file order) and their
    values (one row each, one column per measure)."""

    scored: np.ndarray
    values: np.ndarray


class RagColumns:
    """``evaluate_rag``'s result gathered a block at a time (module docstring).

    Args:
        relevance: the verdict source (``ids`` or ``span``).
        metrics: metric names or measures.
        unscorable, incomplete: the case policies, as ``evaluate_rag``'s.
        params: the parameters the summary reports (``min_overlap``, ``threshold``, ``id_field``,
            ``relevance_level``, ``min_evidence_chars``), as ``evaluate_rag`` passes them to
            :func:`~rankwise.metrics.rag.rag_summary`.
    """

    def __init__(self, relevance: str, metrics: Iterable[str | Measure], *, unscorable: str = "skip",
                 incomplete: str = "zero", **params):
        measures = columns_measures(metrics)
        if measures is None:
            raise ValueError("a metric needs the records (metrics over retrieval calls) or counts the queries")
        self.relevance, self.measures = relevance, measures
        self.unscorable, self.incomplete, self.params = unscorable, incomplete, params
        self.ids: list[str] = []
        self.status: list[np.ndarray] = []  # per case: 0 ok, 1 unscorable, 2 incomplete
        self.why: list[np.ndarray] = []  # per case: UNSCORABLE index, 3 no retrieved chunks
        self.missing: list[np.ndarray] = []
        self.scored_ids: list[str] = []
        self.values: list[np.ndarray] = []
        self.counts = {"ok": 0, "failed": 0, "missing": 0}
        self.positive = False
        self.deepest = 0
        self.repeats = 0
        self.repeat_example: tuple | None = None
        self.basis: str | None = None
        self.refused: str | None = None  # why the object path must run instead
        self.user_fields = self.without_truth = False  # the test set reader's warning about fields

    def add(self, cases: CaseColumns, verdicts: ColumnVerdicts) -> BlockScores:
        """Take one block: statuses, verdict counts, the checks' tallies, the scored cases'
        values."""
        lengths = verdicts.lengths
        status = verdicts.status_codes()
        why = np.where(verdicts.unscorable > 0, verdicts.unscorable, np.where(lengths == 0, 3, 0)).astype(np.int8)
        self.ids.extend(cases.ids)
        self.status.append(status)
        self.why.append(why)
        self.missing.append(verdicts.missing())
        ok = int(verdicts.ok.sum())
        self.counts["ok"] += ok
        self.counts["missing"] += len(verdicts.ok) - ok
        self.positive = self.positive or bool((verdicts.grade[verdicts.ok] > 0).any())
        self.deepest = max(self.deepest, int(lengths.max(initial=0)))
        self._repeats(cases)
        self.user_fields = self.user_fields or bool(cases.user_fields)
        truth = (np.diff(cases.passage_offsets) > 0) | (np.diff(cases.ref_offsets) > 0) | cases.has_reference
        self.without_truth = self.without_truth or not truth.all()
        # ``left_out``'s rule, case by case: no ground truth left out under unscorable=skip (no
        # chunks never), failed/missing verdicts under incomplete=skip
        out = (((status == 1) & (why != 3) & (self.unscorable == "skip"))
               | ((status == 2) & (self.incomplete == "skip")))
        scored = np.flatnonzero(~out)
        values = np.zeros((0, len(self.measures)))
        if len(scored):
            matrix = matrix_from_columns(cases, verdicts, scored, id_field=self.params.get("id_field"))
            self.basis = matrix.r_basis
            try:
                for measure in self.measures:
                    measure.check(matrix)
                values = case_values(matrix, self.measures)
            except InputError as exc:  # evaluate_rag raises it, in its own words
                self.refused = str(exc)
                values = np.full((len(scored), len(self.measures)), np.nan)
            self.scored_ids.extend(cases.ids[i] for i in scored.tolist())
        self.values.append(values)
        return BlockScores(scored, values)

    def _repeats(self, cases: CaseColumns) -> None:
        """The cases listing a chunk id more than once (``duplicate_chunk_ids``' count and first
        example)."""
        case = cases.chunk_case()
        named = cases.chunk_id >= 0
        if not named.any():
            return
        width = np.int64(cases.n_codes + 1)
        pairs = np.sort(case[named] * width + cases.chunk_id[named])
        repeated = distinct_sorted(pairs[1:][pairs[1:] == pairs[:-1]] // width)
        self.repeats += len(repeated)
        if len(repeated) and self.repeat_example is None:
            first = int(repeated[0])
            chunk_ids = cases.string(cases.chunk_id[cases.chunk_offsets[first]:cases.chunk_offsets[first + 1]])
            cid, n = next((i, n) for i, n in Counter(x for x in chunk_ids if x is not None).items() if n > 1)
            self.repeat_example = (cases.ids[first], cid, n)

    def result(self) -> RagResult | None:
        """The ``evaluate_rag`` result, or None when ``evaluate_rag`` must run to refuse or explain
        (module docstring); :attr:`refused` then says why."""
        n = len(self.ids)
        status = np.concatenate(self.status) if self.status else np.zeros(0, dtype=np.int64)
        why = np.concatenate(self.why) if self.why else np.zeros(0, dtype=np.int8)
        missing = np.concatenate(self.missing) if self.missing else np.zeros(0, dtype=np.int64)
        reason = self._refusal(n, status)
        if reason:
            self.refused = reason
            return None
        unscorable_cases = {self.ids[i]: _WHY[why[i]] for i in np.flatnonzero(status == 1).tolist()}
        incomplete_cases = {self.ids[i]: incomplete_words(0, int(missing[i])) for i in np.flatnonzero(status == 2).tolist()}
        order = np_values(pc.sort_indices(arrow_strings(self.scored_ids))).astype(np.int64)
        ids = [self.scored_ids[i] for i in order.tolist()]
        values = self._in_order(order)
        p = self.params
        summary = rag_summary(n, self.relevance, len(ids), unscorable_cases, incomplete_cases, self.unscorable,
                              self.incomplete, self.basis, False, dict(self.counts), **p)
        for message in (repeated_ids_message(self.repeats, self.repeat_example),
                        cutoffs_beyond_depth(self.deepest, [m.k for m in self.measures])):
            if message:
                warn(message, summary=summary)
        mean, undefined = aggregate_columns(values, self.measures)
        summary = note_undefined(dict(summary), undefined, self.measures)
        return RagResult(self.measures, PerQuery(ids, [m.name for m in self.measures], values), mean, summary,
                         f"eval-rag ({self.relevance})", records=[], relevance=self.relevance)

    def _in_order(self, order: np.ndarray) -> np.ndarray:
        """Every scored case's values in ``order`` (case-id byte order), each block moved in and
        let go in turn (one copy of the values at a time, not two)."""
        place = np.empty(len(order), dtype=np.int64)
        place[order] = np.arange(len(order))
        out = np.empty((len(order), len(self.measures)), dtype=np.float64)
        start = 0
        while self.values:
            block = self.values.pop(0)
            out[place[start:start + len(block)]] = block
            start += len(block)
        return out

    def _refusal(self, n: int, status: np.ndarray) -> str | None:
        if self.refused:
            return self.refused
        if n == 0:
            return "no case"
        if self.user_fields and self.without_truth:
            return "the test set reader warns about fields it did not read"
        if (status == 1).all():
            return "no case can be scored"
        if self.counts["ok"] == 0:
            return "no chunk has a verdict"
        if not self.positive:
            return "no verdict matched: evaluate_rag explains why"
        if not self.scored_ids:
            return "no case in the means"
        if len(set(self.ids)) != n:
            return "a case id appears twice"
        return None


_WHY = (*UNSCORABLE, "no retrieved chunks")
