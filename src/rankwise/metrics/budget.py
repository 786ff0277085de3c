"""Metrics at a context budget: cutoffs in characters (``recall@1500c``) or tokens (``ndcg@512t``),
not chunks.

At a fixed K, bigger chunks win by holding more text; at a budget B, two chunkers are compared at
the same prompt size. The retrieved chunks are laid out in rank order, as a prompt holds them
(overlapping chunks repeat their shared text, as the prompt does); chunk i occupies positions L(i-1)
+ 1 .. L(i) of that layout, L(i) = l(1) + ... + l(i) and l(i) its length: characters (``c``), or
tokens (``t``, counted as ``ceil(characters / 4)`` per chunk, the rule of rankwise's cost
estimates). The chunk that crosses the budget counts by the part that fits: w(i) = clamp((B -
L(i-1)) / l(i), 0, 1).

Definitions and worked examples: docs/context-metrics.md, "Metrics at a context budget".

Example:
    >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
    >>> rec = CaseRecord(
    ...     "q1",
    ...     chunks=[
    ...         ChunkRecord(rank=1, text="x" * 60, verdicts={"llm": Verdict(1)}),
    ...         ChunkRecord(rank=2, text="y" * 60, verdicts={"llm": Verdict(0)}),
    ...     ],
    ... )
    >>> from rankwise.metrics.matrix import RelevanceMatrix
    >>> m = RelevanceMatrix.from_records([rec], "llm")
    >>> budget_weights(m, 90, "c").tolist(), precision_at(m, 90, "c").tolist()
    ([[1.0, 0.5]], [0.6666666666666666])
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics.context import rank_weights
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["UNITS", "BUDGET_METRICS", "chunk_lengths", "budget_weights", "precision_at", "recall_at", "ndcg_at",
           "wcp_at", "budget_values"]

#: budget units: characters and tokens (ceil(characters / 4) per chunk)
UNITS = {"c": "characters", "t": "tokens"}
CHARS_PER_TOKEN = 4


def chunk_lengths(m: RelevanceMatrix, unit: str) -> np.ndarray:
    """(queries, depth) lengths of the retrieved chunks in ``unit`` (0 past a list's end); an
    InputError when the matrix carries no chunk lengths (a qrels + run, or records whose chunks have
    neither text nor offsets)."""
    if unit not in UNITS:
        raise InputError(f"a budget's unit is c (characters) or t (tokens), not {unit!r}", field="metric")
    if m.chunk_chars is None:
        raise InputError("a budget cutoff (@Nc, @Nt) needs the chunks' texts (or their start/end offsets): "
                         "evaluate RAG records or a test set with retrieved texts, not ids alone", field="metric")
    chars = m.chunk_chars.astype(np.float64)
    return chars if unit == "c" else np.ceil(chars / CHARS_PER_TOKEN)


def _layout(m: RelevanceMatrix, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk's length and where it starts in the layout (the lengths of the chunks above it).
    """
    lengths = chunk_lengths(m, unit)
    ends = np.cumsum(lengths, axis=1)
    return lengths, ends - lengths


def budget_weights(m: RelevanceMatrix, budget: int, unit: str) -> np.ndarray:
    """(queries, depth) share of each chunk inside the budget: 1 above it, the part that fits across
    it, 0 past it (an empty chunk inside the budget counts 1)."""
    lengths, starts = _layout(m, unit)
    room = budget - starts
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(lengths > 0, np.clip(room / np.where(lengths > 0, lengths, 1), 0.0, 1.0),
                     (room > 0).astype(np.float64))
    in_list = np.arange(m.depth)[None, :] < m.lengths[:, None]
    return np.where(in_list, w, 0.0)


def precision_at(m: RelevanceMatrix, budget: int, unit: str) -> np.ndarray:
    """The share of the budget filled by relevant chunks."""
    w = budget_weights(m, budget, unit)
    lengths = chunk_lengths(m, unit)
    return (np.where(m.chunk_relevant, w * lengths, 0.0).sum(axis=1)) / budget


def recall_at(m: RelevanceMatrix, budget: int, unit: str) -> np.ndarray:
    """Gold items found within the budget (a chunk across it by the part that fits) over R."""
    found = m.found if m.found is not None else m.relevant.astype(np.int64)
    got = (budget_weights(m, budget, unit) * found).sum(axis=1)
    out = np.zeros(len(got))
    np.divide(got, m.n_relevant, out=out, where=m.n_relevant > 0)
    return out


def _ideal_weights(m: RelevanceMatrix, budget: int, unit: str, w: np.ndarray, width: int) -> np.ndarray:
    """(queries, width) weights of the ideal ranking's positions: the list's own, then, for a list
    shorter than the budget, positions of its mean chunk length until the budget is full."""
    lengths = chunk_lengths(m, unit)
    total = lengths.sum(axis=1)
    out = np.zeros((len(w), width))
    cols = min(width, w.shape[1])
    out[:, :cols] = w[:, :cols]
    for q in np.flatnonzero(total < budget):
        n = int(m.lengths[q])
        mean = total[q] / n if n else float(budget)
        if mean <= 0:
            continue
        extra = (budget - total[q]) / mean
        for j in range(n, min(width, n + math.ceil(extra))):
            out[q, j] = min(1.0, extra - (j - n))
    return out


def ndcg_at(m: RelevanceMatrix, budget: int, unit: str, gain: str = "raw") -> np.ndarray:
    """DCG within the budget over the ideal DCG at the same positions (see the module doc)."""
    w = budget_weights(m, budget, unit)
    g = np.where(m.judged & (m.grades > 0), m.grades, 0).astype(np.float64)
    ig = m.ideal_gains.astype(np.float64)
    if gain == "exp":
        g, ig = np.exp2(g) - 1, np.exp2(ig) - 1
    elif gain != "raw":
        raise InputError(f"gain must be 'raw' or 'exp', not {gain!r}", field="metric")
    width = ig.shape[1]
    iw = _ideal_weights(m, budget, unit, w, width)
    disc = 1.0 / np.log2(np.arange(2, max(m.depth, width) + 2, dtype=np.float64))
    dcg = (w * g * disc[: m.depth]).sum(axis=1)
    idcg = (iw * ig * disc[:width]).sum(axis=1)
    out = np.zeros(len(dcg))
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


def wcp_at(m: RelevanceMatrix, budget: int, unit: str, decay: str = "log", ideal: str = "k", p: float = 0.8,
           a: float = 1.0, curve: str = "") -> np.ndarray:
    """Relevant positions of the layout within the budget, each weighted by the decay of its
    position."""
    if ideal != "k":
        raise InputError("wcp at a budget divides by the budget's positions: ideal=attainable has no meaning there",
                         field="metric")
    lengths, starts = _layout(m, unit)
    in_list = np.arange(m.depth)[None, :] < m.lengths[:, None]
    # positions past every list's end weigh only in the denominator: summed in blocks, so a budget
    # far past the lists (wcp@100000000c) costs time in proportion but memory bounded by the lists'
    # own length
    reach = int(min(budget, np.where(in_list, starts + lengths, 0).max(initial=0)))
    cum = np.concatenate([[0.0], np.cumsum(rank_weights(reach, decay, p=p, a=a, curve=curve))])
    lo = np.clip(starts, 0, reach).astype(np.int64)
    hi = np.clip(starts + lengths, 0, reach).astype(np.int64)
    part = np.where(m.chunk_relevant & in_list, cum[hi] - cum[lo], 0.0)
    total = cum[budget] if reach == budget else (
        _decay_total(budget, decay, p, a, curve) if isinstance(decay, str)
        else _decay_total.__wrapped__(budget, decay, p, a, curve))
    return part.sum(axis=1) / total


_BLOCK = 1 << 20  # decay weights summed at a time past the lists' end


@functools.lru_cache(maxsize=64)
def _decay_total(budget: int, decay: str, p: float, a: float, curve: str) -> float:
    """Sum of the decay over positions 1 .. budget, a block at a time (remembered: an evaluation
    scores one budget several times, for the result and its headroom)."""
    total = 0.0
    for first in range(1, budget + 1, _BLOCK):
        n = min(_BLOCK, budget + 1 - first)
        total += float(rank_weights(n, decay, p=p, a=a, curve=curve, start=first).sum())
    return total


_COMPUTE = {"precision": precision_at, "recall": recall_at, "ndcg": ndcg_at, "ndcg_exp": None, "wcp": wcp_at}
#: the metrics that take a budget cutoff
BUDGET_METRICS = tuple(_COMPUTE)


def budget_values(metric: str, m: RelevanceMatrix, budget: int, unit: str, **params: object) -> np.ndarray:
    """Per-query values of ``metric`` at ``budget`` ``unit`` (one of :data:`BUDGET_METRICS`).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> rec = CaseRecord(
        ...     "q1",
        ...     chunks=[
        ...         ChunkRecord(rank=1, text="a" * 40, verdicts={"llm": Verdict(0)}),
        ...         ChunkRecord(rank=2, text="b" * 40, verdicts={"llm": Verdict(1)}),
        ...     ],
        ... )
        >>> m = RelevanceMatrix.from_records([rec], "llm")
        >>> (
        ...     budget_values("recall", m, 60, "c").tolist(),
        ...     budget_values("recall", m, 80, "c").tolist(),
        ... )
        ([0.5], [1.0])
    """
    if budget < 1:
        raise InputError(f"a budget must be at least 1, not {budget}", field="metric")
    if metric == "ndcg_exp":
        return ndcg_at(m, budget, unit, gain="exp")
    fn = _COMPUTE.get(metric)
    if fn is None:
        raise InputError(f"{metric} takes no budget cutoff; budgets (@Nc, @Nt) apply to "
                         f"{', '.join(BUDGET_METRICS)}", field="metric")
    return fn(m, budget, unit, **params)
