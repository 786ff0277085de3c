"""Ranking does not depend on the order rows come in: shuffled rows, blocks out of order, blocks
unranked inside, dicts built in any order all give the run that ranked input gives, and that run
follows trec_eval's rule (score descending, then doc id descending by bytes).

Scores include heavy ties, -0.0 next to 0.0, negatives, huge magnitudes and neighbours one ulp
apart (equal in the high bits the packed sort keys keep: the exact pass must order them).
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise import evaluate
from rankwise.data import Qrels, Run
from rankwise.data.columns import take_ascending
from rankwise.data.ranking import descending_keys
from rankwise.errors import InputError

DOCS = ["1", "01", "10", "001", "d", "d1", "d10", "D", "a", "b", "z", "Z", "é", "e", "doc-7", "d_1", "", "zz"]
QUERIES = ["1", "01", "10", "q", "q1", "Q", "é", "q2"]


def _scores(rng: random.Random, n: int) -> list[float]:
    base = [0.0, -0.0, 1.0, 0.5, -1.0, 1e300, -1e300, 5e-324, 3.0]
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(base))
        elif r < 0.6:
            x = rng.choice([0.5, 1.0, 3.0, 1e10])
            out.append(float(np.nextafter(x, np.inf if rng.random() < 0.5 else -np.inf)))
        else:
            out.append(rng.uniform(-5, 5))
    return out


def _expected(rows: list[tuple[str, str, float]]) -> dict[str, list[str]]:
    """trec_eval's order, written plainly: query, score descending, doc id descending (UTF-8 bytes).
    """
    out: dict[str, list[tuple[float, bytes, str]]] = {}
    for q, d, s in rows:
        out.setdefault(q, []).append((s, d.encode(), d))
    by_doc = {q: sorted(v, key=lambda t: t[1], reverse=True) for q, v in out.items()}
    return {q: [d for _, _, d in sorted(v, key=lambda t: -t[0])] for q, v in by_doc.items()}  # stable


def _random_rows(rng: random.Random) -> list[tuple[str, str, float]]:
    rows = []
    for q in rng.sample(QUERIES, rng.randint(1, len(QUERIES))):
        docs = rng.sample(DOCS, rng.randint(1, len(DOCS)))
        rows.extend((q, d, s) for d, s in zip(docs, _scores(rng, len(docs)), strict=True))
    return rows


def _as_run(rows) -> Run:
    return Run.from_columns([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def _as_chunked_run(rows, rng: random.Random) -> Run:
    """The same rows as ids in several Arrow chunks, as a large file's reader returns them."""
    cuts = sorted(rng.sample(range(1, len(rows)), min(3, len(rows) - 1))) if len(rows) > 1 else []
    bounds = list(zip([0, *cuts], [*cuts, len(rows)], strict=True))

    def chunked(i):
        return pa.chunked_array([pa.array([r[i] for r in rows[a:b]], pa.string()) for a, b in bounds])

    return Run.from_columns(chunked(0), chunked(1), [r[2] for r in rows])


def _same(a: Run, b: Run) -> None:
    assert a.queries == b.queries
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.doc_ids.to_pylist() == b.doc_ids.to_pylist()
    assert np.array_equal(a.scores, b.scores)


def _arrangements(rng: random.Random, rows: list) -> dict[str, list]:
    by_query: dict[str, list] = {}
    for r in rows:
        by_query.setdefault(r[0], []).append(r)
    blocks = list(by_query.values())
    shuffled = rows[:]
    rng.shuffle(shuffled)
    unranked_blocks = [rng.sample(b, len(b)) for b in rng.sample(blocks, len(blocks))]
    return {
        "ranked": [r for q in sorted(by_query) for r in sorted(by_query[q], key=lambda t: -t[2])],
        "shuffled rows": shuffled,
        "blocks unranked inside": [r for b in unranked_blocks for r in b],
        "blocks ranked, out of order": [r for b in rng.sample(blocks, len(blocks))
                                        for r in sorted(b, key=lambda t: -t[2])],
    }


@pytest.mark.parametrize("seed", range(60))
def test_every_arrangement_ranks_as_trec_eval(seed):
    rng = random.Random(seed)
    rows = _random_rows(rng)
    expected = _expected(rows)
    reference = None
    for name, arranged in _arrangements(rng, rows).items():
        run = _as_run(arranged)
        assert {q: run.ranking(q) for q in run.queries} == expected, name
        _same(_as_chunked_run(arranged, rng), run)
        reference = reference or run
        _same(run, reference)
    # a dict built in random order, queries and docs alike
    as_dict: dict = {}
    for q, d, s in rng.sample(rows, len(rows)):
        as_dict.setdefault(q, {})[d] = s
    _same(Run.from_dict(as_dict), reference)


def test_big_shuffled_run_equals_ranked_run():
    """Over 2**20 rows (the threaded gather) and one-ulp neighbours in a single big query."""
    rng = np.random.default_rng(5)
    n_queries, depth = 300, 3500
    n = n_queries * depth
    q = np.repeat(np.arange(n_queries), depth)
    doc_num = rng.permutation(n)  # unique doc per row: fixed-width ids sort like their numbers
    scores = np.round(rng.uniform(0, 20, n), 2)  # many ties
    ulp = rng.random(n) < 0.05
    scores[ulp] = np.nextafter(scores[ulp], np.inf)
    scores[rng.random(n) < 0.01] = -0.0
    order = np.lexsort((-doc_num, -(scores + 0.0), q))  # trec_eval's order, by numbers
    qids = pa.array([f"q{i:04d}" for i in range(n_queries)]).take(pa.array(q))
    docs = pa.array([f"d{x:08d}" for x in doc_num.tolist()])
    ranked = Run.from_columns(qids.take(pa.array(order)), docs.take(pa.array(order)), scores[order])
    perm = rng.permutation(n)
    shuffled = Run.from_columns(qids.take(pa.array(perm)), docs.take(pa.array(perm)), scores[perm])
    _same(shuffled, ranked)
    assert ranked.doc_ids.to_pylist() == docs.take(pa.array(order)).to_pylist()
    # one query holding everything: few score bits left in the keys, many near ties
    one = Run.from_columns(pa.array(["q"] * n), docs.take(pa.array(perm)), scores[perm])
    flat = np.lexsort((-doc_num, -(scores + 0.0)))
    assert one.doc_ids.to_pylist() == docs.take(pa.array(flat)).to_pylist()


@pytest.mark.parametrize("seed", range(10))
def test_evaluation_ignores_row_order(seed):
    rng = random.Random(100 + seed)
    rows = _random_rows(rng)
    qrels = {q: {d: rng.randint(-1, 3) for d in rng.sample(DOCS, 6)} for q in QUERIES}
    measures = ["map", "ndcg@5", "P@3", "mrr", "bpref", "recall@10"]
    results = [evaluate(qrels, _as_run(arranged), measures).per_query.to_dict()
               for arranged in _arrangements(rng, rows).values()]
    assert all(r == results[0] for r in results)


def test_ordered_run_keeps_row_order_within_query_when_shuffled():
    run = Run.from_columns(["b", "a", "b", "a", "b"], ["x", "y", "z", "w", "v"])
    assert (run.ranking("a"), run.ranking("b")) == (["y", "w"], ["x", "z", "v"])


def test_qrels_from_shuffled_rows_group_by_query():
    qrels = Qrels.from_columns(["b", "a", "b", "a"], ["x", "y", "z", "w"], [1, 0, 2, 3])
    assert qrels.queries == ["a", "b"]
    assert qrels.judgements("a") == {"y": 0, "w": 3}
    with pytest.raises(InputError, match=r"q.txt:4: field 'doc_id': pair .query 'a', doc 'y'. is judged twice \(first at line 2\)"):
        Qrels.from_columns(["b", "a", "b", "a"], ["x", "y", "z", "y"], [1, 0, 2, 3], source="q.txt")


def test_duplicate_in_shuffled_run_names_both_lines():
    with pytest.raises(InputError, match=r"r.trec:5: field 'doc_id': doc 'x' appears twice in query 'b' "
                                         r"\(first at line 1\)"):
        Run.from_columns(["b", "a", "c", "a", "b"], ["x", "y", "z", "w", "x"], [1.0, 2.0, 3.0, 4.0, 5.0],
                         source="r.trec")


def test_descending_keys_order_every_kind_of_double():
    values = np.array([-np.inf, -1e300, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1e300, np.inf])
    keys = descending_keys(values)
    assert np.argsort(keys, kind="stable").tolist() == [9, 8, 7, 6, 4, 5, 3, 2, 1, 0]
    assert keys[4] == keys[5]  # -0.0 and 0.0 tie, as in C comparisons


def _reference_hash(s: bytes) -> int:
    """string_hashes' definition, byte by byte: the first word (zero-padded) times K1, then each
    further word (the last one overlapping) times its own constant, XOR-ed in."""
    from rankwise.data.columns import _FACTORS, _K1

    mask = (1 << 64) - 1
    h = int.from_bytes(s[:8].ljust(8, b"\0"), "little") * int(_K1) & mask
    at = 8
    while at < len(s):
        pos = len(s) - 8 if len(s) <= at + 8 else at
        h ^= int.from_bytes(s[pos:pos + 8], "little") * int(_FACTORS[(at // 8) % len(_FACTORS)]) & mask
        at += 8
    return h


@pytest.mark.parametrize("lengths", [[3, 9, 16, 17, 40], [2, 100_000, 5], [70_000, 65_001, 1, 8, 12, 300] + [20] * 50])
def test_string_hashes_follow_their_definition_for_long_and_short_ids(lengths):
    """Long doc ids beside short ones: the few long ones are hashed word-vector at a time, to the
    same value."""
    from rankwise.data.columns import string_hashes

    rng = random.Random(len(lengths))
    ids = ["".join(rng.choice("ab\u00e9") for _ in range(n)) for n in lengths]
    got = string_hashes(pa.array(ids)).tolist()
    assert got == [_reference_hash(s.encode()) for s in ids]
    assert string_hashes(pa.array(["x", *ids]).slice(1)).tolist() == got  # an offset slice hashes alike


def test_blocks_laid_end_to_end_are_the_plain_gather():
    """MovePlan.full_order's running sum equals ``arange + repeat(first - new start)`` for blocks
    of any length, empty ones included, in any order."""
    from rankwise.data.ranking import MovePlan

    rng = np.random.default_rng(3)
    for _ in range(500):
        lengths = rng.integers(0, 5, rng.integers(1, 8))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        perm = rng.permutation(len(lengths))
        firsts, moved = starts[perm], lengths[perm]
        new_starts = np.concatenate([[0], np.cumsum(moved)[:-1]])
        plain = np.arange(int(moved.sum())) + np.repeat(firsts - new_starts, moved)
        assert MovePlan(runs=(firsts, moved)).full_order().tolist() == plain.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text(max_size=4), max_size=6), min_size=1, max_size=6), st.data())
def test_take_ascending_is_arrows_take_of_the_combined_column(chunks, data):
    """Taken chunk by chunk (empty chunks, rows in one chunk or all, no rows): Arrow's take of
    the combined column."""
    column = pa.chunked_array([pa.array(c, pa.string()) for c in chunks], pa.string())
    rows = np.array(sorted(data.draw(st.lists(st.integers(0, max(len(column) - 1, 0)), max_size=12)
                                     if len(column) else st.just([]))), dtype=np.int64)
    got = take_ascending(column, rows)
    assert got.type == pa.string() and got.to_pylist() == [column[i].as_py() for i in rows.tolist()]
