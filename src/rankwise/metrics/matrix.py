"""The relevance matrix: run and qrels joined once into (queries x ranks) arrays.

Every metric is a short vector expression over this matrix, so the qrels are looked up once per
evaluation, not once per metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc

from rankwise.data._columns import arrow_indices, np_values
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run

__all__ = ["RelevanceMatrix", "join"]


@dataclass(frozen=True, eq=False)
class RelevanceMatrix:
    """Per query and rank, the grade of the item retrieved there.

    Attributes:
        query_ids: evaluated queries, in byte order.
        grades: (queries, depth) int grades; 0 where unjudged or past the end of the ranking.
        judged: (queries, depth) True where the item has a grade >= 0 in the qrels.
        lengths: items retrieved per query.
        n_relevant: R per query (grades >= relevance_level).
        n_judged_nonrelevant: judged non-relevant per query (0 <= grade < relevance_level).
        ideal_gains: (queries, width) positive grades of the qrels, descending (for nDCG).
        relevance_level: grade from which an item counts as relevant.
        found: optional (queries, depth) count of gold items first found at each rank; recall uses it
            when relevant items are not one-to-one with gold items (text ground truth).
        in_run: True where the query appeared in the run.
    """

    query_ids: list[str]
    grades: np.ndarray
    judged: np.ndarray
    lengths: np.ndarray
    n_relevant: np.ndarray
    n_judged_nonrelevant: np.ndarray
    ideal_gains: np.ndarray
    relevance_level: int = 1
    found: np.ndarray | None = None
    in_run: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def depth(self) -> int:
        return self.grades.shape[1]

    @property
    def relevant(self) -> np.ndarray:
        """(queries, depth) bool: the item at this rank is relevant."""
        if "relevant" not in self._cache:
            self._cache["relevant"] = self.judged & (self.grades >= self.relevance_level)
        return self._cache["relevant"]

    def cum_relevant(self) -> np.ndarray:
        """(queries, depth) relevant items within the top i (inclusive)."""
        if "cum" not in self._cache:
            self._cache["cum"] = np.cumsum(self.relevant, axis=1, dtype=np.int64)
        return self._cache["cum"]

    def cum_found(self) -> np.ndarray:
        """(queries, depth) gold items found within the top i (for recall)."""
        if self.found is None:
            return self.cum_relevant()
        if "cum_found" not in self._cache:
            self._cache["cum_found"] = np.cumsum(self.found, axis=1, dtype=np.int64)
        return self._cache["cum_found"]

    def at(self, cumulative: np.ndarray, k: int | None) -> np.ndarray:
        """Column k-1 of a cumulative matrix (the last column when k is None or past the depth)."""
        n = cumulative.shape[0]
        if cumulative.shape[1] == 0 or (k is not None and k <= 0):
            return np.zeros(n, dtype=cumulative.dtype)
        col = cumulative.shape[1] - 1 if k is None else min(k, cumulative.shape[1]) - 1
        return cumulative[:, col]

    @classmethod
    def from_verdicts(cls, verdicts: dict[str, list[int]] | list[list[int]], *, n_relevant=None,
                      found=None, relevance_level: int = 1) -> RelevanceMatrix:
        """A matrix from ordered verdict (or grade) lists, one per query; every item counts as judged.

        Example:
            >>> m = RelevanceMatrix.from_verdicts([[1, 0, 1]])
            >>> m.grades.tolist(), int(m.n_relevant[0])
            ([[1, 0, 1]], 2)
        """
        if isinstance(verdicts, dict):
            qids, rows = list(verdicts), list(verdicts.values())
        else:
            qids, rows = [str(i) for i in range(len(verdicts))], list(verdicts)
        depth = max((len(r) for r in rows), default=0)
        grades = np.zeros((len(rows), depth), dtype=np.int64)
        judged = np.zeros((len(rows), depth), dtype=bool)
        for i, r in enumerate(rows):
            grades[i, : len(r)] = r
            judged[i, : len(r)] = True
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        rel = (grades >= relevance_level) & judged
        n_rel = rel.sum(axis=1) if n_relevant is None else np.asarray(n_relevant, dtype=np.int64)
        ideal = -np.sort(-np.where(grades > 0, grades, 0), axis=1)
        found_arr = None
        if found is not None:
            found_arr = np.zeros((len(rows), depth), dtype=np.int64)
            for i, r in enumerate(found):
                found_arr[i, : len(r)] = r
        return cls(qids, grades, judged, lengths, n_rel,
                   (judged & ~rel & (grades >= 0)).sum(axis=1), ideal, relevance_level, found_arr,
                   lengths > 0)


def join(qrels: Qrels, run: Run, *, relevance_level: int = 1, missing: str = "zero",
         depth: int | None = None) -> tuple[RelevanceMatrix, dict]:
    """Join a run with qrels into a :class:`RelevanceMatrix` and a summary of the query sets.

    ``missing="zero"``: every qrels query is evaluated (absent from the run = empty ranking);
    ``"skip"``: only queries in both. Run queries absent from the qrels are ignored either way.

    Example:
        >>> from rankwise.data import Qrels, Run
        >>> m, summary = join(Qrels.from_dict({"q": {"a": 1}}), Run.from_dict({"q": {"a": 1.0, "b": 0.5}}))
        >>> m.grades.tolist(), summary["evaluated"]
        ([[1, 0]], 1)
    """
    if missing not in ("zero", "skip"):
        raise ValueError(f"missing must be 'zero' or 'skip', not {missing!r}")
    qrels_position = {q: i for i, q in enumerate(qrels.queries)}
    run_to_qrels = np.array([qrels_position.get(q, -1) for q in run.queries], dtype=np.int64)
    in_run = np.zeros(qrels.n_queries, dtype=bool)
    in_run[run_to_qrels[run_to_qrels >= 0]] = True
    ignored = [q for q, j in zip(run.queries, run_to_qrels.tolist(), strict=False) if j < 0]
    missing_from_run = [q for q, present in zip(qrels.queries, in_run.tolist(), strict=False) if not present]
    if missing == "skip":
        eval_q = np.flatnonzero(in_run)
    else:
        eval_q = np.arange(qrels.n_queries)
    row_of_qrels_query = np.full(qrels.n_queries + 1, -1, dtype=np.int64)  # [-1] -> -1
    row_of_qrels_query[eval_q] = np.arange(len(eval_q))
    n_eval = len(eval_q)

    # --- per run query: its matrix row (-1: not evaluated) and its length
    run_row = row_of_qrels_query[run_to_qrels]
    lengths = np.zeros(n_eval, dtype=np.int64)
    evaluated = run_row >= 0
    lengths[run_row[evaluated]] = np.diff(run.offsets)[evaluated]
    if depth is not None:
        lengths = np.minimum(lengths, depth)
    width = int(lengths.max()) if n_eval else 0
    grades = np.zeros((n_eval, width), dtype=np.int64)
    judged = np.zeros((n_eval, width), dtype=bool)

    # --- the judged run rows: (query, doc) found in the qrels
    if len(run) and len(qrels) and width:
        rows, qrels_rows, run_q = _judged_rows(qrels, run, run_to_qrels)
        target, col = run_row[run_q], rows - run.offsets[run_q]
        keep = (target >= 0) & (col < width) if depth is None else (target >= 0) & (col < depth)
        g = qrels.grades[qrels_rows[keep]]
        grades[target[keep], col[keep]] = np.where(g >= 0, g, 0)
        judged[target[keep], col[keep]] = g >= 0

    # --- per-query qrels statistics
    qq = qrels.query_codes()
    rel_mask = qrels.grades >= relevance_level
    n_rel = np.bincount(qq[rel_mask], minlength=qrels.n_queries)[eval_q]
    nonrel_mask = (qrels.grades >= 0) & ~rel_mask
    n_nonrel = np.bincount(qq[nonrel_mask], minlength=qrels.n_queries)[eval_q]
    ideal = _ideal_gains(qrels, eval_q)

    matrix = RelevanceMatrix(
        [qrels.queries[i] for i in eval_q.tolist()], grades, judged, lengths, n_rel.astype(np.int64),
        n_nonrel.astype(np.int64), ideal, relevance_level, None, in_run[eval_q],
    )
    summary = {
        "queries_in_qrels": qrels.n_queries,
        "queries_in_run": run.n_queries,
        "evaluated": n_eval,
        "missing_from_run": len(missing_from_run),
        "ignored_not_in_qrels": len(ignored),
        "missing_queries": missing_from_run,
        "ignored_queries": ignored,
        "missing": missing,
        "relevance_level": relevance_level,
    }
    return matrix, summary


def _judged_rows(qrels: Qrels, run: Run,
                 run_to_qrels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run rows whose (query, doc) is in the qrels, the matching qrels rows, and the rows' run queries.

    Each qrels entry's (query, doc hash) is binary-searched in the run's sorted row keys (built once,
    when the run was read, for its duplicate check); candidates are confirmed on the exact doc-id
    string. Nothing here walks the run's rows.
    """
    layout = run._row_keys
    keys = layout.keys
    qrels_to_run = np.full(qrels.n_queries, -1, dtype=np.int64)
    in_both = run_to_qrels >= 0
    qrels_to_run[run_to_qrels[in_both]] = np.flatnonzero(in_both)
    run_q = qrels_to_run[qrels.query_codes()]
    entries = np.flatnonzero(run_q >= 0)
    empty = np.zeros(0, dtype=np.int64)
    if len(entries) == 0 or len(keys) == 0:
        return empty, empty, empty
    # needles come in query order (both query lists are byte-ordered): the searches walk the keys forward
    needles = layout.needles(run_q[entries], qrels._doc_hashes[entries])
    first = np.searchsorted(keys, needles)
    high = needles >> np.uint64(layout.row_bits)
    found_rows, found_entries = [], []
    pending, step = np.arange(len(entries)), 0
    while len(pending):  # one pass per run row sharing the (query, hash) prefix: one, unless hashes collide
        pos = first[pending] + step
        pending, pos = pending[pos < len(keys)], pos[pos < len(keys)]
        k = keys[pos]
        same = (k >> np.uint64(layout.row_bits)) == high[pending]
        pending, k = pending[same], k[same]
        found_rows.append(layout.rows(k))
        found_entries.append(entries[pending])
        step += 1
    rows, match = np.concatenate(found_rows), np.concatenate(found_entries)
    by_row = np.argsort(rows)
    rows, match = rows[by_row], match[by_row]
    same = np_values(pc.equal(run.doc_ids.take(arrow_indices(rows)), qrels.doc_ids.take(arrow_indices(match))))
    return rows[same], match[same], run_q[match[same]]


def _ideal_gains(qrels: Qrels, eval_q: np.ndarray) -> np.ndarray:
    """Positive grades of each evaluated query, sorted descending, as a padded matrix."""
    per_query = np.diff(qrels.offsets)
    most = int(per_query.max()) if len(per_query) else 0
    if len(eval_q) == 0 or most == 0:
        return np.zeros((len(eval_q), 0), dtype=np.int64)
    qq = qrels.query_codes()
    gains = np.where(qrels.grades > 0, qrels.grades, 0)
    if qrels.n_queries * most <= 4 * len(qrels) + 1_000_000:
        # judgements are grouped by query: lay them out (queries x most judged) and sort each row
        grid = np.zeros((qrels.n_queries, most), dtype=np.int64)
        grid[qq, np.arange(len(qq)) - qrels.offsets[qq]] = gains
        grid = grid[eval_q]
        grid.sort(axis=1)
        grid = grid[:, ::-1]
        width = int((grid > 0).sum(axis=1).max())
        return np.ascontiguousarray(grid[:, :width])
    pos = gains > 0
    codes, gains = qq[pos], gains[pos]
    counts = np.bincount(codes, minlength=qrels.n_queries)
    width = int(counts[eval_q].max())
    out = np.zeros((qrels.n_queries, width), dtype=np.int64)
    if width:
        order = np.lexsort((-gains, codes))
        codes, gains = codes[order], gains[order]
        starts = np.zeros(qrels.n_queries + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        col = np.arange(len(codes)) - starts[codes]
        out[codes, col] = gains
    return out[eval_q]
