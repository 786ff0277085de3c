"""Column helpers shared by :class:`Qrels` and :class:`Run`: query grouping and duplicate checks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.errors import InputError


def as_string_array(values, *, source, field: str) -> pa.Array:
    """Turn a sequence of ids into an Arrow string array; ids must be non-empty strings (or ints)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        arr = values
    else:
        arr = pa.array(list(values) if not isinstance(values, np.ndarray) else values.tolist())
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.string())
    if pa.types.is_integer(arr.type):
        arr = arr.cast(pa.string())
    if pa.types.is_null(arr.type) and len(arr) == 0:
        arr = pa.array([], pa.string())
    if not pa.types.is_string(arr.type):
        raise InputError(f"ids must be strings, got {arr.type}", source=source, field=field)
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError("missing id", source=source, line=row + 1, field=field)
    return arr


def group_queries(qids: pa.Array) -> tuple[list[str], np.ndarray]:
    """Return the distinct query ids in byte order and each row's index into them."""
    n = len(qids)
    if n > 1:
        # fast path: rows grouped by query (as in nearly every run file); compare neighbours only
        change = np.asarray(pc.not_equal(qids.slice(1), qids.slice(0, n - 1)), dtype=bool)
        heads = np.concatenate([[0], np.flatnonzero(change) + 1])
        head_ids = qids.take(pa.array(heads))
        if pc.count_distinct(head_ids).as_py() == len(heads):
            order = np.asarray(pc.sort_indices(head_ids), dtype=np.int64)
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            codes = np.repeat(rank, np.diff(np.concatenate([heads, [n]])))
            return head_ids.take(pa.array(order)).to_pylist(), codes
    enc = pc.dictionary_encode(qids)
    dictionary = enc.dictionary
    order = np.asarray(pc.sort_indices(dictionary), dtype=np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = rank[np.asarray(enc.indices, dtype=np.int64)]
    return dictionary.take(pa.array(order)).to_pylist(), codes


def _string_hashes(docs: pa.Array) -> np.ndarray | None:
    """64-bit hashes of strings via polars when installed (about 50x faster than hashing in Arrow)."""
    try:
        import polars as pl
    except ImportError:
        return None
    return pl.Series(docs).hash(seed=0).to_numpy().view(np.int64)


def find_duplicate_pair(qcodes: np.ndarray, docs: pa.Array) -> tuple[int, int] | None:
    """Return (first row, repeated row) of the first repeated (query, doc) pair, or None."""
    if len(docs) == 0:
        return None
    hashes = _string_hashes(docs) if len(docs) > 100_000 else None
    if hashes is not None:
        keys = np.sort(hashes ^ (qcodes.astype(np.int64) * np.int64(-7046029254386353131)))
        if not (keys[1:] == keys[:-1]).any():
            return None  # distinct hashes: certainly no repeated pair; otherwise check exactly below
    dcodes = np.asarray(pc.dictionary_encode(docs).indices, dtype=np.int64)
    keys = qcodes.astype(np.int64) * (int(dcodes.max()) + 1) + dcodes
    uniq, first = np.unique(keys, return_index=True)
    if len(uniq) == len(keys):
        return None
    seen = np.zeros(len(keys), dtype=bool)
    seen[first] = True
    repeated = int(np.flatnonzero(~seen)[0])
    first_row = int(first[np.searchsorted(uniq, keys[repeated])])
    return first_row, repeated


def offsets_from_codes(codes: np.ndarray, n_queries: int) -> np.ndarray:
    """CSR offsets of rows already sorted by query code."""
    counts = np.bincount(codes, minlength=n_queries)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets
