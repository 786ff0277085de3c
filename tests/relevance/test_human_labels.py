"""Human labels (docs/metrics.md §4): CSV/JSONL, types, precise errors, missing labels counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankwise.data.records import records_from_testset
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.relevance.human import apply_labels, read_labels

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TESTSET = [
    {"id": "q1", "user_input": "a", "retrieved_contexts": [{"id": "c1", "text": "x"}, {"id": "c2", "text": "y"},
                                                           {"id": "c3", "text": "z"}]},
    {"id": "q2", "user_input": "b", "retrieved_contexts": [{"id": "d1", "text": "x"}, {"id": "d2", "text": "y"}]},
]


def csv_file(tmp_path, body: str) -> Path:
    p = tmp_path / "labels.csv"
    p.write_text("query_id,chunk_id,rank,verdict,type,reason\n" + body, encoding="utf-8")
    return p


def test_csv_labels_by_chunk_id_and_rank(tmp_path):
    p = csv_file(tmp_path, "q1,c1,,1,answer,states it\nq1,,2,no,topic_only,\nq1,c3,3,1,partial,\n"
                           "q2,d2,,0,supports_wrong_answer,\nq2,,1,yes,,\n")
    r = evaluate_rag(TESTSET, "human", labels=p, k=3, metrics=["precision@3", "acp@3", "mrr"])
    q1 = r.records[0] if r.records[0].id == "q1" else r.records[1]
    assert q1.verdicts("human") == [1, 0, 1]
    assert [c.verdicts["human"].type for c in q1.chunks] == ["answer", "topic_only", "partial"]
    assert q1.chunks[0].verdicts["human"].reason == "states it"
    assert r.per_query["q1"] == {"precision@3": pytest.approx(2 / 3), "acp@3": pytest.approx(5 / 6), "mrr": 1.0}
    assert r.per_query["q2"]["acp@3"] == 1.0
    assert r.summary["incomplete"] == 0


def test_jsonl_labels(tmp_path):
    p = tmp_path / "labels.jsonl"
    rows = [{"question_id": "q2", "chunk_id": "d1", "verdict": 0, "type": "irrelevant", "annotator": "ann"},
            {"question_id": "q2", "rank": 2, "verdict": True, "grade": 2}]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    recs = records_from_testset(TESTSET)
    counts = apply_labels(recs, p)
    assert counts == {"labels": 2, "missing": 3}
    assert recs[1].verdicts("human") == [0, 1]
    assert recs[1].chunks[0].verdicts["human"].meta == {"annotator": "ann"}
    assert recs[1].chunks[1].verdicts["human"].grade == 2


def test_unlabelled_chunks_are_missing_and_the_case_incomplete_not_dropped(tmp_path):
    p = csv_file(tmp_path, "q1,c1,,1,,\nq2,d1,,1,,\nq2,d2,,0,,\n")
    r = evaluate_rag(TESTSET, "human", labels=p, k=3, metrics=["precision@3"])
    assert r.summary["incomplete"] == 1
    assert r.summary["incomplete_cases"] == {"q1": "2 missing verdicts"}
    assert r.summary["verdicts"] == {"ok": 3, "failed": 0, "missing": 2}
    assert r.summary["evaluated"] == 2  # counted in the mean, missing verdicts as not relevant
    assert r.mean["precision@3"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert r.records[0].status["human"] == "incomplete: 2 missing verdicts"
    skipped = evaluate_rag(TESTSET, "human", labels=p, k=3, metrics=["precision@3"], incomplete="skip")
    assert skipped.summary["evaluated"] == 1 and skipped.mean["precision@3"] == pytest.approx(1 / 3)
    assert skipped.records[0].scores["human"] == {"precision@3": None}


@pytest.mark.parametrize(("body", "line", "field", "words"), [
    ("q1,c1,,1,,\nq1,c2,,maybe,,\n", 3, "verdict", "verdict must be 1 or 0"),
    ("q1,c1,,1,,\nq1,c2,,,,\n", 3, "verdict", "no verdict"),
    ("q1,c1,,1,,\nq1,c2,,1,useful,\n", 3, "type", "type must be one of"),
    ("q1,c1,,1,irrelevant,\n", 2, "type", "contradicts"),
    ("q1,c1,,1,,\nq9,c1,,1,,\n", 3, "query_id", "not in the test set"),
    ("q1,c9,,1,,\n", 2, "chunk_id", "was not retrieved"),
    ("q1,,7,1,,\n", 2, "rank", "has 3 chunks"),
    ("q1,,0,1,,\n", 2, "rank", "integer >= 1"),
    ("q1,c2,3,1,,\n", 2, "rank", "is at rank 2"),
    ("q1,,,1,,\n", 2, "chunk_id", "give chunk_id or rank"),
    (",c1,,1,,\n", 2, "query_id", "no question id"),
    ("q1,c1,,1,,\nq1,,1,0,,\n", 3, "chunk_id", "second label"),
])
def test_bad_label_rows(tmp_path, body, line, field, words):
    p = csv_file(tmp_path, body)
    with pytest.raises(InputError) as err:
        apply_labels(records_from_testset(TESTSET), p)
    assert (err.value.source, err.value.line, err.value.field) == (str(p), line, field)
    assert words in str(err.value)


def test_repeated_chunk_id_needs_a_rank(tmp_path):
    ts = [{"id": "q", "retrieved_context_ids": ["doc1", "doc2", "doc1"]}]
    with pytest.raises(InputError, match=r"ranks \[1, 3\]"):
        apply_labels(records_from_testset(ts), [{"query_id": "q", "chunk_id": "doc1", "verdict": 1}])
    recs = records_from_testset(ts)
    apply_labels(recs, [{"query_id": "q", "chunk_id": "doc1", "rank": 3, "verdict": 1}])
    assert recs[0].verdicts("human") == [None, None, 1]


def test_human_without_labels_is_an_error():
    with pytest.raises(InputError, match="needs labels"):
        evaluate_rag(TESTSET, "human")


def test_example_labels():
    labels = read_labels(EXAMPLES / "human_labels.csv")
    assert len(labels) == 24
    r = evaluate_rag(EXAMPLES / "rich_testset.jsonl", "human", labels=EXAMPLES / "human_labels.csv", k=4)
    assert r.summary["incomplete"] == 0 and r.summary["verdicts"]["ok"] == 24
    assert round(r.mean["precision@4"], 4) == 0.3333  # 8 relevant of 24 chunks
