"""Per-case records (docs/metrics.md §6): lossless JSONL round trip and precise errors."""

from __future__ import annotations

import json
import math

import pytest

import rankwise
from rankwise.data.records import (
    CaseRecord,
    ChunkRecord,
    Verdict,
    load_records,
    records_from_testset,
    testset_from_records,
    write_records,
)
from rankwise.data.testset import ReferencePassage
from rankwise.errors import InputError


def full_record() -> CaseRecord:
    return CaseRecord(
        id="q1", question="Capital of France? ünïcode", reference="Paris", response=None,
        reference_contexts=[ReferencePassage("Paris is the capital", "d1", 0, 20), ReferencePassage("other")],
        reference_context_ids=["d1"],
        chunks=[
            ChunkRecord(rank=1, id="c1", text="Paris is the capital.", doc_id="d1", start=0, end=21, score=12.300000000000001, verdicts={
                "human": Verdict(1, type="answer", reason="states it", meta={"annotator": "ann"}),
                "llm": Verdict(None, status="failed", error="timeout after 3 retries",
                               meta={"mode": "reference", "model": "m", "prompt_version": "v1"}),
            }),
            ChunkRecord(rank=2, id=None, text="Rome.", doc_id=None, start=None, end=None, score=None, verdicts={"human": Verdict(0, grade=0)}),
        ],
        passages_found={"span": [[0], []]},
        scores={"human": {"acp@5": 1.0, "set_precision": None}},
        status={"human": "ok", "llm": "incomplete: 1 failed verdict"},
        extra={"custom": {"kept": [1, 2]}},
    )


def test_round_trip_is_lossless(tmp_path):
    rec = full_record()
    path = write_records([rec, CaseRecord("q2")], tmp_path / "sub" / "r.jsonl")
    back = load_records(path)
    assert back == [rec, CaseRecord("q2")]
    # writing again gives the same bytes
    write_records(back, tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == path.read_bytes()
    # the public alias
    assert rankwise.load_records(path)[0].chunks[0].verdicts["llm"].error == "timeout after 3 retries"


def test_schema_keys(tmp_path):
    path = write_records([full_record()], tmp_path / "r.jsonl")
    obj = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert list(obj)[:10] == ["id", "question", "reference", "response", "reference_contexts",
                              "reference_context_ids", "chunks", "passages_found", "scores", "status"]
    assert obj["chunks"][0]["verdicts"]["human"] == {
        "verdict": 1, "grade": None, "type": "answer", "reason": "states it", "status": "ok", "error": None,
        "meta": {"annotator": "ann"}}
    assert obj["custom"] == {"kept": [1, 2]}


def test_nan_scores_are_written_as_null(tmp_path):
    rec = CaseRecord("q", scores={"ids": {"set_precision": math.nan}})
    back = load_records(write_records([rec], tmp_path / "r.jsonl"))
    assert back[0].scores == {"ids": {"set_precision": None}}


def test_verdicts_helper_and_sources():
    rec = full_record()
    assert rec.verdicts("human") == [1, 0]
    assert rec.verdicts("llm") == [None, None]  # failed, absent
    assert rec.sources() == ["human", "llm"]


def test_records_from_testset_and_back():
    rows = [{"id": "q1", "user_input": "x", "retrieved_contexts": [{"id": "c1", "text": "a", "score": 1.0}, "b"],
             "reference_contexts": ["a"], "reference_context_ids": ["c1"], "reference": "r", "response": "s"}]
    recs = records_from_testset(rows)
    assert [(c.rank, c.id, c.text, c.score) for c in recs[0].chunks] == [(1, "c1", "a", 1.0), (2, None, "b", None)]
    ts = testset_from_records(recs)
    assert ts["q1"].reference == "r" and ts["q1"].reference_context_ids == ["c1"]


@pytest.mark.parametrize(("mutate", "field", "words"), [
    (lambda o: o["chunks"][0]["verdicts"]["human"].update(verdict=2), "chunks[0].verdicts.human.verdict",
     "0, 1 or null"),
    (lambda o: o["chunks"][0]["verdicts"]["human"].update(status="maybe"), "chunks[0].verdicts.human.status",
     "status"),
    (lambda o: o["chunks"][1].update(rank=5), "chunks[1].rank", "rank order"),
    (lambda o: o["chunks"][0].update(start="zero"), "chunks[0].start", "integer"),
    (lambda o: o.update(passages_found={"span": [[0]]}), "passages_found.span", "1 entries for 2 chunks"),
    (lambda o: o.pop("id"), "id", "no id"),
])
def test_bad_records_name_line_and_field(tmp_path, mutate, field, words):
    good = full_record().to_dict()
    bad = full_record().to_dict()
    bad["id"] = "q9"
    mutate(bad)
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_records(p)
    assert (err.value.line, err.value.field) == (2, field)
    assert words in str(err.value)


def test_duplicate_case_and_bad_json(tmp_path):
    p = tmp_path / "r.jsonl"
    line = json.dumps(CaseRecord("q").to_dict())
    p.write_text(line + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="appears twice .first on line 1"):
        load_records(p)
    p.write_text(line + "\n{\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"r\.jsonl:2: not valid JSON"):
        load_records(p)


def test_as_records_copies_records_deeply_and_field_by_field():
    """as_records copies a record list: equal to the deep copy, and nothing in the copy is shared
    with the original but atoms (whatever does the copying)."""
    import copy

    from rankwise.data.records import CallRecord, ChunkRecord, Verdict, as_records

    chunk = ChunkRecord(rank=1, id="c1", text="t", doc_id="d", start=0, end=1, score=0.5,
                        verdicts={"llm": Verdict(1, grade=2, meta={"model": "m", "tries": [1, 2]})})
    rec = CaseRecord("q1", question="?", reference_contexts=[ReferencePassage("t", "d", 0, 1)],
                     reference_context_ids=["c1"], chunks=[chunk], passages_found={"llm": [[0]]},
                     scores={"llm": {"mrr": 1.0}}, status={"llm": "ok"}, truth={"llm": {"gains": [1]}},
                     extra={"tags": ["a"], "when": (1, [2])},
                     calls=[CallRecord([copy.deepcopy(chunk)], query="sub", meta={"hop": [0]})])
    [got] = as_records([rec])
    assert got == copy.deepcopy(rec) == rec and got is not rec
    got.chunks[0].verdicts["llm"].meta["tries"].append(3)
    got.chunks[0].verdicts["human"] = Verdict(0)
    got.calls[0].chunks[0].verdicts["llm"].verdict = 0
    got.calls[0].meta["hop"].append(1)
    got.reference_contexts[0].text = "changed"
    got.reference_context_ids.append("c2")
    got.scores["llm"]["mrr"] = 0.0
    got.truth["llm"]["gains"].append(0)
    got.extra["when"][1].append(3)
    got.passages_found["llm"][0].append(1)
    assert rec == CaseRecord("q1", question="?", reference_contexts=[ReferencePassage("t", "d", 0, 1)],
                             reference_context_ids=["c1"], chunks=[chunk], passages_found={"llm": [[0]]},
                             scores={"llm": {"mrr": 1.0}}, status={"llm": "ok"}, truth={"llm": {"gains": [1]}},
                             extra={"tags": ["a"], "when": (1, [2])},
                             calls=[CallRecord([ChunkRecord(rank=1, id="c1", text="t", doc_id="d", start=0, end=1,
                                                            score=0.5, verdicts={"llm": Verdict(
                                                                1, grade=2, meta={"model": "m", "tries": [1, 2]})})],
                                               query="sub", meta={"hop": [0]})])
    assert chunk.verdicts["llm"].meta["tries"] == [1, 2] and "human" not in chunk.verdicts
    assert as_records([rec], copy=False)[0] is rec


def test_copy_record_rebuilds_every_record_type_from_all_its_fields():
    """copy_record passes a record type's dataclass fields to its constructor in order: that holds
    only while every field is an init field (a field added with init=False would be dropped or
    shifted)."""
    import dataclasses

    from rankwise.data.records import CallRecord, ChunkRecord, Verdict

    for kind in (CaseRecord, ChunkRecord, CallRecord, Verdict, ReferencePassage):
        assert all(f.init for f in dataclasses.fields(kind)), kind.__name__
