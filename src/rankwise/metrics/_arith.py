"""trec_eval's arithmetic, bit for bit: C's log2 of whole numbers from a table, and left-to-right
row sums.

numpy's SIMD ``log2`` may differ from the C library's in the last bit, and ``np.sum`` adds pairwise
where trec_eval's loops add left to right; every measure that must match trec_eval to the last
printed digit uses these two.

Example:
    >>> import numpy as np
    >>> float(_log2_table(8)[8]), _rowsum(np.array([[0.1, 0.2, 0.0], [1.0, 0.0, 2.0]])).tolist()
    (3.0, [0.30000000000000004, 3.0])
"""

from __future__ import annotations

import math

import numpy as np

_LOG2: list[np.ndarray] = [np.zeros(0)]


def _log2_table(n: int) -> np.ndarray:
    """``math.log2(j)`` for j in 0..n (C's log2; index 0 is never used)."""
    if len(_LOG2[0]) <= n:
        size = max(n + 1, 2 * len(_LOG2[0]), 64)
        _LOG2[0] = np.array([-math.inf] + [math.log2(j) for j in range(1, size)])
    return _LOG2[0]


def _c_log2(x: np.ndarray) -> np.ndarray:
    """C's log2 of each value: whole numbers from a table, the rest one by one through :mod:`math`.
    """
    x = np.asarray(x, dtype=np.float64)
    whole = (x >= 1) & (x < 1 << 20) & (x == np.floor(x))
    out = np.empty(x.shape)
    if whole.any():
        idx = x[whole].astype(np.int64)
        out[whole] = _log2_table(int(idx.max()))[idx]
    rest = ~whole
    out[rest] = [math.log2(v) for v in x[rest].tolist()]
    return out


def _rowsum(x: np.ndarray) -> np.ndarray:
    """Left-to-right sum of each row (C's loop order; ``np.sum`` adds pairwise). Zero terms change
    no sum, so only the others are added, in row-major order (``np.bincount`` adds in input order).
    """
    flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
    at = np.flatnonzero(flat)
    width = max(x.shape[1], 1)
    return np.bincount(at // width, weights=flat[at], minlength=x.shape[0]).astype(np.float64)
