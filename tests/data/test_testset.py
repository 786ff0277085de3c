"""RAG test set readers: Ragas and rich JSONL, CSV, JSON, DataFrames, dict of lists; errors name
line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankwise.data.testset import Chunk, ReferencePassage, TestSet, load_testset
from rankwise.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RAGAS_ROW = {
    "id": "q1", "user_input": "Capital of France?", "reference": "Paris", "response": "Paris.",
    "retrieved_contexts": ["Paris is the capital of France.", "Lyon is a city."],
    "retrieved_context_ids": ["c1", "c2"],
    "reference_contexts": ["Paris is the capital"], "reference_context_ids": ["c1"],
}
RICH_ROW = {
    "id": "q1", "question": "Capital of France?",
    "retrieved_contexts": [{"id": "c1", "text": "Paris is the capital.", "doc_id": "d1", "start": 0, "end": 21,
                            "score": 2.5}, "plain string chunk"],
    "reference_contexts": [{"text": "Paris is the capital", "doc_id": "d1", "start": 0, "end": 20}, "plain"],
}


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ragas_jsonl(tmp_path):
    ts = load_testset(write_jsonl(tmp_path / "t.jsonl", [RAGAS_ROW]))
    case = ts["q1"]
    assert case.question == "Capital of France?"
    assert case.reference == "Paris" and case.response == "Paris."
    assert [(c.id, c.text) for c in case.chunks] == [("c1", "Paris is the capital of France."),
                                                       ("c2", "Lyon is a city.")]
    assert case.reference_contexts == [ReferencePassage("Paris is the capital")]
    assert case.reference_context_ids == ["c1"]


def test_rich_jsonl(tmp_path):
    ts = load_testset(write_jsonl(tmp_path / "t.jsonl", [RICH_ROW]))
    case = ts["q1"]
    assert case.chunks[0] == Chunk("Paris is the capital.", "c1", "d1", 0, 21, 2.5)
    assert case.chunks[0].span == ("d1", 0, 21)
    assert case.chunks[1] == Chunk("plain string chunk")
    assert case.reference_contexts[0].span == ("d1", 0, 20)
    assert case.reference_contexts[1].span is None


def test_cases_without_id_are_numbered_and_blank_lines_skipped(tmp_path):
    rows = [{"question": "a", "retrieved_contexts": ["x"]}, "", {"question": "b", "retrieved_contexts": []}]
    ts = load_testset(write_jsonl(tmp_path / "t.jsonl", rows))
    assert ts.ids == ["1", "2"]
    assert ts["2"].chunks == []


def test_only_ids(tmp_path):
    ts = load_testset([{"id": "q", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d2"]}])
    assert [c.id for c in ts["q"].chunks] == ["d1", "d2"]
    assert all(c.text is None for c in ts["q"].chunks)


def test_csv_with_json_and_python_lists(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(
        'id,user_input,retrieved_contexts,reference_contexts\n'
        'q1,"Capital?","[""Paris is the capital."", ""Rome.""]","[""paris is the capital""]"\n'
        "q2,Other?,\"['a, with comma', 'b']\",\n",
        encoding="utf-8")
    ts = load_testset(p)
    assert [c.text for c in ts["q1"].chunks] == ["Paris is the capital.", "Rome."]
    assert [c.text for c in ts["q2"].chunks] == ["a, with comma", "b"]
    assert ts["q2"].reference_contexts == []


def test_csv_bad_list_names_line_and_field(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('id,user_input,retrieved_contexts\nq1,a,"[""x""]"\nq2,b,[not json\n', encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_testset(p)
    assert err.value.line == 3 and err.value.field == "retrieved_contexts"
    assert str(err.value).startswith(f"{p}:3: field 'retrieved_contexts'")


def test_json_array_and_object_of_lists(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps([RAGAS_ROW]), encoding="utf-8")
    assert load_testset(p).ids == ["q1"]
    p2 = tmp_path / "b.json"
    p2.write_text(json.dumps({"user_input": ["a", "b"], "retrieved_contexts": [["x"], ["y", "z"]]}), encoding="utf-8")
    ts = load_testset(p2)
    assert ts.ids == ["1", "2"] and len(ts["2"].chunks) == 2


def test_dataframes_and_dict_of_lists():
    import pandas as pd
    import polars as pl

    cols = {"id": ["q1", "q2"], "user_input": ["a", "b"], "retrieved_contexts": [["x", "y"], ["z"]],
            "reference_contexts": [["x"], ["w"]]}
    for obj in (cols, pd.DataFrame(cols), pl.DataFrame(cols)):
        ts = load_testset(obj)
        assert ts.ids == ["q1", "q2"]
        assert [c.text for c in ts["q1"].chunks] == ["x", "y"]
        assert ts["q2"].reference_contexts[0].text == "w"


def test_object_with_to_list_like_ragas_evaluation_dataset():
    class Dataset:  # the shape of Ragas' EvaluationDataset / HF Dataset
        def to_list(self):
            return [RAGAS_ROW]

    assert load_testset(Dataset())["q1"].chunks[1].id == "c2"


def test_examples_load():
    rich = load_testset(EXAMPLES / "rich_testset.jsonl")
    ragas = load_testset(EXAMPLES / "ragas_testset.jsonl")
    assert rich.ids == ragas.ids and len(rich) == 6
    for a, b in zip(rich, ragas, strict=True):
        assert [c.text for c in a.chunks] == [c.text for c in b.chunks]
        assert [c.id for c in a.chunks] == [c.id for c in b.chunks]
        assert all(c.span is not None for c in a.chunks)


@pytest.mark.parametrize(("row", "line_field", "words"), [
    ('{"id": "q2", "user_input": "x", "retrieved_contexts": "not a list"}', "retrieved_contexts", "expected a list"),
    ('{"id": "q2", "retrieved_contexts": [{"text": "a", "start": -1}]}', "retrieved_contexts[0].start", "offset"),
    ('{"id": "q2", "retrieved_contexts": [{"text": "a", "start": 5, "end": 2}]}', "retrieved_contexts[0].end",
     "before start"),
    ('{"id": "q2", "retrieved_contexts": [{"txt": "a"}]}', "retrieved_contexts[0]", "unknown key"),
    ('{"id": "q2", "retrieved_contexts": [{"text": "a", "score": "high"}]}', "retrieved_contexts[0].score",
     "number"),
    ('{"id": "q2", "retrieved_contexts": ["a"], "retrieved_context_ids": ["c1", "c2"]}', "retrieved_context_ids",
     "2 ids for 1"),
    ('{"id": "q2", "reference_contexts": [3]}', "reference_contexts[0]", "expected a string or an object"),
    ('{"id": "q2", "user_input": ["x"]}', "user_input", "expected a string"),
    ('{"id": "q1", "user_input": "dup"}', "id", "appears twice"),
])
def test_bad_lines_name_line_and_field(tmp_path, row, line_field, words):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(RAGAS_ROW) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_testset(p)
    assert err.value.line == 2
    assert err.value.field == line_field
    assert words in str(err.value)


def test_invalid_json_and_empty_file(tmp_path):
    p = write_jsonl(tmp_path / "t.jsonl", [RAGAS_ROW, "{oops"])
    with pytest.raises(InputError, match=r"t\.jsonl:2: not valid JSON"):
        load_testset(p)
    e = tmp_path / "e.jsonl"
    e.write_text("\n")
    with pytest.raises(InputError, match="empty"):
        load_testset(e)


def test_testset_is_not_collected_by_pytest():
    assert TestSet.__test__ is False


def test_id_lists_of_plain_strings_and_of_other_values_read_the_same_way():
    """Plain-string id lists skip the per-item check (issue 37); numbers still become strings, nulls
    and lists still fail naming the item, and the chunks' ids are the same either way."""
    plain = load_testset([{"id": "q", "retrieved_context_ids": ["1", "2"], "reference_context_ids": ["2"]}])
    mixed = load_testset([{"id": "q", "retrieved_context_ids": [1, "2"], "reference_context_ids": [2]}])
    assert [c.id for c in plain.cases[0].chunks] == [c.id for c in mixed.cases[0].chunks] == ["1", "2"]
    assert plain.cases[0].reference_context_ids == mixed.cases[0].reference_context_ids == ["2"]
    with pytest.raises(InputError, match=r"null in the list of reference ids"):
        load_testset([{"id": "q", "retrieved_context_ids": ["1"], "reference_context_ids": ["1", None]}])
    with pytest.raises(InputError, match=r"expected a string") as err:
        load_testset([{"id": "q", "retrieved_context_ids": ["1", ["x"]]}])
    assert "retrieved_context_ids[1]" in str(err.value)
