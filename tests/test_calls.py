"""Cases retrieved several times (agents, multi-hop pipelines): the data model, its readers and writers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import (
    CallRecord,
    ChunkRecord,
    dump_record,
    load_records,
    records_from_testset,
    write_records,
)
from rankwise.data.testset import (
    Chunk,
    RetrievalCall,
    TestCase,
    case_to_dict,
    load_testset,
    merge_calls,
    write_testset,
)
from rankwise.errors import InputError
from rankwise.relevance.verdicts import judge

CASE = {"id": "q1", "user_input": "Who founded the company that makes the X1?",
        "calls": [{"position": 0, "query": "who makes the X1", "span_id": "s0", "trace_id": "t",
                   "chunks": [{"id": "a", "text": "The X1 is made by Acme.", "score": 0.9},
                              {"id": "b", "text": "The X1 ships in blue.", "score": 0.4}]},
                  {"position": 1, "query": "who founded Acme", "span_id": "s1", "trace_id": "t",
                   "chunks": [{"id": "c", "text": "Acme was founded by Ada Lee.", "score": 0.8},
                              {"id": "a", "text": "The X1 is made by Acme.", "score": 0.7}]}],
        "reference_contexts": [{"text": "The X1 is made by Acme", "hop": 0},
                               {"text": "Acme was founded by Ada Lee", "hop": 1}]}


def _ids(chunks):
    return [c.id for c in chunks]


def test_calls_are_read_and_merged_by_default():
    case = load_testset([CASE])["q1"]
    assert [c.position for c in case.calls] == [0, 1]
    assert [c.query for c in case.calls] == ["who makes the X1", "who founded Acme"]
    assert case.calls[1].span_id == "s1" and case.calls[0].trace_id == "t"
    assert _ids(case.chunks) == ["a", "c", "b"]  # rank 1 of each call, then rank 2; "a" again dropped
    assert [p.hop for p in case.reference_contexts] == [0, 1]


def test_merge_orders_and_dedup_rules():
    calls = load_testset([CASE])["q1"].calls
    assert _ids(merge_calls(calls, "score")) == ["a", "c", "b"]
    assert _ids(merge_calls(calls, "concat")) == ["a", "b", "c"]
    assert _ids(merge_calls(calls, "interleave", "none")) == ["a", "c", "b", "a"]
    spans = [RetrievalCall([Chunk("x", id="1", doc_id="d", start=0, end=10)]),
             RetrievalCall([Chunk("y", id="2", doc_id="d", start=5, end=15), Chunk("z", id="3", doc_id="d",
                                                                                    start=10, end=20)])]
    assert _ids(merge_calls(spans, dedup="id")) == ["1", "2", "3"]
    assert _ids(merge_calls(spans, dedup="span")) == ["1", "3"]  # 2 overlaps 1; 3 touches 1 at 10 only
    with pytest.raises(InputError, match="needs a score on every chunk; 1 of 2"):
        merge_calls([[Chunk("a", score=1.0)], [Chunk("b")]], "score")
    with pytest.raises(InputError, match="merge order must be one of interleave, score, concat"):
        merge_calls(calls, "random")


def test_calls_sorted_by_position_and_positions_default_to_order():
    rows = [{"id": "q", "calls": [{"position": 3, "chunks": ["late"]}, {"position": 1, "chunks": ["early"]}]},
            {"id": "r", "calls": [{"chunks": ["one"]}, {"chunks": ["two"]}]}]
    ts = load_testset(rows)
    assert [c.chunks[0].text for c in ts["q"].calls] == ["early", "late"]
    assert [c.position for c in ts["r"].calls] == [0, 1]


def test_single_list_files_do_not_change(tmp_path):
    """A case without calls writes no calls and no hop: its files stay as they were."""
    recs = records_from_testset([{"id": "q", "retrieved_contexts": ["a b c"], "reference_contexts": ["a b"]}])
    d = recs[0].to_dict()
    assert "calls" not in d and "hop" not in d["reference_contexts"][0]
    assert "calls" not in case_to_dict(load_testset([{"id": "q", "retrieved_contexts": ["x"]}])["q"])


def test_testset_round_trip_is_identical(tmp_path):
    first = write_testset([CASE, {"id": "q2", "retrieved_contexts": ["plain"]}], tmp_path / "a.jsonl")
    second = write_testset(first, tmp_path / "b.jsonl")
    assert first.read_bytes() == second.read_bytes()
    row = json.loads(first.read_text().splitlines()[0])
    assert "retrieved_contexts" not in row and len(row["calls"]) == 2  # the merge is rebuilt on reading
    explicit = dict(CASE, retrieved_contexts=[{"id": "c", "text": "Acme was founded by Ada Lee."}])
    again = load_testset(write_testset([explicit], tmp_path / "c.jsonl"))["q1"]
    assert _ids(again.chunks) == ["c"] and len(again.calls) == 2  # an explicit final context is kept


def test_records_share_verdicts_and_round_trip(tmp_path):
    recs = records_from_testset([CASE])
    judge(recs, "containment")
    r = recs[0]
    assert r.verdicts("containment") == [1, 1, 0]  # merged a, c, b
    assert r.call_index() == [[0, 2], [1, 0]]
    shared = [[c.verdicts["containment"].verdict for c in call] for call in r.call_chunks()]
    assert shared == [[1, 0], [1, 1]]  # "a" judged once, seen in both calls
    first = write_records(recs, tmp_path / "r1.jsonl")
    loaded = load_records(first)
    assert loaded[0].calls[1].query == "who founded Acme" and loaded[0].reference_contexts[1].hop == 1
    second = write_records(loaded, tmp_path / "r2.jsonl")
    assert first.read_bytes() == second.read_bytes()
    assert loaded[0].to_case().calls[1].chunks[0].id == "c"


def test_call_record_verdicts_stay_when_the_merged_list_lacks_the_chunk():
    from rankwise.data.records import CaseRecord, Verdict

    r = CaseRecord("q", chunks=[ChunkRecord(1, id="a")],
                   calls=[CallRecord([ChunkRecord(1, id="z", verdicts={"human": Verdict(1)})])])
    assert r.call_index() == [[None]]
    assert r.call_chunks()[0][0].verdicts["human"].verdict == 1
    assert dump_record(r).count('"human"') == 1


BAD_TESTSET = [
    ('"calls": 3', "calls", "expected a list"),
    ('"calls": [3]', "calls[0]", "expected an object"),
    ('"calls": [{"chunks": ["a"], "hops": 1}]', "calls[0]", "unknown key(s) ['hops']"),
    ('"calls": [{"query": "x"}]', "calls[0].chunks", "a call needs chunks"),
    ('"calls": [{"chunks": ["a"], "position": -1}]', "calls[0].position", "integer >= 0"),
    ('"calls": [{"chunks": ["a"], "position": "first"}]', "calls[0].position", "integer >= 0"),
    ('"calls": [{"chunks": ["a"]}, {"chunks": ["b"], "position": 0}]', "calls[1].position", "also calls[0]"),
    ('"calls": [{"chunks": [{"idx": 1}]}]', "calls[0].chunks[0]", "unknown key(s) ['idx']"),
    ('"calls": [{"chunks": ["a"], "query": [1]}]', "calls[0].query", "expected a string"),
    ('"calls": [{"chunks": ["a"], "meta": 2}]', "calls[0].meta", "expected an object"),
    ('"calls": [{"chunks": ["a"]}], "reference_contexts": [{"text": "a", "hop": "one"}]',
     "reference_contexts[0].hop", "hop number"),
]


@pytest.mark.parametrize("fragment, field, problem", BAD_TESTSET)
def test_malformed_calls_name_file_line_and_field(tmp_path, fragment, field, problem):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "ok", "retrieved_contexts": ["x"]}\n{"id": "q", ' + fragment + "}\n")
    with pytest.raises(InputError) as err:
        load_testset(path)
    assert err.value.line == 2 and err.value.field == field and problem in str(err.value), str(err.value)
    result = CliRunner().invoke(main, ["eval-rag", str(path), "-k", "1", "--quiet"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}:2" in result.stderr and field in result.stderr, result.stderr


BAD_RECORDS = [
    ('"calls": {"a": 1}', "calls", "expected a list of calls"),
    ('"calls": [{"chunks": [{"rank": 2, "id": "a"}]}]', "calls[0].chunks[0].rank", "rank order"),
    ('"calls": [{"chunks": []}, {"chunks": [], "position": 0}]', "calls[1].position", "trajectory order"),
    ('"calls": [{"chunks": [], "span": 1}]', "calls[0]", "unknown key(s) ['span']"),
    ('"calls": [{"position": 0}]', "calls[0].chunks", "a call needs chunks"),
    ('"calls": [{"chunks": [{"rank": 1, "verdicts": {"llm": {"verdict": 2}}}]}]',
     "calls[0].chunks[0].verdicts.llm.verdict", "0, 1 or null"),
    ('"reference_contexts": [{"text": "a", "hop": -1}]', "reference_contexts[0].hop", "hop must be >= 0"),
]


@pytest.mark.parametrize("fragment, field, problem", BAD_RECORDS)
def test_malformed_record_calls_name_file_line_and_field(tmp_path, fragment, field, problem):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "ok", "chunks": []}\n{"id": "q", "chunks": [{"rank": 1, "id": "a"}], ' + fragment
                    + "}\n")
    with pytest.raises(InputError) as err:
        load_records(path)
    assert err.value.line == 2 and err.value.field == field and problem in str(err.value), str(err.value)


def test_testcase_defaults_keep_the_single_list_case():
    case = TestCase("q", chunks=[Chunk("a")])
    assert case.calls == [] and case.to_dict()["retrieved_contexts"][0]["text"] == "a"
