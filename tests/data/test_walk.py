"""The C walks (rankwise/data/_walk.c) give what the pure-Python and numpy paths give.

``flat_items`` reads a ``{query: {doc: value}}`` dict's groups in one C pass where the extension
was built, else with ``flat_strings`` and ``np.fromiter``. Held here, on any input: the same doc
ids, the same values bit for bit, hashes equal to ``string_hashes`` of the ids, a ranked walk that
is each group's items in trec_eval's order and ranks to the very run the Python path ranks to, and
anything the C walk does not read exactly handed to the Python path (same arrays, same errors).
And a file's rows in any order, grouped and ranked in C, rank to numpy's run (or fail alike).
"""

from __future__ import annotations

import struct
from collections import OrderedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.data import Qrels, Run
from rankwise.data.columns import flat_items, string_hashes, string_parts
from rankwise.data.compiled import (
    HAS_CR,
    HAS_HIGH,
    HAS_SPACE,
    HAS_TAB,
    HAS_VT_FF,
    SPACE_PAIR,
    TAB_PAIR,
    byte_census,
    line_census,
    walk,
)
from rankwise.data.ranking import group_by_query, rank_rows
from rankwise.data.text import MappedFile, read_lines
from rankwise.data.trec import unsplittable
from rankwise.errors import InputError

_IDS = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30) | st.sampled_from(
    ["", "d", "d1", "D0000001", "a" * 8, "b" * 9, "é" * 5, "x" * 16, "y" * 17, "z" * 40])
_SCORES = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 1.0, 0.5, 5e-324, 1e300])
_VALUES = _SCORES | st.integers(-(2**70), 2**70) | st.booleans()
_GROUPS = st.lists(st.dictionaries(_IDS, _VALUES, max_size=40), max_size=8)


def _bits(values: np.ndarray) -> list[int]:
    return values.view(np.uint64).tolist()


def test_the_extension_is_built_here():
    # scripts/setup.sh builds it (pip's editable install, or `setup.py build_ext --inplace`);
    # a test environment without it would measure and test only the Python walk
    assert walk is not None


@settings(max_examples=300, deadline=None)
@given(_GROUPS)
def test_the_c_walk_gives_the_python_walk_arrays(groups):
    total = sum(map(len, groups))
    compiled = flat_items(groups, total, field="score")
    python = flat_items(groups, total, field="score", compiled=False)
    assert compiled.docs.to_pylist() == python.docs.to_pylist() == [k for g in groups for k in g]
    assert _bits(compiled.values) == _bits(python.values)
    assert python.hashes is None
    assert compiled.hashes.tolist() == string_hashes(compiled.docs).tolist()
    keys_only = flat_items([list(g) for g in groups], total, field=None)
    assert keys_only.values is None and keys_only.docs.equals(python.docs)


def _rank_key(item):
    doc, score = item
    return (-score, tuple(-b for b in doc.encode()) + (1,))  # doc id descending by bytes, longer first


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_IDS, _SCORES, min_size=1, max_size=60), min_size=1, max_size=6))
def test_a_ranked_walk_is_trec_evals_order_and_ranks_to_the_same_run(groups):
    total = sum(map(len, groups))
    walked = flat_items(groups, total, field="score", rank=True)
    python = flat_items(groups, total, field="score", compiled=False)
    got = list(zip(walked.docs.to_pylist(), walked.values.tolist(), strict=True))
    want = [item for g in groups for item in sorted(g.items(), key=_rank_key)]
    assert got == want
    blocks = (np.arange(len(groups), dtype=np.int32),
              np.concatenate([[0], np.cumsum([len(g) for g in groups])[:-1]]).astype(np.int64))
    queries = [f"q{i}" for i in range(len(groups))]
    a = rank_rows(None, walked.docs, walked.values, source="<dict>", queries=queries, blocks=blocks,
                  owned=True, hashes=walked.hashes)
    b = rank_rows(None, python.docs, python.values.copy(), source="<dict>", queries=queries, blocks=blocks)
    assert a.docs.to_pylist() == b.docs.to_pylist()
    assert _bits(a.values) == _bits(b.values)
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.keys.keys.tolist() == b.keys.keys.tolist()


class _Str(str):
    pass


@pytest.mark.parametrize("groups", [
    [{1: 1.0}],  # a key that is not a str
    [{_Str("d"): 1.0}],  # a str subclass
    [{"\ud800": 1.0}],  # a lone surrogate
    [{"d": np.int64(3)}],  # a numpy integer
    [{"d": "1.5"}],  # a string value
    [OrderedDict(d=1.0)],  # not an exact dict
    [{"d": 10**400}],  # an int too large for a double
])
def test_what_the_c_walk_does_not_read_it_hands_over(groups):
    assert walk.items(groups, 1, True, False) is None


@pytest.mark.parametrize("score", [float("nan"), float("inf"), -float("inf")])
def test_a_ranked_walk_hands_over_a_score_that_is_not_finite(score):
    assert walk.items([{"a": 1.0, "b": score}], 2, True, True) is None
    with pytest.raises(InputError, match="score is not a finite number") as err:
        Run.from_dict({"q": {"a": 1.0, "b": score}})
    assert err.value.line == 2  # the row the Python path read it from


def test_values_the_python_path_reads_read_the_same_after_the_hand_over():
    run = Run.from_dict({"q": {"d1": np.int64(3), "d2": np.float32(0.5), "d3": 2}})
    assert run.ranking("q") == ["d1", "d3", "d2"]
    assert Qrels.from_dict({"q": OrderedDict(a=1, b=np.int64(2))}).grades.tolist() == [1, 2]


def test_the_same_errors_either_way():
    with pytest.raises(InputError, match="scores must be numbers"):
        Run.from_dict({"q": {"a": 10**400}})
    with pytest.raises(InputError, match="grades must be integers"):
        Qrels.from_dict({"q": {"a": "x"}})
    with pytest.raises(InputError, match="lone surrogate") as err:
        Run.from_dict({"q": {"a": 2.0, "\ud800": 1.0}})
    assert err.value.line == 2 and err.value.field == "doc_id"


def test_ints_past_2_to_the_53_round_as_numpy_rounds_them():
    values = [2**53 + 1, 2**63 - 1, -(2**64) - 3, 10**300, True, False]
    groups = [{f"d{i}": v for i, v in enumerate(values)}]
    compiled = flat_items(groups, len(values), field="score")
    assert compiled.hashes is not None  # (read by the C walk, not handed over)
    assert _bits(compiled.values) == _bits(np.fromiter(values, dtype=np.float64))
    assert [struct.pack("<d", v) for v in compiled.values.tolist()] == [struct.pack("<d", float(v)) for v in values]


_ROW = st.tuples(st.sampled_from(["q1", "q2", "q10", "é", "Q"]), _IDS, _SCORES)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=80), st.lists(st.integers(1, 79), max_size=3), st.integers(0, 3))
def test_rows_in_any_order_rank_in_c_as_in_numpy(rows, cuts, skip):
    """A file's rows (shuffled, repeated docs included) grouped and ranked by the C walk: the same
    run as numpy's ranking, or the same error on the same lines; ids in several chunks, sliced."""
    rows = [(f"x{i}", "pad", 0.0) for i in range(skip)] + rows  # sliced off below: chunks with an offset
    bounds = sorted({0, len(rows), *[c for c in cuts if c < len(rows)]})

    def column(i):
        return pa.chunked_array([pa.array([r[i] for r in rows[a:b]], pa.string())
                                 for a, b in zip(bounds, bounds[1:], strict=False)]).slice(skip)
    scores = np.array([r[2] for r in rows[skip:]], dtype=np.float64)
    outcomes = []
    for compiled in (True, False):
        try:
            r = rank_rows(column(0), column(1), scores.copy(), source="<run>", compiled=compiled)
        except InputError as exc:
            outcomes.append(("error", str(exc), exc.line))
        else:
            outcomes.append((r.queries, r.offsets.tolist(), r.docs.to_pylist(), _bits(r.values),
                             r.keys.keys.tolist()))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("seed", range(6))
def test_long_queries_rank_in_c_as_in_numpy(seed):
    """Queries of 64 rows or more (the C walk radix-sorts those): heavy ties, -0.0 beside 0.0,
    repeated docs in one case; shuffled file rows and an unranked dict alike."""
    rng = np.random.default_rng(seed)
    n_queries, depth = 4, int(rng.integers(64, 1200))
    pool = np.array([0.0, -0.0, 1.0, 0.5, -2.5, 1e300, 5e-324], dtype=np.float64)
    scores = np.where(rng.random(n_queries * depth) < 0.5, rng.choice(pool, n_queries * depth),
                      rng.normal(0, 3, n_queries * depth))
    docs = [f"d{int(i)}" for i in rng.permutation(10 * depth)[: n_queries * depth] % (10 * depth)]
    if seed == 5:
        docs[7] = docs[3]  # a repeated doc in the first query
    qids = [f"q{i // depth}" for i in range(n_queries * depth)]
    perm = rng.permutation(n_queries * depth)
    qcol, dcol = pa.array([qids[i] for i in perm]), pa.array([docs[i] for i in perm])
    outcomes = []
    for compiled in (True, False):
        try:
            r = rank_rows(qcol, dcol, scores[perm].copy(), source="<run>", compiled=compiled)
        except InputError as exc:
            outcomes.append(("error", str(exc), exc.line))
        else:
            outcomes.append((r.queries, r.docs.to_pylist(), _bits(r.values), r.keys.keys.tolist()))
    assert outcomes[0] == outcomes[1]
    if seed != 5:
        groups = [{docs[i]: float(scores[i]) for i in perm if qids[i] == f"q{q}"} for q in range(n_queries)]
        walked = flat_items(groups, n_queries * depth, field="score", rank=True)
        got = list(zip(walked.docs.to_pylist(), walked.values.tolist(), strict=True))
        assert got == [item for g in groups for item in sorted(g.items(), key=_rank_key)]


def test_grouped_rows_unranked_inside_rank_in_c_as_in_numpy():
    """Rows grouped by query (blocks out of query order) but not ranked inside: the C pass ranks
    them without numpy's grid sort first, to the same run."""
    rng = np.random.default_rng(3)
    qids = [q for q in ("q2", "q10", "q1") for _ in range(70)]
    docs = [f"d{i}" for i in rng.permutation(210)]
    scores = rng.choice(np.array([0.0, -0.0, 1.0, 2.5, -1.0]), 210)
    runs = [rank_rows(pa.array(qids), pa.array(docs), scores.copy(), source="<run>", compiled=compiled)
            for compiled in (True, False)]
    assert runs[0].queries == runs[1].queries == ["q1", "q10", "q2"]
    assert runs[0].docs.to_pylist() == runs[1].docs.to_pylist()
    assert _bits(runs[0].values) == _bits(runs[1].values)
    assert runs[0].keys.keys.tolist() == runs[1].keys.keys.tolist()


def _c_pass(qids: pa.ChunkedArray, docs: pa.ChunkedArray, scores: np.ndarray, threads: int) -> list[bytes]:
    queries, blocks, qcodes = group_by_query(qids)
    if qcodes is None:
        qcodes = np.repeat(blocks[0], np.diff(np.append(blocks[1], len(qids))))
    offsets = np.zeros(len(queries) + 1, np.int64)
    np.cumsum(np.bincount(qcodes, minlength=len(queries)), out=offsets[1:])
    parts = [(b[1], b"" if b[2] is None else b[2], c.offset, len(c)) for c in docs.chunks for b in [c.buffers()]]
    out = walk.ranked_rows(np.ascontiguousarray(qcodes, np.int32), offsets, parts, scores, threads)
    return [bytes(x) for x in out]


@settings(max_examples=200, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=120), st.lists(st.integers(1, 119), max_size=3), st.integers(2, 17))
def test_the_c_pass_on_threads_writes_what_one_thread_writes(rows, cuts, threads):
    """The queries split into ranges of about equal rows, each ranked on a thread of its own into
    its part of the outputs: byte for byte what one thread writes (ids in chunks, repeated docs,
    more threads than queries)."""
    bounds = sorted({0, len(rows), *[c for c in cuts if c < len(rows)]})

    def column(i):
        return pa.chunked_array([pa.array([r[i] for r in rows[a:b]], pa.string())
                                 for a, b in zip(bounds, bounds[1:], strict=False)])
    scores = np.array([r[2] for r in rows], dtype=np.float64)
    assert _c_pass(column(0), column(1), scores, threads) == _c_pass(column(0), column(1), scores, 1)


def test_a_big_table_ranks_on_threads_as_numpy_ranks_it():
    """From 2**17 rows rank_rows hands the C pass Arrow's CPU count of threads: the same run as
    numpy's ranking (queries long and short, ties, doc ids repeated across queries)."""
    rng = np.random.default_rng(11)
    n = (1 << 17) + 4321
    qids = pc.binary_join_element_wise("q", pa.array(rng.zipf(1.3, n) % 5000).cast(pa.string()), "")
    docs = pc.binary_join_element_wise("d", pa.array(rng.permutation(n)).cast(pa.string()), "")
    scores = rng.choice(np.array([0.0, -0.0, 1.0, 2.5, 3.25]), n)
    cuts = [0, 50_000, 90_000, n]
    chunked = [pa.chunked_array([col.slice(a, b - a) for a, b in zip(cuts, cuts[1:], strict=False)])
               for col in (qids, docs)]
    runs = [rank_rows(*chunked, scores.copy(), source="<run>", compiled=compiled) for compiled in (True, False)]
    assert runs[0].queries == runs[1].queries
    assert runs[0].docs.equals(runs[1].docs)
    assert _bits(runs[0].values) == _bits(runs[1].values)
    assert runs[0].keys.keys.tolist() == runs[1].keys.keys.tolist()
    assert pa.cpu_count() < 2 or _c_pass(*chunked, scores, 2) == _c_pass(*chunked, scores, 1)


def test_a_big_chunked_query_column_is_grouped_on_two_threads_as_in_one():
    """From 2**20 rows the C pass encodes a query-id column on more than one thread (a hash table
    a thread) and merges the parts' codes: the same queries and row codes as one encoding of the
    whole."""
    rng = np.random.default_rng(5)
    n = (1 << 20) + 999
    codes = rng.integers(0, 30_000, n)
    codes[-500:] = 40_000 + np.arange(500)  # ids seen only in the second half
    qids = pc.binary_join_element_wise("q", pa.array(codes).cast(pa.string()), "")
    chunked = pa.chunked_array([qids.slice(a, 1 << 18) for a in range(0, n, 1 << 18)])
    queries, blocks, qcodes = group_by_query(chunked)
    whole_queries, _, whole_codes = group_by_query(qids)
    assert blocks is None and queries == whole_queries and len(queries) == len(set(codes.tolist()))
    assert np.array_equal(qcodes, whole_codes)
    assert [queries[c] for c in qcodes[-3:]] == [f"q{c}" for c in codes[-3:]]


def test_ranked_blocks_out_of_query_order_rank_in_c_as_in_numpy():
    """Rows grouped and ranked inside, but blocks out of byte order ("q2" before "q10", as numeric
    ids are written) and ties in the file's doc order: the C pass moves them, to numpy's run."""
    rng = np.random.default_rng(8)
    qids, docs, scores = [], [], []
    for q in ("q1", "q2", "q10", "q11", "q3"):
        values = -np.sort(-rng.choice(np.array([3.0, 2.0, 2.0, 1.0, 0.0, -0.0]), 40))
        qids += [q] * 40
        docs += [f"d{i}" for i in rng.permutation(40)]
        scores += values.tolist()
    runs = [rank_rows(pa.array(qids), pa.array(docs), np.array(scores), source="<run>", compiled=compiled)
            for compiled in (True, False)]
    assert runs[0].queries == runs[1].queries == ["q1", "q10", "q11", "q2", "q3"]
    assert runs[0].docs.to_pylist() == runs[1].docs.to_pylist()
    assert _bits(runs[0].values) == _bits(runs[1].values)
    assert runs[0].keys.keys.tolist() == runs[1].keys.keys.tolist()


_TEXT = st.binary(max_size=80).map(lambda b: bytes(b" \t\n\x0b\x0caQ"[c % 7] for c in b))


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.sampled_from([b" ", b"\t"]))
def test_the_c_scan_of_fields_answers_as_numpy_does(data, delimiter):
    """Another whitespace byte or an empty field (doubled delimiter, one at a line's start or end):
    found alike by the C scan and by numpy, and as splitting the lines would find them."""
    lines = data.split(b"\n")
    expected = any(w in data for w in {b" ", b"\t", b"\x0b", b"\x0c"} - {delimiter}) or any(
        b"" in line.split(delimiter) for line in lines if delimiter in line)
    assert unsplittable(data, delimiter) == unsplittable(data, delimiter, compiled=False) == expected


@pytest.mark.parametrize("at", [0, 15, 16, 17, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (1 << 21) - 2])
@pytest.mark.parametrize("mark", [b"  ", b"\n ", b" \n", b"\t"])
def test_the_c_scan_finds_a_mark_anywhere_in_a_big_buffer(at, mark):
    """A buffer of 2 MiB (scanned in two halves on two threads, 16 bytes at a time): the mark is
    found at either end, across the cut in the middle and across a 16-byte step."""
    data = bytearray(b"ab c\n" * ((1 << 21) // 5)) + b"abc"
    data[at:at + len(mark)] = mark
    assert len(data) < 1 << 21 + 1 and unsplittable(bytes(data), b" ")
    assert unsplittable(bytes(data), b" ", compiled=False)
    clean = bytes(b"ab c\n" * ((1 << 21) // 5))
    assert not unsplittable(clean, b" ") and not unsplittable(clean, b" ", compiled=False)


def _census_by_hand(data: bytes) -> int:
    flags = sum(flag for flag, found in [(HAS_CR, b"\r" in data), (HAS_HIGH, not data.isascii()),
                                         (HAS_TAB, b"\t" in data), (HAS_SPACE, b" " in data),
                                         (HAS_VT_FF, b"\x0b" in data or b"\x0c" in data)] if found)
    for flag, c in ((SPACE_PAIR, b" "), (TAB_PAIR, b"\t")):
        if any(pair in data for pair in (c + c, c + b"\n", b"\n" + c)):
            flags |= flag
    return flags


_BYTES = st.binary(max_size=80).map(lambda b: bytes(b" \t\n\r\x0b\x0caQ\x80\xff"[c % 10] for c in b))


@settings(max_examples=400, deadline=None)
@given(_BYTES, st.integers(0, 3))
def test_the_byte_census_is_what_the_bytes_hold(data, repeat):
    """``byte_census`` (the C pass ``read_lines`` runs once over a mapped file, which
    ``unsplittable`` then reads): each byte class and each pair found as the bytes hold them, and
    the LF bytes counted (a ``--stream`` piece's lines), in a short buffer and in one past 1 MiB
    (two halves on two threads; the pair across the cut too)."""
    assert line_census(data) == (_census_by_hand(data), data.count(b"\n"))
    if repeat and data:
        big = b"ab c\n" * (((1 << 20) + 3 * repeat) // 5) + data + b"ab c\n" * 1000
        assert line_census(big) == (_census_by_hand(big), big.count(b"\n"))
        assert byte_census(big) == _census_by_hand(big)


@pytest.mark.parametrize("at", [0, 15, 16, 17, (1 << 20) - 2, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (1 << 21) - 3])
@pytest.mark.parametrize("mark", [b"\r", b"\xc3\xa9", b"x\t\n", b"\x0c"])
def test_the_census_finds_a_byte_anywhere_in_a_big_buffer(at, mark):
    """CR, a non-ASCII byte, a tab pair and FF: found at either end of a 2 MiB buffer, across the
    cut between the threads' halves (at 2**20 - 2 the tab pair is the bytes either side of it) and
    across a 16-byte step."""
    data = bytearray(b"ab c\n" * ((1 << 21) // 5)) + b"abc"
    data[at:at + len(mark)] = mark
    assert byte_census(bytes(data)) == _census_by_hand(bytes(data))


def test_a_mapped_file_carries_its_census_to_the_readers(tmp_path):
    """``read_lines`` maps a big plain file and keeps its census (the fast reader's check reads it
    instead of scanning again); a file with a CR or a non-ASCII byte is read and normalised."""
    plain = tmp_path / "run.trec"
    plain.write_bytes(b"q1 Q0 d1 1 2.5 s\n" * 300_000)
    mapped = read_lines(plain)
    assert isinstance(mapped, MappedFile) and mapped.census == HAS_SPACE
    assert not unsplittable(mapped, b" ") and unsplittable(mapped, b"\t")
    mapped.close()
    for odd in (b"q1 Q0 d1 1 2.5 s\r\n", "q1 Q0 d\u00e9 1 2.5 s\n".encode()):
        path = tmp_path / "odd.trec"
        path.write_bytes(b"q1 Q0 d1 1 2.5 s\n" * 300_000 + odd)
        data = read_lines(path)
        assert isinstance(data, bytes) and data.endswith(odd.replace(b"\r\n", b"\n"))


def _encoded_by_arrow(ids: list[str]) -> tuple[list[int], list[int], list[int]]:
    """Codes in order of first appearance, each code's first row and its rows: Arrow's encoding."""
    enc = pc.dictionary_encode(pa.array(ids, pa.string()))
    codes = enc.indices.to_pylist()
    firsts = [codes.index(c) for c in range(len(enc.dictionary))]
    return codes, firsts, np.bincount(codes, minlength=len(firsts)).tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["", "q", "q\0", "\0", "q1", "q10", "a" * 8, "a" * 9, "é" * 5, "x" * 17, "y" * 17, "q2"])
                | _IDS, min_size=1, max_size=150).flatmap(lambda ids: st.tuples(
                    st.just(ids), st.lists(st.integers(0, len(ids)), max_size=4), st.integers(1, 17))))
def test_the_c_encoding_numbers_ids_as_arrow_does(case):
    """``_walk.encode_ids`` (one hash table a thread, the tables merged in order): each row's code,
    each code's first row and its rows, as Arrow's dictionary encoding numbers them, on any chunking
    and any number of threads (empty parts too); ids of up to 8 bytes kept in the table's slots,
    longer ones compared byte for byte (and "q" told from "q\\0")."""
    ids, cuts, threads = case
    bounds = sorted({0, len(ids), *cuts})
    column = pa.chunked_array([pa.array(ids[a:b], pa.string()) for a, b in zip(bounds, bounds[1:], strict=False)],
                              pa.string())
    codes, firsts, counts = walk.encode_ids(string_parts(column), threads)
    assert (np.frombuffer(codes, np.int32).tolist(), np.frombuffer(firsts, np.int64).tolist(),
            np.frombuffer(counts, np.int64).tolist()) == _encoded_by_arrow(ids)


def test_hash_neighbours_and_a_growing_table_encode_exactly():
    """Thousands of ids that differ in one byte (the table grows from 4096 slots, ids probe past
    each other) and ids that share their first 8 bytes: the C encoding still tells them apart."""
    ids = [f"q{i}" for i in range(20_000)] + [f"prefix__{i}" for i in range(3000)]
    ids = ids + ids[::-1] + ids[::7]
    codes, firsts, counts = walk.encode_ids(string_parts(pa.array(ids)), 3)
    assert (np.frombuffer(codes, np.int32).tolist(), np.frombuffer(firsts, np.int64).tolist(),
            np.frombuffer(counts, np.int64).tolist()) == _encoded_by_arrow(ids)


def test_ids_whose_hashes_share_their_top_bits_encode_as_fast_as_any():
    """A ``--stream`` partition holds the query ids whose ``string_hashes`` share their top bits
    (the partitions are cut by them). The C encoding's table mixes a hash again before it takes a
    slot: such ids spread over the table as any ids do, instead of piling into one stretch of it
    (which made a partition's encoding quadratic: 1.3 s for 2M rows). Timed against the same number
    of ordinary ids, best of three each (a pile-up is a hundredfold, not a few percent)."""
    import time

    candidates = pc.binary_join_element_wise("q", pa.array(np.arange(1_500_000)).cast(pa.string()), "")
    top = string_hashes(candidates) >> np.uint64(58)
    shared = candidates.filter(pa.array(top == 0))  # (one in 64)
    ordinary = candidates.slice(0, len(shared))
    rng = np.random.default_rng(4)

    def best(ids: pa.Array) -> float:
        rows = ids.take(pa.array(rng.integers(0, len(ids), 20 * len(ids))))
        parts = string_parts(rows)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            codes, firsts, _ = walk.encode_ids(parts, 1)
            times.append(time.perf_counter() - start)
        assert len(firsts) // 8 == len(ids)
        return min(times)

    assert len(shared) > 20_000
    assert best(shared) < 3 * best(ordinary) + 0.01
