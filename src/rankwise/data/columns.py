"""Column helpers shared by :class:`Qrels` and :class:`Run`: Arrow <-> numpy, string hashing,
duplicate checks.

Arrow <-> numpy conversions here read Arrow buffers directly: ``pa.array(...)``,
``Array.to_numpy()`` and ``pa.scalar(...)`` make pyarrow import pandas (a quarter of a second),
which ``rankwise eval`` must not pay.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def np_empty(n: int, dtype) -> np.ndarray:
    """An uninitialised numpy array whose memory comes from Arrow's pool.

    Big arrays allocated right after a file read reuse the pages the reader just freed; a fresh
    ``np.empty`` of 80 MB costs a fifth of a second of page faults on some virtual machines.
    """
    dtype = np.dtype(dtype)
    if n * dtype.itemsize < (1 << 22):
        return np.empty(n, dtype=dtype)
    buf = pa.allocate_buffer(n * dtype.itemsize, memory_pool=memory_pool())
    return np.frombuffer(buf, dtype=dtype, count=n)


def take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` for a numpy index array."""
    return pc.take(arr, arrow_indices(idx), memory_pool=memory_pool())


def single_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (chunks combined in Arrow's pool)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        return values.combine_chunks(memory_pool=memory_pool())
    return values


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


def arrow_strings(values: list) -> pa.Array:
    """An Arrow string array from a list of Python strings (anything else goes through ``str``).

    ASCII ids (nearly all) are joined and encoded once and cut by their lengths, others encoded one
    by one: faster than ``pa.array`` and, unlike it, without importing pandas.

    Example:
        >>> arrow_strings(["d1", "d22"]).to_pylist(), arrow_strings(["é", "d2"]).to_pylist()
        (['d1', 'd22'], ['é', 'd2'])
    """
    try:
        joined = "".join(values)
    except TypeError:
        values = [str(v) for v in values]
        joined = "".join(values)
    n = len(values)
    if joined.isascii():
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
        data = bytearray(joined, "ascii")  # mutable: the run builder may reorder tied rows in place
    else:  # UTF-8, encoded id by id (a lone surrogate cannot be: pyarrow says so, as it would have)
        try:
            encoded = [v.encode("utf-8") for v in values]
        except UnicodeEncodeError:
            return pa.array(values, pa.string())
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
        data = bytearray(b"".join(encoded))
    if len(data) >= 2**31:  # past 32-bit offsets: pyarrow picks the layout
        return pa.array(values, pa.string())
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def flat_strings(groups: list, total: int) -> pa.Array:
    """One Arrow string array of the keys of every group in turn (dicts or lists of ids), made with
    one C-level join per group instead of Python work per id.

    Example:
        >>> flat_strings([{"d1": 1.0, "d22": 0.5}, ["é"]], 3).to_pylist()
        ['d1', 'd22', 'é']
    """
    try:  # each group's ids joined and encoded on its own: no second copy of all the text as one str
        joined = b"\0".join(["\0".join(g).encode("utf-8") for g in groups if len(g)])
    except TypeError:  # ids that are not strings
        return arrow_strings([str(v) for g in groups for v in g])
    except UnicodeEncodeError:  # lone surrogates: let Arrow say what is wrong
        return pa.array([v for g in groups for v in g], pa.string())
    data = np.frombuffer(joined, dtype=np.uint8)
    separator = data == 0
    ends = np.flatnonzero(separator)
    if len(ends) != max(total - 1, 0) or len(data) - len(ends) >= 2**31:  # a NUL inside an id, or huge
        return pa.array([v for g in groups for v in g], pa.string())
    offsets = np.empty(total + 1, dtype=np.int32)
    offsets[0] = 0
    if total:
        offsets[1:-1] = ends - np.arange(len(ends))
        offsets[-1] = len(data) - len(ends)
    chars = data[~separator]  # a fresh, writable copy (the run builder may reorder tied rows in place)
    return pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])


def as_string_array(values, *, source, field: str, chunked: bool = False) -> pa.Array:
    """Turn a sequence of ids into an Arrow string array; ids must be strings (or ints), never null.

    With ``chunked=True`` a chunked string array without nulls is returned as it is (no copy).
    """
    if isinstance(values, pa.ChunkedArray):
        if chunked and pa.types.is_string(values.type) and values.null_count == 0 and values.num_chunks > 1:
            return values
        values = single_array(values) if values.num_chunks else pa.array([], values.type)
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


_CHUNK = 1 << 20  # rows per step of the big elementwise passes: temporaries stay small and reused


# 64-bit constants (odd, from splitmix64 / xxhash)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_K3 = np.uint64(0x165667B19E3779F9)
_K4 = np.uint64(0x27D4EB2F165667C5)
_K5 = np.uint64(0xBF58476D1CE4E5B9)
_FACTORS = (_K2, _K3, _K5, np.uint64(0x94D049BB133111EB), np.uint64(0xFF51AFD7ED558CCD),
            np.uint64(0xC4CEB9FE1A85EC53))
_FACTOR_ARRAY = np.array(_FACTORS, dtype=np.uint64)
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
    data = bufs[2]
    size = 0 if data is None else int(offsets[-1])
    if size < 16:
        raw = np.zeros(32, dtype=np.uint8)
        if size:
            raw[:size] = np.frombuffer(data, dtype=np.uint8, count=size)
        words = np.ndarray(shape=(25,), dtype="<u8", buffer=raw, strides=(1,))
        in_place = n  # every start <= size is readable in the padded copy
    else:
        # an unaligned view: words[p] is the 8 bytes starting at byte p
        words = np.ndarray(shape=(size - 7,), dtype="<u8", buffer=data, strides=(1,))
        in_place = int(np.searchsorted(offsets[:-1], size - 7))  # rows whose first word is readable
    h = np_empty(n, np.uint64)
    if in_place < n:  # the last few short strings: read them from a zero-padded copy of the tail
        tail = np.zeros(24, dtype=np.uint8)
        tail[:8] = np.frombuffer(data, dtype=np.uint8, count=8, offset=size - 8)
        tail_words = np.ndarray(shape=(17,), dtype="<u8", buffer=tail, strides=(1,))
        h[in_place:] = tail_words[offsets[in_place:-1] - (size - 8)]
    for c0 in range(0, n, _CHUNK):
        c1 = min(c0 + _CHUNK, n)
        starts = offsets[c0:c1]
        lengths = offsets[c0 + 1:c1 + 1] - starts
        out = h[c0:c1]
        if c0 < in_place:
            out[: in_place - c0] = words[starts[: in_place - c0]]  # (np.take would copy all of words)
        if int(lengths.min()) < 8:
            out &= _MASKS[np.minimum(lengths, 8)]
        out *= _K1
        # every further byte: the words at 8, 16, ... and the last 8 bytes, each times its own
        # constant (a product's high bits depend on every bit of the word: callers key on them)
        longest = int(lengths.max())
        at = 8
        rows = np.flatnonzero(lengths > at)  # the strings that still have bytes from ``at`` on
        while at < longest and len(rows) * 64 >= longest - at:
            tail_word = lengths[rows] <= at + 8  # the last (possibly overlapping) word of the string
            pos = starts[rows] + np.where(tail_word, lengths[rows] - 8, at)
            out[rows] ^= words[pos] * _FACTORS[(at // 8) % len(_FACTORS)]
            at += 8
            rows = rows[~tail_word]
        # a few strings much longer than the rest: each one's remaining words at once (the same
        # products XOR-ed in), not one numpy pass over them per 8 bytes
        for r in rows.tolist():
            length = int(lengths[r])
            ats = np.arange(at, length, 8)
            pos = int(starts[r]) + np.minimum(ats, length - 8)
            out[r] ^= np.bitwise_xor.reduce(words[pos] * _FACTOR_ARRAY[(ats // 8) % len(_FACTORS)])
    return h


@dataclass(frozen=True)
class RowKeys:
    """Sorted 64-bit keys, one per row of a query-grouped table, and how to read them.

    A key is ``[query code | hash bits of the doc id | row within the query]``, high bits first, so
    sorting puts each query's rows together and, inside, equal doc hashes next to each other: one
    sort serves the duplicate check (equal neighbours) and the join with qrels (a binary search by
    query and doc hash). The query code and the row are exact; only the hash part can collide, and
    every use confirms a match on the strings.
    """

    keys: np.ndarray
    offsets: np.ndarray  # rows of query q: offsets[q] .. offsets[q + 1]
    query_bits: int
    row_bits: int

    @property
    def query_shift(self) -> np.uint64:
        return np.uint64(64 - self.query_bits)

    def needles(self, qcodes: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The smallest key a row with this query and doc hash can have."""
        out = qcodes.astype(np.uint64) << self.query_shift
        out |= (hashes >> np.uint64(self.query_bits + self.row_bits)) << np.uint64(self.row_bits)
        return out

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Table rows of keys."""
        q = (keys >> self.query_shift).astype(np.int64)
        return self.offsets[q] + (keys & np.uint64((1 << self.row_bits) - 1)).astype(np.int64)


def row_keys(counts: np.ndarray, hashes: np.ndarray, *, in_place: bool = False) -> RowKeys:
    """:class:`RowKeys` of a table whose rows are grouped by query code, ``counts[q]`` rows each.

    ``in_place=True`` turns ``hashes`` itself into the keys (saving a copy).

    Example:
        >>> import pyarrow as pa
        >>> rk = row_keys(np.array([2, 1]), string_hashes(pa.array(["a", "b", "a"])))
        >>> sorted(rk.rows(rk.keys).tolist())
        [0, 1, 2]
    """
    n = len(hashes)
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    layout = RowKeys(hashes if in_place else hashes.copy(), offsets,
                     max(int(len(counts) - 1).bit_length(), 1),
                     max(int(counts.max(initial=1) - 1).bit_length(), 1))
    keys = layout.keys
    hash_shift = np.uint64(layout.query_bits + layout.row_bits)
    if len(counts) and n == len(counts) * int(counts[0]) and bool((counts == counts[0]).all()):
        # equal-length blocks (a run cut at a fixed depth): a (queries x depth) grid; sort each row
        grid = keys.reshape(len(counts), int(counts[0]))
        grid >>= hash_shift
        grid <<= np.uint64(layout.row_bits)
        grid |= (np.arange(len(counts), dtype=np.uint64) << layout.query_shift)[:, None]
        grid |= np.arange(int(counts[0]), dtype=np.uint64)[None, :]
        grid.sort(axis=1)
        return layout
    q = 0
    for c0 in range(0, n, _CHUNK):
        c1 = min(c0 + _CHUNK, n)
        q_end = int(np.searchsorted(offsets, c1, side="left"))
        span = np.minimum(offsets[q + 1:q_end + 1], c1) - np.maximum(offsets[q:q_end], c0)
        chunk = keys[c0:c1]
        chunk >>= hash_shift
        chunk <<= np.uint64(layout.row_bits)
        chunk |= np.repeat(np.arange(q, q_end, dtype=np.uint64) << layout.query_shift, span)
        chunk |= (np.arange(c0, c1, dtype=np.int64) - np.repeat(offsets[q:q_end], span)).astype(np.uint64)
        q = max(q_end - 1, 0) if offsets[q_end] > c1 else q_end
    keys.sort()
    return layout


def duplicate_candidates(layout: RowKeys) -> np.ndarray:
    """Rows whose (query, doc) hash equals another row's (from :func:`row_keys`): check them
    exactly."""
    keys = layout.keys
    if len(keys) < 2:
        return np.zeros(0, dtype=np.int64)
    limit = np.uint64(1 << layout.row_bits)
    last = len(keys) - 1  # pairs (i, i + 1) for i < last, a chunk at a time
    same = np.concatenate([
        np.flatnonzero((keys[c0 + 1:min(c0 + _CHUNK, last) + 1] ^ keys[c0:min(c0 + _CHUNK, last)]) < limit) + c0
        for c0 in range(0, last, _CHUNK)])
    if len(same) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(layout.rows(keys[np.unique(np.concatenate([same, same + 1]))]))


def first_duplicate(rows: np.ndarray, row_queries: np.ndarray, docs: pa.Array,
                    numbers: np.ndarray | None = None) -> tuple[int, int, int] | None:
    """Exact check of candidate ``rows`` (with their query codes): the earliest repeat, or None.

    ``numbers`` are the rows' numbers in the caller's order (file order: which repeat is "first");
    returns (number of the first occurrence, number of the repeat, row of the repeat).
    """
    if len(rows) == 0:
        return None
    numbers = rows if numbers is None else numbers
    by_number = np.argsort(numbers, kind="stable")
    first_seen: dict[tuple[int, str], int] = {}
    docs_of = docs.take(arrow_indices(rows[by_number])).to_pylist()
    for i, d in zip(by_number.tolist(), docs_of, strict=False):
        key = (int(row_queries[i]), d)
        if key in first_seen:
            return first_seen[key], int(numbers[i]), int(rows[i])
        first_seen[key] = int(numbers[i])
    return None
