"""The columnar RAG path (issue 37 item 3) against the object path: the same numbers to the last
digit, the same warnings, the same errors.

Random test sets (ids, spans, doc ids, overlapping and repeated chunks, missing fields, cases
without ground truth or chunks) are scored by both paths under every option the columnar path
takes; a file read a few bytes at a time (many blocks) gives what one block gives; bad files and
mutants of good ones give the object path's error, word for word, through the library and the CLI.
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rankwise.analysis.failures import FAILURE_CLASSES, classify_case
from rankwise.analysis.headroom import best_order
from rankwise.analysis.rag_columns import evaluate_rag_columns, evaluate_rag_diagnosed
from rankwise.cli import main
from rankwise.data.records import records_from_testset
from rankwise.data.testset_columns import NotColumnar, iter_case_columns
from rankwise.errors import InputError
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.metrics.matrix_columns import char_coverage, matrix_from_columns
from rankwise.relevance.column_sources import judge_columns
from rankwise.relevance.verdicts import assign_verdicts
from rankwise.report.text import to_json

DOCS = ("a", "b", "c.md")


def _chunk(rng: random.Random) -> dict:
    c: dict = {}
    if rng.random() < 0.7:
        c["id"] = f"{rng.choice('cd')}{rng.randrange(6)}"
    if rng.random() < 0.85:
        c["doc_id"] = rng.choice(DOCS)
    if rng.random() < 0.9:
        c["start"] = rng.randrange(60)
        if rng.random() < 0.95:
            c["end"] = c["start"] + rng.randrange(45)
    if rng.random() < 0.5:
        c["score"] = round(rng.random(), 3) if rng.random() < 0.9 else None
    if rng.random() < 0.08:
        c["text"] = rng.choice(["alpha beta", "", "ünïcode ✓"])
    if not ({"id", "text"} & set(c)) and not {"doc_id", "start", "end"} <= set(c):
        c["id"] = "c9"
    return c


def _passage(rng: random.Random) -> dict:
    p: dict = {}
    if rng.random() < 0.9:
        p["doc_id"] = rng.choice(DOCS)
    if rng.random() < 0.9:
        p["start"] = rng.randrange(60)
        p["end"] = p["start"] + rng.randrange(40)
    if rng.random() < 0.15 or not ({"doc_id", "start"} <= set(p)):
        p["text"] = "alpha"
    return p


def _case(rng: random.Random, i: int, own_fields: bool = False) -> dict:
    row: dict = {}
    roll = rng.random()
    if roll < 0.9:
        row["id"] = f"q{i}" if rng.random() < 0.5 else f"case-{rng.randrange(10**6)}-{i}"
    elif roll < 0.95:
        row["id"] = ""
    row["question"] = f"question {i}?"
    if rng.random() < 0.5:  # chunks by id
        if rng.random() < 0.92:
            row["retrieved_context_ids"] = [rng.choice([f"d{j}" for j in range(6)] + [None] * (rng.random() < 0.1))
                                            for _ in range(rng.randrange(7))]
    elif rng.random() < 0.93:
        row["retrieved_contexts"] = [_chunk(rng) for _ in range(rng.randrange(8))]
    if rng.random() < 0.7:
        row["reference_context_ids"] = [f"d{rng.randrange(7)}" if rng.random() < 0.8 else rng.choice(DOCS)
                                        for _ in range(rng.randrange(4))]
    if rng.random() < 0.7:
        row["reference_contexts"] = [_passage(rng) for _ in range(rng.randrange(4))]
    if own_fields and rng.random() < 0.5:
        row["style"] = rng.choice(["short", "long"])
    if rng.random() < 0.05:
        row["reference"] = "an answer"
    return row


def _write(path: Path, rows: list[dict], rng: random.Random | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    if rng is not None and rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines) + 1), "   ")
    path.write_text("\n".join(lines) + "\n")
    return path


def _said(caught) -> list[str]:
    """The warnings a user sees (not a ResourceWarning for a file some earlier test left open,
    which the collector may report during either path)."""
    return [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]


def _outcome(**kw):
    """(JSON text or the error's words, the warnings' words, whether the columnar path answered)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = evaluate_rag_diagnosed(**kw)
        except InputError as exc:
            return ("error", str(exc)), _said(caught), None
    return ("ok", to_json(result, per_query=True)), _said(caught), not result.records


def _same(**kw) -> bool:
    """Both paths agree on ``kw``; returns whether the columnar path answered."""
    fast, fast_warned, took = _outcome(columns=True, **kw)
    slow, slow_warned, _ = _outcome(columns=False, **kw)
    assert fast == slow, kw
    assert fast_warned == slow_warned, kw
    return bool(took)


OPTIONS = [
    {},
    {"k": [1, 2]},
    {"unscorable": "zero"},
    {"incomplete": "skip"},
    {"unscorable": "zero", "incomplete": "skip", "k": 4},
    {"id_field": "doc_id"},
    {"id_field": "id", "k": [3]},
    {"metrics": ["mrr", "map", "precision", "wcp", "r_precision", "ndcg@3", "recall@2", "acp@5", "judged@3"]},
    {"min_overlap": 0.3},
    {"min_overlap": 1.0, "metrics": ["char_recall@2", "char_recall", "recall@40c", "precision@30c", "hit_rate@2"]},
]


@pytest.mark.parametrize("relevance", ["ids", "span"])
def test_random_test_sets_give_the_same_numbers_by_both_paths(tmp_path, relevance):
    rng = random.Random(37 if relevance == "ids" else 38)
    took = 0
    trials = 90
    for t in range(trials):
        own = rng.random() < 0.15
        rows = [_case(rng, i, own) for i in range(rng.randint(1, 14))]
        path = _write(tmp_path / f"t{t}.jsonl", rows, rng)
        options = OPTIONS[t % len(OPTIONS)]
        if relevance == "ids" and "min_overlap" in options:
            options = {"metrics": ["mrr", "recall@3"], "k": [2]}
        took += _same(testset=path, relevance=relevance, **options)
    assert took > trials // 4, took  # the columnar path answered a good share (the rest: refused, said by both)


def test_a_file_read_a_few_bytes_at_a_time_gives_what_one_block_gives(tmp_path):
    """The streamed path (many blocks, partial sums kept per case) prints what one block prints,
    and what the object path prints."""
    rng = random.Random(3)
    for t in range(12):
        rows = [_case(rng, i) for i in range(40)]
        path = _write(tmp_path / f"s{t}.jsonl", rows)
        for relevance in ("ids", "span"):
            whole = evaluate_rag_columns(path, relevance)
            if whole is None:
                continue
            for block_bytes in (1, 300, 2000):
                parts = evaluate_rag_columns(path, relevance, block_bytes=block_bytes)
                assert to_json(parts, per_query=True) == to_json(whole, per_query=True)
            assert _same(testset=path, relevance=relevance)


def test_the_benchmark_shapes_take_the_columnar_path(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from rag_scale import write_ids, write_spans

    write_ids(tmp_path / "ids.jsonl", 300, 10)
    write_spans(tmp_path / "spans.jsonl", 300, 10)
    assert _same(testset=tmp_path / "ids.jsonl", relevance="ids")
    assert _same(testset=tmp_path / "spans.jsonl", relevance="span")


BAD = {
    "not json": b'{"id": "q1", "retrieved_context_ids": ["a"]\n',
    "two objects on a line": b'{"id": "q1", "retrieved_context_ids": ["a"]} {"id": "q2"}\n',
    "a case over two lines": b'{"id": "q1",\n "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "an id that is a list": b'{"id": ["q1"], "retrieved_context_ids": ["a"]}\n',
    "a boolean chunk id": b'{"id": "q1", "retrieved_context_ids": [true], "reference_context_ids": ["a"]}\n',
    "a null reference id": b'{"id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": [null]}\n',
    "a negative offset": (b'{"id": "q1", "retrieved_contexts": [{"doc_id": "a", "start": -1, "end": 3}], '
                          b'"reference_contexts": [{"doc_id": "a", "start": 0, "end": 3}]}\n'),
    "an end before its start": (b'{"id": "q1", "retrieved_contexts": [{"doc_id": "a", "start": 5, "end": 3}], '
                                b'"reference_contexts": [{"doc_id": "a", "start": 0, "end": 3}]}\n'),
    "an unknown chunk key": b'{"id": "q1", "retrieved_contexts": [{"doc": "a"}], "reference_context_ids": ["a"]}\n',
    "a null chunk": b'{"id": "q1", "retrieved_contexts": [null], "reference_context_ids": ["a"]}\n',
    "an empty chunk": b'{"id": "q1", "retrieved_contexts": [{"score": 1}], "reference_context_ids": ["a"]}\n',
    "an infinite score": (b'{"id": "q1", "retrieved_contexts": [{"id": "a", "score": Infinity}], '
                          b'"reference_context_ids": ["a"]}\n'),
    "a passage with nothing": b'{"id": "q1", "retrieved_context_ids": ["a"], "reference_contexts": [{"doc_id": "a"}]}\n',
    "a repeated case id": (b'{"id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n'
                           b'{"id": "q1", "retrieved_context_ids": ["b"], "reference_context_ids": ["b"]}\n'),
    "a default id repeated": (b'{"id": "2", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n'
                              b'{"retrieved_context_ids": ["b"], "reference_context_ids": ["b"]}\n'),
    "ids and contexts disagree": (b'{"id": "q1", "retrieved_contexts": [{"id": "x"}], "retrieved_context_ids": ["y"],'
                                  b' "reference_context_ids": ["y"]}\n'),
    "a lone surrogate": b'{"id": "\\ud800", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "bytes that are not UTF-8": b'{"id": "q\xff", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "a line that is an array": b'["q1"]\n',
    "an empty file": b"",
    "blank lines only": b"\n  \n",
    "no ground truth anywhere": b'{"id": "q1", "retrieved_context_ids": ["a"]}\n',
    "no chunk anywhere": b'{"id": "q1", "reference_context_ids": ["a"]}\n',
    "nothing matched": b'{"id": "q1", "retrieved_context_ids": ["a.md"], "reference_context_ids": ["a"]}\n',
    "no span anywhere": b'{"id": "q1", "retrieved_context_ids": ["a"], "reference_contexts": [{"doc_id": "a", '
                        b'"start": 0, "end": 3}]}\n',
    "a field of the user's and no truth": (b'{"id": "q1", "retrieved_context_ids": ["a"], "gold": ["a"]}\n'
                                            b'{"id": "q2", "retrieved_context_ids": ["a"], "reference_context_ids": '
                                            b'["a"]}\n'),
}
# read alike by both (the columnar reader hands these to the object reader, which reads them)
GOOD_ELSEWHERE = {
    "integer ids": b'{"id": 7, "retrieved_context_ids": ["a", 3], "reference_context_ids": ["a"]}\n',
    "CR line ends": (b'{"id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\r'
                     b'{"id": "q2", "retrieved_context_ids": ["b"], "reference_context_ids": ["a"]}\r'),
    "a byte-order mark": b'\xef\xbb\xbf{"id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "an alias": b'{"qid": "q1", "contexts": ["x"], "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "a NaN score": (b'{"id": "q1", "retrieved_contexts": [{"id": "a", "doc_id": "d", "start": 0, "end": 4, '
                    b'"score": NaN}], "reference_contexts": [{"doc_id": "d", "start": 0, "end": 4}], '
                    b'"reference_context_ids": ["a"]}\n'),
    "an offset written 2.0": (b'{"id": "q1", "retrieved_contexts": [{"doc_id": "d", "start": 2.0, "end": 4}], '
                              b'"reference_contexts": [{"doc_id": "d", "start": 0, "end": 4}]}\n'),
    "a hop": (b'{"id": "q1", "retrieved_contexts": [{"doc_id": "d", "start": 0, "end": 4}], "reference_contexts": '
              b'[{"doc_id": "d", "start": 0, "end": 4, "hop": 0}]}\n'),
    "a records file": (b'{"id": "q1", "reference_context_ids": ["a"], "reference_contexts": [{"doc_id": "d", "start": 0, '
                       b'"end": 4}], "chunks": [{"rank": 1, "id": "a", "doc_id": "d", "start": 0, "end": 4}]}\n'),
    "a duplicate key": b'{"id": "q0", "id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}\n',
    "texts both sides": (b'{"id": "q1", "retrieved_contexts": [{"id": "a", "text": "alpha beta gamma delta epsilon"}],'
                         b' "reference_contexts": ["alpha beta gamma delta epsilon zeta"], '
                         b'"reference_context_ids": ["b"]}\n'
                         b'{"id": "q2", "retrieved_context_ids": ["b"], "reference_context_ids": ["b"]}\n'),
}


@pytest.mark.parametrize("name", sorted(BAD) + sorted(GOOD_ELSEWHERE))
@pytest.mark.parametrize("relevance", ["ids", "span"])
def test_bad_and_unusual_files_give_the_object_paths_words(tmp_path, name, relevance):
    path = tmp_path / "cases.jsonl"
    path.write_bytes({**BAD, **GOOD_ELSEWHERE}[name])
    _same(testset=path, relevance=relevance)


def test_a_missing_file_and_a_directory(tmp_path):
    _same(testset=tmp_path / "nope.jsonl", relevance="ids")
    (tmp_path / "dir.jsonl").mkdir()
    _same(testset=tmp_path / "dir.jsonl", relevance="ids")


@pytest.mark.parametrize("name", ["not json", "a negative offset", "a repeated case id", "a lone surrogate",
                                  "no ground truth anywhere", "a default id repeated"])
def test_the_cli_says_the_same_line_by_either_path(tmp_path, name):
    """``--records`` takes the object path; without it the columnar path is tried first."""
    path = tmp_path / "cases.jsonl"
    path.write_bytes(BAD[name])
    for relevance in ("ids", "span"):
        fast = CliRunner().invoke(main, ["eval-rag", str(path), "-r", relevance, "--quiet"])
        slow = CliRunner().invoke(main, ["eval-rag", str(path), "-r", relevance, "--quiet", "--records",
                                         str(tmp_path / "out.jsonl")])
        assert fast.exit_code == slow.exit_code == 2, (fast.output, slow.output)
        assert fast.stderr == slow.stderr and fast.stderr.startswith("rankwise: error: ")


TOKENS = [b" ", b"\t", b"\r", b"\n", b"\x00", b"\xff", b"\xef\xbb\xbf", b'"', b",", b"{", b"}", b"[", b"]", b":",
          b"\\", b'"\\ud800"', b"null", b"true", b"[]", b"{}", b"1.5", b"-1", b"NaN", b"Infinity", b"1e400", b"2.0",
          b"99999999999999999999", b'"doc_id"', b'"id"', b'"x"', b"0", b"7"]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(data) + 1)
        op = rng.randrange(5)
        if op == 0:
            data = data[:pos] + rng.choice(TOKENS) + data[pos:]
        elif op == 1:
            data = data[:pos] + data[pos + rng.randint(1, 4):]
        elif op == 2:
            lines = data.split(b"\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i] = lines[j]
            data = b"\n".join(lines)
        elif op == 3 and data:
            data = data[:pos] + rng.choice(TOKENS) + data[pos + rng.randint(1, 6):]
        else:
            data = data.replace(b" ", rng.choice([b"", b"\n", b"  "]), 1)
    return data


@pytest.mark.parametrize("relevance", ["ids", "span"])
def test_mutants_read_or_fail_alike_by_both_paths(tmp_path, relevance):
    rng = random.Random(11)
    seed = (b'{"id": "q1", "question": "a?", "retrieved_contexts": [{"id": "d1", "doc_id": "a", "start": 0, "end": 9, '
            b'"score": 0.5}, {"id": "d2", "doc_id": "b", "start": 4, "end": 8}], "reference_context_ids": ["d2"], '
            b'"reference_contexts": [{"doc_id": "b", "start": 3, "end": 9}]}\n'
            b'{"id": "q2", "retrieved_context_ids": ["d3", "d1", "d3"], "reference_context_ids": ["d3", "d4"], '
            b'"reference_contexts": [{"doc_id": "a", "start": 0, "end": 5}]}\n'
            b'{"id": "q3", "retrieved_contexts": [{"doc_id": "a", "start": 2, "end": 7}], "reference_contexts": '
            b'[{"doc_id": "a", "start": 0, "end": 6}], "reference_context_ids": ["a"]}\n')
    took = errors = 0
    for m in range(150):
        path = tmp_path / f"m{m}.jsonl"
        path.write_bytes(_mutate(seed, rng))
        fast, _, answered = _outcome(testset=path, relevance=relevance, columns=True)
        slow, _, _ = _outcome(testset=path, relevance=relevance, columns=False)
        assert fast == slow, path.read_bytes()
        took += bool(answered)
        errors += fast[0] == "error"
    assert took > 10 and errors > 10, (took, errors)


# ------------------------------------------------------------------ the pieces, beside the objects'
def _pieces(tmp_path: Path, rows: list[dict], relevance: str):
    path = _write(tmp_path / "p.jsonl", rows)
    cases = next(iter_case_columns(path))
    records = records_from_testset(rows)
    assign_verdicts(records, relevance)
    return cases, judge_columns(cases, relevance), records


def test_verdicts_matrix_classes_and_best_order_equal_the_objects(tmp_path):
    rng = random.Random(5)
    for relevance in ("ids", "span"):
        for _ in range(40):
            rows = [{**_case(rng, i), "id": f"q{i}"} for i in range(rng.randint(1, 8))]
            try:
                cases, verdicts, records = _pieces(tmp_path, rows, relevance)
            except NotColumnar:
                continue
            assert verdicts.grade.tolist() == [int(c.verdicts[relevance].verdict or 0) for r in records
                                               for c in r.chunks]
            assert [verdicts.status_of(i) for i in range(cases.n)] == [r.status[relevance] for r in records]
            rows_ = np.arange(cases.n)
            ours = matrix_from_columns(cases, verdicts, rows_)
            theirs = RelevanceMatrix.from_records(records, relevance)
            for name in ("grades", "judged", "lengths", "n_relevant", "n_judged_nonrelevant", "ideal_gains", "found",
                         "in_run", "distinct", "pooled", "chunk_grades", "chunk_chars", "char_found", "char_total"):
                a, b = getattr(ours, name), getattr(theirs, name)
                assert (a is None) == (b is None), name
                if a is not None:
                    assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all(), name
            assert ours.r_basis == theirs.r_basis
            from rankwise.analysis.failures_columns import classify_columns
            from rankwise.analysis.headroom_columns import best_ranks

            try:
                classes = classify_columns(cases, verdicts, 3)
            except NotColumnar:
                continue
            assert [FAILURE_CLASSES[c] for c in classes] == [classify_case(r, relevance, 3) for r in records]
            ranks = best_ranks(cases, verdicts)
            offsets = cases.chunk_offsets
            for i, r in enumerate(records):
                mine = ranks[offsets[i]:offsets[i + 1]]
                assert np.argsort(mine).tolist() == best_order(r, relevance)


def test_character_coverage_by_hand():
    """Reference [40, 60) and [140, 160) in doc 5; chunks [0, 50), [150, 200), [45, 58): 10
    characters first at rank 1, 10 at rank 2, 8 at rank 3 (50-58; 45-50 already covered)."""
    total, found = char_coverage(1, 3, np.array([0, 0, 0]), np.array([0, 1, 2]), np.array([5, 5, 5]),
                                 np.array([0, 150, 45]), np.array([50, 200, 58]), np.array([0, 0]), np.array([5, 5]),
                                 np.array([40, 140]), np.array([60, 160]))
    assert total.tolist() == [40.0] and found.tolist() == [[10.0, 10.0, 8.0]]


def test_running_means_equal_the_engines_means_block_by_block():
    from rankwise.metrics.engine import aggregate_columns
    from rankwise.metrics.rag_columns import RunningMeans
    from rankwise.metrics.registry import parse_measures

    rng = np.random.default_rng(2)
    measures = parse_measures(["mrr", "num_ret", "gm_map", "calls_to_evidence@5", "id_recall"])
    for _ in range(30):
        values = rng.random((rng.integers(0, 60), len(measures))) * 10.0 ** rng.integers(-3, 4)
        values[rng.random(values.shape) < 0.2] = np.nan
        values[:, :3] = np.nan_to_num(values[:, :3])  # these never undefined
        run = RunningMeans(measures)
        cuts = sorted(rng.integers(0, len(values) + 1, 3).tolist())
        for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True):
            run.add(values[a:b])
        assert run.result() == aggregate_columns(values, measures)
