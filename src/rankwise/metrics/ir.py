"""Ranked-retrieval metrics as vector expressions over a :class:`RelevanceMatrix`.

Each function takes the matrix and a cutoff ``k`` (None = the whole ranking) and returns one value
per query. Definitions follow trec_eval (docs/metrics.md §2).
"""

from __future__ import annotations

import numpy as np

from rankwise.metrics._arith import _log2_table, _rowsum
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["hit_rate", "precision", "recall", "f1", "mrr", "average_precision", "r_precision", "ndcg", "bpref",
           "num_ret", "num_rel", "num_rel_ret", "num_q", "first_relevant_ranks"]


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _cols(m: RelevanceMatrix, k: int | None) -> int:
    return m.depth if k is None else min(k, m.depth)


def hit_rate(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1 if a relevant item is within the top k, else 0 (trec_eval ``success_k``)."""
    return (m.within("relevant", k) > 0).astype(np.float64)


def precision(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Relevant items in the top k divided by k; without k, by the number retrieved.

    A chunk that holds only gold items a chunk above it matched still counts (it is relevant
    context; docs/context-metrics.md, "Redundant chunks").
    """
    hits = m.within("chunk", k)
    return _safe_div(hits, m.lengths if k is None else np.full(len(hits), k))


def recall(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Gold items found in the top k divided by R (0 when R = 0)."""
    return _safe_div(m.within("found", k), m.n_relevant)


def f1(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Harmonic mean of precision@k and recall@k (0 when both are 0)."""
    p, r = precision(m, k), recall(m, k)
    return _safe_div(2 * p * r, p + r)


def first_relevant_ranks(m: RelevanceMatrix) -> np.ndarray:
    """1-based rank of the first relevant item per query; 0 where there is none."""
    rel = m.relevant
    if rel.shape[1] == 0:
        return np.zeros(rel.shape[0], dtype=np.int64)
    first = rel.argmax(axis=1) + 1
    return np.where(rel.any(axis=1), first, 0)


def mrr(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant item (0 if none, or if it ranks below k)."""
    rank = first_relevant_ranks(m)
    if k is not None:
        rank = np.where(rank <= k, rank, 0)
    return _safe_div(np.ones(len(rank)), rank)


def average_precision(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Sum of precision@i over relevant ranks i <= k, divided by R (trec_eval ``map`` /
    ``map_cut_k``).

    The precisions are added in rank order, one query at a time, as trec_eval adds them.
    """
    n = _cols(m, k)
    rows, cols = np.nonzero(m.relevant[:, :n])
    # (row-major: each query's relevant ranks ascending, so the relevant items at or above one are
    # its place among its query's, plus one: the running sum at that rank, without the sums)
    per_query = np.bincount(rows, minlength=m.relevant.shape[0])
    above = np.arange(1, len(rows) + 1) - (np.cumsum(per_query) - per_query)[rows]
    precision_at = above / (cols + 1.0)
    sums = np.bincount(rows, weights=precision_at, minlength=m.relevant.shape[0])
    return _safe_div(sums, m.n_relevant)


def r_precision(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Relevant items in the top R, divided by R."""
    cum = m.cum_relevant()
    if cum.shape[1] == 0:
        return np.zeros(cum.shape[0])
    col = np.clip(np.minimum(m.n_relevant, cum.shape[1]) - 1, 0, None)
    hits = np.where(m.n_relevant > 0, np.take_along_axis(cum, col[:, None], axis=1)[:, 0], 0)
    return _safe_div(hits, m.n_relevant)


def _log2_ranks(n: int) -> np.ndarray:
    """log2(i + 1) for ranks i = 1..n, from the C library (numpy's SIMD log2 may differ in the last
    bit)."""
    return _log2_table(n + 2)[2: n + 2]


def _row_sums(x: np.ndarray) -> np.ndarray:
    """Left-to-right sums per row, as trec_eval adds (``np.sum`` adds pairwise)."""
    return _rowsum(x)


def ndcg(m: RelevanceMatrix, k: int | None = None, gain: str = "raw") -> np.ndarray:
    """DCG@k / ideal DCG@k with gain = grade (``raw``, trec_eval) or 2^grade - 1 (``exp``).

    The ideal ranking uses every positive grade of the query's qrels, whatever the relevance level.
    """
    n = _cols(m, k)
    g = np.where(m.judged[:, :n] & (m.grades[:, :n] > 0), m.grades[:, :n], 0).astype(np.float64)
    ig = m.ideal_gains[:, : (m.ideal_gains.shape[1] if k is None else min(k, m.ideal_gains.shape[1]))]
    ig = ig.astype(np.float64)
    if gain == "exp":
        g, ig = np.exp2(g) - 1, np.exp2(ig) - 1
    elif gain != "raw":
        raise ValueError(f"gain must be 'raw' or 'exp', not {gain!r}")
    dcg = _row_sums(g / _log2_ranks(n))
    idcg = _row_sums(ig / _log2_ranks(ig.shape[1]))
    return _safe_div(dcg, idcg)


def bpref(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """trec_eval's bpref: relevant items ranked above judged non-relevant ones; unjudged are
    skipped."""
    n = _cols(m, k)
    rel = m.relevant[:, :n]
    nonrel = m.judged[:, :n] & ~rel
    nonrel_above = np.cumsum(nonrel, axis=1)
    R = m.n_relevant[:, None].astype(np.float64)
    denom = np.minimum(m.n_judged_nonrelevant[:, None], m.n_relevant[:, None]).astype(np.float64)
    penalty = _safe_div(np.minimum(nonrel_above, R), np.broadcast_to(denom, nonrel_above.shape))
    contrib = np.where(nonrel_above > 0, 1.0 - penalty, 1.0)
    return _safe_div(_row_sums(np.where(rel, contrib, 0.0)), m.n_relevant)


def num_ret(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Items retrieved (trec_eval ``num_ret``)."""
    return (m.lengths if k is None else np.minimum(m.lengths, k)).astype(np.float64)


def num_rel(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Relevant judgements in the qrels, R (trec_eval ``num_rel``)."""
    return m.n_relevant.astype(np.float64)


def num_rel_ret(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Relevant items retrieved (trec_eval ``num_rel_ret``)."""
    return m.within("relevant", k).astype(np.float64)


def num_q(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1 per evaluated query; summed, the number of queries (trec_eval ``num_q``)."""
    return np.ones(len(m.query_ids))
