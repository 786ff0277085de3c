"""RAG context metrics (docs/metrics.md §3): rank-weighted and average context precision, set
precision/recall.

Two faces: plain functions over one verdict list (for notebooks and docs) and matrix versions used
by the engine. Both share one implementation, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rankwise.metrics.ir import _row_sums
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["weighted_context_precision", "average_context_precision", "set_precision", "set_recall",
           "harmonic_mean", "wcp", "acp", "context_recall", "char_recall", "id_precision", "id_recall",
           "RAGAS_EPSILON", "rank_weights", "load_position_weights"]

RAGAS_EPSILON = 1e-10
Decay = str | Callable[[int], float]


DECAYS = ("log", "linear", "rbp", "power", "flat", "curve")


def rank_weights(n: int, decay: Decay = "log", *, p: float = 0.8, a: float = 1.0, curve: str = "",
                 start: int = 1) -> np.ndarray:
    """Weights w(start..start+n-1) of the ranks (w(1..n) by default).

    ``log`` = 1/log2(i+1); ``linear`` = 1/i; ``rbp`` = p^(i-1) (rank-biased precision's patience p);
    ``power`` = i^-a; ``flat`` = 1; ``curve`` = a measured position curve (a JSON file written by
    ``rankwise position-curve``: ``{"weights": [...]}`` or ``{"accuracy": [...]}``, one value per
    position, the last one repeated past its end); or any callable rank -> weight.

    Example:
        >>> rank_weights(3).round(4).tolist(), rank_weights(3, "rbp", p=0.5).tolist()
        ([1.0, 0.6309, 0.5], [1.0, 0.5, 0.25])
    """
    ranks = np.arange(start, start + n, dtype=np.float64)
    if decay == "log":
        return 1.0 / np.log2(ranks + 1)
    if decay == "linear":
        return 1.0 / ranks
    if decay == "rbp":
        return np.power(float(p), ranks - 1)
    if decay == "power":
        return np.power(ranks, -float(a))
    if decay == "flat":
        return np.ones(n)
    if decay == "curve":
        values = load_position_weights(curve)
        idx = np.minimum(np.arange(start - 1, start - 1 + n), len(values) - 1)
        return values[idx] if n else np.zeros(0)
    if callable(decay):
        return np.array([float(decay(int(r))) for r in ranks], dtype=np.float64)
    raise ValueError(f"decay must be one of {', '.join(DECAYS)} or a callable, not {decay!r}")


_CURVES: dict[str, np.ndarray] = {}


def load_position_weights(path: str) -> np.ndarray:
    """Per-position weights from a position-curve JSON file (``weights`` or ``accuracy``), cached by
    path."""
    if path in _CURVES:
        return _CURVES[path]
    import json
    from pathlib import Path

    from rankwise.errors import InputError

    if not path:
        raise InputError("decay=curve needs curve=PATH of a position-curve JSON file", field="metric")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the position curve: {exc}", source=path, field="curve") from None
    values = data.get("weights", data.get("accuracy")) if isinstance(data, dict) else None
    if (not isinstance(values, list) or not values
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values)):
        raise InputError("a position curve holds 'weights' (or 'accuracy'): a non-empty list of numbers >= 0",
                         source=path, field="weights")
    arr = np.asarray(values, dtype=np.float64)
    if arr.max() <= 0:
        raise InputError("a position curve needs at least one weight > 0", source=path, field="weights")
    _CURVES[path] = arr
    return arr


def wcp(m: RelevanceMatrix, k: int | None = None, decay: Decay = "log", ideal: str = "k", p: float = 0.8,
        a: float = 1.0, curve: str = "") -> np.ndarray:
    """Weighted context precision per query: sum w(i)·v_i / sum w(i) over the top K.

    ``ideal="k"`` divides by the weights of all K positions; ``"attainable"`` by those of the first
    min(K, R). Without k, K is the number of items retrieved for the query. Weights:
    :func:`rank_weights`.
    """
    if ideal not in ("k", "attainable"):
        raise ValueError(f"ideal must be 'k' or 'attainable', not {ideal!r}")
    nq = len(m.query_ids)
    K = np.full(nq, k, dtype=np.int64) if k is not None else m.lengths.astype(np.int64)
    width = int(max(K.max(initial=0), m.depth))
    w = rank_weights(width, decay, p=p, a=a, curve=curve)
    cum_w = np.concatenate([[0.0], np.cumsum(w)])
    cols = min(m.depth, width)
    rel = m.chunk_relevant[:, :cols]  # redundant chunks count: they are relevant context
    in_k = np.arange(cols)[None, :] < K[:, None]
    if ideal == "attainable":
        # min(K, R); with text ground truth several chunks can match one passage, so never fewer
        # positions than relevant chunks in the top K (keeps the score <= 1).
        K_den = np.minimum(K, np.maximum(m.n_relevant, (rel & in_k).sum(axis=1)))
    else:
        K_den = K
    num = _row_sums(np.where(rel & in_k, w[:cols], 0.0))  # left to right: independent of padding
    den = cum_w[K_den]
    out = np.zeros(nq)
    np.divide(num, den, out=out, where=den > 0)
    return out


def acp(m: RelevanceMatrix, k: int | None = None, ragas_compat: bool = False) -> np.ndarray:
    """Average context precision per query: sum P@i·v_i / sum v_i over the top K (0 if no v_i = 1).

    ``ragas_compat`` adds Ragas' 1e-10 to the denominator, so a perfect ranking scores 0.9999999999.
    """
    n = m.depth if k is None else min(k, m.depth)
    rel = m.chunk_relevant[:, :n]  # redundant chunks count: they are relevant context
    cum = np.cumsum(rel, axis=1)
    prec = cum / np.arange(1, n + 1, dtype=np.float64)
    terms = np.where(rel, prec, 0.0)
    # left-to-right sum (not numpy's pairwise one), as Ragas' Python sum: the same digits
    num = np.add.accumulate(terms, axis=1)[:, -1] if n else np.zeros(len(terms))
    den = rel.sum(axis=1).astype(np.float64)
    if ragas_compat:
        return num / (den + RAGAS_EPSILON)
    out = np.zeros(len(num))
    np.divide(num, den, out=out, where=den > 0)
    return out


def context_recall(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Share of ground-truth items (passages) found in the top K."""
    den = m.n_relevant.astype(np.float64)
    out = np.zeros(len(den))
    np.divide(m.within("found", k).astype(np.float64), den, out=out, where=den > 0)
    return out


def char_recall(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Share of the reference passages' characters covered by the top K chunks' spans (span ground
    truth).

    Overlapping passages or chunks count once; 0 when no passage has a span.
    """
    if m.char_found is None or m.char_total is None:
        raise ValueError("char_recall needs a matrix built from span ground truth")
    covered = m.at(np.cumsum(m.char_found, axis=1), k)
    out = np.zeros(len(covered))
    np.divide(covered, m.char_total, out=out, where=m.char_total > 0)
    return out


def _distinct(m: RelevanceMatrix) -> np.ndarray:
    in_list = np.arange(m.depth)[None, :] < m.lengths[:, None]
    return in_list if m.distinct is None else (m.distinct & in_list)


def id_precision(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Distinct relevant ids retrieved / distinct ids retrieved, order-blind; NaN when nothing was
    retrieved."""
    distinct = _distinct(m)
    n = distinct.sum(axis=1).astype(np.float64)
    hits = (distinct & m.chunk_relevant).sum(axis=1).astype(np.float64)
    out = np.full(len(n), np.nan)
    np.divide(hits, n, out=out, where=n > 0)
    return out


def id_recall(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Distinct gold ids retrieved / gold ids, order-blind; NaN when the case has no gold id."""
    den = m.n_relevant.astype(np.float64)
    out = np.full(len(den), np.nan)
    np.divide(m.within("found", None).astype(np.float64), den, out=out, where=den > 0)
    return out


def _one(verdicts: Sequence[int | bool], n_relevant: int | None = None) -> RelevanceMatrix:
    v = [1 if int(x) >= 1 else 0 for x in verdicts]
    return RelevanceMatrix.from_verdicts([v], n_relevant=None if n_relevant is None else [n_relevant])


def weighted_context_precision(verdicts: Sequence[int | bool], k: int | None = None, decay: Decay = "log",
                               ideal: str = "k", n_relevant: int | None = None, p: float = 0.8,
                               a: float = 1.0) -> float:
    """Rank-weighted share of the top K that is relevant (docs/metrics.md §3, ``wcp@K``).

    Args:
        verdicts: 0/1 per retrieved chunk, in rank order.
        k: cutoff K; None = all given verdicts. Missing ranks count as non-relevant.
        decay: ``"log"`` (1/log2(i+1)), ``"linear"`` (1/i), ``"rbp"`` (p^(i-1)), ``"power"`` (i^-a),
            ``"flat"`` or a callable rank -> weight.
        ideal: ``"k"`` (all K positions could be relevant) or ``"attainable"`` (only min(K, R)).
        n_relevant: R for ``ideal="attainable"``; defaults to the number of 1s given.

    Example:
        >>> round(weighted_context_precision([1, 0, 1], k=3), 4)
        0.7039
        >>> round(weighted_context_precision([0, 1, 1], k=3, decay="linear"), 4)
        0.4545
    """
    return float(wcp(_one(verdicts, n_relevant), k, decay, ideal, p=p, a=a)[0])


def average_context_precision(verdicts: Sequence[int | bool], k: int | None = None,
                              ragas_compat: bool = False) -> float:
    """Mean of precision@i over the relevant ranks i <= K (Ragas/DeepEval "context precision").

    Divides by relevant *retrieved*: one relevant chunk at rank 1 scores 1.0 however much was
    missed, so pair it with a recall figure.

    Example:
        >>> round(average_context_precision([1, 0, 1]), 4)
        0.8333
        >>> average_context_precision([1], ragas_compat=True)
        0.9999999999
    """
    return float(acp(_one(verdicts), k, ragas_compat)[0])


def set_precision(retrieved: Iterable[str], gold: Iterable[str]) -> float | None:
    """|retrieved ∩ gold| / |retrieved| over distinct ids; None when nothing was retrieved.

    Example:
        >>> set_precision(["d1", "d2", "d3", "d4"], ["d1", "d4", "d5", "d6"])
        0.5
    """
    ret, gold_set = set(retrieved), set(gold)
    return None if not ret else len(ret & gold_set) / len(ret)


def set_recall(retrieved: Iterable[str], gold: Iterable[str]) -> float | None:
    """|retrieved ∩ gold| / |gold| over distinct ids; None when there is no gold id.

    Example:
        >>> set_recall(["d1", "d2", "d3"], ["d1", "d4", "d5", "d6"])
        0.25
    """
    ret, gold_set = set(retrieved), set(gold)
    return None if not gold_set else len(ret & gold_set) / len(gold_set)


def harmonic_mean(a, b):
    """Elementwise 2ab/(a+b), 0 where both are 0 (the paired F1 summaries).

    Example:
        >>> float(harmonic_mean(0.5, 0.5))
        0.5
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(2 * a * b, a + b, out=out, where=(a + b) > 0)
    return out
