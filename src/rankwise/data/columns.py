"""Column helpers shared by :class:`Qrels` and :class:`Run`: Arrow <-> numpy, string hashing, rows
moved into a new order.

Arrow <-> numpy conversions here read Arrow buffers directly: ``pa.array(...)``,
``Array.to_numpy()`` and ``pa.scalar(...)`` make pyarrow import pandas (a quarter of a second),
which ``rankwise eval`` must not pay.
"""

from __future__ import annotations

import bisect
from itertools import chain
from operator import methodcaller
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.compiled import walk as _walk
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


def np_zeros(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """A numpy array of zeros whose memory comes from Arrow's pool (see :func:`np_empty`): after a
    big read, the pages Arrow's columns were freed from, written over rather than faulted in anew.

    Example:
        >>> np_zeros((2, 3), bool).tolist()
        [[False, False, False], [False, False, False]]
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = np_empty(int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape)
    out.fill(0)
    return out


def take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` for a numpy index array."""
    return pc.take(arr, arrow_indices(idx), memory_pool=memory_pool())


def take_ascending(values: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``values[rows]`` as one array, for ascending ``rows``: a chunked column is taken chunk by
    chunk (Arrow's take of a chunked array looks every index up across all the chunks: several
    times slower on the ~400 chunks of a big file's column).

    Example:
        >>> column = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c", "d", "e"])])
        >>> take_ascending(column, np.array([1, 2, 4])).to_pylist()
        ['b', 'c', 'e']
    """
    if not isinstance(values, pa.ChunkedArray):
        return take(values, rows)
    if values.num_chunks < 2:
        return take(single_array(values), rows)
    bounds = np.zeros(values.num_chunks + 1, dtype=np.int64)
    np.cumsum([len(c) for c in values.chunks], out=bounds[1:])
    cuts = np.searchsorted(rows, bounds)
    parts = [take(chunk, rows[a:b] - first) for chunk, first, a, b
             in zip(values.chunks, bounds[:-1].tolist(), cuts[:-1].tolist(), cuts[1:].tolist(), strict=True) if b > a]
    return pa.concat_arrays(parts) if parts else values.chunk(0).slice(0, 0)


def string_parts(column: pa.Array | pa.ChunkedArray) -> list[tuple] | None:
    """What the compiled passes (``rankwise/data/_walk.c``) read of a string column: each chunk's
    (offsets buffer, data buffer, offset, length); None where the extension was not built or the
    column is not plain strings without nulls.

    Example:
        >>> parts = string_parts(pa.array(["a", "bc"]))
        >>> parts is None or [(offset, length) for _, _, offset, length in parts] == [(0, 2)]
        True
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if _walk is None or not all(pa.types.is_string(c.type) and c.null_count == 0 for c in chunks):
        return None
    return [(b[1], b"" if b[2] is None else b[2], c.offset, len(c)) for c in chunks for b in [c.buffers()]]


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


def arrow_floats(values: np.ndarray) -> pa.Array:
    """An Arrow float64 array over numpy values, built without ``pa.array`` (which imports pandas,
    even for a numpy array).

    Example:
        >>> arrow_floats(np.array([2.5, 1.0])).to_pylist()
        [2.5, 1.0]
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])


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


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (``np.unique`` by a sort, which numpy does several times faster
    than the hash table ``np.unique`` builds for integers).

    Example:
        >>> distinct_sorted(np.array([3, 1, 3])).tolist()
        [1, 3]
    """
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Every index of the ranges ``[start, start + count)``, one range after another.

    Example:
        >>> expand_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
        [5, 6, 9, 10, 11]
    """
    counts = np.asarray(counts, dtype=np.int64)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + within


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
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
        row, bad = next((i, v) for i, v in enumerate(v for g in groups for v in g) if not _encodable(v))
        raise InputError(f"id {bad!r} is not text that UTF-8 can hold (a lone surrogate)", source="<dict>",
                         line=row + 1, field="doc_id") from None
    data = np.frombuffer(joined, dtype=np.uint8)
    separators = max(total - 1, 0)
    if len(data) - separators >= 2**31:  # beyond 32-bit offsets
        return pa.array([v for g in groups for v in g], pa.string())
    offsets = np.empty(total + 1, dtype=np.int32)
    offsets[0], offsets[-1] = 0, len(data) - separators
    chars = np.empty(len(data) - separators, dtype=np.uint8)  # writable: the run builder may patch ties
    seen = kept = 0
    for start in range(0, len(data), _STEP):  # a slice at a time: small temporaries, reused
        piece = data[start:start + _STEP]
        separator = piece == 0
        ends = np.flatnonzero(separator)
        if seen + len(ends) > separators:  # a NUL inside an id
            return pa.array([v for g in groups for v in g], pa.string())
        ends -= np.arange(seen - start, seen - start + len(ends))  # chars before each separator
        offsets[1 + seen:1 + seen + len(ends)] = ends
        rest = piece[~separator]
        chars[kept:kept + len(rest)] = rest
        seen, kept = seen + len(ends), kept + len(rest)
    if seen != separators:
        return pa.array([v for g in groups for v in g], pa.string())
    return pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])


_STEP = 1 << 22  # bytes per slice of flat_strings' pass: its temporaries stay a few MB


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class FlatItems(NamedTuple):
    """The groups of a dict of dicts laid flat (see :func:`flat_items`)."""

    docs: pa.Array  # every group's keys in turn
    values: np.ndarray | None  # their values, float64 (None: keys only)
    hashes: np.ndarray | None  # string_hashes(docs), when the C walk computed them on the way


def flat_items(groups: list, total: int, *, field: str | None, words: str = "values must be numbers",
               rank: bool = False, compiled: bool = True) -> FlatItems:
    """The keys of every group in turn as one Arrow string array and, with a ``field`` (the values'
    name in errors), the groups' values in the same order as float64; ``field=None``: keys only
    (the groups may then be lists of ids too).

    One C pass over the dicts (``rankwise.data._walk``, where it was built) when every key is a
    ``str`` and every value a float, int or bool, which also hashes the keys as
    :func:`string_hashes` does; otherwise, or with ``compiled=False``, :func:`flat_strings` and
    ``np.fromiter``, which give the same arrays (and no hashes). A value that is not a number is an
    :class:`InputError` saying ``words``. ``rank`` (scores): the C walk lays each dict's items out
    in rank order (score, then doc id, descending), a head start for
    :func:`rankwise.data.ranking.rank_rows`, which ranks the rows either way.

    Example:
        >>> flat = flat_items([{"d1": 1.0, "d22": 0.5}, {"é": 2}], 3, field="score")
        >>> flat.docs.to_pylist(), flat.values.tolist()
        (['d1', 'd22', 'é'], [1.0, 0.5, 2.0])
    """
    if compiled and _walk is not None:
        walked = _walk.items(groups, total, field is not None, rank and field is not None)
        if walked is not None:  # (None: something the C walk does not read; the Python one does)
            chars, offsets, values, hashes = walked
            docs = pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
            return FlatItems(docs, None if field is None else np.frombuffer(values, dtype=np.float64),
                             np.frombuffer(hashes, dtype=np.uint64))
    docs = flat_strings(groups, total)
    if field is None:
        return FlatItems(docs, None, None)
    take_values = dict.values if set(map(type, groups)) <= {dict} else methodcaller("values")
    try:
        values = np.fromiter(chain.from_iterable(map(take_values, groups)), dtype=np.float64, count=total)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{words} ({exc})", source="<dict>", field=field) from None
    return FlatItems(docs, values, None)


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
        in_place = int(np.searchsorted(offsets[:-1], np.int32(size - 7)))  # rows whose first word is readable
        # (an np.int32 needle: a Python int would make numpy convert all the offsets first)
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


# ----------------------------------------------------------------- moving rows
def permute(values: np.ndarray, order: np.ndarray | None, runs=None, patch=None) -> np.ndarray:
    """``values`` moved into a new order: ``values[order]``, or whole blocks (``runs``: first rows
    and lengths, a :class:`MovePlan`'s ``runs``) laid end to end; then ``patch`` = (positions, rows)
    sets single rows.
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

    A ``patch`` may only reorder rows among its own positions (as tie-breaking does), so the bytes
    it moves fill exactly the space they leave.
    """
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    if runs is None or not all(pa.types.is_string(c.type) and c.null_count == 0 for c in chunks):
        if order is None:
            order = np.arange(len(strings)) if runs is None else np.concatenate(
                [np.arange(a, a + k) for a, k in zip(runs[0].tolist(), runs[1].tolist(), strict=False)])
        if patch is not None:
            order = order.copy()
            order[patch[0]] = patch[1]
        return single_array(take(single_array(strings), order))  # (a take across chunks is slower)
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


def patch_strings_in_place(strings: pa.Array, positions: np.ndarray, rows: np.ndarray) -> bool:
    """Reorder rows of ``strings`` among ``positions`` (``strings[positions] = strings[rows]``) in
    its own buffers, when they are writable; False (and nothing done) when they are not.

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
    """Write ``source[rows]`` at ``positions`` (sorted; runs of them hold the same strings) in
    place."""
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
