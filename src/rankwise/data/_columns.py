"""Column helpers shared by :class:`Qrels` and :class:`Run`: query grouping, string hashing, duplicate checks.

Arrow <-> numpy conversions here read Arrow buffers directly: ``pa.array(...)``, ``Array.to_numpy()``
and ``pa.scalar(...)`` make pyarrow import pandas (a quarter of a second), which ``rankwise eval`` must
not pay.
"""

from __future__ import annotations

import bisect
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


def permute(values: np.ndarray, order: np.ndarray | None, runs=None, patch=None) -> np.ndarray:
    """``values`` moved into a new order: ``values[order]``, or whole blocks (``runs``: first rows and
    lengths, from :func:`runs_of`) laid end to end; then ``patch`` = (positions, rows) sets single rows.
    """
    if runs is None:
        out = np_empty(len(order), values.dtype)
        np.take(values, order, out=out)
    else:
        out = np_empty(int(runs[1].sum()), values.dtype)
        np.concatenate([values[a:a + k] for a, k in zip(runs[0].tolist(), runs[1].tolist(), strict=False)], out=out)
    if patch is not None:
        out[patch[0]] = values[patch[1]]
    return out


def permute_strings(strings: pa.Array | pa.ChunkedArray, order: np.ndarray | None, runs=None,
                    patch=None) -> pa.Array:
    """:func:`permute` for null-free strings (one array or the chunks a file reader returns), into
    one array: block copies of the bytes when ``runs`` is given.

    A ``patch`` may only reorder rows among its own positions (as tie-breaking does), so the bytes it
    moves fill exactly the space they leave.
    """
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    if runs is None or not all(pa.types.is_string(c.type) and c.null_count == 0 for c in chunks):
        if order is None:
            order = np.arange(len(strings)) if runs is None else np.concatenate(
                [np.arange(a, a + k) for a, k in zip(runs[0].tolist(), runs[1].tolist(), strict=False)])
        if patch is not None:
            order = order.copy()
            order[patch[0]] = patch[1]
        return single_array(take(strings, order))
    n = len(strings)
    parts = [_string_buffers(c) for c in chunks]  # (offsets, bytes) per chunk
    chunk_starts = np.cumsum([0] + [len(c) for c in chunks]).tolist()
    offset_pieces, data_pieces = [], []
    written = 0
    for first, length in zip(runs[0].tolist(), runs[1].tolist(), strict=False):
        c = bisect.bisect_right(chunk_starts, first) - 1
        while length > 0:
            local = first - chunk_starts[c]
            take_n = min(length, chunk_starts[c + 1] - first)
            offsets, data = parts[c]
            a, b = int(offsets[local]), int(offsets[local + take_n])
            offset_pieces.append(offsets[local:local + take_n] + np.int32(written - a))
            data_pieces.append(data[a:b])
            written += b - a
            first, length, c = first + take_n, length - take_n, c + 1
    offset_pieces.append(np.array([written], dtype=np.int32))
    new_offsets = np_empty(n + 1, np.int32)
    np.concatenate(offset_pieces, out=new_offsets)
    new_data = np_empty(written, np.uint8)
    if data_pieces:
        np.concatenate(data_pieces, out=new_data)
    if patch is not None and len(patch[0]):
        _patch_strings(new_offsets, new_data, strings, *patch)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(new_data)])


def _string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string array, as numpy views; offsets index into the bytes."""
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(strings) + 1, offset=strings.offset * 4)
    data = np.zeros(0, np.uint8) if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    return offsets, data


def single_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (chunks combined in Arrow's pool)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        return values.combine_chunks(memory_pool=memory_pool())
    return values


def patch_strings_in_place(strings: pa.Array, positions: np.ndarray, rows: np.ndarray) -> bool:
    """Reorder rows of ``strings`` among ``positions`` (``strings[positions] = strings[rows]``) in its
    own buffers, when they are writable; False (and nothing done) when they are not.

    Only for arrays the caller built itself: Arrow arrays are otherwise immutable by convention.
    """
    bufs = strings.buffers()
    if (isinstance(strings, pa.ChunkedArray) or not pa.types.is_string(strings.type) or strings.null_count
            or bufs[2] is None or not bufs[1].is_mutable or not bufs[2].is_mutable):
        return False
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(strings) + 1, offset=strings.offset * 4)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    if not (offsets.flags.writeable and data.flags.writeable):
        return False
    source = take(strings, rows)  # a copy of the moved strings, taken before any write
    _patch_strings(offsets, data, source, positions, np.arange(len(rows)))
    return True


def _patch_strings(offsets: np.ndarray, data: np.ndarray, source: pa.Array, positions: np.ndarray,
                   rows: np.ndarray) -> None:
    """Write ``source[rows]`` at ``positions`` (sorted; runs of them hold the same strings) in place."""
    moved = single_array(take(source, rows))
    m_offsets = np.frombuffer(moved.buffers()[1], dtype=np.int32, count=len(moved) + 1, offset=moved.offset * 4)
    m_data = np.frombuffer(moved.buffers()[2], dtype=np.uint8) if moved.buffers()[2] is not None else None
    # contiguous stretches of positions: their byte span is the same before and after
    first_of_stretch = np.concatenate([[True], np.diff(positions) != 1])
    stretch = np.cumsum(first_of_stretch) - 1
    stretch_start = positions[first_of_stretch]
    base = offsets[stretch_start][stretch]  # byte where each position's stretch begins
    within = m_offsets[:-1] - m_offsets[:-1][first_of_stretch][stretch]
    offsets[positions] = base + within
    if m_data is not None:
        lengths = np.diff(m_offsets)
        dest = np.repeat(offsets[positions] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        dest += np.arange(len(dest))
        data[dest] = m_data[int(m_offsets[0]):int(m_offsets[-1])]


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

    ASCII ids (nearly all) are joined and encoded once and cut by their lengths: faster than
    ``pa.array`` and, unlike it, without importing pandas.

    Example:
        >>> arrow_strings(["d1", "d22"]).to_pylist()
        ['d1', 'd22']
    """
    try:
        joined = "".join(values)
    except TypeError:
        values = [str(v) for v in values]
        joined = "".join(values)
    if not joined.isascii() or len(joined) >= 2**31:
        return pa.array(values, pa.string())
    n = len(values)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int32, count=n), out=offsets[1:])
    data = bytearray(joined, "ascii")  # mutable: the run builder may reorder tied rows in place
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


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


def group_blocks(qids: pa.Array) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """When each query's rows are contiguous (as in nearly every run file): the distinct query ids in
    byte order, each block's index into them, and each block's first row. Else None.

    Example:
        >>> import pyarrow as pa
        >>> queries, codes, heads = group_blocks(pa.array(["b", "b", "a"]))
        >>> queries, codes.tolist(), heads.tolist()
        (['a', 'b'], [1, 0], [0, 2])
    """
    n = len(qids)
    if n == 0:
        return [], np.zeros(0, np.int32), np.zeros(0, np.int64)
    change = np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1))) if n > 1 else np.zeros(0, bool)
    heads = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
    head_ids = qids.take(arrow_indices(heads))
    if pc.count_distinct(head_ids).as_py() != len(heads):
        return None
    order = np_values(pc.sort_indices(head_ids)).astype(np.int64)
    codes = np.empty(len(order), dtype=np.int32)
    codes[order] = np.arange(len(order), dtype=np.int32)
    return head_ids.take(arrow_indices(order)).to_pylist(), codes, heads


def group_queries(qids: pa.Array) -> tuple[list[str], np.ndarray]:
    """Return the distinct query ids in byte order and each row's index into them (int32)."""
    n = len(qids)
    blocks = group_blocks(qids)
    if blocks is not None:
        queries, codes, heads = blocks
        return queries, np.repeat(codes, np.diff(np.append(heads, n)))
    enc = pc.dictionary_encode(qids)
    dictionary = enc.dictionary
    order = np_values(pc.sort_indices(dictionary)).astype(np.int64)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    codes = rank[np_values(enc.indices)]
    return dictionary.take(arrow_indices(order)).to_pylist(), codes


_CHUNK = 1 << 20  # rows per step of the big elementwise passes: temporaries stay small and reused


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
        while at < longest:
            rows = np.flatnonzero(lengths > at)
            tail_word = lengths[rows] <= at + 8  # the last (possibly overlapping) word of the string
            pos = starts[rows] + np.where(tail_word, lengths[rows] - 8, at)
            out[rows] ^= words[pos] * _FACTORS[(at // 8) % len(_FACTORS)]
            at += 8
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
    """Rows whose (query, doc) hash equals another row's (from :func:`row_keys`): check them exactly."""
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
