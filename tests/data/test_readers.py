"""Readers and writers: every bad input is an InputError naming file, line and field; good inputs of
every supported shape load to the same Run / Qrels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _extras import need
from rankwise.data import (
    Qrels,
    Run,
    load_qrels,
    load_run,
    qrels_from_frame,
    read_beir_qrels,
    read_delimited_run,
    read_jsonl_qrels,
    read_jsonl_run,
    read_trec_qrels,
    read_trec_run,
    run_from_frame,
    write_jsonl_qrels,
    write_jsonl_run,
    write_trec_qrels,
    write_trec_run,
)
from rankwise.errors import InputError


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _error(func, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        func(*args, **kwargs)
    return info.value


RUN_TEXT = "q1 Q0 d1 1 3.0 sys\nq1 Q0 d2 2 2.0 sys\nq2 Q0 d1 1 5.0 sys\n"
QRELS_TEXT = "q1 0 d1 1\nq1 0 d3 2\nq2 0 d9 0\n"


# ------------------------------------------------------------------ TREC: good input
def test_trec_run_reads_and_ranks(tmp_path):
    run = read_trec_run(_write(tmp_path, "a.run", RUN_TEXT))
    assert run.queries == ["q1", "q2"]
    assert run.ranking("q1") == ["d1", "d2"]
    assert run.scores.tolist() == [3.0, 2.0, 5.0]
    assert run.kind == "scored" and run.name == "a"


def test_trec_run_ignores_rank_column_and_sorts_by_score(tmp_path):
    run = read_trec_run(_write(tmp_path, "r", "q1 Q0 d1 1 1.0 s\nq1 Q0 d2 2 3.0 s\nq1 Q0 d3 3 3.0 s\n"))
    assert run.ranking("q1") == ["d3", "d2", "d1"]  # tie d2/d3 broken by doc id descending


def test_trec_run_unsorted_queries_and_extra_fields(tmp_path):
    text = "q2 Q0 a 1 1.0 s x y\nq1 Q0 b 1 2.0 s junk\nq2 Q0 c 2 2.0 s\n"
    run = read_trec_run(_write(tmp_path, "r", text))
    assert run.queries == ["q1", "q2"]
    assert run.ranking("q2") == ["c", "a"]


@pytest.mark.parametrize("sep", ["\t", "  ", " \t ", "\t\t"])
def test_trec_any_whitespace(tmp_path, sep):
    run = read_trec_run(_write(tmp_path, "r", RUN_TEXT.replace(" ", sep)))
    assert run.to_dict() == {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d1": 5.0}}
    qrels = read_trec_qrels(_write(tmp_path, "q", QRELS_TEXT.replace(" ", sep)))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 0}}


def test_trec_mixed_separators_split_on_any_whitespace(tmp_path):
    # a tab-separated file where a later line has a space inside a field: trec_eval splits on any
    # whitespace, so "d2 x" is doc d2 followed by more fields; never a doc id with a space in it
    text = "q1\tQ0\td1\t1\t3.0\tsys\nq1\tQ0\td2 x\t2\t2.5\tsys\n"
    run = read_trec_run(_write(tmp_path, "r", text))
    assert run.to_dict() == {"q1": {"d1": 3.0, "d2": 2.0}}
    text = "q1 Q0 d1 1 3.0 sys\nq1 Q0 d2\t2 2.5 sys x\n"
    assert read_trec_run(_write(tmp_path, "r2", text)).to_dict() == {"q1": {"d1": 3.0, "d2": 2.5}}
    qtext = "q1\t0\td1\t1\nq1\t0\td2 0\t1\n"
    err = _error(read_trec_qrels, _write(tmp_path, "q", qtext))
    assert err.line == 2 and "got 5" in str(err)


def test_trec_crlf_and_leading_whitespace(tmp_path):
    run = read_trec_run(_write(tmp_path, "r", "  " + RUN_TEXT.replace("\n", "\r\n")))
    assert run.to_dict() == {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d1": 5.0}}


def test_trec_comments_and_blank_lines(tmp_path):
    text = "# header comment\n\nq1 0 d1 1\n# mid comment\nq1 0 CR#93 2\n\n"
    qrels = read_trec_qrels(_write(tmp_path, "q", text))
    assert qrels.to_dict() == {"q1": {"d1": 1, "CR#93": 2}}
    run = read_trec_run(_write(tmp_path, "r", "# c\n" + RUN_TEXT + "# trailing\n"))
    assert len(run) == 3


def test_comment_later_in_large_file(tmp_path):
    """A '#' line far past the first block still counts as a comment, not as a query '#'."""
    lines = [f"q{i // 10} Q0 d{i} {i % 10 + 1} {1.0 / (i + 1)} s" for i in range(20000)]
    lines.insert(15000, "# a comment deep inside")
    run = read_trec_run(_write(tmp_path, "r", "\n".join(lines) + "\n"))
    assert len(run) == 20000 and "#" not in run.queries


def test_numeric_looking_ids_stay_strings(tmp_path):
    run = read_trec_run(_write(tmp_path, "r", "01 Q0 007 1 1 s\n1 Q0 7 1 1 s\n"))
    assert run.queries == ["01", "1"]
    assert run.ranking("01") == ["007"]
    qrels = read_trec_qrels(_write(tmp_path, "q", "01 0 007 1\n1 0 7 1\n"))
    assert qrels.judgements("01") == {"007": 1}


def test_trec_qrels_negative_and_float_integer_grades(tmp_path):
    qrels = read_trec_qrels(_write(tmp_path, "q", "q 0 a -1\nq 0 b 2.0\n"))
    assert qrels.judgements("q") == {"a": -1, "b": 2}


def test_scores_exponents_and_integers(tmp_path):
    run = read_trec_run(_write(tmp_path, "r", "q Q0 a 1 1e3 s\nq Q0 b 2 -2 s\nq Q0 c 3 0.5 s\n"))
    assert run.ranking("q") == ["a", "c", "b"]


# ------------------------------------------------------------------ TREC: bad input
def test_run_wrong_field_count(tmp_path):
    path = _write(tmp_path, "bad.run", "q1 Q0 d1 1 1.0 s\nq1 Q0 d2 2\n")
    err = _error(read_trec_run, path)
    assert (err.source, err.line, err.field) == (str(path), 2, "score")
    assert str(err).startswith(f"{path}:2: field 'score': expected at least 6 fields")


def test_run_non_numeric_score(tmp_path):
    path = _write(tmp_path, "bad.run", "q1 Q0 d1 1 1.0 s\nq1 Q0 d2 2 high s\n")
    err = _error(read_trec_run, path)
    assert (err.line, err.field) == (2, "score")
    assert "not a number: 'high'" in str(err)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_run_non_finite_score(tmp_path, value):
    path = _write(tmp_path, "bad.run", f"q1 Q0 d1 1 1.0 s\nq1 Q0 d2 2 {value} s\n")
    err = _error(read_trec_run, path)
    assert (err.line, err.field) == (2, "score")


def test_run_duplicate_doc_names_both_lines(tmp_path):
    path = _write(tmp_path, "dup.run", "q1 Q0 d1 1 3 s\nq2 Q0 d1 1 3 s\nq1 Q0 d2 2 2 s\nq1 Q0 d1 3 1 s\n")
    err = _error(read_trec_run, path)
    assert (err.line, err.field) == (4, "doc_id")
    assert "doc 'd1' appears twice in query 'q1' (first at line 1)" in str(err)


def test_run_duplicate_doc_in_large_file_reports_lines(tmp_path):
    lines = [f"q{i // 100} Q0 d{i % 100} {i % 100 + 1} {100 - i % 100} s" for i in range(200_000)]
    lines.append("q7 Q0 d42 101 0.5 s")  # q7 already has d42 at line 743
    path = _write(tmp_path, "dup.run", "\n".join(lines) + "\n")
    err = _error(read_trec_run, path)
    assert err.line == 200_001
    assert "(first at line 743)" in str(err)


def test_qrels_wrong_field_count(tmp_path):
    path = _write(tmp_path, "bad.qrels", "q1 0 d1 1\nq1 0 d2\n")
    err = _error(read_trec_qrels, path)
    assert (err.line, err.field) == (2, "relevance")
    path = _write(tmp_path, "bad2.qrels", "q1 0 d1 1\nq1 0 d2 1 extra\n")
    err = _error(read_trec_qrels, path)
    assert err.line == 2 and "expected 4 fields" in str(err) and "got 5" in str(err)


@pytest.mark.parametrize("grade", ["x", "1.5", "nan"])
def test_qrels_non_integer_grade(tmp_path, grade):
    path = _write(tmp_path, "bad.qrels", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    err = _error(read_trec_qrels, path)
    assert (err.line, err.field) == (2, "relevance")
    assert "not an integer" in str(err)


def test_qrels_duplicate_pair(tmp_path):
    path = _write(tmp_path, "dup.qrels", "q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n")
    err = _error(read_trec_qrels, path)
    assert (err.line, err.field) == (3, "doc_id")
    assert "pair (query 'q1', doc 'd1') is judged twice (first at line 1)" in str(err)


@pytest.mark.parametrize("content,says", [(b"", "file is empty"), (b"\n\n  \n", "file has no rows: only blank lines")])
@pytest.mark.parametrize("reader", [read_trec_run, read_trec_qrels, read_jsonl_run, read_beir_qrels])
def test_empty_file(tmp_path, content, says, reader):
    err = _error(reader, _write(tmp_path, "empty", content))
    assert says in str(err) and err.source.endswith("empty")


def test_comments_only(tmp_path):
    assert "no run lines" in str(_error(read_trec_run, _write(tmp_path, "r", "# x\n# y\n")))
    assert "no judgement lines" in str(_error(read_trec_qrels, _write(tmp_path, "q", "# x\n")))


def test_undecodable_bytes(tmp_path):
    path = _write(tmp_path, "bad.run", b"q1 Q0 d1 1 1.0 s\nq1 Q0 d\xff2 2 0.5 s\n")
    err = _error(read_trec_run, path)
    assert err.line == 2 and "not UTF-8 at column 8" in str(err)
    path = _write(tmp_path, "bad.qrels", b"q1 0 d1 1\n\xfe 0 d2 1\n")
    assert _error(read_trec_qrels, path).line == 2


def test_missing_file_and_directory(tmp_path):
    assert "file not found" in str(_error(read_trec_run, tmp_path / "nope.trec"))
    assert "is a directory" in str(_error(load_qrels, tmp_path))


# ------------------------------------------------------------------ BEIR / CSV / JSONL
def test_beir_qrels_with_header(tmp_path):
    path = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\n1\t28\t1\n1\t35\t2\n2\t28\t0\n")
    qrels = read_beir_qrels(path)
    assert qrels.to_dict() == {"1": {"28": 1, "35": 2}, "2": {"28": 0}}
    assert load_qrels(path).to_dict() == qrels.to_dict()


def test_beir_qrels_errors(tmp_path):
    path = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\n1\t28\t1\n1\t35\tyes\n")
    err = _error(read_beir_qrels, path)
    assert (err.line, err.field) == (3, "score")
    path = _write(tmp_path, "t2.tsv", "query-id\tcorpus-id\tscore\n1\t28\n")
    assert _error(read_beir_qrels, path).line == 2
    path = _write(tmp_path, "t3.tsv", "query-id\tcorpus-id\tscore\n1\t28\t1\n1\t28\t0\n")
    err = _error(read_beir_qrels, path)
    assert err.line == 3 and "first at line 2" in str(err)
    path = _write(tmp_path, "t4.tsv", "a\tb\tc\n1\t2\t3\n")
    assert "no query id column" in str(_error(read_beir_qrels, path))


def test_beir_qrels_custom_columns(tmp_path):
    path = _write(tmp_path, "q.csv", "topic,passage,label\nt1,p1,1\n")
    qrels = read_beir_qrels(path, query_column="topic", doc_column="passage", grade_column="label")
    assert qrels.to_dict() == {"t1": {"p1": 1}}


def test_csv_run_scored_and_ordered(tmp_path):
    scored = read_delimited_run(_write(tmp_path, "r.csv", "query_id,doc_id,score\nq,a,1\nq,b,2\n"))
    assert scored.ranking("q") == ["b", "a"] and scored.kind == "scored"
    ordered = read_delimited_run(_write(tmp_path, "o.csv", "query_id,doc_id\nq,a\nq,b\n"))
    assert ordered.ranking("q") == ["a", "b"] and ordered.kind == "ordered"
    err = _error(read_delimited_run, _write(tmp_path, "b.csv", "query_id,doc_id,score\nq,a,1\nq,b,x\n"))
    assert (err.line, err.field) == (3, "score")


def test_jsonl_run_and_qrels(tmp_path):
    run_path = _write(tmp_path, "run.jsonl", "\n".join(json.dumps(r) for r in [
        {"query_id": "q", "doc_id": "a", "score": 1.0}, {"query_id": "q", "doc_id": "b", "score": 2.0},
    ]) + "\n")
    assert load_run(run_path).ranking("q") == ["b", "a"]
    ordered = _write(tmp_path, "o.jsonl", '{"qid": "q", "doc_id": "b"}\n{"qid": "q", "doc_id": "a"}\n')
    assert read_jsonl_run(ordered).ranking("q") == ["b", "a"]
    qrels_path = _write(tmp_path, "q.jsonl", '{"query_id": "q", "doc_id": "a", "relevance": 2}\n')
    assert load_qrels(qrels_path).to_dict() == {"q": {"a": 2}}


def test_jsonl_errors(tmp_path):
    err = _error(read_jsonl_run, _write(tmp_path, "r.jsonl", '{"query_id": "q", "doc_id": "a"}\n{oops\n'))
    assert err.line == 2 and "not valid JSON" in str(err)
    err = _error(read_jsonl_run, _write(tmp_path, "r2.jsonl", '{"query_id": "q"}\n'))
    assert (err.line, err.field) == (1, "doc_id")
    err = _error(read_jsonl_qrels, _write(tmp_path, "q.jsonl", '{"query_id": "q", "doc_id": "a", "relevance": "x"}\n'))
    assert (err.line, err.field) == (1, "relevance")
    err = _error(read_jsonl_run, _write(tmp_path, "r3.jsonl", "[1, 2]\n"))
    assert "expected a JSON object" in str(err)
    err = _error(read_jsonl_run, _write(tmp_path, "r4.jsonl",
                                        '{"query_id": "q", "doc_id": "a", "score": 1}\n{"query_id": "q", "doc_id": "a", "score": 2}\n'))
    assert err.line == 2 and "first at line 1" in str(err)


# ------------------------------------------------------------------ DataFrames and dicts
def test_pandas_frames_with_custom_columns():
    pd = need("pandas")
    frame = pd.DataFrame({"qid": ["q1", "q1", "q2"], "pid": ["a", "b", "a"], "sim": [0.1, 0.9, 0.5]})
    run = run_from_frame(frame, query_column="qid", doc_column="pid", score_column="sim")
    assert run.to_dict() == {"q1": {"b": 0.9, "a": 0.1}, "q2": {"a": 0.5}}
    qframe = pd.DataFrame({"qid": ["q1"], "pid": ["b"], "label": [2]})
    qrels = qrels_from_frame(qframe, query_column="qid", doc_column="pid", grade_column="label")
    assert qrels.to_dict() == {"q1": {"b": 2}}
    # default names through load_*
    assert load_run(pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [1.0]})).ranking("q") == ["d"]
    assert load_qrels(pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "relevance": [1]})).n_queries == 1


def test_polars_frames():
    pl = need("polars")
    run = load_run(pl.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, 2.0]}))
    assert run.ranking("q") == ["b", "a"]
    ordered = run_from_frame(pl.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"]}))
    assert ordered.kind == "ordered" and ordered.ranking("q") == ["a", "b"]
    qrels = load_qrels(pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "relevance": [3]}))
    assert qrels.to_dict() == {"q": {"a": 3}}


def test_frame_errors():
    pd = need("pandas")
    err = _error(run_from_frame, pd.DataFrame({"q": ["x"], "doc_id": ["d"]}))
    assert err.field == "query_id" and "no column 'query_id'" in str(err)
    err = _error(load_run, pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["d", "d"], "score": [1.0, 2.0]}))
    assert err.line == 2 and err.field == "doc_id"  # row 2 of the frame
    err = _error(load_qrels, pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "relevance": [0.5]}))
    assert err.field == "relevance"
    err = _error(load_run, pd.DataFrame({"query_id": ["q", None], "doc_id": ["d", "e"], "score": [1.0, 2.0]}))
    assert (err.line, err.field) == (2, "query_id")


def test_dicts():
    run = load_run({"q1": {"a": 1, "b": 2.5}, 2: {"x": 0}})
    assert run.queries == ["2", "q1"] and run.ranking("q1") == ["b", "a"]
    assert load_run({"q": ["c2", "c1"]}).kind == "ordered"
    assert "mixes scored" in str(_error(load_run, {"a": {"x": 1.0}, "b": ["y"]}))
    assert "scores must be numbers" in str(_error(load_run, {"a": {"x": "high"}}))
    assert "duplicate" in str(_error(load_run, {"q": ["a", "a"]})).lower() or \
        "appears twice" in str(_error(load_run, {"q": ["a", "a"]}))
    assert "grades must be integers" in str(_error(load_qrels, {"q": {"a": "x"}}))
    assert "grade must be an integer" in str(_error(load_qrels, {"q": {"a": 1.5}}))
    assert load_qrels({"q": {"a": True, "b": 2.0}}).judgements("q") == {"a": 1, "b": 2}


def test_unsupported_object():
    assert "cannot read a run from int" in str(_error(load_run, 3))
    assert "cannot read qrels from list" in str(_error(load_qrels, [1]))


# ------------------------------------------------------------------ writers round trip
def _same_run(a: Run, b: Run) -> None:
    assert a.queries == b.queries
    assert a.doc_ids.to_pylist() == b.doc_ids.to_pylist()
    np.testing.assert_array_equal(a.offsets, b.offsets)
    if a.scores is not None and b.scores is not None:
        np.testing.assert_array_equal(a.scores, b.scores)


def test_trec_round_trip(tmp_path):
    run = Run.from_dict({"q2": {"b": 0.1, "a": 0.1, "c": 1 / 3}, "q1": {"x": 1e-300, "y": -2.5}, "10": {"z": 7.0}})
    write_trec_run(run, tmp_path / "out.trec")
    again = read_trec_run(tmp_path / "out.trec")
    _same_run(run, again)
    assert (tmp_path / "out.trec").read_text().splitlines()[0] == "10 Q0 z 1 7.0 run"
    qrels = Qrels.from_dict({"q1": {"a": 1, "b": -1}, "q0": {"c": 3}})
    write_trec_qrels(qrels, tmp_path / "out.qrels")
    assert read_trec_qrels(tmp_path / "out.qrels").to_dict() == qrels.to_dict()


def test_ordered_run_written_as_trec_keeps_order(tmp_path):
    run = Run.from_dict({"q": ["c3", "c1", "c2"]})
    write_trec_run(run, tmp_path / "o.trec")
    assert read_trec_run(tmp_path / "o.trec").ranking("q") == ["c3", "c1", "c2"]


def test_jsonl_round_trip(tmp_path):
    run = Run.from_dict({"q2": {"b": 0.1, "a": 0.1}, "q1": {"x": 2.0}})
    write_jsonl_run(run, tmp_path / "r.jsonl")
    _same_run(run, read_jsonl_run(tmp_path / "r.jsonl"))
    ordered = Run.from_dict({"q": ["b", "a"]})
    write_jsonl_run(ordered, tmp_path / "o.jsonl")
    assert read_jsonl_run(tmp_path / "o.jsonl").ranking("q") == ["b", "a"]
    qrels = Qrels.from_dict({"q1": {"a": 1, "b": 0}})
    write_jsonl_qrels(qrels, tmp_path / "q.jsonl")
    assert read_jsonl_qrels(tmp_path / "q.jsonl").to_dict() == qrels.to_dict()


def test_trec_suite_files_load(shared_data):
    data = shared_data / "trec_eval"
    plain = read_trec_qrels(data / "qrels.test")
    commented = read_trec_qrels(data / "qrels.test.with-comments")
    assert len(plain) == len(commented) == 3681 and int(plain.n_relevant().sum()) == 561
    # the commented file renames a docno to hold a '#': only a leading '#' starts a comment
    assert {d for d in commented.doc_ids.to_pylist() if "#" in d} == {"CR#93E-1860"}
    assert "CR93E-1860" in plain.judgements("301") and "CR93E-1860" not in commented.judgements("301")
    run = read_trec_run(data / "results.test")
    assert len(run) == 1500 and run.queries == ["301", "302", "303"]


# ------------------------------------------------------------------ engine internals seen from
# outside
def test_hash_collisions_are_resolved_exactly():
    """Doc ids differing only by trailing NUL bytes share a hash: joins and duplicate checks stay
    exact."""
    from rankwise import evaluate

    run = {"q": {"a": 1.0, "a\x00": 2.0, "a\x00\x00": 0.5, "b": 0.1}}
    qrels = {"q": {"a": 1, "a\x00\x00": 2, "b\x00": 1}}
    r = evaluate(qrels, run, ["P@1", "P@2", "mrr", "num_rel_ret", "map"]).mean
    assert r == {"precision@1": 0.0, "precision@2": 0.5, "mrr": 0.5, "num_rel_ret": 2.0,
                 "map": pytest.approx((1 / 2 + 2 / 3) / 3)}
    assert load_run({"q": ["a", "a\x00", "a\x00\x00"]}).ranking("q") == ["a", "a\x00", "a\x00\x00"]
    err = _error(load_run, {"q": ["a", "a\x00", "b", "a"]})
    assert err.line == 4 and "first at line 1" in str(err)


def test_query_blocks_out_of_byte_order_and_unordered_ties(tmp_path):
    """Queries in numeric order (10 after 9), ties listed in ascending doc order: re-ranked like
    trec_eval."""
    lines = []
    expected = {}
    for q in range(1, 13):
        docs = [f"d{q}_{j}" for j in range(5)]
        scores = [3.0, 2.0, 2.0, 2.0, 1.0]
        lines += [f"{q} Q0 {d} {i + 1} {s} sys" for i, (d, s) in enumerate(zip(docs, scores, strict=False))]
        expected[str(q)] = [docs[0], docs[3], docs[2], docs[1], docs[4]]
    path = _write(tmp_path, "r.trec", "\n".join(lines) + "\n")
    run = read_trec_run(path)
    assert run.queries == sorted(expected)  # byte order: "1", "10", "11", "12", "2", ...
    assert {q: run.ranking(q) for q in run.queries} == expected
    same = Run.from_dict({q: dict(zip(d, [3.0, 2.0, 2.0, 2.0, 1.0][::1], strict=False)) for q, d in
                          ((q, [f"d{q}_{j}" for j in range(5)]) for q in expected)})
    assert same.to_dict() == run.to_dict()


def test_shuffled_rows_are_grouped_and_ranked(tmp_path):
    rng = np.random.default_rng(3)
    rows = [(f"q{q}", f"doc{d}", float(rng.integers(0, 4))) for q in range(30) for d in range(40)]
    order = rng.permutation(len(rows))
    text = "".join(f"{rows[i][0]} Q0 {rows[i][1]} 0 {rows[i][2]} s\n" for i in order)
    run = read_trec_run(_write(tmp_path, "r", text))
    by_query: dict = {}
    for q, d, s in rows:
        by_query.setdefault(q, []).append((s, d))
    for q, items in by_query.items():
        by_doc = sorted(items, key=lambda x: x[1].encode(), reverse=True)  # doc id, descending bytes
        assert run.ranking(q) == [d for s, d in sorted(by_doc, key=lambda x: -x[0])]  # stable: score


def test_duplicate_line_numbers_survive_reordering(tmp_path):
    """Query blocks out of byte order, ties to reorder, and a repeated doc: the lines are the
    file's."""
    lines = []
    for q in (9, 10, 2):
        lines += [f"{q} Q0 a{q} 1 5 s", f"{q} Q0 b{q} 2 5 s", f"{q} Q0 c{q} 3 4 s"]
    lines.append("10 Q0 b10 4 1 s")  # line 10 repeats line 5
    lines += [f"11 Q0 x{j} {j} 1 s" for j in range(200)]
    err = _error(read_trec_run, _write(tmp_path, "r", "\n".join(lines) + "\n"))
    assert (err.line, err.field) == (10, "doc_id")
    assert "doc 'b10' appears twice in query '10' (first at line 5)" in str(err)


@pytest.mark.parametrize("seed", range(6))
def test_chunked_columns_build_the_same_run(seed):
    """A file reader hands over columns in chunks; blocks and tied groups can straddle chunk edges.
    """
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    qids, docs, scores = [], [], []
    for q in rng.permutation(40):  # query blocks in no particular order
        k = int(rng.integers(1, 30))
        s = np.sort(rng.integers(0, 4, k))[::-1].astype(float)  # ranked, with many ties
        if seed % 2:
            s = rng.permutation(s)  # not ranked: the general path
        qids += [f"q{q}"] * k
        docs += [f"d{int(rng.integers(0, 10**6))}x{j}" for j in range(k)]
        scores += s.tolist()
    cuts = np.sort(rng.choice(np.arange(1, len(qids)), 5, replace=False))
    edges = [0, *cuts.tolist(), len(qids)]
    q_chunked = pa.chunked_array([pa.array(qids[a:b]) for a, b in zip(edges, edges[1:], strict=False)])
    d_chunked = pa.chunked_array([pa.array(docs[a:b]) for a, b in zip(edges, edges[1:], strict=False)])
    whole = Run.from_columns(qids, docs, scores)
    chunked = Run.from_columns(q_chunked, d_chunked, scores)
    _same_run(whole, chunked)
    chunked.doc_ids.validate(full=True)
    expected = {}
    for q, d, s in zip(qids, docs, scores, strict=False):
        expected.setdefault(q, []).append((s, d))
    for q, items in expected.items():
        by_doc = sorted(items, key=lambda x: x[1].encode(), reverse=True)
        assert chunked.ranking(q) == [d for s, d in sorted(by_doc, key=lambda x: -x[0])]


def test_headerless_trec_lines_in_a_tsv_are_trec(tmp_path):
    """MS MARCO ships qrels as headerless `.tsv` TREC lines: read as TREC (tabs or spaces), not as
    BEIR."""
    from _inprocess import run_cli

    (tmp_path / "qrels.dev.tsv").write_text("q1\t0\td1\t1\nq1\t0\td2\t0\nq2\t0\td3\t2\n")
    (tmp_path / "spaces.tsv").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n")
    (tmp_path / "run.tsv").write_text("q1 Q0 d2 1 2.0 r\nq1 Q0 d1 2 1.0 r\nq2 Q0 d3 1 1.0 r\n")
    for qrels in ("qrels.dev.tsv", "spaces.tsv"):
        done = run_cli(["eval", tmp_path / qrels, tmp_path / "run.tsv", "-m", "map", "--format", "json"])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["mean"]["map"] == pytest.approx((0.5 + 1.0) / 2)
    # a BEIR file with its header still reads as BEIR
    (tmp_path / "beir.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n")
    done = run_cli(["eval", tmp_path / "beir.tsv", tmp_path / "run.tsv", "-m", "map", "--format", "json"])
    assert json.loads(done.stdout)["mean"]["map"] == pytest.approx((0.5 + 1.0) / 2)


@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch, kind):
    """Every file is mapped (MAP_AT_LEAST 0) but a pipe cannot be: it is read, to the same rows, and
    the map of a regular file is released once parsed."""
    import os
    import threading

    from rankwise.data import text, trec

    monkeypatch.setattr(text, "MAP_AT_LEAST", 0)
    data = (b"q2 Q0 b 1 1.5 t\nq1 Q0 a 1 2.0 t\nq1 Q0 c 2 2.0 t\n" if kind == "run"
            else b"q2 0 b 1\nq1 0 a 2\nq1 0 c 0\n")
    read = trec.read_trec_run if kind == "run" else trec.read_trec_qrels
    regular = tmp_path / "file"
    regular.write_bytes(data)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_bytes, args=(data,))
    writer.start()
    from_pipe = read(pipe)
    writer.join(timeout=10)
    from_file = read(regular)
    assert (from_pipe.queries, from_pipe.doc_ids.to_pylist()) == (from_file.queries, from_file.doc_ids.to_pylist())
    assert from_file.queries == ["q1", "q2"] and from_file.doc_ids.to_pylist()[:2] == ["c", "a"] or kind == "qrels"
