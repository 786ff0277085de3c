"""Column helpers shared by :class:`Qrels` and :class:`Run`: query grouping, string hashing, duplicate checks.

Arrow <-> numpy conversions here read Arrow buffers directly: ``pa.array(...)``, ``Array.to_numpy()``
and ``pa.scalar(...)`` make pyarrow import pandas (a quarter of a second), which ``rankwise eval`` must
not pay.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.errors import InputError

_NUMPY_TYPES = {
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float": np.float32, "double": np.float64, "halffloat": np.float16,
}


def np_values(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a primitive or boolean Arrow array as numpy (zero-copy for primitives).

    Slots that are null hold unspecified values: mask them with :func:`np_valid`.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n, offset = len(arr), arr.offset
    if pa.types.is_boolean(arr.type):
        buf = arr.buffers()[1]
        if buf is None or n == 0:
            return np.zeros(n, dtype=bool)
        bits = np.frombuffer(buf, dtype=np.uint8)
        return np.unpackbits(bits, count=offset + n, bitorder="little")[offset:].view(bool)
    dtype = _NUMPY_TYPES.get(str(arr.type))
    if dtype is None:
        raise TypeError(f"not a numeric Arrow array: {arr.type}")
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=n, offset=offset * np.dtype(dtype).itemsize)


def np_valid(arr: pa.Array) -> np.ndarray:
    """True where ``arr`` is not null."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np_values(arr.is_valid())


def arrow_indices(idx: np.ndarray) -> pa.Array:
    """An Arrow int64 array over a numpy index array (for ``take``), built without ``pa.array``."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(idx), [None, pa.py_buffer(idx)])


def arrow_strings(values: list[str]) -> pa.Array:
    """An Arrow string array from Python strings."""
    return pa.array(values, pa.string())


def as_string_array(values, *, source, field: str) -> pa.Array:
    """Turn a sequence of ids into an Arrow string array; ids must be strings (or ints), never null."""
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
        row = int(np.flatnonzero(~np_valid(arr))[0])
        raise InputError("missing id", source=source, line=row + 1, field=field)
    return arr


def group_queries(qids: pa.Array) -> tuple[list[str], np.ndarray]:
    """Return the distinct query ids in byte order and each row's index into them."""
    n = len(qids)
    if n > 1:
        # fast path: rows grouped by query (as in nearly every run file); compare neighbours only
        change = np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1)))
        heads = np.concatenate([[0], np.flatnonzero(change) + 1])
        head_ids = qids.take(arrow_indices(heads))
        if pc.count_distinct(head_ids).as_py() == len(heads):
            order = np_values(pc.sort_indices(head_ids)).astype(np.int64)
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            codes = np.repeat(rank, np.diff(np.concatenate([heads, [n]])))
            return head_ids.take(arrow_indices(order)).to_pylist(), codes
    enc = pc.dictionary_encode(qids)
    dictionary = enc.dictionary
    order = np_values(pc.sort_indices(dictionary)).astype(np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = rank[np_values(enc.indices)]
    return dictionary.take(arrow_indices(order)).to_pylist(), codes


# 64-bit constants (odd, from splitmix64 / xxhash)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_K3 = np.uint64(0x165667B19E3779F9)
_K4 = np.uint64(0x27D4EB2F165667C5)
_K5 = np.uint64(0xBF58476D1CE4E5B9)
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def string_hashes(strings: pa.Array) -> np.ndarray:
    """A 64-bit hash per string, computed with numpy from the Arrow buffers (no Python loop).

    Equal strings always hash equal; the hash mixes the length with the first, middle and last eight
    bytes, so it is fast whatever the length but unequal strings can collide more often than with a
    full hash: callers treat equal hashes as candidates and confirm with an exact comparison.

    Example:
        >>> import pyarrow as pa
        >>> h = string_hashes(pa.array(["d1", "d2", "d1"]))
        >>> bool(h[0] == h[2]), bool(h[0] == h[1])
        (True, False)
    """
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if pa.types.is_large_string(strings.type) or pa.types.is_string_view(strings.type):
        strings = strings.cast(pa.string())
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=strings.offset * 4)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    data = bufs[2]
    size = 0 if data is None else int(offsets[-1])
    if size < 16:
        raw = np.zeros(32, dtype=np.uint8)
        if size:
            raw[:size] = np.frombuffer(data, dtype=np.uint8, count=size)
        words = np.ndarray(shape=(25,), dtype="<u8", buffer=raw, strides=(1,))
        tail_from = size + 1  # every start <= size is readable in the padded copy
    else:
        # an unaligned view: words[p] is the 8 bytes starting at byte p
        words = np.ndarray(shape=(size - 7,), dtype="<u8", buffer=data, strides=(1,))
        tail_from = size - 7
    if int(starts[-1]) < tail_from:  # starts ascend: all readable in place
        h = words[starts]
    else:
        inside = starts < tail_from
        h = np.empty(n, dtype=np.uint64)
        h[inside] = words[starts[inside]]
        tail = np.zeros(24, dtype=np.uint8)  # the last 8 bytes followed by zeros
        tail[:8] = np.frombuffer(data, dtype=np.uint8, count=8, offset=size - 8)
        tail_words = np.ndarray(shape=(17,), dtype="<u8", buffer=tail, strides=(1,))
        h[~inside] = tail_words[starts[~inside] - (size - 8)]
    if int(lengths.min()) < 8:
        h &= _MASKS[np.minimum(lengths, 8)]
    h *= _K1
    long_ = np.flatnonzero(lengths > 8)
    if len(long_):
        last = words[starts[long_] + lengths[long_] - 8] * _K2
        h[long_] ^= (last << np.uint64(23)) | (last >> np.uint64(41))
        longer = long_[lengths[long_] > 16]
        if len(longer):
            mid = words[starts[longer] + (lengths[longer] - 8) // 2] * _K3
            h[longer] ^= (mid << np.uint64(43)) | (mid >> np.uint64(21))
    h += lengths.astype(np.uint64) * _K4
    h ^= h >> np.uint64(31)
    h *= _K5
    h ^= h >> np.uint64(29)
    return h


def _mix_query(hashes: np.ndarray, qcodes: np.ndarray) -> np.ndarray:
    return hashes ^ ((qcodes.astype(np.uint64) + np.uint64(1)) * _K1)


def find_duplicate_pair(qcodes: np.ndarray, docs: pa.Array,
                        hashes: np.ndarray | None = None) -> tuple[int, int] | None:
    """Return (first row, repeated row) of the first repeated (query, doc) pair, or None.

    "First" is in row order: the smallest row that repeats an earlier one, and that earlier row.
    ``hashes`` (from :func:`string_hashes` of ``docs``) is computed when not given.
    """
    n = len(docs)
    if n < 2:
        return None
    if hashes is None:
        hashes = string_hashes(docs)
    keys = np.sort(_mix_query(hashes, qcodes))
    same = keys[1:] == keys[:-1]
    if not same.any():
        return None
    # equal keys: candidates; confirm with the exact strings
    suspect = np.unique(keys[1:][same])
    rows = np.flatnonzero(np.isin(_mix_query(hashes, qcodes), suspect))
    cand_q = qcodes[rows].tolist()
    cand_d = docs.take(arrow_indices(rows)).to_pylist()
    first_seen: dict[tuple[int, str], int] = {}
    for row, q, d in zip(rows.tolist(), cand_q, cand_d):
        key = (q, d)
        if key in first_seen:
            return first_seen[key], row
        first_seen[key] = row
    return None


def offsets_from_codes(codes: np.ndarray, n_queries: int) -> np.ndarray:
    """CSR offsets of rows already sorted by query code."""
    counts = np.bincount(codes, minlength=n_queries)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets
