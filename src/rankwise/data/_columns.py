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


_POOL: list = []


def memory_pool() -> pa.MemoryPool:
    """Arrow's jemalloc pool when available (else the system one) for the big reads and copies.

    pyarrow's default pool (mimalloc) lazily hands memory back to the OS after a 400 MB read, and
    the numpy work that follows then pays for it in page faults (a second of system time here).
    """
    if not _POOL:
        try:
            _POOL.append(pa.jemalloc_memory_pool())
        except (NotImplementedError, AttributeError):
            _POOL.append(pa.system_memory_pool())
    return _POOL[0]


def take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` for a numpy index array."""
    return pc.take(arr, arrow_indices(idx), memory_pool=memory_pool())


def runs_of(order: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(first rows, lengths) of the runs of consecutive rows in ``order``, or None if there are many.

    A run file whose queries are not in byte order is a few thousand blocks to move, not ten
    million rows to gather.
    """
    n = len(order)
    if n < 2:
        return None
    breaks = np.flatnonzero(np.diff(order) != 1) + 1
    if len(breaks) + 1 > max(n // 64, 1):
        return None
    firsts = np.concatenate([[0], breaks])
    return order[firsts], np.diff(np.append(firsts, n))


def permute(values: np.ndarray, order: np.ndarray | None, runs=None) -> np.ndarray:
    """``values[order]``, copying whole blocks when ``runs`` (from :func:`runs_of`) is given."""
    if runs is None:
        return values[order]
    return np.concatenate([values[a:a + k] for a, k in zip(runs[0].tolist(), runs[1].tolist())])


def permute_strings(strings: pa.Array, order: np.ndarray | None, runs=None) -> pa.Array:
    """``strings[order]`` for a null-free string array; block copies of the bytes when ``runs`` is given."""
    if runs is None or not pa.types.is_string(strings.type) or strings.null_count:
        return take(strings, order)
    n = len(strings)
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=strings.offset * 4)
    data = np.zeros(0, np.uint8) if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    firsts, lengths = runs
    begin, end = offsets[firsts], offsets[firsts + lengths]
    shift = np.concatenate([[0], np.cumsum(end - begin)[:-1]]) - begin  # old byte position -> new
    pieces, data_pieces = [], []
    for f, k, a, b, d in zip(firsts.tolist(), lengths.tolist(), begin.tolist(), end.tolist(), shift.tolist()):
        pieces.append(offsets[f:f + k] + np.int32(d))
        data_pieces.append(data[a:b])
    pieces.append(np.array([int(np.sum(end - begin))], dtype=np.int32))
    new_offsets = np.concatenate(pieces).astype(np.int32, copy=False)
    new_data = np.concatenate(data_pieces) if data_pieces else np.zeros(0, np.uint8)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(new_data)])


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
    """Return the distinct query ids in byte order and each row's index into them (int32)."""
    n = len(qids)
    if n > 1:
        # fast path: rows grouped by query (as in nearly every run file); compare neighbours only
        change = np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1)))
        heads = np.concatenate([[0], np.flatnonzero(change) + 1])
        head_ids = qids.take(arrow_indices(heads))
        if pc.count_distinct(head_ids).as_py() == len(heads):
            order = np_values(pc.sort_indices(head_ids)).astype(np.int64)
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            codes = np.repeat(rank, np.diff(np.concatenate([heads, [n]])))
            return head_ids.take(arrow_indices(order)).to_pylist(), codes
    enc = pc.dictionary_encode(qids)
    dictionary = enc.dictionary
    order = np_values(pc.sort_indices(dictionary)).astype(np.int64)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    codes = rank[np_values(enc.indices)]
    return dictionary.take(arrow_indices(order)).to_pylist(), codes


# 64-bit constants (odd, from splitmix64 / xxhash)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_K3 = np.uint64(0x165667B19E3779F9)
_K4 = np.uint64(0x27D4EB2F165667C5)
_K5 = np.uint64(0xBF58476D1CE4E5B9)
_FACTORS = (_K2, _K3, _K5, np.uint64(0x94D049BB133111EB), np.uint64(0xFF51AFD7ED558CCD),
            np.uint64(0xC4CEB9FE1A85EC53))
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def string_hashes(strings: pa.Array) -> np.ndarray:
    """A 64-bit hash per string, computed with numpy from the Arrow buffers (no Python loop).

    Equal strings always hash equal. Every byte counts: the string is read as 8-byte words (the last
    word overlapping the previous one), each multiplied by its own odd constant. Only the high bits
    mix well (each depends on every byte): callers key on them. Unequal strings can collide (for
    one, strings that differ only by trailing NUL bytes), so callers treat equal hashes as
    candidates and confirm with an exact comparison.

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
    # every further byte: the words at 8, 16, ... and the last 8 bytes, each times its own constant
    # (a product's high bits depend on every bit of the word: callers key on the high bits)
    longest = int(lengths.max())
    at = 8
    while at < longest:
        rows = np.flatnonzero(lengths > at)
        tail_word = lengths[rows] <= at + 8  # the last (possibly overlapping) word of the string
        pos = starts[rows] + np.where(tail_word, lengths[rows] - 8, at)
        h[rows] ^= words[pos] * _FACTORS[(at // 8) % len(_FACTORS)]
        at += 8
    return h


def mix_query(hashes: np.ndarray, qcodes: np.ndarray) -> np.ndarray:
    """One 64-bit key per row from its query code and its doc-id hash."""
    keys = qcodes.astype(np.uint64)
    keys += np.uint64(1)
    keys *= _K1
    keys ^= hashes
    return keys


def row_keys(qcodes: np.ndarray | None, hashes: np.ndarray,
             counts: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Sorted keys, one per row: high bits hash (query, doc), the low ``bits`` bits are the row.

    Pass ``counts`` (rows per query) instead of ``qcodes`` when the rows are grouped by query code.

    One sort serves both the duplicate check (equal high bits are neighbours) and the join with
    qrels (binary search of a (query, doc) hash gives the rows).

    Example:
        >>> import pyarrow as pa
        >>> keys, bits = row_keys(np.array([0, 0, 1]), string_hashes(pa.array(["a", "b", "a"])))
        >>> sorted((keys & np.uint64((1 << bits) - 1)).tolist())
        [0, 1, 2]
    """
    n = len(hashes)
    bits = max(int(n - 1).bit_length(), 1)
    if counts is not None:  # rows grouped by query in code order: ``counts`` rows per query
        per_query = np.arange(1, len(counts) + 1, dtype=np.uint64)
        per_query *= _K1
        keys = np.repeat(per_query, counts)
        keys ^= hashes
    else:
        keys = mix_query(hashes, qcodes)
    keys &= ~np.uint64((1 << bits) - 1)
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    return keys, bits


def duplicate_candidates(keys: np.ndarray, bits: int) -> np.ndarray:
    """Rows whose (query, doc) hash equals another row's, from :func:`row_keys`: check them exactly."""
    if len(keys) < 2:
        return np.zeros(0, dtype=np.int64)
    same = np.flatnonzero((keys[1:] ^ keys[:-1]) < np.uint64(1 << bits))
    if len(same) == 0:
        return np.zeros(0, dtype=np.int64)
    pos = np.unique(np.concatenate([same, same + 1]))
    return (keys[pos] & np.uint64((1 << bits) - 1)).astype(np.int64)


def first_duplicate(rows: np.ndarray, qcodes: np.ndarray, docs: pa.Array,
                    original: np.ndarray | None = None) -> tuple[int, int] | None:
    """Exact check of candidate rows: (first row, repeated row) of the earliest repeat, or None.

    ``original`` maps rows to the caller's row numbers (their order decides which repeat is first).
    """
    if len(rows) == 0:
        return None
    numbers = rows if original is None else original[rows]
    by_number = np.argsort(numbers, kind="stable")
    rows, numbers = rows[by_number], numbers[by_number]
    first_seen: dict[tuple[int, str], int] = {}
    docs_of = docs.take(arrow_indices(rows)).to_pylist()
    for number, q, d in zip(numbers.tolist(), qcodes[rows].tolist(), docs_of):
        if (q, d) in first_seen:
            return first_seen[(q, d)], number
        first_seen[(q, d)] = number
    return None


def find_duplicate_pair(qcodes: np.ndarray, docs: pa.Array,
                        hashes: np.ndarray | None = None) -> tuple[int, int] | None:
    """Return (first row, repeated row) of the first repeated (query, doc) pair, or None.

    "First" is in row order: the smallest row that repeats an earlier one, and that earlier row.
    ``hashes`` (from :func:`string_hashes` of ``docs``) is computed when not given.
    """
    if len(docs) < 2:
        return None
    if hashes is None:
        hashes = string_hashes(docs)
    keys, bits = row_keys(qcodes, hashes)
    return first_duplicate(duplicate_candidates(keys, bits), qcodes, docs)


def offsets_from_codes(codes: np.ndarray, n_queries: int) -> np.ndarray:
    """CSR offsets of rows already sorted by query code."""
    counts = np.bincount(codes, minlength=n_queries)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets
