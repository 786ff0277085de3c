"""The rest of trec_eval 10.0's measures, each computed as trec_eval computes it.

Every function takes a :class:`RelevanceMatrix` and a cutoff ``k`` (None: the whole ranking) and
returns one value per query, the value trec_eval's ``m_<name>.c`` stores for that query: the same
operations on doubles in the same order (sums run left to right along a row, never pairwise as
``np.sum`` adds; logarithms come from the C library through :mod:`math`, as numpy's SIMD ``log2``
may differ from it in the last bit), so the digits agree beyond the four trec_eval prints
(tests/conformance/test_trec_eval_binary.py compares them bit for bit). Definitions and citations:
``docs/trec-measures.md``.

trec_eval's view of a ranked item: its grade when the qrels judge it (grade >= 0), "unjudged in the
pool" when the qrels give it a negative grade, "not in the pool" when the qrels do not list it.
Queries in the qrels but absent from the run (``missing="zero"``, trec_eval ``-c``) are scored on an
empty ranking, which gives the value trec_eval's placeholder ranking (one document outside the
qrels) gives for every measure here, except where trec_eval zeroes ``utility``, ``unj``,
``rbp_resid`` and ``relstring`` for those queries by their printed name: it matches the bare names
only, so with parameters (``utility_2,-1,0,0``, ``rbp_resid_p=0.5``, ``relstring_25``) they keep the
placeholder's value, and so do ours.

Gain maps (``ndcg.1=1,2=3``, ``G``, ``dcg``, ...) follow trec_eval's ``gain_init.c``: a judged
level's gain is the map's value for it, else the level itself; the ideal ranking holds every judged
document's positive gain, largest first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rankwise.metrics._arith import _c_log2, _log2_table, _rowsum
from rankwise.metrics._names import TREC_NICKNAMES, MeasureParamError
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = [
    "TREC_NICKNAMES", "MeasureParamError", "MIN_GEO_MEAN", "INFAP_EPSILON", "TextValues", "parse_gains", "parse_floats",
    "iprec_at_recall", "eleven_pt_avg", "average_precision_seq", "bpref_seq", "inf_ap", "rprec_mult",
    "set_map", "set_relative_p", "set_f", "relative_p", "utility", "num_nonrel_judged_ret", "dcg", "ideal_dcg",
    "ndcg_gains", "ndcg_rel", "rndcg", "ndcg_p", "g_measure", "bin_g", "rbp", "rbp_resid", "unj",
    "judged", "yaap", "relstring", "err", "nerr8", "nerr9", "gmean_trec",
]

# trec_eval's measure nicknames (measures.c) and MeasureParamError live in _names.py, which the
# registry reads without importing this module

MIN_GEO_MEAN = 0.00001  # trec_eval.h: floor of a value entering a geometric mean
INFAP_EPSILON = 0.00001  # trec_eval.h

NONPOOL, UNJUDGED = -1, -2  # trec_eval's relevance values for items not in the qrels / with a negative grade


class TextValues(np.ndarray):
    """Per-query numbers that also carry a text per query (``relstring``); ``.texts`` holds the
    texts."""

    texts: list[str]

    def __new__(cls, values: np.ndarray, texts: list[str]) -> TextValues:
        obj = np.asarray(values, dtype=np.float64).view(cls)
        obj.texts = texts
        return obj

    def __array_finalize__(self, obj) -> None:
        self.texts = getattr(obj, "texts", [])


# ------------------------------------------------------------------------------------------ helpers
def _div(num, den) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _valid(m: RelevanceMatrix) -> np.ndarray:
    return np.arange(m.depth)[None, :] < m.lengths[:, None]


def _pooled(m: RelevanceMatrix) -> np.ndarray:
    return m.judged if m.pooled is None else m.pooled


def _rel_list(m: RelevanceMatrix) -> np.ndarray:
    """trec_eval's ``results_rel_list``: the grade when judged, -2 unjudged in the pool, -1 not in
    the pool."""
    out = np.where(_pooled(m) & ~m.judged, UNJUDGED, NONPOOL)
    return np.where(m.judged, m.grades, out)


def _num_rel_ret(m: RelevanceMatrix) -> np.ndarray:
    return m.within("relevant", None)


def _in_run(m: RelevanceMatrix) -> np.ndarray:
    return np.ones(len(m.query_ids), dtype=bool) if m.in_run is None else m.in_run


def _lround(x: np.ndarray) -> np.ndarray:
    """C's ``lround``: halves away from zero (``np.round`` rounds them to even)."""
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)).astype(np.int64)


def parse_floats(text: str, default: Sequence[float]) -> list[float]:
    """A comma list of numbers (``"0.2,0.5,0.8"``); ``default`` when empty.

    Example:
        >>> parse_floats("0.2, .5", [])
        [0.2, 0.5]
    """
    if not str(text).strip():
        return list(default)
    try:
        return [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise MeasureParamError(f"expected comma-separated numbers, not {text!r}") from None


def parse_gains(text: str) -> dict[int, float]:
    """trec_eval's gain map ``"1=1,2=3,3=7"`` (level = gain); ``""`` is the default map (gain =
    level).

    Example:
        >>> parse_gains("1=1,2=3,3=7")
        {1: 1.0, 2: 3.0, 3: 7.0}
    """
    out: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        key, eq, value = part.partition("=")
        try:
            level, gain = int(key), float(value)
        except ValueError:
            raise MeasureParamError(f"a gain map is level=gain pairs (1=1,2=3), not {part!r}") from None
        if not eq or level < 0:
            raise MeasureParamError(f"a gain map is level=gain pairs with levels >= 0 (1=1,2=3), not {part!r}")
        out[level] = gain
    return out


def _gain_of(levels: np.ndarray, gains: dict[int, float]) -> np.ndarray:
    out = levels.astype(np.float64)
    for level, gain in gains.items():
        out[levels == level] = gain
    return out


def _result_gains(m: RelevanceMatrix, gains: dict[int, float]) -> np.ndarray:
    """(queries, depth) gain of each retrieved item; 0 unless judged."""
    return np.where(m.judged & _valid(m), _gain_of(m.grades, gains), 0.0)


def _ideal(m: RelevanceMatrix, gains: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """(queries, T) positive gains of the judged documents, largest first, and T per query."""
    pos = m.ideal_gains > 0
    g = np.where(pos, _gain_of(m.ideal_gains, gains), 0.0)
    zero_gain = gains.get(0, 0.0)
    if zero_gain > 0:  # grade-0 judgements gain too: add them (n judged - n positive of them per query)
        zeros = (m.n_relevant + m.n_judged_nonrelevant - pos.sum(axis=1)).astype(np.int64)
        width = g.shape[1] + int(zeros.max(initial=0))
        wide = np.zeros((g.shape[0], width))
        wide[:, : g.shape[1]] = g
        for i in np.flatnonzero(zeros):
            start = int(pos[i].sum())
            wide[i, start: start + zeros[i]] = zero_gain
        g = wide
    g = np.where(g > 0, g, 0.0)
    g = -np.sort(-g, axis=1)
    count = (g > 0).sum(axis=1)
    width = int(count.max(initial=0))
    return np.ascontiguousarray(g[:, :width]), count


def _discounted(values: np.ndarray, offset: int = 2) -> np.ndarray:
    """values[:, i] / log2(i + offset), as C divides."""
    n = values.shape[1]
    table = _log2_table(n + offset)
    return values / table[offset: offset + n][None, :]


# ------------------------------------------------------------------------------------------
# measures
def _iprec_values(m: RelevanceMatrix, points: Sequence[float]) -> np.ndarray:
    """(queries, len(points)) interpolated precision at each recall point (m_iprec_at_recall.c)."""
    nq = len(m.query_ids)
    cum = m.cum_relevant()
    nrr = _num_rel_ret(m)
    out = np.zeros((nq, len(points)))
    if m.depth == 0:
        return out
    if "iprec_best_after" not in m._cache:
        prec = np.where(_valid(m), cum / np.arange(1.0, m.depth + 1)[None, :], -np.inf)
        m._cache["iprec_best_after"] = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]  # max P(j), j >= i
    best_after = m._cache["iprec_best_after"]
    rows = np.arange(nq)
    for j, point in enumerate(points):
        cut = _lround(point * m.n_relevant.astype(np.float64))
        # the rank of the cut-th relevant item (cut >= 1): first column where the count reaches it
        col = np.argmax((cum >= np.maximum(cut, 1)[:, None]) & m.relevant, axis=1)
        value = np.where(cut == 0, best_after[:, 0], best_after[rows, col])
        out[:, j] = np.where((cut <= nrr) & (nrr > 0), value, 0.0)
    return out


def iprec_at_recall(m: RelevanceMatrix, k: int | None = None, recall: float = 0.0) -> np.ndarray:
    """Interpolated precision at a recall level: max over ranks i >= the rank where recall first
    reaches ``recall`` of P@i; the level is round(recall * R) relevant items (C ``lround``).
    trec_eval ``iprec_at_recall_0.10`` (m_iprec_at_recall.c; Manning et al., IIR §8.4)."""
    return _iprec_values(m, [recall])[:, 0]


ELEVEN_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def eleven_pt_avg(m: RelevanceMatrix, k: int | None = None, points: str = "") -> np.ndarray:
    """Mean interpolated precision over recall points (default the 11 points 0, 0.1, ..., 1);
    trec_eval ``11pt_avg`` (m_11pt_avg.c). The points are sorted, as trec_eval assumes them to be.
    """
    pts = sorted(parse_floats(points, ELEVEN_POINTS))
    values = _iprec_values(m, pts)
    total = np.zeros(values.shape[0])
    for j in range(len(pts) - 1, -1, -1):  # trec_eval adds from the highest point down
        total = total + values[:, j]
    return total / float(len(pts))


def average_precision_seq(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """AP = sum over relevant ranks i of P@i, divided by R, summed in rank order (m_gm_map.c)."""
    rel = m.relevant
    cum = m.cum_relevant()
    terms = np.where(rel, cum / np.arange(1.0, m.depth + 1)[None, :], 0.0)
    return _div(_rowsum(terms), m.n_relevant)


def bpref_seq(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """bpref = (1/R) sum over retrieved relevant r of 1 - min(N_r, R) / min(N, R), N_r the judged
    non-relevant items above r, N all judged non-relevant (m_gm_bpref.c; Buckley & Voorhees, SIGIR
    2004)."""
    rel = m.relevant
    nonrel = m.judged & ~rel & _valid(m)
    above = np.cumsum(nonrel, axis=1)
    R = m.n_relevant[:, None].astype(np.float64)
    den = np.minimum(m.n_judged_nonrelevant[:, None], m.n_relevant[:, None]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = 1.0 - np.minimum(above, R) / den
    terms = np.where(rel, np.where(above > 0, part, 1.0), 0.0)
    return _div(_rowsum(terms), m.n_relevant)


def gmean_trec(values: np.ndarray) -> float:
    """trec_eval's geometric mean (meas_avg.c ``te_calc_avg_meas_s_gm``): exp of the mean of
    log(max(v, MIN_GEO_MEAN)), the logs added in query order.

    Example:
        >>> round(gmean_trec(np.array([0.5, 0.0])), 6)
        0.002236
    """
    if len(values) == 0:
        return 0.0
    total = 0.0
    for v in np.asarray(values, dtype=np.float64).tolist():
        total += math.log(max(v, MIN_GEO_MEAN))
    return math.exp(total / len(values))


def inf_ap(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Inferred AP (Yilmaz & Aslam, CIKM 2006), trec_eval ``infAP`` (m_infap.c): at the relevant
    item of 0-based rank j > 0, 1/(j+1) + j/(j+1) * ((r-1 + n + u)/j) * ((r-1 + eps)/(r-1 + n + 2
    eps)), with r the relevant items up to it, n the judged non-relevant and u the unjudged pooled
    items above it; 1 at rank 0; summed and divided by R. Items not in the pool are skipped."""
    rl = _rel_list(m)
    valid = _valid(m)
    rel = m.relevant & valid
    nonrel = m.judged & ~m.relevant & valid
    unj = (rl == UNJUDGED) & valid
    r = np.cumsum(rel, axis=1)
    n = np.cumsum(nonrel, axis=1)
    u = np.cumsum(unj, axis=1)
    fj = np.arange(m.depth, dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        term = (1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((r - 1 + n + u) / fj)
                * (((r - 1) + INFAP_EPSILON) / ((r - 1 + n) + 2 * INFAP_EPSILON)))
    term[:, :1] = 1.0
    return _div(_rowsum(np.where(rel, term, 0.0)), m.n_relevant)


def rprec_mult(m: RelevanceMatrix, k: int | None = None, mult: float = 1.0) -> np.ndarray:
    """Precision at rank (long)(mult * R + 0.9); past the end of the ranking, relevant retrieved /
    that rank. trec_eval ``Rprec_mult_0.20`` (m_Rprec_mult.c)."""
    cut = (mult * m.n_relevant.astype(np.float64) + 0.9).astype(np.int64)
    nrr = _num_rel_ret(m).astype(np.float64)
    cum = m.cum_relevant()
    inside = (cut >= 1) & (cut <= m.lengths)
    col = np.clip(cut - 1, 0, max(m.depth - 1, 0))
    hits = cum[np.arange(len(cut)), col].astype(np.float64) if m.depth else np.zeros(len(cut))
    return np.where(inside, _div(hits, cut), np.where(cut > m.lengths, _div(nrr, cut), 0.0))


def set_map(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """relevant retrieved^2 / (retrieved * R); 0 when either is 0. trec_eval ``set_map``
    (m_set_map.c)."""
    nrr = _num_rel_ret(m).astype(np.float64)
    return _div(nrr * nrr, m.lengths.astype(np.float64) * m.n_relevant.astype(np.float64))


def set_relative_p(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """relevant retrieved / min(retrieved, R): precision over the best a list this long could do.
    trec_eval ``set_relative_P`` (m_set_rel_P.c)."""
    return _div(_num_rel_ret(m), np.minimum(m.lengths, m.n_relevant))


def set_f(m: RelevanceMatrix, k: int | None = None, beta: float = 1.0) -> np.ndarray:
    """trec_eval's ``set_F`` (m_set_F.c): ``(beta + 1) P R / (beta P + R)`` over the whole list,
    with P ``set_P`` and R ``set_recall``; 0 when nothing relevant is retrieved. ``beta`` is
    trec_eval's parameter as is (``set_F.0.5``), the relative importance of recall, not squared as
    in van Rijsbergen's F_beta; at 1 it is the harmonic mean of P and R.

    Example:
        >>> from rankwise.metrics.matrix import RelevanceMatrix
        >>> m = RelevanceMatrix.from_verdicts([[1, 0, 0, 0]], n_relevant=[2])
        >>> set_f(m).tolist(), set_f(m, beta=2.0).tolist()  # P 1/4, R 1/2
        ([0.3333333333333333], [0.375])
    """
    from rankwise.metrics.ir import precision, recall

    p, r = precision(m, None), recall(m, None)
    return _div((beta + 1.0) * p * r, beta * p + r)


def relative_p(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """relevant in the top k / min(k, R); 0 when R = 0. trec_eval ``relative_P_k`` (m_rel_P.c)."""
    if k is None:
        return set_relative_p(m)
    return _div(m.within("relevant", k), np.minimum(k, m.n_relevant))


def utility(m: RelevanceMatrix, k: int | None = None, coefficients: str = "1,-1,0,0",
            num_docs: int = 0, bare: bool | None = None) -> np.ndarray:
    """a*relret + b*(ret - relret) + c*(R - relret) + d*(N + relret - ret - R) with coefficients
    a,b,c,d and N the collection size (trec_eval ``-N``); 0 for queries missing from the run under
    the bare name (``bare``, default: the default coefficients), else the placeholder's value.
    trec_eval ``utility`` (m_utility.c)."""
    co = parse_floats(coefficients, (1.0, -1.0, 0.0, 0.0))
    if len(co) != 4:
        raise MeasureParamError(f"utility takes 4 coefficients (a,b,c,d), not {coefficients!r}")
    a, b, c, d = co
    nrr = _num_rel_ret(m).astype(np.int64)
    ret, rel = m.lengths.astype(np.int64), m.n_relevant.astype(np.int64)
    missing = ~_in_run(m)
    bare = coefficients == "1,-1,0,0" if bare is None else bare
    if not bare:  # utility_<coefficients>: trec_eval's placeholder, one retrieved item, not relevant
        ret = np.where(missing, 1, ret)
    value = (a * nrr.astype(np.float64) + b * (ret - nrr).astype(np.float64)
             + c * (rel - nrr).astype(np.float64) + d * (num_docs + nrr - ret - rel).astype(np.float64))
    return np.where(missing & bare, 0.0, value)


def num_nonrel_judged_ret(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Judged non-relevant items retrieved. trec_eval ``num_nonrel_judged_ret`` (summed over
    queries)."""
    return (m.judged & ~m.relevant & _valid(m)).sum(axis=1).astype(np.float64)


def _dcg_parts(m: RelevanceMatrix, gains: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    g = parse_gains(gains)
    rg = _result_gains(m, g)
    ig, t = _ideal(m, g)
    return rg, _discounted(rg), ig, _discounted(ig)


def dcg(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """DCG = sum over ranks i of gain_i / log2(i + 1) (Järvelin & Kekäläinen, TOIS 2002). trec_eval
    ``dcg``."""
    rg, drg, _, _ = _dcg_parts(m, gains)
    return _rowsum(drg)


def ideal_dcg(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """DCG of the ideal ranking (every judged positive gain, largest first). trec_eval
    ``ideal_dcg``."""
    _, _, _, dig = _dcg_parts(m, gains)
    return _rowsum(dig)


def ndcg_gains(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """DCG / ideal DCG over the whole ranking under a gain map (trec_eval ``-m ndcg.1=1,2=3,3=7``,
    printed ``ndcg_1=1,2=3,3=7``; m_ndcg.c)."""
    _, drg, _, dig = _dcg_parts(m, gains)
    return _div(_rowsum(drg), _rowsum(dig))


def ndcg_rel(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """nDCG averaged over the relevant documents: at each retrieved positive-gain item, DCG / ideal
    DCG at its rank, plus (T - those retrieved) * final DCG / final ideal DCG, all / T (T the
    positive-gain judgements). trec_eval ``ndcg_rel`` (m_ndcg_rel.c)."""
    rg, drg, ig, dig = _dcg_parts(m, gains)
    nq = rg.shape[0]
    t = (ig > 0).sum(axis=1)
    out = np.zeros(nq)
    if ig.shape[1] == 0:
        return out
    dcg_at = np.cumsum(drg, axis=1) if rg.shape[1] else np.zeros((nq, 0))
    idcg_at = np.cumsum(dig, axis=1)
    full_dcg = dcg_at[:, -1] if rg.shape[1] else np.zeros(nq)
    full_idcg = idcg_at[np.arange(nq), np.maximum(t - 1, 0)]
    cols = np.minimum(np.arange(rg.shape[1])[None, :], np.maximum(t - 1, 0)[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = dcg_at / np.take_along_axis(idcg_at, cols, axis=1)
        terms = np.where(rg > 0, ratio, 0.0)
        total = _rowsum(terms) + ((t - (rg > 0).sum(axis=1)).astype(np.float64) * full_dcg) / full_idcg
    ok = (total > 0) & (t > 0)
    out[ok] = total[ok] / t[ok]
    return out


def rndcg(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """nDCG averaged over the ranks where the ideal gain drops (the ends of its grade levels) and,
    when the ranking runs past the ideal one, its end; 0 when R = 0. trec_eval ``Rndcg``
    (m_Rndcg.c)."""
    rg, drg, ig, dig = _dcg_parts(m, gains)
    nq = rg.shape[0]
    out = np.zeros(nq)
    if ig.shape[1] == 0:
        return out
    t = (ig > 0).sum(axis=1)
    n = rg.shape[1]
    dcg_at = np.cumsum(drg, axis=1) if n else np.zeros((nq, 0))
    idcg_at = np.cumsum(dig, axis=1)
    for i in range(nq):
        if m.n_relevant[i] == 0 or t[i] == 0:
            continue
        ti, ln = int(t[i]), int(m.lengths[i])
        row = ig[i, :ti]
        total, count = 0.0, 0
        for c in range(1, ti + 1):  # change points: the ideal gain at c differs from the one at c - 1
            if c < ti and row[c] == row[c - 1]:
                continue
            d = dcg_at[i, min(c - 1, ln - 1)] if ln else 0.0
            total += d / idcg_at[i, c - 1]
            count += 1
        if ln > ti + 1:
            total += dcg_at[i, ln - 1] / idcg_at[i, ti - 1]
            count += 1
        out[i] = total / count
    return out


def ndcg_p(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """nDCG with the discount 1 at rank 1 and 1/log2(i) at rank i > 1 (Järvelin & Kekäläinen's
    original form); 0 when nothing relevant is retrieved. trec_eval ``ndcg_p`` (m_ndcg_p.c)."""
    g = parse_gains(gains)
    rg = _result_gains(m, g)
    ig, _ = _ideal(m, g)

    def disc(x: np.ndarray) -> np.ndarray:
        if x.shape[1] == 0:
            return x
        out = x.copy()
        out[:, 1:] = _discounted(x[:, 1:], offset=2)  # column i (0-based) / log2(i + 1)
        return out

    return np.where(_num_rel_ret(m) > 0, _div(_rowsum(disc(rg)), _rowsum(disc(ig))), 0.0)


def g_measure(m: RelevanceMatrix, k: int | None = None, gains: str = "") -> np.ndarray:
    """trec_eval's normalized gain ``G`` (m_G.c): sum over retrieved items of gain_i / log2(2 +
    cost_i - gained_i), cost_i the ideal gains (at least 1 per rank) up to rank i and gained_i the
    gains obtained, divided by the sum of the ideal gains."""
    g = parse_gains(gains)
    rg = _result_gains(m, g)
    ig, t = _ideal(m, g)
    nq, n = rg.shape
    out = np.zeros(nq)
    sum_ideal = _rowsum(ig)
    if n == 0:
        return out
    ideal_n = np.zeros((nq, n))
    w = min(n, ig.shape[1])
    ideal_n[:, :w] = ig[:, :w]
    cost = np.cumsum(np.where(ideal_n >= 1.0, ideal_n, 1.0), axis=1)
    got = np.cumsum(rg, axis=1)
    gaining = _valid(m) & (rg != 0)
    terms = np.zeros((nq, n))
    terms[gaining] = rg[gaining] / _c_log2(((2.0 + cost) - got)[gaining])
    return _div(_rowsum(terms), sum_ideal)


def bin_g(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Binary G: sum over retrieved relevant items of 1 / log2(2 + non-relevant items above it), /
    R. trec_eval ``binG`` (m_binG.c)."""
    rel = m.relevant
    if m.depth == 0:
        return np.zeros(len(m.query_ids))
    cum = m.cum_relevant()
    idx = 3 + np.arange(m.depth)[None, :] - cum  # 3 + i - relevant so far (inclusive), i 0-based
    table = _log2_table(int(idx.max()) + 1)
    terms = np.where(rel, 1.0 / table[np.where(rel, idx, 2)], 0.0)
    return _div(_rowsum(terms), m.n_relevant)


def _powers(p: float, n: int) -> np.ndarray:
    """1, p, p*p, ... by repeated multiplication, as C does."""
    out = np.empty(n + 1)
    cur = 1.0
    for i in range(n + 1):
        out[i] = cur
        cur = cur * p
    return out


def _rbp_spec(p: float, spec: str) -> tuple[float, dict[int, float]]:
    gains: dict[int, float] = {}
    for part in filter(None, (s.strip() for s in str(spec).split(","))):
        key, _, value = part.partition("=")
        if key.strip() == "p":
            try:
                p = float(value)
            except ValueError:
                raise MeasureParamError(f"p must be a number, not {value!r}") from None
        else:
            gains.update(parse_gains(part))
    return p, gains


def rbp(m: RelevanceMatrix, k: int | None = None, p: float = 0.9, gains: str = "") -> np.ndarray:
    """Rank-biased precision (Moffat & Zobel, TOIS 2008): (1 - p) * sum over ranks i of gain_i *
    p^(i-1), the gains scaled into [0, 1] when one falls outside. trec_eval ``rbp`` (``rbp.p=0.8``;
    m_rbp.c).

    trec_eval reads the scaling's min and max without initialising them; with its debug build they
    start at 0, which this reproduces: gains are divided by max(gains) when it exceeds 1.
    """
    p, g = _rbp_spec(p, gains)
    valid = m.judged & _valid(m)
    rg = np.zeros(m.grades.shape)
    top = m.ideal_gains[:, 0] if m.ideal_gains.shape[1] else np.zeros(len(m.query_ids), dtype=np.int64)
    for level in np.unique(top).tolist():  # the scaling depends on the query's judged levels
        rows = top == level
        values = [g.get(j, float(j)) for j in range(level + 1)] + list(g.values())
        lo, hi = min([0.0, *values]), max([0.0, *values])
        raw = _gain_of(m.grades[rows], g)
        if lo < 0 or hi > 1:
            raw = (raw - lo) / (hi - lo)
        rg[rows] = np.where(valid[rows], raw, 0.0)
    terms = rg * _powers(p, m.depth)[None, : m.depth]
    return (1.0 - p) * _rowsum(np.where(rg != 0, terms, 0.0))


def rbp_resid(m: RelevanceMatrix, k: int | None = None, p: float = 0.9, gains: str = "") -> np.ndarray:
    """RBP's residual: p^n + (1 - p) * sum over unjudged ranks i of p^(i-1) (n items retrieved), the
    most the unjudged items could add; 0 when every retrieved item is judged. trec_eval
    ``rbp_resid``."""
    p0 = p
    p, _ = _rbp_spec(p, gains)
    p_given = p0 != 0.9
    unjudged = ~m.judged & _valid(m)
    powers = _powers(p, m.depth)
    total = _rowsum(np.where(unjudged, powers[None, : m.depth], 0.0))
    value = powers[m.lengths] + (1 - p) * total
    missing = ~_in_run(m)
    if spec_given := (p_given or bool(gains)):  # named rbp_resid_<params>: trec_eval keeps the placeholder's
        value = np.where(missing, p + (1 - p) * 1.0, value)
    return np.where((unjudged.any(axis=1) & ~missing) | (missing & spec_given), value, 0.0)


def unj(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Unjudged items (not judged, in the pool or not) in the top k, / k. trec_eval ``unj_k``
    (m_unjudged.c)."""
    unjudged = np.cumsum(~m.judged & _valid(m), axis=1)
    if k is None:
        return _div(m.at(unjudged, None), m.lengths)
    return np.where(_in_run(m), m.at(unjudged, k) / float(k), 0.0)


def judged(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Share of the top k that has a judgement: items the qrels list (any grade, negative ones too),
    or for RAG records chunks with a verdict (not failed or missing), in the top k / min(k,
    retrieved); 0 for an empty ranking. ir_measures ``Judged@k``."""
    pooled = np.cumsum(_pooled(m) & _valid(m), axis=1)
    shown = m.lengths if k is None else np.minimum(m.lengths, k)
    return _div(m.at(pooled, k), shown)


def yaap(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Yet Another AP (Robertson, ECIR 2012): log((1 + S) / (1 + R - S)), S the sum of P@i over
    relevant ranks i. trec_eval ``yaap`` (m_yaap.c)."""
    rel = m.relevant
    terms = np.where(rel, m.cum_relevant() / np.arange(1.0, m.depth + 1)[None, :], 0.0)
    s = _rowsum(terms)
    return np.array([math.log((1.0 + a) / (1.0 + float(r) - a)) for a, r in zip(s.tolist(),
                                                                              m.n_relevant.tolist(), strict=True)])


def relstring(m: RelevanceMatrix, k: int | None = None, length: int = 10, bare: bool | None = None) -> TextValues:
    """The grades of the first ``length`` items as characters: the grade (``>`` above 9), ``-`` not
    in the qrels, ``.`` in the qrels with a negative grade. trec_eval ``relstring`` (printed per
    query, quoted). The number is the string's length. A query missing from the run shows ``''``
    under the bare name (``bare``, default: length 10), else the placeholder document's ``'-'``
    (``relstring_10``)."""
    rl = _rel_list(m)
    texts = []
    missing = ~_in_run(m)
    bare = length == 10 if bare is None else bare
    for i in range(len(m.query_ids)):
        if missing[i] and not bare:  # relstring_<n>: trec_eval shows its placeholder document
            texts.append("-" if length > 0 else "")
            continue
        n = max(0, min(int(length), int(m.lengths[i])))
        chars = []
        for v in rl[i, :n].tolist():
            chars.append(">" if v > 9 else str(v) if v >= 0 else "-" if v == NONPOOL else "." if v == UNJUDGED
                         else "<")
        texts.append("".join(chars))
    return TextValues(np.array([float(len(t)) for t in texts]), texts)


def err(m: RelevanceMatrix, k: int | None = None, max_grade: int = 4) -> np.ndarray:
    """Expected reciprocal rank (Chapelle et al., CIKM 2009): sum over ranks r <= k of (1/r) R_r
    prod_{i<r} (1 - R_i), with R = (2^grade - 1) / 2^max_grade (gdeval.pl's max_grade 4)."""
    n = m.depth if k is None else min(k, m.depth)
    g = np.where(m.judged[:, :n] & (m.grades[:, :n] > 0), m.grades[:, :n], 0).astype(np.float64)
    g = np.minimum(g, float(max_grade))
    r = (np.exp2(g) - 1.0) / 2.0 ** max_grade
    stay = np.cumprod(1.0 - r, axis=1)
    before = np.ones_like(r)
    before[:, 1:] = stay[:, :-1]
    return _rowsum(r * before / np.arange(1.0, n + 1)[None, :])


def _nerr(m: RelevanceMatrix, k: int | None, min_rel: int, max_rel: int, eq9: bool) -> np.ndarray:
    if k is None:
        raise MeasureParamError("nerr8/nerr9 need a cutoff (nerr8@10)")
    if max_rel <= min_rel:
        raise MeasureParamError(f"max_rel ({max_rel}) must exceed min_rel ({min_rel})")
    n = min(k, m.depth)
    level = np.clip(np.where(m.judged[:, :n], m.grades[:, :n], min_rel), min_rel, max_rel)
    g = np.zeros((len(m.query_ids), k))
    g[:, :n] = (level - min_rel) / float(max_rel - min_rel)
    cont = 1.0 - g[:, : k - 1]
    if eq9:
        r = np.arange(1.0, k)
        cont = (r / (r + 1.0))[None, :] * cont
    reach = np.ones((len(m.query_ids), k))
    reach[:, 1:] = np.cumprod(cont, axis=1)  # chance of reaching rank i: the product of continuing before it
    return (reach * g).sum(axis=1) / reach.sum(axis=1)


def nerr8(m: RelevanceMatrix, k: int | None = None, min_rel: int = 0, max_rel: int = 4) -> np.ndarray:
    """NERR, eq. 8 of Azzopardi, Mackenzie & Moffat (ICTIR 2021): a C/W/L metric with continuation
    C_i = 1 - g_i before rank k (0 from k on), g = (grade - min_rel) / (max_rel - min_rel) clipped
    to [0, 1] (unjudged: 0); value = sum_i W_i g_i with W_i proportional to prod_{j<i} C_j
    (cwl_eval's NERR-EQ8)."""
    return _nerr(m, k, min_rel, max_rel, eq9=False)


def nerr9(m: RelevanceMatrix, k: int | None = None, min_rel: int = 0, max_rel: int = 4) -> np.ndarray:
    """NERR, eq. 9 (ICTIR 2021): as :func:`nerr8` with C_i = i/(i+1) (1 - g_i), rank i 1-based."""
    return _nerr(m, k, min_rel, max_rel, eq9=True)
