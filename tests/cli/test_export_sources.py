"""``export-verdicts --source`` names only sources the records hold (issue 33, item 7): an unknown
one was exit 0 with an empty file; now it is one line naming it and the sources present, exit 2, and
nothing written."""

from __future__ import annotations

import json

import pytest

from _inprocess import run_cli
from rankwise.data.records import Verdict, records_from_testset, write_records
from rankwise.data.traces import document_evaluations
from rankwise.errors import InputError
from rankwise.traces import import_traces

TRACE = "0x" + "1" * 32


def _span(span_id: str, parent: str | None, kind: str, **attrs) -> dict:
    return {"name": "s", "context": {"trace_id": TRACE, "span_id": span_id}, "parent_id": parent,
            "start_time": "2026-01-01T00:00:00Z", "attributes": {"openinference.span.kind": kind, **attrs}}


@pytest.fixture
def exported(tmp_path, monkeypatch):
    """A console trace (a root and a retriever span of two documents) and records holding 'human'
    and 'span' verdicts on both documents."""
    monkeypatch.chdir(tmp_path)
    root, retriever = "0x" + "a" * 16, "0x" + "b" * 16
    docs = {"retrieval.documents.0.document.id": "d1", "retrieval.documents.0.document.content": "alpha",
            "retrieval.documents.1.document.id": "d2", "retrieval.documents.1.document.content": "beta",
            "input.value": "which?"}
    spans = [_span(root, None, "CHAIN", **{"input.value": "which letter?"}), _span(retriever, root, "RETRIEVER",
                                                                                 **docs)]
    (tmp_path / "spans.json").write_text("\n".join(json.dumps(s) for s in spans))
    records = records_from_testset(import_traces(tmp_path / "spans.json").testset)
    for rec in records:
        for i, chunk in enumerate(rec.chunks):
            chunk.verdicts["human"] = Verdict(1)
            chunk.verdicts["span"] = Verdict(i % 2)
    write_records(records, tmp_path / "records.jsonl")
    return tmp_path


@pytest.mark.parametrize("sources", [["nosuch"], ["human", "nosuch"], ["Human"], [""], [" span"], ["span "],
                                     ["sp\u00e4n"], ["llm"], ["human", "span", "human ", "span"]])
def test_an_unknown_source_is_named_with_those_present(exported, sources):
    args = ["export-verdicts", "records.jsonl", "--traces", "spans.json", "--phoenix", "evals.jsonl"]
    done = run_cli([*args, *(x for s in sources for x in ("--source", s))])
    unknown = next(s for s in sources if s not in ("human", "span"))
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (f"rankwise: error: --source: no verdict source {unknown!r} in records.jsonl "
                           "(present: human, span)\n")
    assert not (exported / "evals.jsonl").exists()


def test_known_sources_still_export(exported):
    done = run_cli(["export-verdicts", "records.jsonl", "--traces", "spans.json", "--phoenix", "evals.jsonl",
                    "--source", "span", "--source", "span"])  # named twice: exported once
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (exported / "evals.jsonl").read_text().splitlines()]
    assert [(r["document_position"], r["label"], r["annotation_name"]) for r in rows] == [
        (0, "irrelevant", "span"), (1, "relevant", "span")]


def test_the_library_names_them_too(exported):
    from rankwise.data.records import load_records

    records = load_records(exported / "records.jsonl")
    with pytest.raises(InputError, match=r"no verdict source 'llm' in <records> \(present: human, span\)"):
        document_evaluations(records, import_traces(exported / "spans.json"), sources=["llm"])
