"""Trace files read once and written readable (issue 33 items 2 and 3): a span seen twice is not a
second retrieval call, in all five formats; MLflow traces are keyed by their own ids; a document
with neither content nor id, impossible offsets and a span kind that is not a string are counted,
and what ``import-traces`` writes ``eval-rag`` reads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from _extras import need
from conformance.test_fuzz_inputs import TRACES_CONSOLE, TRACES_LANGSMITH, TRACES_MLFLOW, TRACES_OTLP
from rankwise.cli import main
from rankwise.data.testset import load_testset
from rankwise.metrics.rag import evaluate_rag
from rankwise.traces import TraceSkipWarning, import_traces, load_traces

T1 = "0x" + "1" * 32
ROOT, R1, R2 = "0x" + "a" * 16, "0x" + "b" * 16, "0x" + "c" * 16


def _span(span, parent=None, kind="RETRIEVER", start="2026-01-01T00:00:00Z", trace=T1, **attrs):
    return {"name": "s", "context": {"trace_id": trace, "span_id": span}, "parent_id": parent,
            "start_time": start, "attributes": {"openinference.span.kind": kind, **attrs}}


def _docs(*docs):
    out = {}
    for i, d in enumerate(docs):
        for part, value in d.items():
            out[f"retrieval.documents.{i}.document.{part}"] = value
    return out


AGENT = [_span(ROOT, kind="CHAIN", **{"input.value": "Where is Paris?"}),
         _span(R1, ROOT, start="2026-01-01T00:00:01Z", **{"input.value": "Paris"},
               **_docs({"id": "c1", "content": "Paris is in France."}, {"id": "c2", "content": "Lyon too."})),
         _span(R2, ROOT, start="2026-01-01T00:00:02Z", **{"input.value": "France"},
               **_docs({"id": "c3", "content": "France is in Europe."}, {"id": "c4", "content": "Nice."}))]


def _write(path, spans):
    path.write_text("\n".join(json.dumps(s) for s in spans) + "\n", encoding="utf-8")
    return path


def test_a_console_file_appended_twice_is_read_once(tmp_path):
    once = import_traces(_write(tmp_path / "once.json", AGENT))
    twice_path = _write(tmp_path / "twice.json", AGENT + AGENT)
    twice = import_traces(twice_path)
    assert twice.testset.cases == once.testset.cases and twice.summary()["calls"] == 2
    assert twice.summary()["duplicate_spans"] == 3 and once.summary()["duplicate_spans"] == 0
    assert twice.warnings()[0].startswith("3 spans seen more than once (the same trace and span id) were read "
                                          f"once: span {ROOT[2:]} of trace {T1[2:]} (twice)")
    # call_redundancy is a property of the agent, not of the exporter
    testset = load_testset([{**c.to_dict(), "reference_contexts": ["Paris is in France."]} for c in twice.testset])
    assert evaluate_rag(testset, "containment", metrics=["call_redundancy@2"]).mean["call_redundancy@2"] == 0.0
    with pytest.warns(TraceSkipWarning, match="3 spans seen more than once"):
        load_traces(twice_path)
    r = CliRunner().invoke(main, ["import-traces", str(twice_path), "-o", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0 and "1 cases from" in r.stdout and "2 retrieval calls" in r.stdout
    assert "warning: 3 spans seen more than once" in r.stderr


def test_export_verdicts_writes_each_row_once(tmp_path):
    spans = _write(tmp_path / "twice.json", AGENT + AGENT[1:2])
    testset, records, evals = tmp_path / "t.jsonl", tmp_path / "records.jsonl", tmp_path / "e.jsonl"
    run = CliRunner().invoke
    assert run(main, ["import-traces", str(spans), "-o", str(testset)]).exit_code == 0
    rows = [json.loads(x) for x in testset.read_text().splitlines()]
    rows[0]["reference_contexts"] = ["Paris is in France."]
    testset.write_text(json.dumps(rows[0]) + "\n")
    r = run(main, ["eval-rag", str(testset), "--records", str(records), "--quiet", "--format", "json"])
    assert r.exit_code == 0, r.output
    r = run(main, ["export-verdicts", str(records), "--traces", str(spans), "--phoenix", str(evals)])
    assert r.exit_code == 0, r.output
    out = [json.loads(x) for x in evals.read_text().splitlines()]
    assert [(x["context.span_id"], x["document_position"], x["score"]) for x in out] == [
        (R1[2:], 0, 1.0), (R1[2:], 1, 0.0), (R2[2:], 0, 0.0), (R2[2:], 1, 0.0)]
    assert "4 document evaluations on 2 retriever spans" in r.stdout
    assert "warning: 1 span seen more than once (the same trace and span id) was read once" in r.stderr


def _doubled_otlp(tmp_path):
    return TRACES_OTLP + TRACES_OTLP  # an exporter that wrote its request twice, one a line


def _doubled_langsmith(tmp_path):
    runs = json.loads(TRACES_LANGSMITH)
    return json.dumps(runs + runs[1:]).encode()


def _doubled_mlflow(tmp_path):
    return TRACES_MLFLOW + TRACES_MLFLOW


def _doubled_console(tmp_path):
    return TRACES_CONSOLE + TRACES_CONSOLE


@pytest.mark.parametrize("fmt, name, doubled, seed", [
    ("otlp", "t.json", _doubled_otlp, TRACES_OTLP), ("console", "t.json", _doubled_console, TRACES_CONSOLE),
    ("langsmith", "t.json", _doubled_langsmith, TRACES_LANGSMITH), ("mlflow", "t.json", _doubled_mlflow, TRACES_MLFLOW),
])
def test_every_json_format_reads_a_doubled_span_once(tmp_path, fmt, name, doubled, seed):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_bytes(seed)
    two.write_bytes(doubled(tmp_path))
    a, b = import_traces(one), import_traces(two)
    assert b.format == fmt and b.testset.cases == a.testset.cases and b.calls == a.calls
    assert a.summary()["duplicate_spans"] == 0 and b.summary()["duplicate_spans"] >= 1


def test_phoenix_duplicated_rows_are_read_once(tmp_path):
    pd = need("pandas")
    rows = [{"context.trace_id": "1" * 32, "context.span_id": "a" * 16, "parent_id": None, "span_kind": "CHAIN",
             "name": "rag", "attributes.input.value": "q?", "attributes.retrieval.documents": None},
            {"context.trace_id": "1" * 32, "context.span_id": "b" * 16, "parent_id": "a" * 16,
             "span_kind": "RETRIEVER", "name": "r", "attributes.input.value": "q?",
             "attributes.retrieval.documents": [{"document.id": "c1", "document.content": "alpha"}]}]
    pd.DataFrame(rows).to_parquet(tmp_path / "one.parquet")
    pd.DataFrame(rows + rows[1:]).to_parquet(tmp_path / "two.parquet")
    a, b = import_traces(tmp_path / "one.parquet"), import_traces(tmp_path / "two.parquet")
    assert b.testset.cases == a.testset.cases and len(b.calls["1" * 32]) == 1
    assert b.summary()["duplicate_spans"] == 1


def _mlflow_trace(trace_id, span_ids, question, doc):
    root, child = span_ids
    return {"info": {"trace_id": trace_id}, "data": {"spans": [
        {"span_id": root, "parent_span_id": None, "name": "answer", "start_time_unix_nano": 1,
         "attributes": {"mlflow.spanType": '"CHAIN"', "mlflow.spanInputs": json.dumps({"question": question})}},
        {"span_id": child, "parent_span_id": root, "name": "retrieve", "start_time_unix_nano": 2,
         "attributes": {"mlflow.spanType": '"RETRIEVER"', "mlflow.spanInputs": json.dumps({"query": question}),
                        "mlflow.spanOutputs": json.dumps([{"page_content": doc, "metadata": {}, "id": doc}])}}]}}


def test_mlflow_traces_sharing_a_trace_id_stay_apart(tmp_path):
    traces = [_mlflow_trace("tr-shared", (f"{n:016x}", f"{n + 100:016x}"), f"question {i}?", f"doc {i}")
              for n, i in enumerate("EFGH", start=1)]
    path = tmp_path / "mlflow.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in traces + traces[:1]), encoding="utf-8")
    imp = import_traces(path)
    assert [c.question for c in imp.testset] == ["question E?", "question F?", "question G?", "question H?"]
    assert [[x.id for x in c.chunks] for c in imp.testset] == [["doc E"], ["doc F"], ["doc G"], ["doc H"]]
    assert imp.testset.ids == ["tr-shared", "tr-shared#2", "tr-shared#3", "tr-shared#4"]
    assert imp.summary()["duplicate_spans"] == 2  # the first trace written twice: read once


# ------------------------------------------------------------------------------------- item 3:
# readable output

def _import_then_eval(tmp_path, spans):
    """import-traces (labels from a one-case test set), then eval-rag on what it wrote: both exit 0.
    """
    path = _write(tmp_path / "spans.json", spans)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "q1", "question": "q?", "reference_contexts": ["alpha"]}) + "\n")
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["import-traces", str(path), "-o", str(out), "--testset", str(labels)])
    assert r.exit_code == 0, r.output
    back = CliRunner().invoke(main, ["eval-rag", str(out), "-m", "precision@1", "--quiet"])
    assert back.exit_code == 0, back.output
    return r, load_testset(out)


def test_document_with_neither_content_nor_id_is_a_counted_skip(tmp_path):
    spans = [_span(R1, **{"input.value": "q?"}, **_docs({"score": 0.9, "metadata": '{"x": 1}'},
                                                         {"content": "alpha", "id": "c2"}))]
    r, ts = _import_then_eval(tmp_path, spans)
    assert [c.id for c in ts[0].chunks] == ["c2"]
    assert "skipped: 1 document with neither content nor id (left out of its call)" in r.stderr
    assert f"span {R1[2:]} document 0 has neither content nor id" in r.stderr
    imp = import_traces(tmp_path / "spans.json")
    assert imp.calls[T1[2:]][0].meta["document_positions"] == [1]  # verdicts go back to the right document


@pytest.mark.parametrize("start, shown", [(1e30, "start 1000000000000000019884624838656"), (-40, "start -40"),
                                          (2.5, "start 2.5"), ("abc", 'start "abc"'), (True, "start true"),
                                          ([3], "start [3]")])
def test_impossible_offsets_are_dropped_with_a_counted_warning(tmp_path, start, shown):
    meta = json.dumps({"source": "d1", "start_index": start})
    spans = [_span(R1, **{"input.value": "q?"}, **_docs({"content": "alpha", "metadata": meta},
                                                         {"content": "beta", "metadata": '{"source": "d1", '
                                                                                         '"start_index": 6}'}))]
    r, ts = _import_then_eval(tmp_path, spans)
    first, second = ts[0].chunks
    assert (first.doc_id, first.start, first.end) == ("d1", None, None) and (second.start, second.end) == (6, 10)
    assert f"warning: 1 chunk carries impossible offsets (negative, end before start, past 2**63 or not whole " \
           f"numbers; first: span {R1[2:]} document 0: {shown}" in r.stderr, r.stderr
    assert import_traces(tmp_path / "spans.json").summary()["bad_offsets"] == 1


@pytest.mark.parametrize("kind", [["RETRIEVER"], {"k": "RETRIEVER"}, 7])
def test_a_span_kind_that_is_not_a_string_is_a_counted_skip(tmp_path, kind):
    spans = [_span(ROOT, kind="CHAIN", **{"input.value": "q?"}),
             _span(R1, ROOT, kind=kind, **{"input.value": "q?"}, **_docs({"content": "alpha"})),
             _span(R2, ROOT, **{"input.value": "q?"}, **_docs({"content": "beta"}))]
    r, ts = _import_then_eval(tmp_path, spans)
    assert [c.text for c in ts[0].chunks] == ["beta"]
    assert "skipped: 1 span whose kind is not a string (not read)" in r.stderr
    assert f"span {R1[2:]}'s kind is {type(kind).__name__} {json.dumps(kind)}, not a string" in r.stderr


def test_empty_retriever_span_inside_a_retriever_span_is_not_a_skip(tmp_path):
    spans = [_span(ROOT, kind="CHAIN", **{"input.value": "q?"}),
             _span(R1, ROOT, **{"input.value": "q?"}, **_docs({"content": "alpha"})),
             _span("0x" + "d" * 16, R1, **{"input.value": "q?"})]  # LlamaIndex's _retrieve inside retrieve
    imp = import_traces(_write(tmp_path / "s.json", spans))
    assert imp.skipped == {} and imp.summary()["calls"] == 1
    # an empty retriever span of its own is still a skipped call
    imp = import_traces(_write(tmp_path / "s.json", spans[:2] + [_span("0x" + "d" * 16, ROOT)]))
    assert imp.skipped == {"retriever span without documents": 1}


def test_hand_made_trace_located_in_a_folder_corpus(tmp_path):
    """A hand-made trace: documents named by an absolute file_path, text re-wrapped by the pipeline;
    the folder the documents came from gives them their document (by file name) and span (whitespace
    normalised)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    rules = "# Setup\n\nEach player draws  five cards.\nThe youngest player starts.\n\n# Scoring\n\nA set of three scores 5."
    (docs / "rules.md").write_text(rules, encoding="utf-8")
    (docs / "faq.md").write_text("Q: Can I pass? A: Yes, once a round.", encoding="utf-8")
    spans = [_span(R1, **{"input.value": "How many cards?"}, **_docs(
        {"content": "Each player draws five cards. The youngest player starts.",
         "metadata": json.dumps({"file_path": "/home/me/game/docs/rules.md"})},
        {"content": "Can I pass?", "id": "f1"},
        {"content": "not in any document"}))]
    path = _write(tmp_path / "spans.json", spans)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "q1", "question": "How many cards?", "reference_contexts": [
        {"text": "Each player draws  five cards.", "doc_id": "rules.md", "start": 9, "end": 39}]}) + "\n")
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["import-traces", str(path), "-o", str(out), "--testset", str(labels),
                                  "--corpus", str(docs)])
    assert r.exit_code == 0, r.output
    assert f"located 2 of 3 chunks without offsets in {docs} (1 exact, 1 with whitespace normalised); 1 not " \
           "found: span verdicts cannot judge them" in r.stdout
    chunks = load_testset(out)[0].chunks
    assert [(c.doc_id, c.start, c.end) for c in chunks] == [("rules.md", 9, 67), ("faq.md", 3, 14), (None, None, None)]
    assert rules[9:67].split() == chunks[0].text.split()
    res = evaluate_rag(load_testset(out), "span", metrics=["precision@1", "recall@1"])
    assert res.mean == {"precision@1": 1.0, "recall@1": 1.0}
