"""The relevance matrix: every verdict source, joined once into (queries x ranks) arrays.

This module is the one place a :class:`RelevanceMatrix` is built. Its named constructors cover every
source: :meth:`RelevanceMatrix.from_qrels_run` (qrels + run, as trec_eval),
:meth:`RelevanceMatrix.from_records` (per-case RAG records with containment, span, fuzzy, ids,
human, LLM or any other verdicts) and :meth:`RelevanceMatrix.from_verdicts` (ordered verdict lists).
Each carries R per query and where R came from (``r_basis``): ``qrels``, ``reference passages``,
``reference ids``, ``pooled verdicts`` or ``given`` (docs/context-metrics.md, "What R is"). Every
metric is a short vector expression over this matrix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.columns import arrow_indices, np_empty, np_values, np_zeros, string_parts
from rankwise.data.compiled import walk
from rankwise.data.qrels import Qrels
from rankwise.data.ranking import RowKeys
from rankwise.data.run import Run
from rankwise.relevance.truth import pooled_items

__all__ = ["RelevanceMatrix", "join", "record_truth", "R_BASES", "verdict_grade"]

R_BASES = ("qrels", "reference passages", "reference ids", "pooled verdicts", "given")
_THREADED_ROWS = 1 << 17  # from this many run rows the C join runs on Arrow's CPU count of threads


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
        ideal_gains: (queries, width) positive grades of the ideal ranking, descending (for nDCG).
        relevance_level: grade from which an item counts as relevant.
        found: optional (queries, depth) count of gold items first found at each rank; recall uses
            it when relevant items are not one-to-one with gold items (text ground truth).
        in_run: True where the query appeared in the run.
        r_basis: where R came from, one of :data:`R_BASES`.
        distinct: optional (queries, depth) True where the item is the first occurrence of its id
            (the id-set metrics count distinct ids); None when every item is distinct.
        char_found: optional (queries, depth) reference characters first covered at each rank (span
            ground truth), with ``char_total`` the reference characters per query.
        pooled: optional (queries, depth) True where the item is in the qrels with any grade,
            negative ones included (trec_eval's "in the pool"; ``pooled & ~judged`` is its
            unjudged-in-pool); for records, where the chunk has a verdict (not failed or missing).
            None: the judged items.
        records: the per-case records the matrix was built from (:meth:`from_records`), with
            ``source`` and ``id_field``: the metrics over retrieval calls (``metrics/calls.py``)
            read each case's calls there.
        chunk_grades: optional (queries, depth) grade of each chunk as its verdict gave it, before
            the redundancy rule (docs/context-metrics.md, "Redundant chunks"): ``grades`` keep a
            grade only where the chunk earns a gold item no chunk above it matched; precision, wcp
            and acp read these. None when no chunk is redundant.
        chunk_chars: optional (queries, depth) characters of each retrieved chunk (its text, else
            end - start; 0 past a list's end): what budget cutoffs (``recall@1500c``,
            ``metrics/budget.py``) lay out. None when some chunk has neither text nor offsets.
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
    r_basis: str = "qrels"
    distinct: np.ndarray | None = None
    char_found: np.ndarray | None = None
    char_total: np.ndarray | None = None
    pooled: np.ndarray | None = None
    records: tuple | None = field(default=None, repr=False)
    source: str | None = None
    id_field: str | None = None
    chunk_grades: np.ndarray | None = None
    chunk_chars: np.ndarray | None = None
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

    @property
    def chunk_relevant(self) -> np.ndarray:
        """(queries, depth) bool: the chunk at this rank holds relevant evidence, redundant or not
        (precision, wcp and acp count it); :attr:`relevant` counts only chunks that earn a gold
        item."""
        if self.chunk_grades is None:
            return self.relevant
        if "chunk_relevant" not in self._cache:
            self._cache["chunk_relevant"] = self.judged & (self.chunk_grades >= self.relevance_level)
        return self._cache["chunk_relevant"]

    def cum_chunk_relevant(self) -> np.ndarray:
        """(queries, depth) chunks holding relevant evidence within the top i (inclusive), redundant
        or not."""
        if self.chunk_grades is None:
            return self.cum_relevant()
        if "cum_chunk" not in self._cache:
            self._cache["cum_chunk"] = _cumulative(self.chunk_relevant)
        return self._cache["cum_chunk"]

    def has(self, what: str) -> bool:
        """Whether the matrix carries ``what`` (``"char_spans"``: character coverage of span ground
        truth)."""
        if what == "char_spans":
            return self.char_found is not None and self.char_total is not None
        if what == "records":
            return self.records is not None
        return False

    def cum_relevant(self) -> np.ndarray:
        """(queries, depth) relevant items within the top i (inclusive)."""
        if "cum" not in self._cache:
            self._cache["cum"] = _cumulative(self.relevant)
        return self._cache["cum"]

    def cum_found(self) -> np.ndarray:
        """(queries, depth) gold items found within the top i (for recall)."""
        if self.found is None:
            return self.cum_relevant()
        if "cum_found" not in self._cache:
            self._cache["cum_found"] = _cumulative(self.found)
        return self._cache["cum_found"]

    def within(self, kind: str, k: int | None) -> np.ndarray:
        """Per query, how many ``kind`` items rank within the top k (every rank when k is None):
        ``"relevant"`` items, ``"chunk"`` (chunks holding relevant evidence, as
        :meth:`cum_chunk_relevant`) or ``"found"`` gold items (as :meth:`cum_found`). Column k-1
        of the running sums, read from them when they were made, else counted from the first k
        columns alone (no (queries x depth) sums made for one column).

        Example:
            >>> m = RelevanceMatrix.from_verdicts([[1, 0, 1]])
            >>> m.within("relevant", 2).tolist(), m.within("relevant", None).tolist()
            ([1], [2])
        """
        if kind not in ("relevant", "chunk", "found"):
            raise ValueError(f"kind must be 'relevant', 'chunk' or 'found', not {kind!r}")
        if kind == "found" and self.found is not None:
            rows, key = self.found, "cum_found"
        elif kind == "chunk" and self.chunk_grades is not None:
            rows, key = self.chunk_relevant, "cum_chunk"
        else:
            rows, key = self.relevant, "cum"
        if key in self._cache:
            return self.at(self._cache[key], k)
        if rows.shape[1] == 0 or (k is not None and k <= 0):
            return np.zeros(rows.shape[0], dtype=np.int64)
        return rows[:, : rows.shape[1] if k is None else min(k, rows.shape[1])].sum(axis=1, dtype=np.int64)

    def at(self, cumulative: np.ndarray, k: int | None) -> np.ndarray:
        """Column k-1 of a cumulative matrix (the last column when k is None or past the depth)."""
        n = cumulative.shape[0]
        if cumulative.shape[1] == 0 or (k is not None and k <= 0):
            return np.zeros(n, dtype=cumulative.dtype)
        col = cumulative.shape[1] - 1 if k is None else min(k, cumulative.shape[1]) - 1
        return cumulative[:, col]

    # ------------------------------------------------------------------------------ constructors
    @classmethod
    def from_qrels_run(cls, qrels: Qrels, run: Run, *, relevance_level: int = 1, missing: str = "zero",
                       depth: int | None = None) -> tuple[RelevanceMatrix, dict]:
        """Join a run with qrels (R from the qrels), and a summary of the query sets. See
        :func:`join`.

        Example:
            >>> from rankwise.data import Qrels, Run
            >>> m, _ = RelevanceMatrix.from_qrels_run(Qrels.from_dict({"q": {"a": 1}}),
            ...                                       Run.from_dict({"q": {"b": 2.0, "a": 1.0}}))
            >>> m.grades.tolist(), m.r_basis
            ([[0, 1]], 'qrels')
        """
        return join(qrels, run, relevance_level=relevance_level, missing=missing, depth=depth)

    @classmethod
    def from_verdicts(cls, verdicts: Mapping[str, Sequence[int]] | Sequence[Sequence[int]], *,
                      n_relevant: Sequence[int] | None = None,
                      ideal_gains: Sequence[Sequence[int]] | None = None,
                      found: Sequence[Sequence[int]] | None = None, relevance_level: int = 1,
                      r_basis: str | None = None,
                      earned: Sequence[Sequence[bool]] | None = None) -> RelevanceMatrix:
        """A matrix from ordered verdict (or grade) lists, one per query; every item counts as
        judged.

        Without ``n_relevant``, R is the relevant items of each list (``pooled verdicts``); with it,
        R is given and nDCG's ideal ranking holds the list's positive grades padded with 1s up to R,
        unless ``ideal_gains`` are given too. ``earned`` (per item: does it earn a gold item no item
        above it matched) applies the redundancy rule: the others keep their grade for precision,
        wcp and acp only.

        Example:
            >>> m = RelevanceMatrix.from_verdicts([[1, 0, 1]])
            >>> m.grades.tolist(), int(m.n_relevant[0]), m.r_basis
            ([[1, 0, 1]], 2, 'pooled verdicts')
            >>> RelevanceMatrix.from_verdicts([[0, 1]], n_relevant=[3]).ideal_gains.tolist()
            [[1, 1, 1]]
        """
        if isinstance(verdicts, Mapping):
            qids, rows = [str(q) for q in verdicts], [list(v) for v in verdicts.values()]
        else:
            qids, rows = [str(i) for i in range(len(verdicts))], [list(v) for v in verdicts]
        n = len(rows)
        depth = max((len(r) for r in rows), default=0)
        grades = np.zeros((n, depth), dtype=np.int64)
        judged = np.zeros((n, depth), dtype=bool)
        for i, r in enumerate(rows):
            grades[i, : len(r)] = r
            judged[i, : len(r)] = True
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        rel = (grades >= relevance_level) & judged
        if ideal_gains is None:
            ideal_rows = []
            for i, r in enumerate(rows):
                pos = sorted((g for g in r if g > 0), reverse=True)
                if n_relevant is not None:
                    pos += [1] * max(0, int(n_relevant[i]) - len(pos))
                ideal_rows.append(pos)
        else:
            ideal_rows = [sorted((int(g) for g in row if g > 0), reverse=True) for row in ideal_gains]
        n_rel = rel.sum(axis=1) if n_relevant is None else np.asarray(n_relevant, dtype=np.int64)
        found_arr = None
        if found is not None:
            found_arr = np.zeros((n, depth), dtype=np.int64)
            for i, r in enumerate(found):
                found_arr[i, : len(r)] = r
        basis = r_basis or ("pooled verdicts" if n_relevant is None else "given")
        chunk_grades = None
        if earned is not None:
            keep = np.zeros((n, depth), dtype=bool)
            for i, r in enumerate(earned):
                keep[i, : len(r)] = r
            if not (keep | (grades == 0)).all():
                chunk_grades, grades = grades, np.where(keep, grades, 0)
                rel = (grades >= relevance_level) & judged
        return cls(qids, grades, judged, lengths, n_rel.astype(np.int64),
                   (judged & ~rel & (grades >= 0)).sum(axis=1), _pad(ideal_rows), relevance_level,
                   found_arr, lengths > 0, basis, chunk_grades=chunk_grades)

    @classmethod
    def from_records(cls, records: Sequence[Any], source: str, *, relevance_level: int = 1,
                     id_field: str | None = None) -> RelevanceMatrix:
        """A matrix from per-case records and their stored ``source`` verdicts, one row per record.

        Failed or missing verdicts count as not relevant. R and nDCG's ideal ranking come from the
        record's stored ground truth for ``source`` (written when it was judged), else from the
        record: reference passages (containment, span, fuzzy), reference ids (ids) or the source's
        own relevant verdicts (human, LLM: ``pooled verdicts``). Span ground truth also fills the
        character coverage that ``char_recall`` needs.

        Example:
            >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
            >>> rec = CaseRecord("q1", chunks=[ChunkRecord(rank=1, verdicts={"llm": Verdict(0)}),
            ...                                ChunkRecord(rank=2, verdicts={"llm": Verdict(1)})])
            >>> m = RelevanceMatrix.from_records([rec], "llm")
            >>> m.grades.tolist(), m.n_relevant.tolist(), m.r_basis
            ([[0, 1]], [1], 'pooled verdicts')
        """
        n = len(records)
        depth = max((len(r.chunks) for r in records), default=0)
        grades = np.zeros((n, depth), dtype=np.int64)
        judged = np.zeros((n, depth), dtype=bool)
        found = np.zeros((n, depth), dtype=np.int64)
        distinct = np.zeros((n, depth), dtype=bool)
        earned = np.zeros((n, depth), dtype=bool)
        lengths = np.array([len(r.chunks) for r in records], dtype=np.int64)
        n_rel = np.zeros(n, dtype=np.int64)
        ideal_rows: list[list[int]] = []
        bases: set[str] = set()
        spans = source == "span"
        char_found = np.zeros((n, depth), dtype=np.float64) if spans else None
        char_total = np.zeros(n, dtype=np.float64) if spans else None
        pooled = np.zeros((n, depth), dtype=bool)  # the chunk has a verdict (judged@k's "has a judgement")
        chars: np.ndarray | None = np.zeros((n, depth), dtype=np.int64)
        for i, r in enumerate(records):
            row = _record_row(r, source, relevance_level, id_field)
            width = len(r.chunks)
            g = np.asarray(row["grades"], dtype=np.int64)
            # a negative qrels grade (ids) is trec_eval's "unjudged in the pool": no grade, not
            # judged
            grades[i, :width], judged[i, :width] = np.maximum(g, 0), g >= 0
            pooled[i, :width], found[i, :width] = row["pooled"], row["found"]
            distinct[i, :width], earned[i, :width] = row["distinct"], row["earned"]
            bases.add(row["truth"]["basis"])
            n_rel[i] = row["truth"]["n_relevant"]
            ideal_rows.append(list(row["truth"]["ideal_gains"]))
            if chars is not None:
                sizes = [_chunk_chars(c) for c in r.chunks]
                chars = None if None in sizes else chars
                if chars is not None:
                    chars[i, :width] = sizes
            if spans:
                total, gained = _char_coverage(r)
                char_total[i] = total
                char_found[i, : len(gained)] = gained
        chunk_grades = None
        if not (earned | (grades == 0)).all():  # redundant chunks: no grade where they earn nothing new
            chunk_grades, grades = grades, np.where(earned, grades, 0)
        rel = judged & (grades >= relevance_level)
        basis = bases.pop() if len(bases) == 1 else ("mixed" if bases else "reference passages")
        return cls([r.id for r in records], grades, judged, lengths, n_rel, (judged & ~rel).sum(axis=1),
                   _pad(ideal_rows), relevance_level, found, lengths > 0, basis, distinct, char_found,
                   char_total, pooled, tuple(records), source, id_field, chunk_grades, chars)


def _chunk_chars(chunk: Any) -> int | None:
    """A retrieved chunk's length in characters: its text's, else its offsets' (None: neither
    known)."""
    if chunk.text is not None:
        return len(chunk.text)
    if chunk.start is not None and chunk.end is not None:
        return max(int(chunk.end) - int(chunk.start), 0)
    return None


def _record_row(r: Any, source: str, relevance_level: int, id_field: str | None) -> dict:
    """One record's row of the matrix: grades, has-a-verdict, gold items first found, first
    occurrence of each key, whether each chunk earns a gold item (the redundancy rule), and its
    ground truth."""
    g, distinct, pooled = [], [], []
    keys: set = set()
    for c in r.chunks:  # one pass: the grade, whether it has a verdict, first occurrence of its key
        v = c.verdicts.get(source)
        g.append(verdict_grade(v, source))
        pooled.append(v is not None and v.ok)
        key = _chunk_key(c, source, id_field)
        distinct.append(key is None or key not in keys)
        if key is not None:
            keys.add(key)
    truth = record_truth(r, source, relevance_level=relevance_level)
    lists = r.passages_found.get(source)
    basis = truth["basis"]
    if lists is not None and basis != "pooled verdicts":
        seen: set = set()
        found = []
        for items in lists:
            new = [x for x in items if x not in seen]
            seen.update(new)
            found.append(len(new))
    else:
        found = [1 if x >= relevance_level else 0 for x in g]
    if basis == "pooled verdicts":  # each distinct chunk is an item: a repeat of it earns nothing
        earned = pooled_items(r.chunks, g)
        found = [f if e else 0 for f, e in zip(found, earned, strict=True)]
    elif source == "ids" or basis in ("reference ids", "qrels"):  # the gold item is the chunk's key
        earned = distinct
    elif lists is not None:  # reference passages: the first chunk that matches a passage earns it
        earned = [x > 0 for x in found]
    else:
        earned = [True] * len(g)
    return {"grades": g, "found": found, "distinct": distinct, "earned": earned, "truth": truth,
            "pooled": pooled}


def _pad(rows: Sequence[Sequence[int]]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def verdict_grade(v: Any, source: str) -> int:
    """The grade a stored verdict contributes: 0 when failed or missing, the grade when graded, else
    0/1."""
    if v is None or not v.ok:
        return 0
    if source == "ids":
        return int(v.grade if v.grade is not None else v.verdict)
    if v.verdict != 1:
        return 0
    return int(v.grade) if v.grade is not None and v.grade > 0 else 1


def _chunk_key(chunk: Any, source: str, id_field: str | None) -> str | None:
    v = chunk.verdicts.get(source)
    if v is not None and v.meta.get("key") is not None:
        return v.meta["key"]
    if id_field == "doc_id":
        return chunk.doc_id
    return chunk.id if chunk.id is not None else chunk.doc_id


def record_truth(record: Any, source: str, *, relevance_level: int = 1) -> dict:
    """R, the ideal gains and their basis for one record under ``source``.

    The truth stored when the source judged the record wins; records written before that are read
    as: text sources -> the usable reference passages; ids -> the reference ids; others -> pooled
    verdicts.

    Example:
        >>> from rankwise.data.records import CaseRecord
        >>> record_truth(CaseRecord("q", reference_context_ids=["d1", "d2"]), "ids")
        {'n_relevant': 2, 'ideal_gains': [1, 1], 'basis': 'reference ids'}
    """
    stored = record.truth.get(source)
    if stored is not None:
        basis = stored.get("basis", "reference passages")
        n = int(stored["n_relevant"])
        # a passage is one item whatever matched it: R items of gain 1 (records written before the
        # redundancy rule stored max(R, relevant chunks) here)
        gains = [1] * n if basis == "reference passages" else list(stored.get("ideal_gains", []))
        return {"n_relevant": n, "ideal_gains": gains, "basis": basis}
    from rankwise.relevance.verdicts import TEXT_SOURCES

    if source in TEXT_SOURCES:
        from rankwise.relevance.text import normalize

        if source == "span":
            usable = sum(1 for p in record.reference_contexts if p.span is not None)
        else:
            usable = sum(1 for p in record.reference_contexts if p.text is not None and normalize(p.text))
        return {"n_relevant": usable, "ideal_gains": [1] * usable, "basis": "reference passages"}
    if source == "ids":
        gold = list(dict.fromkeys(record.reference_context_ids or []))
        return {"n_relevant": len(gold) if relevance_level <= 1 else 0, "ideal_gains": [1] * len(gold),
                "basis": "reference ids"}
    # the ideal ranking holds every distinct chunk's positive grade (as nDCG's gains do), R the ones
    # at the relevance level
    grades = [verdict_grade(c.verdicts.get(source), source) for c in record.chunks]
    gains = sorted((g for g, e in zip(grades, pooled_items(record.chunks, grades), strict=True) if e and g > 0),
                   reverse=True)
    return {"n_relevant": sum(1 for g in gains if g >= max(1, relevance_level)), "ideal_gains": gains,
            "basis": "pooled verdicts"}


def _char_coverage(record: Any) -> tuple[float, list[float]]:
    """Reference characters in all, and those first covered by each rank's chunk span."""
    from rankwise.relevance.text import merge_intervals

    gold: dict[str, list[tuple[int, int]]] = {}
    for p in record.reference_contexts:
        if p.span is not None:
            gold.setdefault(p.span[0], []).append((p.span[1], p.span[2]))
    merged = {d: merge_intervals(iv) for d, iv in gold.items()}
    total = float(sum(e - s for ivs in merged.values() for s, e in ivs))
    covered: dict[str, list[tuple[int, int]]] = {}
    gained: list[float] = []
    before = 0
    for c in record.chunks:
        span = c.span
        if span is not None and span[0] in merged:
            covered[span[0]] = merge_intervals([*covered.get(span[0], []), (span[1], span[2])])
        now = 0
        for d, ivs in covered.items():
            for gs, ge in merged[d]:
                for cs, ce in ivs:
                    now += max(0, min(ge, ce) - max(gs, cs))
        gained.append(float(now - before))
        before = now
    return total, gained


def _cumulative(rows: np.ndarray) -> np.ndarray:
    """Running sums along each row, as int64, in memory from Arrow's pool."""
    return np.cumsum(rows, axis=1, dtype=np.int64, out=np_empty(rows.size, np.int64).reshape(rows.shape))


def join(qrels: Qrels, run: Run, *, relevance_level: int = 1, missing: str = "zero",
         depth: int | None = None, compiled: bool = True) -> tuple[RelevanceMatrix, dict]:
    """Join a run with qrels into a :class:`RelevanceMatrix` and a summary of the query sets.

    ``missing="zero"``: every qrels query is evaluated (absent from the run = empty ranking);
    ``"skip"``: only queries in both. Run queries absent from the qrels are ignored either way.
    The judged rows are found by the compiled pass where it was built (``compiled=False``: by
    numpy alone; the same matrix).

    Example:
        >>> from rankwise.data import Qrels, Run
        >>> m, summary = join(
        ...     Qrels.from_dict({"q": {"a": 1}}), Run.from_dict({"q": {"a": 1.0, "b": 0.5}})
        ... )
        >>> m.grades.tolist(), summary["evaluated"]
        ([[1, 0]], 1)
    """
    if missing not in ("zero", "skip"):
        raise ValueError(f"missing must be 'zero' or 'skip', not {missing!r}")
    run_to_qrels, in_run, ignored, missing_from_run = _align_queries(qrels, run)
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
    grades = np_zeros((n_eval, width), np.int64)  # (Arrow's pool: the run's freed columns' pages)
    judged = np_zeros((n_eval, width), bool)
    pooled = np_zeros((n_eval, width), bool)

    # --- the judged run rows: (query, doc) found in the qrels
    if len(run) and len(qrels) and width and not (compiled and _graded_in_c(qrels, run, run_to_qrels, run_row, lengths,
                                                                           (grades, judged, pooled))):
        rows, qrels_rows, run_q = _judged_rows(qrels, run, run_to_qrels)
        target, col = run_row[run_q], rows - run.offsets[run_q]
        keep = (target >= 0) & (col < width) if depth is None else (target >= 0) & (col < depth)
        g = qrels.grades[qrels_rows[keep]]
        grades[target[keep], col[keep]] = np.where(g >= 0, g, 0)
        judged[target[keep], col[keep]] = g >= 0
        pooled[target[keep], col[keep]] = True

    # --- per-query qrels statistics
    qq = qrels.query_codes()
    rel_mask = qrels.grades >= relevance_level
    n_rel = np.bincount(qq[rel_mask], minlength=qrels.n_queries)[eval_q]
    nonrel_mask = (qrels.grades >= 0) & ~rel_mask
    n_nonrel = np.bincount(qq[nonrel_mask], minlength=qrels.n_queries)[eval_q]
    ideal = _ideal_gains(qrels, eval_q)

    matrix = RelevanceMatrix(
        list(qrels.queries) if n_eval == qrels.n_queries else [qrels.queries[i] for i in eval_q.tolist()], grades, judged, lengths, n_rel.astype(np.int64),
        n_nonrel.astype(np.int64), ideal, relevance_level, None, in_run[eval_q], pooled=pooled,
    )
    return matrix, _join_summary(qrels, run, n_eval, missing_from_run, ignored, missing, relevance_level)


def _align_queries(qrels: Qrels, run: Run) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Per run query its qrels query's position (-1: not in the qrels), per qrels query whether the
    run has it, the run queries the qrels lack and the qrels queries the run lacks."""
    if run.queries == qrels.queries:  # the same queries (both in byte order): nothing to look up
        return np.arange(qrels.n_queries, dtype=np.int64), np.ones(qrels.n_queries, dtype=bool), [], []
    qrels_position = {q: i for i, q in enumerate(qrels.queries)}
    run_to_qrels = np.array([qrels_position.get(q, -1) for q in run.queries], dtype=np.int64)
    in_run = np.zeros(qrels.n_queries, dtype=bool)
    in_run[run_to_qrels[run_to_qrels >= 0]] = True
    ignored = [q for q, j in zip(run.queries, run_to_qrels.tolist(), strict=False) if j < 0]
    missing_from_run = [q for q, present in zip(qrels.queries, in_run.tolist(), strict=False) if not present]
    return run_to_qrels, in_run, ignored, missing_from_run


def _join_summary(qrels: Qrels, run: Run, n_eval: int, missing_from_run: list[str], ignored: list[str],
                  missing: str, relevance_level: int) -> dict:
    """The query sets of a join, as ``join`` returns them."""
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
    if missing == "zero":
        # trec_eval -c prints, as num_rel's `all`, every judgement with grade > 0 whatever -l says
        summary["num_rel_all_trec_eval"] = int((qrels.grades > 0).sum())
    return summary


def _graded_in_c(qrels: Qrels, run: Run, run_to_qrels: np.ndarray, run_row: np.ndarray, lengths: np.ndarray,
                 matrix: tuple[np.ndarray, np.ndarray, np.ndarray]) -> bool:
    """The judged rows' grades written into ``matrix`` (grades, judged, pooled) by one C pass
    (``_walk.join_grades``): each judgement looked up among its run query's sorted row keys and
    confirmed on the doc id; False (nothing written) where the extension was not built or the
    columns are not single plain string arrays (the C pass declines more than one chunk)."""
    run_parts, qrels_parts = string_parts(run.doc_ids), string_parts(qrels.doc_ids)
    if run_parts is None or qrels_parts is None:
        return False
    layout = run.sorted_keys
    i64 = np.int64
    return bool(walk.join_grades(
        (layout.keys, layout.offsets.astype(i64), layout.query_bits, layout.row_bits, run_parts),
        (run_row.astype(i64), run_to_qrels.astype(i64), lengths.astype(i64)),
        (qrels.offsets.astype(i64), qrels.doc_hashes, qrels_parts, np.ascontiguousarray(qrels.grades, dtype=i64)),
        matrix, pa.cpu_count() if len(run) >= _THREADED_ROWS else 1))


def _judged_rows(qrels: Qrels, run: Run,
                 run_to_qrels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run rows whose (query, doc) is in the qrels, the matching qrels rows, and the rows' run
    queries.

    Each qrels entry's (query, doc hash) is binary-searched in the run's sorted row keys (built
    once, when the run was read, for its duplicate check); candidates are confirmed on the exact
    doc-id string. Nothing here walks the run's rows.
    """
    layout = run.sorted_keys
    keys = layout.keys
    qrels_to_run = np.full(qrels.n_queries, -1, dtype=np.int64)
    in_both = run_to_qrels >= 0
    qrels_to_run[run_to_qrels[in_both]] = np.flatnonzero(in_both)
    run_q = qrels_to_run[qrels.query_codes()]
    empty = np.zeros(0, dtype=np.int64)
    if len(keys) == 0 or not bool((run_q >= 0).any()):
        return empty, empty, empty
    entries = None if bool((run_q >= 0).all()) else np.flatnonzero(run_q >= 0)  # None: every entry
    # needles come in query order (both query lists are byte-ordered): the searches walk the keys
    # forward
    needles = layout.needles(run_q if entries is None else run_q[entries],
                             qrels.doc_hashes if entries is None else qrels.doc_hashes[entries])
    first = np.searchsorted(keys, needles)
    if len(layout.shared) == 0:  # no two run rows share a key prefix: one look per entry
        np.minimum(first, len(keys) - 1, out=first)
        within = keys[first]
        within -= needles  # a match: the same prefix, so the row-in-query bits are what is left
        hit = np.flatnonzero(within < np.uint64(1 << layout.row_bits))
        match = hit if entries is None else entries[hit]
        rows = layout.offsets[run_q[match]] + within[hit].view(np.int64)
    else:
        rows, match = _judged_rows_shared(layout, needles, first,
                                          np.arange(len(run_q)) if entries is None else entries)
    by_row = np.argsort(rows)
    rows, match = rows[by_row], match[by_row]
    same = np_values(pc.equal(run.doc_ids.take(arrow_indices(rows)), qrels.doc_ids.take(arrow_indices(match))))
    return rows[same], match[same], run_q[match[same]]


def _judged_rows_shared(layout: RowKeys, needles: np.ndarray, first: np.ndarray,
                        entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate (run row, qrels row) pairs when run rows share key prefixes: each needle checks its
    first key and the keys after it while their prefix is still the needle's."""
    keys = layout.keys
    high = needles >> np.uint64(layout.row_bits)
    found_rows, found_entries = [], []
    pending, step = np.arange(len(entries)), 0
    while len(pending):  # one pass per run row sharing the (query, hash) prefix
        pos = first[pending] + step
        pending, pos = pending[pos < len(keys)], pos[pos < len(keys)]
        k = keys[pos]
        same = (k >> np.uint64(layout.row_bits)) == high[pending]
        pending, k = pending[same], k[same]
        found_rows.append(layout.rows(k))
        found_entries.append(entries[pending])
        step += 1
    return np.concatenate(found_rows), np.concatenate(found_entries)


def _ideal_gains(qrels: Qrels, eval_q: np.ndarray) -> np.ndarray:
    """Positive grades of each evaluated query, sorted descending, as a padded matrix."""
    per_query = np.diff(qrels.offsets)
    most = int(per_query.max()) if len(per_query) else 0
    if len(eval_q) == 0 or most == 0:
        return np.zeros((len(eval_q), 0), dtype=np.int64)
    gains = np.where(qrels.grades > 0, qrels.grades, 0)
    if qrels.n_queries * most <= 4 * len(qrels) + 1_000_000:
        # judgements are grouped by query: lay them out (queries x most judged) and sort each row
        grid = np.zeros((qrels.n_queries, most), dtype=np.int64)
        # (query q's judgements at q * most onwards: one flat scatter)
        grid.ravel()[np.arange(len(qrels)) + np.repeat(np.arange(qrels.n_queries) * most - qrels.offsets[:-1],
                                                     per_query)] = gains
        grid = grid[eval_q]
        grid.sort(axis=1)
        grid = grid[:, ::-1]
        width = int((grid > 0).sum(axis=1).max())
        return np.ascontiguousarray(grid[:, :width])
    pos = gains > 0
    codes, gains = qrels.query_codes()[pos], gains[pos]
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
